"""The splitter engine: events in, owners and records out. It does no I/O.

Theory of operation
-------------------
A Kineto file is a concatenation of sorted sections (each thread's CPU ops, then the GPU
activity block with runtime calls and kernels, then GPU annotations, then metadata), so an
event can arrive long after later-stamped ones. The engine therefore never orders events by
time. Instead:

1. Structural CPU ops (``cpu_op``, ``user_annotation``; ``Operator`` in torch 1.8's layout) go
   through the per-thread stacks to the detector, which answers with boundaries as soon as they
   are certain.
2. A CPU-side event (any thread: ops, runtime calls, Python frames, instants, CPU flows) is
   owned by the window that holds it (``Windows``). Its owner is decidable once a boundary
   after its end is known, or at ``close()``; until then it waits in the pending list.
3. GPU work (kernels, memcpy, memset) and launch flows (``ac2g``; ``async`` in torch 1.8's
   layout) are owned by correlation id: the owner of the runtime call with the same id
   (``MonotonicOwnerMap``). Work that arrives before its launch waits for it; work whose
   launch never comes goes to ``OUTSIDE`` at close. ``gpu_user_annotation`` follows the CPU
   annotation with the same External id.
4. Metadata is owned by ``METADATA`` (the writer copies it into every piece).

What the engine keeps: the open-op stacks, the window starts and per-iteration numbers (a few
KB per iteration, in lists made by ``per_iteration``: ``pages.PagedList`` keeps old ones in a
file), the id-range maps (a few entries per iteration) and the pending
events (about one iteration's CPU events; beyond ``pending_limit`` they go to the injected
``spill`` store). Nothing grows with the number of events.

Callers drive it h11-style: ``feed(event, raw)`` for each event (``raw``: its original JSON
bytes, which the engine holds instead of the dict while the event waits and hands back in its
place), ``end_of_input()`` at the end (``complete=False`` when the input was cut short: every
iteration record then says so), and after each batch of input ``decided()``, which returns
everything decided since the last call (a ``Decided``: (owner, event) pairs and records) and
says whether to call it again (spilled events become decidable a batch at a time, so that one
call never loads the whole spill). ``close()`` is ``end_of_input()`` plus every decision,
kept for ``pop_assigned()`` / ``pop_records()`` (tests, small traces).

The records are final when they leave the engine, except what needs every iteration of the
trace at once (outliers, the steady state): ``stream_split.stats.finish``, one step that every
front end takes the same way.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, replace
from heapq import heappop, heappush
from itertools import groupby, islice, repeat
from operator import itemgetter, length_hint

import numpy as np

from stream_split.core.breakdown import (ADD_GPU_RULES, ARRAY_MIN_INTERVALS, KEPT_LAUNCHES,
                                         IterationBreakdown, LaunchTimes, new_breakdown,
                                         union_with)
from stream_split.core.detect import (
    StepAnnotationDetector, RetractLast, StructureDetector, TraceFacts, cycle_kinds)
from stream_split.core.detect.evidence import at_outermost_frame
from stream_split.core.finish import FinalRecords
from stream_split.core.owners import AnnotationOwners, MonotonicOwnerMap, Windows, add_window
from stream_split.core.serving import (
    DIFFUSION_CODE, GEMM as _GEMM, NONE as _NO_ROLE, NOTHING_SEEN, ROLES as _PHASE_ROLES,
    PhaseFacts, SeenFacts, infer_phases, input_dims, loop_containers, role_of)
from stream_split.core.records import (
    Boundary, IterationRecord, METADATA, OUTSIDE, REVISION_MOVE, REVISION_RETRACT,
    Revision, made_fresh, made_one)
from stream_split.core.order import OpOrder
from stream_split.core.stack import LIVE_THREADS, ThreadStacks
from stream_split.core.validate import TIME_LIMIT as _TIME_LIMIT, THREAD_ID_TYPES as _ID_TYPES, \
    unusable_field
from stream_split.pages import reading
from stream_split.spill import (END_INTEGER, HELD_EVENT, START_INTEGER, HeldColumns,
                                HeldLinks, HeldRows, MemorySpill)
from stream_split.errors import TraceEventError
from stream_split.native import NATIVE as _native  # (None: the Python fallbacks)
from stream_split.trace_format import (
    ANNOTATION_CAT, BLOCKING_SYNC_NAMES, COPY_LAUNCH_NAMES, CPU_OP_CATS, DIMS_ARG, GPU_ANNOTATION_CAT, GPU_WORK_CATS,
    GRAPH_LAUNCH_NAMES, KERNEL_CATS, LAUNCH_FLOW_CATS, LAUNCH_NAMES, PROFILER_STEP_PREFIX,
    FLOW_PHASES as _FLOW_PHASES, METADATA_PHASE, PYTHON_FRAME_CAT, STRUCTURE_CATS,
    profiler_step_number)


DEFAULT_PENDING_LIMIT = 10_000
#: How many invalid events the manifest describes (all are counted).
INVALID_EXAMPLES = 5


#: The ``detector`` values of ``SplitOptions``.
DETECTORS = ("auto", "structure", "steps")


@dataclass(slots=True)
class SplitOptions:
    """How to split. One object, passed from the adapters to the engine unchanged."""
    #: "auto" (structure, with annotations as evidence), "steps" (ProfilerStep#N only) or
    #: "structure" (ignore step annotations entirely).
    detector: str = "auto"
    #: Split at another level of the repeating structure (0 = the iteration; 1 = the unit
    #: one level below, e.g. micro-batches or layers). None = the default level.
    level: int | None = None
    #: Hand every event back through ``pop_assigned`` (split, tag); False only counts them
    #: (boundaries, summaries).
    keep_events: bool = True
    #: Ops that outlive their parent by more than this are siblings, not children (µs).
    stack_tolerance_us: float = 1.0
    #: Undecided events held in memory before they go to the spill store.
    pending_limit: int = DEFAULT_PENDING_LIMIT

    def __post_init__(self):
        """A wrong value is an error here, not a default later (``detector="step"``)."""
        if self.detector not in DETECTORS:
            raise ValueError(f"detector must be one of {', '.join(DETECTORS)}, "
                             f"not {self.detector!r}")
        if self.level is not None and (not isinstance(self.level, int) or self.level < 0):
            raise ValueError(f"level must be an integer >= 0 or None, not {self.level!r}")
        if not isinstance(self.pending_limit, int) or self.pending_limit < 1:
            raise ValueError(f"pending_limit must be an integer >= 1, not {self.pending_limit!r}")
        if not self.stack_tolerance_us >= 0:
            raise ValueError(f"stack_tolerance_us must be >= 0, not {self.stack_tolerance_us!r}")


# How an event's category routes it (absent: ``_BY_WINDOW``, a CPU-side event, owned by
# its window). The linked ones are below ``_BY_WINDOW``, the structural ones from
# ``_STRUCTURE`` (one comparison each in ``_feed_fields``). ``_READ_STRUCTURE`` is no
# category's: a structural op that ``_read_op`` has read already, given to ``_feed_fields``
# for the rest (``_native.feed_lane``, which reads the ops of a run itself).
_BY_CORRELATION, _BY_FLOW_ID, _BY_EXTERNAL_ID, _BY_WINDOW, _STRUCTURE, _READ_STRUCTURE = range(6)
_ROUTE = {**{cat: _BY_CORRELATION for cat in GPU_WORK_CATS},
          **{cat: _BY_FLOW_ID for cat in LAUNCH_FLOW_CATS}, GPU_ANNOTATION_CAT: _BY_EXTERNAL_ID,
          **{cat: _STRUCTURE for cat in STRUCTURE_CATS}}

_SPILL_BATCH = 4096
#: Held CPU-side events (held one by one, none as columns) that a boundary decides as items,
#: one by one, rather than as columns: a step of a few events would pay for a dozen numpy
#: calls to decide two of them. Likewise a stretch of frames among held items
#: (``_resolve_all``), and held columns that a boundary decides few of (``_resolve_in_order``:
#: the first iterations of a loop, held until the detector was sure, a boundary at a time;
#: split of 30 k one-op iterations 9,680.3 -> 9,413.3 M instructions).
_FEW_HELD = 32


def _arrival(item) -> int:
    return item[1]


_WAITING_IN_MEMORY = 4096


#: ``Splitter._hot`` while no iteration's state is kept at hand.
_NO_HOT = (None, None, None, None)
#: Integers up to this size are held as floats (``HeldColumns``) without change: a float
#: column holds a time exactly when it is a float or such an integer (``_hold_cpu``).
_FLOAT_INTEGERS = 2 ** 53
#: ``HeldColumns.exact`` of an event whose end and start were both given as integers.
_BOTH_INTEGERS = END_INTEGER | START_INTEGER
#: The fewest held events stamped in integers that ``_own_held`` counts at once: below, the
#: bulk path's numpy calls cost more than deciding them one by one (a split of 30 k one-op
#: iterations, each boundary deciding one or two: 12,370.8 M instructions at once from one
#: event, against 11,932.3 M one by one).
_INTEGER_BULK_MIN = 32


#: The category an op held named (``_hold_cpu``) is decided as: a CPU op's (``_own_cpu``).
_NAMED_OP_CAT = "cpu_op"
#: ``Splitter._own_each``'s common cases, ops held as their thread and (given the steps'
#: prefix) the first ``ProfilerStep#N`` annotation of an iteration, in one call where built
#: (``_native.own_held_ops``; None: that method's loop owns every item).
_own_held_ops = None if _native is None else _native.own_held_ops
#: ``Splitter._feed_checked``'s common cases, a run of events in one call where built
#: (``_native.feed_lane``; None: that method's loop feeds each), and what it reads besides
#: the engine's parts: the routes, the flow phases, the launch names (graph launches among
#: them), ``LaunchTimes``' bound, the Python frames' category, the phase of a timed event, the
#: key of a correlation id, the routes of a flow, of a CPU-side event and of GPU work, the
#: kernels' categories, and what it reads structural ops with (their route, the route of one
#: read already, what ``_hold_cpu`` tells an op that keeps its thread alone by, and, as
#: ``_read_op`` reads an op in C, the threads known before any is forgotten:
#: ``_forget_at`` is never below ``LIVE_THREADS``; and what tells the role of a name not in
#: ``ROLES``, as ``_hold_cpu`` asks it).
_feed_lane = None if _native is None else _native.feed_lane
_LANE_RULES = (_ROUTE, _FLOW_PHASES, LAUNCH_NAMES, GRAPH_LAUNCH_NAMES, KEPT_LAUNCHES,
               PYTHON_FRAME_CAT, "X", "correlation", (_BY_FLOW_ID, _BY_WINDOW, _BY_CORRELATION),
               KERNEL_CATS, (_STRUCTURE, _READ_STRUCTURE, CPU_OP_CATS, _PHASE_ROLES, _GEMM,
                             DIMS_ARG, PROFILER_STEP_PREFIX, _WAITING_IN_MEMORY,
                             ADD_GPU_RULES, LIVE_THREADS, role_of))
#: A new boundary record, made without a frame of Python (``records.made_one``).
_new_boundary = made_one(Boundary)
#: A new iteration's record: ``(index, start_ts, first_op)``, its kind an iteration, the rest
#: its fields' defaults (``records.made_fresh``).
_new_iteration = made_fresh(IterationRecord, ("index", "start_ts", "first_op"))
#: ``_add_boundary``'s common case in one call (None: the method's code), and what it makes
#: the new iteration's state with and decides the held events by (``_resolve_pending``).
_open_iteration = None if _native is None else _native.open_iteration
_OPENING = (_new_iteration, new_breakdown, _new_boundary, ARRAY_MIN_INTERVALS, _FEW_HELD,
            union_with, PROFILER_STEP_PREFIX)

#: The fields of an op's view (``_held_view``), and its ``args``: an event with no other
#: field is copied, ``args`` left out (3x as fast as made field by field; a field it lacks
#: reads as None alike).
_OP_FIELDS = frozenset(("ph", "cat", "name", "ts", "dur", "pid", "tid", "args"))


def _held_view(event: dict, link) -> dict | tuple | None:
    """What an undecided event keeps while it is held or spilled, when it is not handed out
    itself: the fields that deciding it reads, no more (on the resnet 10x tile's spilled
    events, when an op's view held its times too: 580 bytes in memory and 68 pickled,
    against 990 and 149 for the slim event).
    A CPU-side event (``link`` None) is decided by ``_own_cpu``: its phase, category,
    name and the ids it links by (a correlation id; an annotation's External id), an op's
    thread too (not its times, held beside the view: a copy of a slim dict keeps them, 3x
    as fast as a view made field by field; without them a spilled op costs less: a split
    of 40 k ops of a phase role, ``testing.attacks.threads``, -2.6 % instructions),
    and its ``Input Dims`` when its name is phase evidence (``core.serving``);
    GPU work waiting for its launch by ``_own_linked``: its category, times, stream, name and
    correlation id (for the breakdown), as the tuple ``(cat, ts, dur, pid, tid, name,
    correlation)`` (cheaper than a dict to make, and to pickle in the spill); a flow or a GPU
    annotation is only counted: None."""
    struct = event.__class__ is not dict  # a slim struct (``validate.SlimEvent``)
    cat = event.cat if struct else event.get("cat")
    if link is None:
        ph, name, args = (event.ph, event.name, event.args) if struct else (
            event.get("ph"), event.get("name"), event.get("args"))
        if cat in CPU_OP_CATS:  # its thread, for the time in ops (core.breakdown)
            if struct:
                view = {"ph": ph, "cat": cat, "name": name, "pid": event.pid,
                        "tid": event.tid}
            elif event.keys() <= _OP_FIELDS:  # (a slim op): a copy is faster
                view = event.copy()
                view.pop("args", None)
            else:
                get = event.get
                view = {"ph": ph, "cat": cat, "name": name, "pid": get("pid"),
                        "tid": get("tid")}
        else:
            view = {"ph": ph, "cat": cat, "name": name}
        if args:
            kept = {}
            if (corr := args.get("correlation")) is not None:
                kept["correlation"] = corr
            if cat == ANNOTATION_CAT and (ext := args.get("External id")) is not None:
                kept["External id"] = ext
            if DIMS_ARG in args and role_of(name or "") != _NO_ROLE:
                kept[DIMS_ARG] = input_dims(args)
            if kept:
                view["args"] = kept
        return view
    if cat in GPU_WORK_CATS:  # and its name and launch, for the breakdown (core.breakdown)
        return _gpu_work_fields(event, cat)
    return None


def _gpu_work_fields(event: dict, cat: str) -> tuple:
    """What owning GPU work (``Splitter._own_linked``) reads of it, in ``_held_view``'s
    tuple: ``(cat, ts, dur, pid, tid, name, correlation)`` (``Splitter._feed_fields`` makes
    the same tuple of the fields it has read, and holds it: ``_wait_for_launch``)."""
    get = event.get  # (a dict's, or a slim struct's)
    return (cat, get("ts"), get("dur"), get("pid"), get("tid"), get("name"),
            (get("args") or {}).get("correlation"))


def _extend_union(seen: tuple | None, start: float, end: float) -> tuple:
    """Work ``[start, end]`` added to a union of work kept as ``seen`` (its latest start and
    latest end, None before the first): returns (the new ``seen``, the time it adds): what
    lies past the latest end when it comes in start order, else its whole duration (work
    decided out of order; see ``_own_linked``)."""
    if seen is None:
        return (start, end), end - start
    latest = seen[1]
    if start >= seen[0]:  # in time order (the comparisons are ``max``'s, ties and all)
        added = end - (latest if latest > start else start)
        return (start, latest if latest > end else end), added if added > 0.0 else 0.0
    if end > latest:
        return (seen[0], end), end - start
    return seen, end - start


#: What a held plain Python frame needs to be decided later (``_own_cpu`` reads no more);
#: a held event that is only counted (``_hold_cpu``) is decided as one.
_HELD_FRAME = {"ph": "X", "cat": PYTHON_FRAME_CAT}
_FRAME_KEYS = ("ph", "cat", "ts", "dur", "name", "pid", "tid", "args")
#: The types ``feed`` accepts for the fields after ``ph`` and ``cat`` (those two are
#: compared with their one value).
_FRAME_FIELD_TYPES = ({float}, {float, type(None)}, {str, type(None)},
                      {*_ID_TYPES, type(None)}, {*_ID_TYPES, type(None)}, {dict, type(None)})
_frame_fields = itemgetter(*_FRAME_KEYS)


def _each_taken_whole(items: list, until) -> bool:
    """Whether each of the held ``items`` ends before ``until`` and none is a plain frame
    (kept as None, or ``_HELD_FRAME``): what ``Splitter._resolve_pending`` takes as they lie.
    A loop, for the few items a boundary decides there: ``max`` of their ends and a list of
    what they keep, tested twice, took three times as long for one item."""
    for end, _, _, kept, _, _ in items:
        if not end < until or kept is None or kept == _HELD_FRAME:
            return False
    return True


def _place(events, event) -> int:
    """Where ``event`` (the object itself) is in ``events``."""
    return next(k for k, other in enumerate(events) if other is event)


def _rows_by_thread(threads: list, rows: np.ndarray):
    """``rows`` by thread (``threads``: each row's), as (thread, its rows in their order),
    the threads in the order they first come. A batch's ops are most often of one thread,
    else in long runs of one (each thread's ops are written together): the runs are found
    and compared in C (``list.count``, ``groupby``), not row by row in Python."""
    first = threads[0]
    if threads.count(first) == len(threads):
        return ((first, rows),)
    runs: dict = {}
    at = 0
    for thread, run in groupby(threads):
        n = len(list(run))
        runs.setdefault(thread, []).append(rows[at:at + n])
        at += n
    return [(thread, parts[0] if len(parts) == 1 else np.concatenate(parts))
            for thread, parts in runs.items()]


def _plain_frames(events: list):
    """(starts, ends) float64 arrays when every event of ``events`` is a Python frame that
    ``feed`` would only own by its window (an ``X`` of category ``python_function`` with
    usable fields and no correlation or External id), else None."""
    n = len(events)
    if set(map(type, events)) != {dict}:
        return None
    try:  # the fields of each event in one pass (Kineto writes all of them)
        columns = list(zip(*map(_frame_fields, events)))
    except KeyError:
        get = dict.get
        columns = [list(map(get, events, repeat(key, n))) for key in _FRAME_KEYS]
    ph, cat, ts, durs, names, _, _, all_args = columns
    if ph.count("X") != n or cat.count(PYTHON_FRAME_CAT) != n:
        return None
    for column, types in zip(columns[2:], _FRAME_FIELD_TYPES):
        if not set(map(type, column)) <= types:
            return None
    for args in all_args:
        if args and ("correlation" in args or "External id" in args):
            return None
    starts = np.array(ts, np.float64)
    durs = np.array([0.0 if d is None else d for d in durs] if None in durs else durs,
                    np.float64)
    if not (np.isfinite(starts).all() and np.isfinite(durs).all()):
        return None
    ends = np.where(durs != 0.0, starts + durs, starts)  # feed: ``if dur: end = ts + dur``
    return starts, ends


def make_detector(options: SplitOptions):
    if options.detector == "steps":
        return StepAnnotationDetector()
    return StructureDetector(use_annotations=options.detector == "auto", level=options.level)


@dataclass(slots=True)
class Decided:
    """What one ``Splitter.decided()`` call hands out (the lists are the caller's now)."""
    #: (owner, event) pairs: owner an iteration index, ``OUTSIDE`` or ``METADATA``; event the
    #: original bytes given to ``feed`` when there were some, else the dict. Empty unless
    #: ``keep_events``.
    pairs: list
    #: Boundary and Revision records, in order. The iteration records are ``Splitter.iterations``
    #: once a call after ``end_of_input()`` says no ``more`` (read them there, in order: a
    #: long trace's are not all in memory).
    records: list
    #: Call ``decided()`` again: more held (spilled) events may be decidable now.
    more: bool


def _detector_for(options: SplitOptions, detector):
    """``detector``, or the one ``options`` name where None. A detector of the caller's own
    that predates ``fast_read`` (``detect.base``: an op pushed and read in one call, read by
    ``Splitter._read_op`` at each op as a plain attribute) is given ``fast_read = None``: its
    ops are pushed and observed as before."""
    detector = detector if detector is not None else make_detector(options)
    if not hasattr(detector, "fast_read"):
        try:
            detector.fast_read = None
        except AttributeError:  # (slots without it)
            raise TypeError(f"the detector {type(detector).__name__} has no attribute "
                            f"fast_read (None where it reads no op in one call)") from None
    return detector


class Splitter:
    """One trace's splitting state. Not thread-safe; one instance per trace."""

    # Every attribute of a splitter (each said in ``__init__``): slots, so that C reads them
    # at offsets (``_native``'s ``eng45_laid_out``) and Python's reads stay specialised.
    __slots__ = (
        "options", "_detector", "_stacks", "_reads_stacks", "_order", "_forget_at",
        "forgotten_threads", "_windows", "_correlations", "_annotations", "_pending",
        "_pending_links", "_cpu_held", "_cpu_rows", "_cpu_held_n", "_seq", "_held_thread",
        "_held_name", "_spill", "_needs_drain", "_due", "_final_pass", "_result",
        "_waiting_gpu", "_waiting_count", "_waiting_annotations", "_diffusion_code",
        "_gpu_latest", "_launch_times", "_hot", "_assigned", "_records", "boundary_records",
        "_keep", "events_in", "metadata_events", "outside_events", "outside_kernels",
        "frames_at_once", "invalid_events", "invalid_examples", "max_pending", "closed",
        "_input_complete", "evidence", "_last_thread", "_ignored_last",
        # ``_per_iteration``
        "_iterations", "_phase_facts", "_breakdowns", "_paged", "_records_done",
        "_visit_final", "events_in_iterations", "kinds")

    def __init__(self, options: SplitOptions | None = None, *, spill=None, detector=None,
                 per_iteration=list):
        self.options = options or SplitOptions()
        self._detector = _detector_for(self.options, detector)
        self._stacks = ThreadStacks(self.options.stack_tolerance_us)
        # A detector that never reads the stack of open ops (step annotations) gets none,
        # and each thread's ops as they come (the nesting is not read).
        self._reads_stacks = getattr(self._detector, "reads_stacks", True)
        # Each thread's ops to the stacks in start order, whatever order the file has.
        self._order = OpOrder(self.options.stack_tolerance_us)
        #: Threads known beyond which the idle ones are forgotten (``_forget_idle_threads``),
        #: and how many were.
        self._forget_at = LIVE_THREADS
        self.forgotten_threads = 0
        self._windows = Windows()
        self._correlations = MonotonicOwnerMap()
        self._annotations = AnnotationOwners()
        # Undecided events; beyond ``pending_limit`` they go to ``_spill``.
        # CPU-side events waiting for a window: as ``HeldColumns`` (``_cpu_held``; those
        # held one at a time in ``_cpu_rows`` first), or in the heap ``_pending`` as items
        # (end, seq, start, event, None, raw), raw the event's original JSON bytes when the
        # caller gave them (back from the spill as items, or a time a float would change):
        # see ``_hold_cpu``.
        self._pending: list = []
        # GPU events waiting for their launch (or annotation) while no window is known yet,
        # or many wait (``_wait_for_launch``): see ``_hold_linked``.
        self._pending_links = HeldLinks()
        self._cpu_held, self._cpu_rows, self._cpu_held_n = [], HeldRows(), 0
        # the arrival count, the thread of the op held last as its thread and the name of
        # the op held last named (``_hold_cpu``)
        self._seq, self._held_thread, self._held_name = 0, (), ""
        self._spill = spill if spill is not None else MemorySpill()
        self._needs_drain = False  # spilled events may be decidable now
        self._due = None  # handles of spilled batches this drain pass still has to look at
        self._final_pass = False  # closing: every launch is known, waiting GPU work decides
        self._result = None
        self._waiting_gpu: dict = {}  # correlation id -> [event] that arrived before its launch
        self._waiting_count = 0
        self._waiting_annotations: dict = {}  # External id -> [gpu_user_annotation event]
        self._per_iteration(per_iteration)
        self._diffusion_code = False  # a Python frame of a diffusion library was seen
        self._gpu_latest = 0  # the latest iteration whose GPU work was decided
        self._launch_times, self._hot = LaunchTimes(), _NO_HOT  # _hot: see ``_hot_state``
        self._assigned, self._records = [], []
        #: Whether ``Boundary`` and ``Revision`` records are made (``decided``,
        #: ``pop_records``): a driver that hands none out turns it off (``run.drive`` without
        #: ``on_record``): a trace of 1 M tiny iterations would make 1 M of them for nothing.
        self.boundary_records = True
        self._keep = self.options.keep_events
        self.events_in = self.metadata_events = self.outside_events = self.outside_kernels = 0
        #: Python frames decided a run at once (``feed_batch``), the rest one by one.
        self.frames_at_once = 0
        #: Events with a field of the wrong type (sent to outside), and the first few of them.
        self.invalid_events = 0
        self.invalid_examples: list[dict] = []
        self.max_pending, self.closed = 0, False
        self._input_complete = True  # ``end_of_input(complete=...)``
        self.evidence: dict = {}
        self._last_thread = ("", "")  # the loop thread of the latest boundary
        self._ignored_last = False  # the detector's latest boundary was not taken

    def _per_iteration(self, per_iteration) -> None:
        """The state kept per iteration, and what its final records tell."""
        # Per iteration: its record, its phase facts (for ``infer_phases``) and its breakdown
        # (``core.breakdown``), each in a list made by ``per_iteration``: a plain list, or one
        # that keeps old pages in a file (``pages.PagedList``, trimmed between batches).
        self._iterations: list[IterationRecord] = per_iteration()
        #: (The phase facts up to the last iteration that has some, None where none: an
        #: iteration after the last one has none, ``_observe_phase``.)
        self._phase_facts: list[PhaseFacts | None] = per_iteration()
        self._breakdowns: list[IterationBreakdown] = per_iteration()
        self._keep_paged()  # ``_paged``: those of them that page (``_trim_paged``)
        self._records_done = False  # ``iterations`` holds the final records
        self._visit_final = None  # see ``watch_final``
        #: The events of every iteration together, summed once their records are final (None
        #: before): what the manifest's counts need, without another pass over the records.
        self.events_in_iterations: int | None = None
        #: Each iteration's kind (``cycle_kinds``: one byte each) once the records are final.
        self.kinds = None

    # -- input -------------------------------------------------------------------------

    def feed(self, event: dict, raw: bytes | None = None) -> None:
        """One event, in file order; ``raw``: its JSON bytes, handed back and held in its place."""
        if event.__class__ is not dict:  # a slim struct, whose fields were checked as decoded
            return self._feed_checked((event,), (raw,))
        self.events_in += 1
        ph = event.get("ph")
        if ph == METADATA_PHASE:
            return self._own_metadata(event, raw)
        ts = event.get("ts")
        if ph is None or ts is None:
            self._reject_untimed(ph)
        # Each field the engine reads, read and type-checked once (``_feed_checked``: a batch
        # whose types the decoder checked, read once and not checked again)
        cat, name, dur = event.get("cat"), event.get("name"), event.get("dur")
        pid, tid, args = event.get("pid"), event.get("tid"), event.get("args")
        if not (((kind := ts.__class__) is float and ts - ts == 0.0
                 or kind is int and -_TIME_LIMIT < ts < _TIME_LIMIT)
                and ph.__class__ is str and (cat is None or cat.__class__ is str)
                and (name is None or name.__class__ is str)
                and (dur is None or (kind := dur.__class__) is float and dur - dur == 0.0
                     or kind is int and -_TIME_LIMIT < dur < _TIME_LIMIT)
                and (pid is None or pid.__class__ in _ID_TYPES) and (tid is None or tid.__class__ in _ID_TYPES)
                and (args is None or args.__class__ is dict and (
                    (value := args.get("correlation")) is None or value.__class__ is int) and (
                    (value := args.get("External id")) is None or value.__class__ is int))):
            if (problem := unusable_field(event)) is not None:
                return self._own_invalid(event, problem, raw)
        self._feed_fields(event, raw, _ROUTE.get(cat, _BY_WINDOW), ph, ts, cat, name, dur, pid,
                          tid, args)

    def _feed_checked(self, events: list, raws: list) -> None:
        """``feed`` of each of ``events``, slim structs whose fields have the types the engine
        needs (``validate.SlimEvent``: a checked batch, ``feed_batch``), each event's category
        read first: a launch flow reads its phase, time and id only (``_route``), the others
        every field ``feed`` reads, once, without its checks (``_feed_fields``). Kineto's GPU
        section is mostly flows (on the resnet 10x tile 67 k of its 135 k events).
        After an event, the events that follow are taken in one call while each is one of
        the common cases below whole (``_native.feed_lane``: launch flows and GPU work of the
        launches' range found last, and CPU-side events of the cached window that link
        nothing or are runtime calls, of the iteration at hand: on that tile 55 k flows, 25 k
        GPU work and 30 k runtime calls of its 220 k events fed one by one; whatever the
        iteration at hand, structural ops, read as ``_read_op`` reads them (in C where the
        order only notes them: -2.3 % of that tile's instructions), then held as
        ``_hold_cpu`` holds an op that keeps its thread alone or its name (phase evidence),
        else placed by ``_feed_fields`` (80 k), and
        GPU work and flows whose launch is not known yet, waiting as ``_wait_for_launch`` has
        them wait (20 k); after an op, ops only); the first it does not take comes back here."""
        feed_fields, route_of = self._feed_fields, _ROUTE.get
        launches, keep = self._correlations, self._keep
        lane, assigned = _feed_lane, self._assigned if keep else None
        parts = self._lane_parts()
        # counted at once: only an untimed event's refusal reads the count before the end
        self.events_in += len(events)
        pairs = zip(events, raws)
        for event, raw in pairs:
            while True:  # (an event the lane hands back, below, goes round again)
                ph, ts = event.ph, event.ts
                if ph == METADATA_PHASE:
                    self._own_metadata(event, raw)
                    break
                if ph is None or ts is None:  # the events after it were not read
                    self.events_in -= len(events) - 1 - _place(events, event)
                    self._reject_untimed(ph)
                cat = event.cat
                route = route_of(cat, _BY_WINDOW)
                if route == _BY_FLOW_ID and ph in _FLOW_PHASES:
                    # ``_route``'s most common case, inline: the flow's launch is in the range
                    # of ids found last, owned by an iteration (67 k flows on the 10x stripped
                    # resnet tile; a Python call less each). What follows is
                    # ``_own_simple``'s common case, as in ``_route``'s last branch: both stay
                    # copies, since one helper for them would be the call saved here (about
                    # 150 instructions, 10 M on that tile)
                    key = event.id
                    if key.__class__ is int and launches.hit_lo <= key <= launches.hit_hi and \
                            (owner := launches.hit_owner) >= 0:
                        if keep:
                            self._assigned.append((owner, event if raw is None else raw))
                        (self._hot if self._hot[0] == owner else self._hot_state(owner))[1] \
                            .events += 1
                    else:
                        self._route(event, raw, None, key)
                else:
                    feed_fields(event, raw, route, ph, ts, cat, event.name, event.dur,
                                event.pid, event.tid, event.args)
                if lane is None or (pair := lane(pairs, self._hot, assigned, parts, _LANE_RULES,
                                                 self._gpu_latest)) is None:
                    break
                event, raw = pair

    def _lane_parts(self) -> tuple:
        """What the feed lane reads and changes of the engine's parts (``_native.feed_lane``'s
        ``parts``; the last: what it reads structural ops, and holds them, with)."""
        return (self._windows, self._correlations, self._launch_times, self._waiting_gpu,
                self._order, self._detector,
                (self, self._read_op, self._feed_fields, self._bound_held,
                 self.options.pending_limit, self._stacks, self._reads_stacks,
                 self._add_boundary))

    def _feed_fields(self, event: dict, raw, route: int, ph: str, ts, cat, name, dur, pid,
                     tid, args) -> None:
        """``feed`` of an event whose fields are read and usable (``route``: its category's,
        ``_ROUTE``), counted in."""
        if ts < self._order.flush_below and ph == "X" and route < _STRUCTURE:
            self._observe_ops(self._order.release_before(ts))  # held ops' section is over
        if route < _BY_WINDOW:
            if route == _BY_CORRELATION:  # GPU work: may end Kineto's CPU section
                key = args.get("correlation") if args else None
                if self._detector.wants_evidence:
                    if found := self._detector.observe_gpu_work(key, ts):
                        self._add_boundaries(found)
                # its fields as ``_gpu_work_fields`` gives them, of those read above
                work = (cat, ts, dur, pid, tid, name, key)
                launches = self._correlations  # (``_route``'s common case, inline: its
                # launch in the range of ids found last; 37 k on the 10x stripped resnet tile)
                if key is not None and launches.hit_lo <= key <= launches.hit_hi:
                    return self._own_gpu_work(launches.hit_owner, event, raw, work)
                return self._route(event, raw, work)
            if route == _BY_EXTERNAL_ID:
                return self._route_annotation(event, args.get("External id") if args else None,
                                              raw)
            if ph in _FLOW_PHASES:  # a launch flow
                return self._route(event, raw, None, event.get("id"))
        end = ts + dur if dur and ph == "X" else ts
        if ph == "X":
            if route == _STRUCTURE:
                self._read_op((pid, tid), ts, end, name := name or "", cat)
            elif route < _STRUCTURE and self._detector.wants_evidence:
                # a launch or a frame may end the section
                self._add_boundaries(self._evidence_of(pid, tid, ts, end, name, cat, args))
            if cat == PYTHON_FRAME_CAT and self._python_frame(event, (pid, tid), ts, end, name,
                                                              raw):
                return  # it opens a step: owned by it
        windows = self._windows
        if windows.cached_lo <= ts <= end < windows.cached_hi:  # the common case, inline
            owner = windows.cached_owner
            if owner < 0:  # else _own_cpu's fast path: an event that links nothing, or a launch
                return self._own_cpu(owner, event, ts, end, raw, cat)
            launch = args and ph == "X" and cat not in STRUCTURE_CATS and args.get("correlation")
            if not launch and args and ("correlation" in args or cat == ANNOTATION_CAT):
                return self._own_cpu(owner, event, ts, end, raw, cat)  # it may link an annotation
            if self._keep:
                self._assigned.append((owner, event if raw is None else raw))
            record = (hot := self._hot if self._hot[0] == owner else self._hot_state(owner))[1]
            record.events += 1
            if cat in STRUCTURE_CATS:  # what ``_own_cpu`` reads of it, as there
                self._structure_facts(owner, record, cat, name, args)
                if ph == "X" and cat in CPU_OP_CATS:
                    hot[2].add_op((pid, tid), ts, end)
            if end > record.end_ts:
                record.end_ts = end
            if launch:  # a runtime call (its correlation id: 0 is _own_cpu's, above)
                self._own_launch(owner, launch, name, end)
        elif windows.closed or end < windows.latest_start:  # (``decidable``, inline)
            self._own_cpu(windows.owner(ts, end), event, ts, end, raw, cat)
        else:
            self._hold_cpu(end, ts, event, raw, ph, cat, name, pid, tid, args)

    def _python_frame(self, event: dict, thread: tuple, ts, end, name, raw) -> bool:
        """A Python frame (``X``) on ``thread`` (pid, tid): the phases' evidence (diffusion
        code), and, when it begins in the gap before a boundary, the step it opens
        (``owners.StepOpeners``): True when owned so."""
        if name and not self._diffusion_code:
            self._diffusion_code = name.startswith(DIFFUSION_CODE)
        windows = self._windows
        if not windows.openers.any:
            return False
        owner = windows.frame_owner(thread, ts, end, name or "",
                                    getattr(self._detector, "revisable", True))
        if owner is None:
            return False
        self._own_cpu(owner, event, ts, end, raw, PYTHON_FRAME_CAT)
        return True

    def _own_metadata(self, event: dict, raw) -> None:
        self.metadata_events += 1
        if self._keep:
            self._assigned.append((METADATA, event if raw is None else raw))

    def _route(self, event: dict, raw, work: tuple | None, flow_id=None) -> None:
        """GPU work (``work``: its fields, ``_gpu_work_fields``, its correlation id last) or a
        launch flow (``work`` None; ``flow_id``: its ``id``) to the owner of its launch, or
        held for it."""
        if work is None:  # a launch flow: counted, no GPU numbers
            key = flow_id  # a string id is legal Chrome; it links nothing
            if key.__class__ is not int:
                key = None
        else:
            key = work[-1]
        # The owner of the launch ``key``: most often in the range found last (inline)
        launches = self._correlations
        if key is None:
            owner = None
        elif launches.hit_lo <= key <= launches.hit_hi:
            owner = launches.hit_owner
        else:
            owner = launches.lookup(key)
        if owner is None:
            self._wait_for_launch(event, key, raw, work)
        elif work is not None:
            self._own_gpu_work(owner, event, raw, work)
        elif owner < 0:
            self._own_simple(owner, event, raw)
        else:  # _own_simple's common case, inline (as in ``_feed_checked``: see there)
            if self._keep:
                self._assigned.append((owner, event if raw is None else raw))
            hot = self._hot if self._hot[0] == owner else self._hot_state(owner)
            hot[1].events += 1

    def _observe_ops(self, ops: list) -> None:
        """Ops that ``OpOrder`` hands on, (thread, start, end, name) each, read in order."""
        for thread, ts, end, name in ops:
            self._read_op(thread, ts, end, name)

    def _read_op(self, thread: tuple, ts, end, name: str, cat: str | None = None) -> None:
        """A structural op through its thread's stack to the detector, whose boundaries are
        taken: as the file has it (``cat``, its category, given: ``order.OpOrder`` may hold
        it until its thread's ops can be read in start order, or hand on others' first), or
        as the order hands it on (``_observe_ops``), in its thread's start order. The feed
        lane reads an op of the settled thread the order only notes in C, as here
        (``_native.feed_lane``'s ``held48_read``; this method elsewhere)."""
        stacks, detector = self._stacks, self._detector
        if not self._reads_stacks:  # (nor the order: each thread's ops as they come)
            found = detector.observe(thread, stacks.note_start(thread, ts), ts, end, name,
                                     stacks.last_section)
        else:
            if cat is not None:
                # an op of the settled thread only noted (``OpOrder.settled``: ``arrive``'s
                # common case, inline), else through ``arrive``
                order = self._order
                settled = order.settled
                if thread == order.settled_thread and ts >= settled.last_start and \
                        ts >= order.flush_below:
                    settled.last_start, settled.last_cat = ts, cat
                elif (ops := order.arrive(thread, ts, end, name, cat)) is not None:
                    self._observe_ops(ops)  # (None: just this op, now: the common case)
                    return
            # pushed and read in one call where the detector's mode has one (a loop of
            # one-op iterations matched, the steps the loop: ``StructureDetector.fast_read``)
            if (fast := detector.fast_read) is None or \
                    (found := fast[0](stacks, fast[1], thread, name, ts, end)) is None:
                found = detector.observe(thread, stacks.push(thread, name, ts, end), ts, end,
                                         name, stacks.last_section)
        if found:
            for boundary in found:  # (``_add_boundaries``, inline: once an op)
                self._add_boundary(boundary)
        if stacks.known > self._forget_at:
            self._forget_idle_threads()

    def _forget_idle_threads(self) -> None:
        """More than ``stack.LIVE_THREADS`` threads are known: the least recently read are
        forgotten by the stacks, the order and the detector, down to a quarter of it (the
        detector ranks them all each time: not too often), but those that hold ops
        (``OpOrder.holding``) or that the detector needs (``threads_needed``: the loop
        thread's candidates). A thread forgotten that comes back begins anew. Real traces
        never come near (``LIVE_THREADS``)."""
        stacks = self._stacks
        keep = self._detector.threads_needed() | self._order.holding()
        excess = len(stacks) - LIVE_THREADS // 4
        idle = [t for t in islice(stacks.least_recent(), excess + len(keep)) if t not in keep]
        idle = idle[:excess]
        stacks.forget(idle)
        self._order.forget(idle)
        self._detector.forget_threads(idle)
        self.forgotten_threads += len(idle)
        # what must stay is not looked at again before as many new threads have come
        self._forget_at = max(LIVE_THREADS, len(stacks) + LIVE_THREADS // 4)

    def note_header(self, header: dict | None) -> None:
        """The trace's header keys written before its events (an adapter passes them before
        the first ``feed``): what they promise of the evidence to come (``TraceFacts``)."""
        self._detector.note_facts(TraceFacts.from_header(header))

    def feed_batch(self, events: list, raws: list | None = None, frame_runs=(),
                   checked: bool = False) -> None:
        """Events in file order, as ``feed`` takes them one by one (``raws`` parallel to
        ``events``, or None). ``frame_runs``: the runs of events that look like plain Python
        frames (the decoder tells them from their bytes: ``decode.FrameRun``, with ``i``, ``j``,
        maybe their times in bulk, and ``events()``); each is checked here and decided a whole
        run at once (``_feed_frames``), with the same outcome as ``feed``. The events may be
        slim (``TraceDecoder.slim``: the fields the engine reads) or whole. ``checked``: the
        fields ``feed`` reads have the types it needs (``decode.Events.checked``), so they
        are not checked again, and each event is fed by its category (``_feed_checked``)."""
        if raws is None:
            raws = [None] * len(events)
        feed_each = self._feed_checked if checked else self._feed_each
        at = 0
        for run in frame_runs:
            feed_each(events[at:run.i], raws[at:run.i])
            self._feed_frames(run, raws[run.i:run.j])
            at = run.j
        feed_each(events[at:], raws[at:])

    def _feed_each(self, events: list, raws: list) -> None:
        """``feed`` of each of ``events``."""
        feed = self.feed
        for event, raw in zip(events, raws):
            feed(event, raw)

    def _feed_frames(self, run, raws: list) -> None:
        """A run of events that are plain Python frames (read in bulk, or accepted by
        ``_plain_frames``; else fed one by one): CPU-side ``X`` events that link nothing,
        decided by their window a stretch at a time (``_own_frames``). The order of the
        decisions, held events, spill and counts are ``feed``'s."""
        if not self._diffusion_code:
            self._diffusion_code = run.names_begin_with(DIFFUSION_CODE)
        if run.starts is not None:
            columns = run.starts, run.ends
        else:
            columns = _plain_frames(run.events())
        if columns is None:
            feed = self.feed
            for event, raw in zip(run.events(), raws):
                feed(event, raw)
            return
        starts, ends = columns
        if len(starts) and starts.min() < self._order.flush_below:  # as ``feed``'s check
            self._observe_ops(self._order.release_before(float(starts.min())))
        detector = self._detector
        if not detector.wants_evidence:
            self._own_frames(run, raws, starts, ends, 0, len(raws))
            return
        # While the detector wants frames as evidence, each one may end the loop thread's
        # Kineto section or confirm the unit, and so decide boundaries that the next frame's
        # owner depends on: the detector reads the frames as ``feed`` gives them, up to the
        # first that finds boundaries (``observe_frames``), and the frames between two such
        # boundaries are decided together.
        threads, names = run.threads_and_names()
        if not LAUNCH_NAMES.isdisjoint(names):  # ``_evidence_of`` reads no such frame
            self._frames_one_by_one(run, raws, starts, ends, threads, names)
            return
        at = k = 0
        n = len(raws)
        while k < n and detector.wants_evidence:
            k, found = detector.observe_frames(threads, starts, ends, names, k)
            if found:
                self._own_frames(run, raws, starts, ends, at, k)
                self._add_boundaries(found)
                at = k
                k += 1
        self._own_frames(run, raws, starts, ends, at, n)

    def _frames_one_by_one(self, run, raws: list, starts: np.ndarray, ends: np.ndarray,
                           threads: list, names: list) -> None:
        """``_feed_frames`` for a run with a frame named as a launch: each frame to
        ``_evidence_of`` in turn, as ``feed`` gives them."""
        detector = self._detector
        evidence_of = self._evidence_of
        at = 0
        for k, ((pid, tid), start, end, name) in enumerate(zip(threads, starts.tolist(),
                                                                ends.tolist(), names)):
            if not detector.wants_evidence:
                break
            found = evidence_of(pid, tid, start, end, name, PYTHON_FRAME_CAT, None)
            if found:
                self._own_frames(run, raws, starts, ends, at, k)
                self._add_boundaries(found)
                at = k
        self._own_frames(run, raws, starts, ends, at, len(raws))

    def _evidence_of(self, pid, tid, ts, end, name, cat, args) -> tuple:
        """What the detector finds in a CPU-side ``X`` event that is not structure, while it
        wants evidence: a launch (by its correlation id) or a Python frame may end the loop
        thread's Kineto section or confirm the unit."""
        if name in LAUNCH_NAMES:
            if args and "correlation" in args:
                return self._detector.observe_launch(
                    (pid, tid), ts, args["correlation"],
                    name in GRAPH_LAUNCH_NAMES, name in COPY_LAUNCH_NAMES)
            return ()
        if cat == PYTHON_FRAME_CAT:
            return self._detector.observe_frame((pid, tid), ts, end, name or "")
        if name in BLOCKING_SYNC_NAMES:
            return self._detector.observe_sync((pid, tid), ts)
        return ()

    def _own_frames(self, run, raws: list, starts: np.ndarray, ends: np.ndarray,
                    a: int, b: int) -> None:
        """Frames ``a`` to ``b`` (excluded) of ``run``, times ``starts`` and ``ends``: owned
        now by the windows known (``Windows.owners``) or held, all at once."""
        n = b - a
        if n <= 0:
            return
        raws, starts, ends = raws[a:b], starts[a:b], ends[a:b]
        self.frames_at_once += n
        self.events_in += n
        now = self._windows.decidable_many(ends)
        decided = np.flatnonzero(now)
        if decided.size == n:
            owners = self._windows.owners(starts, ends)
        else:
            owners = self._windows.owners(starts[decided], ends[decided])
        if self._windows.openers.any:
            self._frames_opening_steps(run, a, starts, ends, decided, owners)
        self._count_cpu(owners, ends if decided.size == n else ends[decided])
        # No bytes, or an event that had to change: a None among the raws, found by ``all``
        # (an event's bytes are never empty; ``None in`` compared each: 3x the instructions).
        changed = self._keep and not all(raws)
        events = run.events()[a:b] if changed else None
        if self._keep:
            kept = raws
            if changed:
                kept = [event if raw is None else raw for event, raw in zip(events, raws)]
            if decided.size < n:
                kept = [kept[k] for k in decided.tolist()]
            self._assigned.extend(zip(owners.tolist(), kept))
        if decided.size < n:
            later = np.flatnonzero(~now).tolist()
            held_raws = [raws[k] for k in later] if self._keep else [None] * len(later)
            held = [events[k] if raw is None and changed else _HELD_FRAME
                    for k, raw in zip(later, held_raws)]
            self._hold_frames(ends[later], starts[later], held, held_raws)

    def _frames_opening_steps(self, run, a: int, starts: np.ndarray, ends: np.ndarray,
                              decided: np.ndarray, owners: np.ndarray) -> None:
        """Of frames ``a`` on of ``run`` (times ``starts``, ``ends``), those that begin in the
        gap before a boundary go to ``Windows.frame_owner`` in their order, as ``feed``
        gives them: ``owners`` (of the frames ``decided``) takes the step each one opens."""
        windows = self._windows
        maybe = np.flatnonzero(windows.in_gaps(starts))
        if not maybe.size:
            return
        # Each one's place in ``owners``, where it is decided (the times read all at once too).
        places = np.searchsorted(decided, maybe).tolist()
        threads, names = run.threads_and_names((a + maybe).tolist())
        revisable = getattr(self._detector, "revisable", True)
        for place, thread, start, end, name in zip(places, threads, starts[maybe].tolist(),
                                                   ends[maybe].tolist(), names):
            owner = windows.frame_owner(thread, start, end, name, revisable)
            if owner is not None:  # decidable, so among ``decided``
                owners[place] = owner

    def _held_event(self, event: dict, raw, link, work: tuple | None = None) -> dict:
        """What a held event keeps: itself when it is handed out once decided (kept events
        without their original bytes), else ``work`` where given (GPU work's fields, read
        already: ``_held_view``'s tuple), else ``_held_view``."""
        if self._keep and raw is None:
            return event
        return work if work is not None else _held_view(event, link)

    def _count_cpu(self, owners: np.ndarray, ends: np.ndarray, ops: bool = False,
                   integer: bool = False) -> None:
        """Count decided CPU-side events that link nothing (``_own_cpu``'s numbers), all at
        once: per iteration the events and the latest end (``ops``: they are CPU ops, counted
        as such too; their time in ops is not added here; ``integer``: every end was given
        as an integer, the latest kept so)."""
        outside = owners < 0
        n_outside = int(outside.sum())
        self.outside_events += n_outside
        if n_outside == owners.size:
            return
        if n_outside:
            owners, ends = owners[~outside], ends[~outside]
        counts = np.bincount(owners)
        latest = np.full(counts.size, -np.inf)
        np.maximum.at(latest, owners, ends)
        iterations = self._iterations
        for owner in np.flatnonzero(counts).tolist():
            record = iterations[owner]
            record.events += int(counts[owner])
            if ops:
                record.cpu_ops += int(counts[owner])
            end = int(latest[owner]) if integer else float(latest[owner])
            if end > record.end_ts:
                record.end_ts = end

    def close(self, *, complete: bool = True) -> None:
        """End of input (``complete``: as for ``end_of_input``): decide everything still
        pending and emit the iteration records.

        Holds every pair decided at once in memory (for ``pop_assigned``); drivers that care
        about memory call ``end_of_input()`` and then ``decided()`` while it says ``more``."""
        self.end_of_input(complete=complete)
        while self._drain():
            pass

    def watch_final(self, visit) -> None:
        """Call ``visit(records)`` with each page of iteration records (a list, in index
        order) once their numbers are final (their ``breakdown`` may be made later:
        ``core.finish``), in the one pass
        that reads them at the end: a caller that needs every final record once
        (``stats.RecordColumns``) reads it there, not in a pass of its own over a long
        trace's records, each of which reads every page of them back from the file."""
        self._visit_final = visit

    def release(self) -> None:
        """Give back what the spill store holds (its temporary file), also when a run is
        abandoned before ``end_of_input()``; idempotent. A Splitter is a context manager
        that calls it on exit."""
        self._spill.close()

    def __enter__(self) -> "Splitter":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def decided(self) -> Decided:
        """Everything decided since the last call, after at most one spilled batch of
        further work; ``more`` says that another call may decide more."""
        self._trim_paged()
        more = self._drain()
        pairs, self._assigned = self._assigned, []
        records, self._records = self._records, []
        return Decided(pairs, records, more)

    def _trim_paged(self) -> None:
        """Send the per-iteration state used least recently to its file (``PagedList.trim``):
        only where no record, breakdown or phase facts got before is still in use (``_hot``
        is forgotten). Between two batches, and at each boundary: a detector that confirms
        its unit at the end finds every boundary of the trace at once (1 M iterations' state
        in memory together)."""
        self._hot = _NO_HOT
        for paged in self._paged:
            if paged.needs_trim:  # (most boundaries: none has a page too many, no call)
                paged.trim()

    def _keep_paged(self) -> None:
        """Note each per-iteration list that pages (``_trim_paged``)."""
        self._paged = tuple(kept for kept in (self._iterations, self._phase_facts,
                                              self._breakdowns) if hasattr(kept, "trim"))

    def end_of_input(self, *, complete: bool = True) -> None:
        """No more events. ``complete=False``: the input was cut short (a truncated file, a
        read error, a stop): any iteration may have lost events (Kineto writes the GPU work
        last), so no iteration record is ``complete``."""
        if self.closed:
            return
        self._input_complete = complete
        self._note_held()
        self._observe_ops(self._order.release_all())
        result = self._detector.close()
        for boundary in result.boundaries:
            self._add_boundary(boundary)
        self._windows.close(result.last_end)
        # What the records still need of the detector's conclusion (its boundaries are in the
        # windows and the records now); the detector itself, and all it learnt of the trace
        # (a few hundred bytes an op), is let go: no event comes after this.
        self._result = replace(result, boundaries=[])
        self._detector = None
        self.closed = True
        self._needs_drain = True

    def _drain(self) -> bool:
        """Decide one spilled batch that may be decidable now; True while more work remains.

        After ``end_of_input()`` it runs two passes: CPU-side events first (so that every
        launch is known), then the GPU work that waited for its launch; the last call emits
        the iteration records."""
        if not self._needs_drain:
            return False
        self._note_held()
        if self._due is None:
            self._due = self._spill.due(float("inf") if self.closed
                                        else self._windows.starts[-1])
        if self._due:
            batch = self._spill.take(self._due.pop(0))
            if isinstance(batch, HeldColumns):
                self._drained_columns(self._resolve_columns(batch))
            elif isinstance(batch, HeldLinks):
                self._drained_links(batch)
            elif kept := self._resolve_all(batch):  # (none once closed: all decidable)
                self._hold_items(kept)  # held in memory again (spilled again if that is full)
            return True
        self._due = None
        if self.closed:
            pending, self._pending = self._pending, []
            self._resolve_in_order(pending, self._take_held())
            self._pending_links = self._resolve_links(self._pending_links)
            if not self._final_pass:
                self._final_pass = True
                return True
            self._finish()
        self._needs_drain = False
        return False

    def _drained_columns(self, kept: HeldColumns | None) -> None:
        """Events of a spilled batch of columns not decided yet: as ``_drain`` keeps items."""
        if kept is None:
            return
        if self.closed:
            self._spill.put(kept)
        else:
            self._add_held(kept)
            self._bound_held()

    def _drained_links(self, batch: HeldLinks) -> None:
        """A spilled batch of links, taken back once closed (``spill.batch_key``): its head
        (CPU-side events, all decidable now) decided first, then the links whose owner is
        known (every one on the final pass); the others spilled again for the final pass."""
        head, batch.head = batch.head, None
        if isinstance(head, HeldColumns):
            self._resolve_columns(head)
        elif head:
            self._resolve_all(head)
        kept = self._resolve_links(batch)
        if kept:
            self._spill.put(kept)

    def _finish(self) -> None:
        for key, events in self._waiting_gpu.items():
            owner = self._correlations.lookup(key) if key is not None else None
            for event, raw in events:
                self._own_linked(OUTSIDE if owner is None else owner, event, raw)
        self._waiting_gpu.clear()
        for key, events in self._waiting_annotations.items():
            owner = self._annotations.lookup(key) if key is not None else None
            for event, raw in events:
                self._own_simple(OUTSIDE if owner is None else owner, event, raw)
        self._waiting_annotations.clear()
        result, self._result = self._result, None  # its shapes (one per iteration): done with
        self._finish_records(result)

    # -- output ------------------------------------------------------------------------

    def pop_assigned(self) -> list:
        """(owner, event) pairs decided since the last call; owner is an iteration index,
        ``OUTSIDE`` or ``METADATA``. Empty unless ``keep_events``."""
        out, self._assigned = self._assigned, []
        return out

    def pop_records(self) -> list:
        """Boundary and Revision records decided since the last call, in order, and after the
        last decision every iteration's record (``iterations``)."""
        out, self._records = self._records, []
        self._hot = _NO_HOT  # iterating a ``PagedList`` trims it
        if self._records_done:
            self._records_done = False
            out.extend(self._iterations)
        return out

    @property
    def iterations(self) -> list[IterationRecord]:
        """The iteration records, in order (a sequence: a list, or a ``PagedList``); final
        once ``decided()`` says no more after ``end_of_input()``."""
        self._hot = _NO_HOT  # the caller may iterate them: a ``PagedList`` is trimmed then
        return self._iterations

    @property
    def events_out(self) -> int:
        """Non-metadata events assigned so far (to an iteration or to outside)."""
        if self.events_in_iterations is not None:  # the records are final
            return self.events_in_iterations + self.outside_events
        self._hot = _NO_HOT  # iterating a ``PagedList`` trims it
        return sum(r.events for r in self._iterations) + self.outside_events

    # -- internals ---------------------------------------------------------------------

    def _own_invalid(self, event: dict, problem: str, raw=None) -> None:
        """An event with a field the engine cannot use: to outside, unchanged, and counted."""
        self.invalid_events += 1
        if len(self.invalid_examples) < INVALID_EXAMPLES:
            self.invalid_examples.append({"event_index": self.events_in - 1, "problem": problem})
        self._own_simple(OUTSIDE, event, raw)

    def _reject_untimed(self, ph):
        """Refuse an event without ``ph`` (None) or ``ts``: an error of the input."""
        self._reject('has no "ph" field' if ph is None else f'(ph {ph!r}) has no "ts" field')

    def _reject(self, problem: str):
        """Refuse an event: it is not counted as read, so the counts still balance."""
        self.events_in -= 1
        raise TraceEventError(f"event #{self.events_in + 1} {problem}")

    def _add_boundaries(self, found) -> None:
        """What the detector found (boundaries and revisions of the latest), if anything."""
        if found:
            for boundary in found:
                self._add_boundary(boundary)

    def _add_boundary(self, found) -> None:
        # A boundary after the latest, no paged list to trim (a loop: most boundaries): all
        # below in one call (``_native.open_iteration``), its held events too where each is
        # an op of the iteration at hand (True), else the caller decides them
        if _open_iteration is not None and (hot := _open_iteration(self, found, _OPENING)):
            if hot is not True:
                self._resolve_pending(found.start_ts)
                self._hot = hot
            return
        windows = self._windows
        if found.__class__ is RetractLast or found.moves_last:
            if not self._ignored_last:  # a revision of an ignored boundary is ignored too
                self._revise_last(found)
            return
        # (``latest_start``: the latest start, -inf where none; no float made of the array)
        self._ignored_last = found.start_ts <= windows.latest_start
        if self._ignored_last:
            return  # a detector may only move forward
        # no caller of ``_add_boundary`` holds per-iteration state: ``_trim_paged``, inline
        # (once a boundary; most often no list has a page too many, and ``_hot``, the state
        # of the iteration the boundary before opened, stays in memory: see below)
        for paged in self._paged:
            if paged.needs_trim:
                self._hot = _NO_HOT
                paged.trim()
        start = found.start_ts
        index = add_window(windows, start, found.opens_after, found.thread)
        pid, tid = self._last_thread = found.thread
        record = _new_iteration(index, start, found.first_op)
        breakdown = new_breakdown()
        self._iterations.append(record)  # (no phase facts yet: see ``_observe_phase``)
        self._breakdowns.append(breakdown)
        # The breakdowns of the iterations before, most often at hand where the boundary
        # before left them (``_hot``: no look-up in a ``PagedList``)
        hot = self._hot
        before, older = (hot[2], hot[3]) if hot[0] == index - 1 else (None, None)
        if index >= 2:  # (not the one before: this boundary's held events come to it now)
            (self._breakdowns[index - 2] if older is None else older).compact_host()
        if self.boundary_records:
            self._records.append(_new_boundary(index, start, pid, tid, found.first_op))
        self._resolve_pending(start)
        # What the next boundary decides mostly falls in the iteration this one opens (a
        # loop of one-op iterations: every event): its state at hand (``_hot_state``), with
        # the breakdown of the one before (its ``compact_host`` at the next boundary)
        self._hot = (index, record, breakdown, before)

    def _revise_last(self, found) -> None:
        """The detector revised its latest boundary. Nothing was owned by its iteration yet
        (an event is decided only by a boundary at or after its end, and no later one came),
        so withdrawing it, or moving it later, changes no decision already handed out."""
        windows = self._windows
        index = len(windows.starts) - 1
        if index < 0:
            return
        record = self._iterations[index]
        pid, tid = self._last_thread
        if found.__class__ is RetractLast:
            assert record.events == 0, "a retracted iteration owns no event"
            windows.drop_last()
            self._iterations.pop()
            self._breakdowns.pop()
            if len(self._phase_facts) > index:  # index for index with the records, up to
                self._phase_facts.pop()  # the last that has facts (``_observe_phase``)
            self._hot = _NO_HOT
            if self.boundary_records:
                self._records.append(Revision(index, REVISION_RETRACT, None, pid, tid,
                                              record.first_op, found.why))
            return
        if found.start_ts <= windows.starts[-1]:
            return  # a revision only moves a boundary later
        windows.move_last(found.start_ts, found.opens_after, found.thread)
        record.start_ts = found.start_ts
        record.first_op = found.first_op
        pid, tid = found.thread
        if self.boundary_records:
            self._records.append(Revision(index, REVISION_MOVE, found.start_ts, pid, tid,
                                          found.first_op, found.why))
        self._resolve_pending(found.start_ts)

    def _hold_linked(self, event: dict, link: tuple, raw=None, work: tuple | None = None) -> None:
        """Hold an event that ``link`` (``("corr"|"ext", id)``) decides: when its launch (or
        annotation) is seen (``work``: see ``_held_event``)."""
        if not self._keep:
            raw = None
        kind, key = link
        self._pending_links.add(key, kind == "ext", self._held_event(event, raw, link, work),
                                raw)
        if self._held_in_memory() >= self.options.pending_limit:
            self._bound_held()

    # What a held CPU-side event keeps (``_hold_cpu``). Unless it is handed out itself (kept,
    # without its original bytes), what deciding it reads (``_own_cpu``), held as columns
    # (``HeldRows``) where its times are floats, or integers a float holds: a CPU op (``X``)
    # that links nothing and whose name tells nothing (no phase role, or a GEMM's without
    # its ``Input Dims``) nor is a step number keeps its thread ``(pid, tid)`` alone (it is
    # counted, with its time in ops), one whose name does (and that has no ``Input Dims`` to
    # keep) ``(pid, tid, name)``: a tuple, not a view's dict (a spilled batch of 4,096
    # pickles and loads in about a third of the time; a split of 200 k ``aten::mm``, phase
    # evidence, on as many threads, ``testing.attacks.threads``: 15,563 -> 13,916 M
    # instructions); an annotation without ``args`` (it links nothing) its name, a string
    # (no view made: 30 k annotated steps of one op each,
    # ``testing.attacks.many_iterations``); an event that is no structure and links nothing,
    # with float times, nothing (None: counted as a plain Python frame is, ``_count_cpu``);
    # any other its ``_held_view``.
    def _hold_cpu(self, end, start, event: dict, raw, ph, cat, name, pid, tid, args) -> None:
        """Hold a CPU-side event (``ph`` to ``args``: its fields, as ``feed`` read them):
        decided by a boundary after its end; what it keeps: the comment above."""
        if cat == ANNOTATION_CAT and args:
            self._annotations.hold(args.get("External id"))
        keep = self._keep
        if not keep:
            raw = None
        self._seq += 1
        if (end.__class__ is float or -_FLOAT_INTEGERS <= end <= _FLOAT_INTEGERS) and (
                start.__class__ is float or -_FLOAT_INTEGERS <= start <= _FLOAT_INTEGERS):
            if keep and raw is None:
                pass  # handed out itself
            elif args and "correlation" in args:
                event = _held_view(event, None)
            elif cat in CPU_OP_CATS:
                if ph != "X":
                    event = _held_view(event, None)
                elif (not (role := _PHASE_ROLES[name] if name in _PHASE_ROLES else
                           role_of(name)) or role == _GEMM and not (args and DIMS_ARG in args)) \
                        and not name.startswith(PROFILER_STEP_PREFIX):
                    # (``serving.tells_nothing`` of a GEMM, inline)
                    event = (pid, tid)
                    # the ops of a thread that follow each other hold one tuple, not one
                    # each: a spilled batch pickles it once, and groups them by identity
                    if event == self._held_thread:
                        event = self._held_thread
                    else:
                        self._held_thread = event
                elif args and DIMS_ARG in args:  # phase evidence, its dims too
                    event = _held_view(event, None)
                else:  # its name is phase evidence or a step number: an op held named
                    # (held one after another with one name, one string: pickled once in a
                    # batch; 200 k ``aten::mm``, the engine alone: -460 instructions an op)
                    if name == self._held_name:
                        name = self._held_name
                    else:
                        self._held_name = name
                    event = (pid, tid, name)
            elif cat == ANNOTATION_CAT:
                # one that links nothing (no ``args``): its name alone, a string (what
                # deciding it reads: ``_own_cpu``); else its view
                event = _held_view(event, None) if args else name or ""
            elif end.__class__ is float and start.__class__ is float:
                event = None
            else:
                event = _held_view(event, None)
            self._cpu_rows.items.append((end, self._seq, start, event, None, raw))
            if end.__class__ is not float or start.__class__ is not float:
                self._cpu_rows.exact = True  # (``HeldRows``: held so, without a call)
            self._cpu_held_n += 1
        else:
            if raw is not None or not keep:
                event = _held_view(event, None)
            heappush(self._pending, (end, self._seq, start, event, None, raw))
        if len(self._pending) + len(self._pending_links.raws) + self._cpu_held_n >= \
                self.options.pending_limit:  # ``_held_in_memory``, inline (once an event)
            self._bound_held()

    def _held_in_memory(self) -> int:
        """Events held in memory: CPU-side ones, and links (``_pending_links`` has no head:
        only a spilled batch has one, so its links are its length, read without a call)."""
        return len(self._pending) + len(self._pending_links.raws) + self._cpu_held_n

    def _hold_frames(self, ends: np.ndarray, starts: np.ndarray, events: list,
                     raws: list) -> None:
        """Hold CPU-side events (already what ``_hold_cpu`` keeps of them) in this order: the
        same items, spilled at the same points, as ``_hold_cpu`` one by one, as columns
        (``HeldColumns``; a plain frame, the view ``_HELD_FRAME``, as None)."""
        first = self._seq + 1
        self._seq += len(ends)
        kept = None
        if not all(event is _HELD_FRAME for event in events):
            kept = [None if event is _HELD_FRAME else event for event in events]
        columns = HeldColumns(ends, np.arange(first, self._seq + 1, dtype=np.int64), starts,
                              raws, kept)
        limit = self.options.pending_limit
        at = 0
        while at < len(raws):
            room = max(1, limit - self._held_in_memory())
            self._add_held(columns.take(slice(at, at + room)))
            at += room
            self._bound_held()

    def _add_held(self, columns: HeldColumns) -> None:
        self._cpu_held.append(columns)
        self._cpu_held_n += len(columns)

    def _take_held(self, until: float | None = None) -> HeldColumns | None:
        """The CPU-side events held as columns (those that end before ``until``, when
        given), no longer held; None if none."""
        rows = self._cpu_rows.columns()
        if rows is not None:
            self._cpu_held.append(rows)
        parts = self._cpu_held
        if until is not None:
            parts = [p for p in parts if p.earliest < until]
        if not parts:
            return None
        columns = HeldColumns.joined(parts)
        if until is None:
            self._cpu_held, self._cpu_held_n = [], 0
            return columns
        taken, kept = columns.split_before(until)
        self._cpu_held = [p for p in self._cpu_held if p.earliest >= until]
        if kept is not None:
            self._cpu_held.append(kept)
        self._cpu_held_n = sum(map(len, self._cpu_held))
        return taken

    def _hold_items(self, items: list) -> None:
        """Hold again items taken back from the spill that are not decided yet."""
        pending = self._pending
        for item in items:
            heappush(pending, item)
        self._bound_held()

    def _bound_held(self) -> None:
        """Spill what is held once it reaches ``pending_limit``."""
        if self._held_in_memory() >= self.options.pending_limit:
            self._note_held()
            # Spill in small batches sorted by end, so that a boundary re-reads at most one
            # batch it only partly decides.
            for batch in self._spill_batches(self._take_held()):
                self._spill.put(batch)
            self._pending, self._pending_links = [], HeldLinks()

    def _spill_batches(self, columns: HeldColumns | None):
        """The batches of ``_bound_held``: the CPU-side events held, sorted by (end, seq),
        then the events waiting for a link, ``_SPILL_BATCH`` at a time. CPU-side events held
        as columns only are spilled as columns, and so decided (``_resolve_columns``) and
        held again as columns; else as items. A batch with links is ``HeldLinks``, the
        CPU-side events it shares with them its head (``spill.batch_key``: due at the end
        only, as the links are)."""
        links = self._pending_links
        if columns is not None and self._pending:  # both kinds: as items
            self._pending.extend(columns.items(_HELD_FRAME))
            columns = None
        if columns is None:
            held = sorted(self._pending)
            part = held.__getitem__
        else:
            held = columns.take(np.lexsort((columns.seqs, columns.ends)))  # (end, seq) order
            part = held.take
        n = len(held)
        for i in range(0, n + len(links), _SPILL_BATCH):
            j = i + _SPILL_BATCH
            if j <= n or not links:
                yield part(slice(i, j))
            else:
                batch = links.take(slice(max(i - n, 0), j - n))
                if i < n:
                    batch.head = part(slice(i, n))
                yield batch

    def _note_held(self, spilled: int | None = None) -> None:
        """Track the most events held at once, in memory and spilled (``spilled``: how many
        are, when the caller knows). Only a hold adds to them, so the most is reached right
        before something held is decided: every path that decides held events calls this
        first (not every hold)."""
        n = self._held_in_memory() + (len(self._spill) if spilled is None else spilled)
        if n > self.max_pending:
            self.max_pending = n

    def _resolve(self, item) -> bool:
        """Decide one held CPU-side event if its window is known now; True if decided."""
        end, _, start, event, _, raw = item
        if self._windows.decidable(end):
            self._own_cpu(self._windows.owner(start, end), event, start, end, raw)
            return True
        return False

    def _resolve_links(self, links: HeldLinks) -> HeldLinks:
        """Decide the held ``links`` (not their head) whose owner is known now, in their
        order, all their owners looked up at once; on the final pass every one (no owner:
        ``OUTSIDE``, launched before the trace began). Returns the others."""
        kept = []
        final = self._final_pass
        own_linked, own_simple = self._own_linked, self._own_simple
        owners = links.owners(self._correlations, self._annotations)
        for k, (owner, event, raw) in enumerate(zip(owners, links.events, links.raws)):
            if owner is None:
                if not final:  # its launch may still come
                    kept.append(k)
                    continue
                owner = OUTSIDE
            if event is None:  # only counted
                own_simple(owner, None, raw)
            else:
                own_linked(owner, event, raw)
        if len(kept) == len(owners):
            return links
        return links.take(kept)

    def _resolve_all(self, items: list) -> list:
        """``_resolve`` each held item in order; returns those not decided, in order. A
        stretch of more than ``_FEW_HELD`` plain Python frames (held a run at once,
        ``_hold_frames``, or events counted as one, ``_hold_cpu``: the view ``_HELD_FRAME``,
        or an equal one back from the spill; times as floats) is decided all at once, as
        ``_own_frames`` does."""
        kept = []
        resolve = self._resolve
        frame = [item[3] == _HELD_FRAME for item in items]
        frame.append(False)  # where the last stretch of frames ends
        at, n = 0, len(items)
        while at < n:
            stop = frame.index(False, at) if frame[at] else at + 1
            if stop - at > _FEW_HELD:
                kept.extend(self._resolve_frames(items[at:stop]))
                at = stop
                continue
            while at < stop:
                if not resolve(items[at]):
                    kept.append(items[at])
                at += 1
        return kept

    def _resolve_frames(self, items: list) -> list:
        """``_resolve_all`` for held plain Python frames (see there); returns those not
        decided, in order."""
        columns = HeldColumns(np.array([item[0] for item in items], np.float64),
                              np.array([item[1] for item in items], np.int64),
                              np.array([item[2] for item in items], np.float64),
                              [item[5] for item in items])
        kept = self._resolve_columns(columns)
        return [] if kept is None else kept.items(items[0][3])

    def _resolve_columns(self, held: HeldColumns) -> HeldColumns | None:
        """Decide the held CPU-side events ``held`` that can be now, in their order, as
        ``_resolve`` one by one (``Windows.owners``; plain frames counted by ``_count_cpu``,
        the others through ``_own_cpu``); returns the others (None if none)."""
        now = self._windows.decidable_many(held.ends)
        decided = np.flatnonzero(now)
        if not decided.size:
            return held
        chosen = held if decided.size == len(held) else held.take(decided)
        owners = self._windows.owners(chosen.starts, chosen.ends)
        if chosen.events is None:
            self._count_cpu(owners, chosen.ends)
            if self._keep:
                self._assigned.extend(zip(owners.tolist(), [_HELD_FRAME if raw is None else raw
                                                            for raw in chosen.raws.tolist()]))
        else:
            self._own_held(chosen, owners)
        return None if chosen is held else held.take(np.flatnonzero(~now))

    def _own_held(self, held: HeldColumns, owners: np.ndarray) -> None:
        """``_resolve_columns`` for columns that are not all plain frames: the frames (and
        the events held as one: None) counted at once, and so the ops held as their thread
        alone (``_hold_cpu``; those held named give their names' facts one by one, in
        order, through ``_own_cpu``, as views do) where every time is a float, or every
        one an integer (``HeldColumns.exact``: kept as given; else an op's end may be an
        integer and another's a float of one value, and the order says which one stays:
        ``_own_cpu``), their time in ops added at once (``_add_held_ops``: else one by
        one, ``_add_held_op``); every other event
        through ``_own_cpu``, but those owned outside that link nothing, counted at once too
        (``_count_outside_quiet``); the pairs in order (those of the rows only counted made
        in bulk between the others)."""
        plain = np.equal(held.events, None)
        if plain.any():
            self._count_cpu(owners[plain], held.ends[plain])
        events = held.events.tolist()
        counted = False  # the ops (held as their thread) were counted at once
        # every time a float, or every one given as an integer (a trace stamped in
        # integers: 200 k ops of unique names, all held, ``testing.attacks.unique_names``)
        integer = held.exact is not None
        if not integer or len(events) >= _INTEGER_BULK_MIN and \
                (held.exact == _BOTH_INTEGERS).all():
            n = len(events)
            ops = np.fromiter(map(type, events), object, n) == tuple  # (in C)
            if ops.any():  # but not those held named: (pid, tid, name)
                ops &= np.fromiter(map(length_hint, events), np.intp, n) == 2
            if ops.any():
                self._count_cpu(owners[ops], held.ends[ops], ops=True, integer=integer)
                one_by_one = self._add_held_ops(held, owners, ops, events, plain, integer)
                counted = True
        own_cpu, add_held_op = self._own_cpu, self._add_held_op
        keep = self._keep
        if keep:
            raws = held.raws.tolist()
            # a None among them found by ``all`` (an event's bytes are never empty; ``None
            # in`` compares each: ``_own_frames``)
            kept = raws if all(raws) else [  # (their bytes, as ``_own_cpu`` hands out)
                raw if raw is not None else _HELD_FRAME if event is None else event
                for event, raw in zip(events, raws)]
            assigned, at = self._assigned, 0
        rest = ~plain & (~ops | one_by_one) if counted else ~plain
        self._count_outside_quiet(rest, owners, events)
        owners = owners.tolist()
        one_by_one_rows = np.flatnonzero(rest).tolist()
        if one_by_one_rows:  # (their times as given: none to read where all were counted)
            ends, starts = held.times()
        for k in one_by_one_rows:
            event = events[k]
            if keep:
                assigned.extend(zip(owners[at:k], kept[at:k]))
                at = k + 1
            if counted and event.__class__ is tuple and len(event) == 2:
                # an op held as its thread, counted: its time in ops one by one
                if keep:
                    assigned.append((owners[k], kept[k]))
                add_held_op(owners[k], event, starts[k], ends[k])
            else:
                own_cpu(owners[k], event, starts[k], ends[k], raws[k] if keep else None)
        if keep:
            assigned.extend(zip(owners[at:], kept[at:]))

    def _count_outside_quiet(self, rest: np.ndarray, owners: np.ndarray, events: list) -> None:
        """Of the held ``rest`` rows that ``_own_held`` would hand ``_own_cpu`` one by one,
        those owned by ``OUTSIDE`` that link nothing (an op held as its thread, or named, an
        annotation as its name, or a dict without ``args``: ``_own_cpu`` only counts them)
        are counted at once here, and taken out of ``rest`` (their pairs are made with the
        rows only counted)."""
        outside = np.flatnonzero(rest & (owners == OUTSIDE)).tolist()
        if not outside:
            return
        quiet = [k for k in outside if (kind := (event := events[k]).__class__) is tuple
                 or kind is str or kind is dict and "args" not in event]
        self.outside_events += len(quiet)
        rest[np.fromiter(quiet, np.intp, len(quiet))] = False  # (a list: 7x the instructions)

    def _add_held_ops(self, held: HeldColumns, owners: np.ndarray, ops: np.ndarray,
                      events: list, plain: np.ndarray, integer: bool = False) -> np.ndarray:
        """The time in ops of the held ``ops`` of ``held`` (held as their thread, counted
        already: ``_count_cpu(..., ops=True)``), per iteration and thread at once
        (``IterationBreakdown.add_ops``) with the CPU ops held named or as views among them
        in their place (``_own_cpu`` adds those again: an interval in a union already
        changes nothing); returns the ops whose time is still to add one by one, in their
        place: those of a union that the order might change (``IntervalUnion.add_many``).
        ``integer``: every time was given as an integer (kept so in the unions). Where no
        view is among them (nothing is added again after), a union may drop its oldest
        intervals as one by one would (``add_many``'s ``may_drop``)."""
        # each row's thread, as an object array (read at rows in numpy): an op's is its event
        threads, rows_of_ops = held.events, ops
        views = [k for k in np.flatnonzero(~(ops | plain)).tolist()
                 if (kind := (event := events[k]).__class__) is tuple  # held named
                 or kind is dict and event.get("cat") in CPU_OP_CATS and event.get("ph") == "X"]
        if views:
            threads, rows_of_ops = threads.copy(), ops.copy()
            for k in views:
                event = events[k]
                threads[k] = event[:2] if event.__class__ is tuple else (
                    event.get("pid"), event.get("tid"))
            rows_of_ops[views] = True
        one_by_one = np.zeros(len(events), bool)
        at = np.flatnonzero(rows_of_ops & (owners >= 0))
        if not at.size:
            return one_by_one
        mine = owners[at]
        single = mine[0] == mine[-1] and not (mine != mine[0]).any()  # (most often)
        for owner in [int(mine[0])] if single else dict.fromkeys(mine.tolist()):
            hot = self._hot if self._hot[0] == owner else self._hot_state(owner)
            rows = at if single else at[mine == owner]
            for thread, part in _rows_by_thread(threads[rows].tolist(), rows):
                if not hot[2].add_ops(thread, held.starts[part], held.ends[part], integer,
                                      not views):
                    one_by_one[part] = True
        return one_by_one & ops

    def _add_held_op(self, owner: int, thread: tuple, start, end) -> None:
        """An op held as its ``thread`` and counted already (``_count_cpu(..., ops=True)``):
        its time in ops, as ``_own_cpu`` adds it."""
        if owner >= 0:
            hot = self._hot if self._hot[0] == owner else self._hot_state(owner)
            hot[2].add_op(thread, start, end)

    def _resolve_in_order(self, items: list, held: HeldColumns | None) -> None:
        """Decide held ``items`` and ``held`` columns together in the order they came (all
        decidable now)."""
        if held is not None and (items or len(held) <= _FEW_HELD):  # both kinds, or a few
            items.extend(held.items(_HELD_FRAME))  # columns (``_FEW_HELD``): as items
            held = None
        items.sort(key=_arrival)  # hand events out in the order they came
        self._resolve_all(items)
        if held is not None:
            self._resolve_columns(held.in_arrival_order())

    def _resolve_pending(self, until: float) -> None:
        """A boundary at ``until``: decide the in-memory held events it decides; spilled
        ones are left to ``decided()`` so that one call never loads the whole spill."""
        spilled = self._spill.count  # (``len``, without a call)
        # ``_note_held(spilled)``, inline (once a boundary)
        held = len(self._pending) + len(self._pending_links.raws) + self._cpu_held_n + spilled
        if held > self.max_pending:
            self.max_pending = held
        if spilled:
            self._needs_drain = True
        pending = self._pending
        decided = []
        while pending and pending[0][0] < until:
            decided.append(heappop(pending))
        rows = self._cpu_rows
        if not self._cpu_held and len(items := rows.items) <= _FEW_HELD:  # a few, held one
            # by one: most often (a loop of tiny iterations: every boundary) each ends before
            # ``until`` and none is a frame, so all are taken as they lie
            # (``_each_taken_whole``; a method of ``HeldRows`` cost two calls). Most often of
            # all, they are ops of the iteration at hand in the window this boundary closed
            # (``Windows.add`` caches it): owned at the head in one call, as ``_own_each``
            # owns them (``_own_held_ops``), no call of either; the rest, if any, as below.
            if not decided and items and _own_held_ops is not None and (done := _own_held_ops(
                    items, self._windows, self._hot, self._assigned if self._keep else None,
                    union_with, PROFILER_STEP_PREFIX)):
                del items[:done]  # (``rows.items`` itself: those owned are held no longer)
                if not items:
                    rows.exact = False  # (``HeldRows``: emptied so)
            if not decided and items and _each_taken_whole(items, until):
                rows.items, rows.exact = [], False  # (``HeldRows``: emptied so)
                self._cpu_held_n = 0
                self._own_each(items)
            elif not items and not decided:
                self._cpu_held_n = 0  # (``items_before``'s case of none, without the call)
            else:
                items = rows.items_before(until, _HELD_FRAME)
                self._cpu_held_n = len(rows.items)
                if decided:
                    decided.extend(items)
                    self._resolve_in_order(decided, None)
                elif items:  # in the order they came already
                    self._own_rows(items)
        else:
            held = self._take_held(until)
            if not decided and held is not None and len(held) <= _FEW_HELD:
                # a few of the held columns alone (the first iterations of a loop, held
                # until the detector was sure, decided a boundary at a time): each ends
                # before ``until``, so as rows are, in the order they came (``_own_rows``)
                items = held.items(_HELD_FRAME)
                items.sort(key=_arrival)
                self._own_rows(items)
            else:
                self._resolve_in_order(decided, held)
        if self._pending_links.raws:  # (no head: see ``_held_in_memory``)
            self._pending_links = self._resolve_links(self._pending_links)

    def _own_rows(self, items: list) -> None:
        """Held items of CPU-side events that a boundary decides (each ends before it), in
        the order they came: ``_resolve_all``, without its look for runs of plain frames
        and its test of each one's window where none is a plain frame."""
        if _HELD_FRAME in map(HELD_EVENT, items):
            self._resolve_all(items)
            return
        self._own_each(items)

    def _own_each(self, items: list) -> None:
        """Held items of CPU-side events, none a plain frame, that a boundary decides (each
        ends before it), in the order they came (``_own_rows``)."""
        windows, keep = self._windows, self._keep
        if _own_held_ops is not None:  # those at the head that are ops held as their
            # thread, or an iteration's step annotation, of the iteration at hand, in one call
            # (the cases inline below)
            done = _own_held_ops(items, windows, self._hot, self._assigned if keep else None,
                                 union_with, PROFILER_STEP_PREFIX)
            if done:
                if done == len(items):
                    return
                items = items[done:]
        own_cpu = self._own_cpu
        for end, _, start, event, _, raw in items:
            # the window found last (``Windows.owner``'s first case, inline: most items)
            owner = windows.cached_owner if windows.cached_lo <= start <= end < \
                windows.cached_hi else windows.owner(start, end)
            if owner < 0 or (kind := event.__class__) is not tuple and kind is not str:
                own_cpu(owner, event, start, end, raw)
                continue
            # ``_own_cpu``'s most common cases, inline: an op held as its thread, or named
            # (it links nothing: counted, its time in ops, what its name tells), or an
            # annotation held as its name (what its name tells), of an iteration (a loop of
            # one-op iterations: each boundary decides one or two)
            if keep:
                self._assigned.append((owner, event if raw is None else raw))
            hot = self._hot if self._hot[0] == owner else self._hot_state(owner)
            record = hot[1]
            record.events += 1
            if kind is str:
                self._structure_facts(owner, record, ANNOTATION_CAT, event, None)
            else:
                if len(event) == 2:
                    record.cpu_ops += 1
                else:
                    self._structure_facts(owner, record, _NAMED_OP_CAT, event[2], None)
                    event = event[:2]
                hot[2].add_op(event, start, end)
            if end > record.end_ts:
                record.end_ts = end

    def _own_cpu(self, owner: int, event, start, end, raw=None, cat=False) -> None:
        """A CPU-side event owned by ``owner``: ``event`` the event, or what ``_hold_cpu``
        keeps of it (not None), with its times; ``cat``: its category where known."""
        if self._keep:
            self._assigned.append((owner, event if raw is None else raw))
        # an op held as its thread (pid, tid), or named: (pid, tid, name); an annotation
        # that links nothing as its name (``_hold_cpu``)
        thread = event if (kind := event.__class__) is tuple else None
        if kind is str:
            cat = ANNOTATION_CAT
        elif thread is None and cat is False:
            cat = event.get("cat")
        if owner == OUTSIDE:
            self.outside_events += 1
        else:
            hot = self._hot
            if hot[0] != owner:
                hot = self._hot_state(owner)
            record = hot[1]
            record.events += 1
            if thread is not None:  # counted, its time in ops; it links nothing
                if len(thread) == 2:
                    record.cpu_ops += 1
                else:  # held named: what its name tells, as a view's (``_held_view``)
                    self._structure_facts(owner, record, _NAMED_OP_CAT, thread[2], None)
                    thread = thread[:2]
                hot[2].add_op(thread, start, end)
            elif kind is str:  # an annotation held as its name: no ``args``, no CPU op
                self._structure_facts(owner, record, cat, event, None)
            elif cat in STRUCTURE_CATS:
                self._structure_facts(owner, record, cat, event.get("name"), event.get("args"))
                if cat in CPU_OP_CATS and event.get("ph") == "X":
                    hot[2].add_op((event.get("pid"), event.get("tid")), start, end)
            if end > record.end_ts:
                record.end_ts = end
        if thread is not None or kind is str:  # it links nothing
            return
        args = event.get("args")
        if args:
            corr = args.get("correlation")
            if corr is not None and event.get("ph") == "X":  # a runtime call
                self._own_launch(owner, corr, event.get("name"), end)
            elif cat == ANNOTATION_CAT:
                ext = args.get("External id")
                if ext is not None:
                    self._annotations.add(ext, owner)
                    waiting = self._waiting_annotations.pop(ext, None)
                    if waiting:
                        for gpu_event, gpu_raw in waiting:
                            self._own_simple(owner, gpu_event, gpu_raw)

    def _structure_facts(self, owner: int, record: IterationRecord, cat: str, name,
                         args) -> None:
        """What a structural op of iteration ``owner`` (its ``name`` and ``args``) tells: its
        step number, phase evidence."""
        if cat in CPU_OP_CATS:
            record.cpu_ops += 1
        name = name or ""
        if record.step is None and name.startswith(PROFILER_STEP_PREFIX):
            # a step's number first: ``ProfilerStep#N`` (ASCII digits) has no phase role, and
            # a name that is one step's only was looked up in vain, the table filled with
            # them (``serving.ROLES``: 30 k annotated one-op steps, 30 k ``role_of`` calls)
            number = profiler_step_number(name)
            if number is not None:
                record.step = number
                return
        role = _PHASE_ROLES[name] if name in _PHASE_ROLES else role_of(name)
        # (not ``serving.tells_nothing``, inline: a GEMM without its ``Input Dims``, most of
        # them, calls nothing)
        if role and (role != _GEMM or args and DIMS_ARG in args):
            self._observe_phase(owner, role, name, args)

    def _observe_phase(self, owner: int, role: int, name: str, args) -> None:
        """An op of iteration ``owner`` with a phase ``role``: into its ``PhaseFacts``, made
        at its first such op that tells something (None before: most iterations of a
        training loop have none, and a None is nothing to page through a file; an op that
        tells nothing, a GEMM without its ``Input Dims`` (``serving.tells_nothing``: tested by
        the caller, ``_structure_facts``), leaves it None: 30 k annotated steps of one
        ``aten::mm`` each, ``testing.attacks.many_iterations``, paged 30 k facts of nothing
        through the file, each pickled by a call of Python). The list of them reaches only
        as far as the last iteration that has some (a boundary appends nothing to it: a
        loop without phase evidence, 30 k one-op iterations, pays no call an iteration for
        it), the iterations between padded with None."""
        known = self._phase_facts
        facts = known[owner] if owner < len(known) else None
        if facts is None:
            facts = PhaseFacts()
            facts.observe(role, name, args)
            if facts != NOTHING_SEEN:
                while len(known) < owner:
                    known.append(None)
                if owner < len(known):
                    known[owner] = facts
                else:
                    known.append(facts)
            return
        facts.observe(role, name, args)

    def _own_launch(self, owner: int, corr, name, end) -> None:
        """A runtime call (ending at ``end``) owned by ``owner``: its GPU work's owner, now and
        for what waited for it; a launch is timed (``LaunchTimes``) and counted."""
        if name in LAUNCH_NAMES:
            early = self._launch_times.add(corr, end)
            if early is not None:  # its GPU work was decided first
                self._breakdowns[early[0]].add_launch_delay(early[1])
            if owner != OUTSIDE:
                hot = self._hot
                record = (hot if hot[0] == owner else self._hot_state(owner))[1]
                record.launches += 1
                if name in GRAPH_LAUNCH_NAMES:
                    record.graph_launches += 1
        self._correlations.add(corr, owner)
        waiting = self._waiting_gpu.pop(corr, None)
        if waiting:
            self._waiting_count -= len(waiting)
            for gpu_event, gpu_raw in waiting:
                self._own_linked(owner, gpu_event, gpu_raw)

    def _wait_for_launch(self, event: dict, key, raw=None, work: tuple | None = None) -> None:
        """GPU work (``work``: its fields, as ``_route`` has them) or a launch flow with the
        correlation id ``key`` (None: none), whose launch's owner is not known (``feed``):
        waiting for it."""
        if self._waiting_count >= _WAITING_IN_MEMORY or (
                not self._windows.starts and not self.closed):
            # No iteration yet, or many waiting (GPU work launched before the trace): held
            # like any undecided event, so the spill bounds the memory.
            self._hold_linked(event, ("corr", key), raw, work)
        else:
            self._waiting_count += 1
            self._waiting_gpu.setdefault(key, []).append(
                (self._held_event(event, raw, ("corr", key), work), raw))

    def _own_linked(self, owner: int, event: dict | tuple | None, raw=None) -> None:
        """GPU work or a launch flow owned by ``owner``: ``event`` the event, or what
        ``_held_view`` keeps of it (a tuple for GPU work; None: only counted)."""
        fields = event
        if event.__class__ is not tuple:  # not GPU work as held
            cat = None if event is None else event.get("cat")
            if cat not in GPU_WORK_CATS:  # a flow: counted, no GPU numbers
                self._own_simple(owner, event, raw)
                return
            fields = _gpu_work_fields(event, cat)
        self._own_gpu_work(owner, event, raw, fields)

    def _own_gpu_work(self, owner: int, event, raw, work: tuple) -> None:
        """GPU work owned by ``owner`` (``_own_linked``; ``_route`` where its launch is
        known): ``event`` what is handed out, ``work`` its fields (``_gpu_work_fields``)."""
        cat, start, dur, pid, tid, name, corr = work
        if self._keep:
            self._assigned.append((owner, event if raw is None else raw))
        kernel = cat in KERNEL_CATS
        if owner == OUTSIDE:
            self.outside_events += 1
            self.outside_kernels += kernel
            return
        hot = self._hot
        if hot[0] != owner:
            hot = self._hot_state(owner)
        record = hot[1]
        record.events += 1
        record.gpu_events += 1
        record.kernels += kernel
        end = start + (dur or 0)
        # Busy time is the union of the iteration's work per stream (same-stream overlaps are
        # jitter), summed over streams; active time the union over all its streams. Both are
        # kept per iteration: the order in which iterations' work is decided (held, spilled,
        # waiting for a launch) changes nothing. Within an iteration, work that comes after
        # a later-starting one on its stream (decided out of order) adds its whole duration
        # to the busy time (a stream runs one thing at a time) and to the active time, which
        # is then capped by the busy time and the iteration's GPU span.
        breakdown = hot[2]
        streams, stream = breakdown.stream_work, (pid, tid)
        streams[stream], busy = _extend_union(streams.get(stream), start, end)
        record.gpu_busy_us += busy
        # (active time is capped at the end: ``_finish_records``)
        breakdown.gpu_work, active = _extend_union(breakdown.gpu_work, start, end)
        record.gpu_active_us += active
        if record.gpu_start_ts is None or start < record.gpu_start_ts:
            record.gpu_start_ts = start
        if record.gpu_end_ts is None or end > record.gpu_end_ts:
            record.gpu_end_ts = end
        if owner > self._gpu_latest:
            self._freeze_gpu_before(owner)
        breakdown.add_gpu(cat, name or "", start, end)
        if kernel and corr is not None:
            delay = self._launch_times.delay(corr, start, owner)
            if delay is not None:
                breakdown.add_launch_delay(delay)

    def _freeze_gpu_before(self, owner: int) -> None:
        """GPU work of iteration ``owner`` came: that of two or more before it is most likely
        all decided (``IterationBreakdown.freeze_gpu``: bounded memory)."""
        for index in range(max(self._gpu_latest - 1, 0), owner - 1):
            self._breakdowns[index].freeze_gpu()
        self._gpu_latest = owner

    def _route_annotation(self, event: dict, ext, raw=None) -> None:
        owner = self._annotations.lookup(ext) if ext is not None else None
        if owner is not None:
            self._own_simple(owner, event, raw)
        elif not self._windows.starts and not self.closed:
            self._hold_linked(event, ("ext", ext), raw)
        else:
            self._waiting_annotations.setdefault(ext, []).append(
                (self._held_event(event, raw, ("ext", ext)), raw))

    def _own_simple(self, owner: int, event: dict, raw=None) -> None:
        if self._keep:
            self._assigned.append((owner, event if raw is None else raw))
        if owner == OUTSIDE:
            self.outside_events += 1
        else:
            hot = self._hot
            (hot if hot[0] == owner else self._hot_state(owner))[1].events += 1

    def _hot_state(self, owner: int) -> tuple:
        """(owner, its record, its breakdown, the breakdown of the iteration before it or
        None), kept as ``_hot``: the events of one iteration mostly come together, and each
        look-up in a ``PagedList`` is a call (``_add_boundary`` keeps the breakdown before,
        here None). Forgotten wherever the lists may change what they hold
        (``_trim_paged``, a retracted boundary)."""
        self._hot = hot = (owner, self._iterations[owner], self._breakdowns[owner], None)
        return hot

    def _launch_counts(self) -> tuple:
        """Each iteration's kernels, graph launches and launches (what its kind and phase are
        decided on), as arrays of int32 (an iteration's counts are far below 2**31): 4 bytes
        an iteration each, not a tuple and three lists (1 M iterations). Where no runtime
        call was ever owned (no correlation id: a trace without GPU work) every count is 0,
        without a pass over the records."""
        if not self._correlations:  # no launch: no kernel was owned by an iteration either
            zeros = bytes(len(self._iterations))  # a 0 a byte, read in C
            return zeros, zeros, zeros
        kernels, graph_launches, launches = array("i"), array("i"), array("i")
        for r in reading(self._iterations):
            kernels.append(r.kernels)
            graph_launches.append(r.graph_launches)
            launches.append(r.launches)
        return kernels, graph_launches, launches

    def _finish_records(self, result) -> None:
        """The records made final (``core.finish``): read once (on a long trace they are paged
        through a file: each pass reads every page), after one pass that reads what the kinds
        and phases are decided on (``_launch_counts``), and made final whole there, or, paged,
        where they are read next. Each begins at its boundary, or at the Python frame that
        opens it where that came after the boundary (``owners.StepOpeners``: Kineto writes
        frames last)."""
        self._hot = _NO_HOT
        opened = self._windows.opened_steps()
        records = self._iterations
        kernels, graph_launches, launches = self._launch_counts()
        self.kinds = kinds = cycle_kinds(result.shapes, kernels)
        seen = SeenFacts(self._phase_facts, len(records))
        phases = infer_phases(kinds, seen, graph_launches, launches,
                              loop_containers(result.evidence), self._diffusion_code)
        final = FinalRecords(len(records), opened, self._windows.last_end, kinds, phases,
                             self._input_complete, self._breakdowns)
        self.events_in_iterations = final.read(records, self._visit_final)
        if hasattr(self._phase_facts, "close"):  # in the records now
            self._phase_facts.close()
        self._phase_facts, self._breakdowns = [], []  # the breakdowns: ``final``'s now
        self._keep_paged()
        self._note_evidence(result, len(opened), len(records))
        self._records_done = True

    def _note_evidence(self, result, opened: int, iterations: int) -> None:
        """The run's evidence, once the records are final: the detector's, and what the
        engine saw on the way (``opened``: iterations opened by a frame after their
        boundary, of ``iterations``)."""
        self.evidence = dict(result.evidence)
        if opened and "phase" in self.evidence:
            self.evidence["phase"] = at_outermost_frame(self.evidence["phase"],
                                                        f"{opened} of {iterations}")
        self.evidence["correlation_ranges"] = len(self._correlations)
        self.evidence["correlation_order_breaks"] = self._correlations.order_breaks
        self.evidence["max_pending_events"] = self.max_pending
        self.evidence["thread_sections"] = self._stacks.sections_started
        order = self._order
        if order.reordered_threads:  # said only where a thread was not in start order
            self.evidence["reordered_threads"] = order.reordered_threads
            self.evidence["most_held_ops"] = order.most_held
            self.evidence["late_ops"] = order.late_ops
        if self.forgotten_threads:  # said only where more than LIVE_THREADS threads came
            self.evidence["forgotten_threads"] = self.forgotten_threads
