"""Detect stage, by structure: find the repeating unit of work without trusting annotations.

Theory of operation
-------------------
Per thread (and per section of a thread) we keep a skeleton of the call tree
(``skeleton.py``: each op a symbol, its name with digits folded, with start, end, kernels
launched beneath and children). At a level of the tree (the thread's
top level, or the children of a container op) ``units.find_unit`` answers which unit repeats,
how alike its instances are and where each begins; its docstring is the account of the
tolerant search, and ``units.Rules`` holds every threshold. This module decides where to look
and what a found unit means:

- the top level is tried first ("repeats at a thread's top level are iterations"); if a single
  container op dominates it (one ``ProfilerStep``, one ``execute_diffusion`` request, a
  ``serve_forever`` wrapper), its children are tried, descending through wrapper chains. A unit
  found inside a container is an iteration only if it is not a layer: it recurs outside the
  container (failure mode 3: minor roots at the top level), or no single ``nn.Module`` frame
  holds all its instances (when Python frames were recorded), or each instance opens by
  copying its input to the device (``_opens_with_copy``: a step, not a layer), or one instance
  itself contains a repeated sub-unit (a model with layers, not a layer). Otherwise the
  container is one iteration.
- a unit found on one section of the loop thread begins with the ops of its other sections
  that open most instances (``_align_sections``; online ``_RootMatcher._boundary``);
- the phase at the outermost frame of the step: when Python frames open the step's first op,
  the boundary is at the outermost of them (``_at_outermost_frames``; online, where the file
  brings frames before the ops they hold, ``_RootMatcher._boundary``);
- each instance's shape (0 when like the unit) goes to the engine, which reports cycles that
  took another path and do almost no GPU work as ``idle`` (``units.cycle_kinds``).

Modes (``StructureDetector.mode``): ``LEARNING`` builds the skeleton and looks for the unit
at the top of the main thread as it grows (``_try_online``), and among the children of a chain
of dominant containers there (``_try_container``: failure mode 3 before its minor roots); ``STEPS`` once ``ProfilerStep#N``
repeats; ``MATCHING`` once the unit is confirmed online (``_RootMatcher``: the unit's first op
is a boundary at once; the anchor confirms it, or a revision moves or retracts it);
``SECTION_END`` once the loop thread's CPU section has ended in a Kineto file and the rest
of the file can hold no evidence the decision uses (``_section_ended``, below). A trace
never confirmed online is decided at close (``_decide``).

Kineto's sections. A Kineto file holds each thread's CPU ops together (the loop thread's
first), then Python frames (``with_stack``), then the GPU block (launches and kernels). The
loop thread's section has ended when something from before its latest ops arrives:
an op of another thread, a Python frame or a launch (in a time-ordered stream nothing comes
from the past, so this never fires there). Then every CPU op of the loop thread has been
read, and what the close decision still lacks is only what comes after: GPU work (kernels
per op weigh the instances, copies tell a step from a layer) and Python frames (``nn.Module``
calls tell layers). The header says whether they will come (``TraceFacts``, given by the
adapter): with neither (``deviceProperties: []``, no ``with_stack``) the close decision is
made right there, and is the same decision. Otherwise the online confirmation
(``_confirm``: evidence that needs no GPU work) is tried once more on the whole section, at
its top and down its chain of dominant containers, once the frames are read (at the first
launch: the GPU block follows the frames); what it cannot confirm waits for close, and
``evidence["waited"]`` says why. Both decision paths apply one
iteration test (``_iteration_test``), find where the last instance ends one way
(``_last_end``) and report the same evidence (``_level_entry``, ``_unit_evidence``).

``ProfilerStep#N`` spans are evidence like any other annotation: repeated at the top level they
are the unit (and are emitted online from the second step on); a single one is a container.
With ``use_annotations=False`` they are transparent (their children are read in their place).

Memory: below the top level the skeleton is capped at ``max_nodes`` ops, and kept only for
main threads (pid == tid); a side thread keeps at most 10 000 top-level ops. Once the unit
is confirmed online the skeleton is dropped. A loop that is never confirmed online keeps its
main thread's top level (about 100 bytes per top-level op) until the end: that part grows with
the trace. Everything the engine waits on meanwhile is spilled. The online tries search the
same few levels again as they grow: the last search of each (at most ``_MEMOS`` levels) is
kept for the next (``units.SearchMemo``, at most twice ``units.MEMO_BUDGET`` ops' worth each).
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, deque
from dataclasses import replace

from stream_split.core.detect import DetectorResult, FoundBoundary, RetractLast, TraceFacts
from stream_split.core.skeleton import (
    MAX_PENDING_FRAMES, SKIPPED, Node, Symbols, ThreadSkeleton, flatten, open_pending,
    outermost_opener, start_of)
from stream_split.core.units import (
    PHASE_AFTER_SYNC, PHASE_INPUT_FETCH, RULES, Rules, SearchMemo, Unit, find_unit,
    last_instance_end, shape_and_similarity, sure_ops, time_reference, turns_the_loop,
    typical_duration)
from stream_split.trace_format import BLOCKING_SYNC_NAMES, PROFILER_STEP_PREFIX

MODULE_FRAME_PREFIX = "nn.Module: "
#: A unit must be seen this often before it is believed (see ``units.Rules``).
MIN_INSTANCES = RULES.min_instances
#: Whether one instance is a whole piece of work (it repeats a sub-unit: a model's layers)
#: is asked op for op: a quarter of the blocks exactly alike (by op counts), covering a
#: third of the ops. Tolerance here would make a layer's q/k/v projections a model.
INNER_RULES = replace(RULES, weigh=False, like=1.0, like_share=0.24, min_like=4,
                      min_coverage=0.3)
#: Online, when every instance so far is like the unit, three exactly alike blocks inside
#: an instance make it a whole piece of work: a model of three layers.
ONLINE_INNER_RULES = replace(INNER_RULES, min_like=3)
#: Top-level ops kept of a side thread (pid != tid): enough to rank it as a loop thread.
_SIDE_THREAD_ROOTS = 10_000
#: A unit found inside a container must hold at least this many ops (with its children).
MIN_UNIT_OPS = 8
#: The detector's modes (``StructureDetector.mode``).
#: Building the skeleton and looking for the unit online; at close, decided from the whole.
LEARNING = "learning"
#: ``ProfilerStep#N`` repeats at the top of a thread: each new one is a boundary at once.
STEPS = "steps"
#: The unit was confirmed at the top of the loop thread: ``_RootMatcher`` reads each new
#: top-level op (its first op is a boundary at once).
MATCHING = "matching"
#: Online, the unit is looked for each time a top-level op is read for the 3rd to this
#: many times (the 4th instance's first op is the earliest moment a unit of three
#: instances can be certain), besides every quarter of growth of the top level.
_EAGER_TRIES = 8
#: Online, the children of containers this shallow (depth of the container) are tried.
_CONTAINER_DEPTH = 4
#: Levels whose last search is kept for the next online try on them (``units.SearchMemo``):
#: the top level and the chain of containers below it.
_MEMOS = _CONTAINER_DEPTH + 1
#: Instance starts kept online, for the typical instance duration.
_TYPICAL_OF = 64
#: Ops of the matched level kept while matching online, to weigh the work between an opening
#: op of another section and an instance's first op (``_RootMatcher._little_work_after``).
_RECENT_OPS = 256
#: Ops kept of one instance while matching online (a bound, not a limit on instance size).
_MAX_INSTANCE_OPS = 100_000
#: The close decision, made at the end of the loop thread's CPU section (Kineto's layout)
#: because the header says that no evidence it uses follows.
SECTION_END = "section end"


def _every_fetch_opens(level: list, unit: Unit) -> bool:
    """Every input fetch read so far opens an instance of the unit. A unit learned from a few
    cycles only (three idle polls after two steps, before any GPU work is known) leaves the
    earlier fetches outside it: it is not the loop yet."""
    fetch = level[unit.first].sym
    opens = set(unit.positions)
    return all(i in opens for i, node in enumerate(level) if node.sym == fetch)


def _opens_with_copy(level: list, unit: Unit) -> bool:
    """Each instance read so far (all but the last, whose children may be unread) opens by
    copying its input to the device: its first op (the first child of an instance that is
    one op) launches a memory copy and is short beside the instance. A layer of a model
    works on what is on the device already; a step (a request) brings its input there."""
    pos = unit.positions
    if len(pos) < MIN_INSTANCES:
        return False
    for a, b in zip(pos, pos[1:]):
        first = level[a]
        span = level[b].start - first.start if b - a > 1 else first.end - first.start
        if b - a == 1:
            if not first.kids:
                return False
            first = first.kids[0]
        if not first.copies or first.end - first.start > span / 2:
            return False
    return True


def _start_of_entry(entry: tuple) -> float:
    return entry[0]


def _confidence(unit: Unit) -> float:
    return min(1.0, unit.coverage) * (unit.score / unit.n) * min(1.0, unit.n / 3)


def _level_entry(container: list, level: list, unit: Unit | None, names: list) -> dict:
    """One level tried, for the evidence (both paths)."""
    entry = {"container": container or ["<thread top level>"], "ops": len(level)}
    if unit is not None:
        entry.update(unit=[names[level[unit.first].sym]], period_ops=len(unit.mode),
                     instances=unit.n, exact=unit.exact, **_tolerance(unit, names),
                     time_coverage=round(unit.coverage, 3))
    return entry


def _unit_evidence(unit: Unit, anchor: list, why: str, names: list) -> dict:
    """What the evidence says of the chosen unit (both paths)."""
    return {"unit": [names[s] for s in anchor], "period_ops": len(unit.mode),
            **_tolerance(unit, names), "time_coverage": round(unit.coverage, 3),
            "why": why, "confidence": round(_confidence(unit), 3)}


def _last_end(tail: list, lengths: list, seen: set, starts: list) -> float:
    """Where the last instance ends (``last_instance_end``), from its ops (``tail``), the
    lengths in ops of the instances before it, the kinds of op seen in them and their
    starts (both paths)."""
    return last_instance_end(tail, sure_ops(lengths), seen, typical_duration(starts))


def _tolerance(unit: Unit, names: list) -> dict:
    """How tolerant the match was, for the manifest and ``explain``."""
    return {"similarity": unit.similarity, "like": unit.like,
            "worst_similarity": unit.worst, "phase": unit.phase,
            "most_different_ops": [[names[s], gap] for s, gap in unit.differing]}


class _RootMatcher:
    """After the unit is confirmed at the top of the loop thread (or among a container's
    children: then the ops whose only open ancestors are those containers, and after them the
    top-level ops): each new op of that level is matched against the unit. Keeps the ops of the current instance only (its shape), so
    memory does not grow with the trace.

    - The **first op** of the unit (``trigger``: the op that opens every instance learned and
      occurs nowhere else in them) is a boundary the moment it is read. The unit's anchor,
      read later, confirms it; if the instance turns out to begin later (ops that are not
      head stand between the trigger and the anchor) the boundary moves there, and if the
      next trigger comes with no anchor in between, the boundary is retracted (the op
      opened nothing: the ops since belong to the instance before). A trigger left without
      its anchor at the end is retracted too.
    - Without a trigger (the unit opens with its anchor, or with ops that vary), the anchor
      is a boundary at once, at the first of the head ops just before it (``Unit.head``).
    """

    def __init__(self, thread_key, level: list, unit: Unit, names: list, opening=()):
        self.thread = thread_key
        #: (start, name) of the ops of the thread's other sections that open instances, in
        #: time order (``StructureDetector._section_openers``).
        self.opening = list(opening)
        self.at_frames = 0  # boundaries put at the outermost Python frame (evidence)
        self.names = names
        self.mode = unit.mode
        self.anchor = unit.anchor
        self.head = unit.head - {unit.anchor}
        pos = unit.positions
        self.seen = {n.sym for n in level[pos[0]:pos[-1]]}
        self.unit = unit
        self.shortest = min((b - a for a, b in zip(pos, pos[1:])), default=len(self.mode))
        instances = [level[a:b] for a, b in zip(pos, pos[1:])]
        if instances:  # later ops carry no GPU work: compare by time, to the likest instance
            likest = max(range(len(instances)), key=unit.similarity.__getitem__)
            unit = self.unit = replace(unit, reference=time_reference(instances[likest]))
        self.shapes: list = []
        self.similarity: list = []  # each instance's similarity to the unit (evidence)
        for ops in instances:
            self._measure(ops)
        opener = level[pos[0]].sym
        self.trigger = opener if opener != self.anchor and opener in self.head and all(
            ops[0].sym == opener and sum(1 for n in ops if n.sym == opener) == 1
            for ops in instances) else None
        self.tentative = False  # the latest boundary came from a trigger, no anchor yet
        self.previous: list = []  # the instance before a tentative boundary (to merge back)
        # After a host sync (``units._begin_at``): the small ops between the previous sync
        # and the head open the instance too; a sync or a big op stops the walk back.
        self.after_sync = unit.phase == PHASE_AFTER_SYNC
        work = sorted(sum(n.end - n.start for n in ops) for ops in instances) or [0.0]
        self.small = RULES.small_op_share * work[len(work) // 2]
        self.syncs = {sym for sym, name in enumerate(names) if name in BLOCKING_SYNC_NAMES}
        self.starts = [level[p] for p in pos]
        # Python frames read before the op they open (a file in time order): pending until
        # the next op of the level is read (``skeleton.open_pending``).
        self.frames: list = []
        ceilings = [n.start for n in self.starts[1:]] + [float("inf")]
        self.found = []
        for k, (n, c) in enumerate(zip(self.starts, ceilings)):
            self.recent = deque(level[pos[k - 1] if k else 0:pos[k]], maxlen=_RECENT_OPS)
            floor = self.starts[k - 1].start if k else float("-inf")
            anchor = next((m for m in level[pos[k]:] if m.sym == self.anchor), n)
            self.found.append(self._boundary(n, ceiling=c, floor=floor, upto=anchor.start))
        self.recent = deque(level[pos[-1]:], maxlen=_RECENT_OPS)
        # The last instance so far, up to its anchor; the ops read after it (the unit may
        # have been found from its middle ops) are matched like any new op, so no instance
        # begun meanwhile is missed.
        cut = next((q for q in range(pos[-1], len(level)) if level[q].sym == self.anchor),
                   None)
        self.waiting = cut is None  # the last instance's own anchor is still to come
        self.current = list(level[pos[-1]:(len(level) if cut is None else cut + 1)])
        for node in level[len(self.current) + pos[-1]:]:
            self.found.extend(self.push(node))

    def _measure(self, instance: list, replace_last: bool = False) -> None:
        shape, sim = shape_and_similarity(instance, self.unit)
        if replace_last:
            self.shapes[-1], self.similarity[-1] = shape, sim
        else:
            self.shapes.append(shape)
            self.similarity.append(sim)

    def _begin(self, instance: list, first: Node) -> None:
        """An instance ends (``instance``, its ops) and the next begins at ``first``."""
        self.shortest = min(self.shortest, len(instance))
        self.seen.update(n.sym for n in instance)
        self._measure(instance)
        self.starts.append(first)
        del self.starts[:-_TYPICAL_OF]

    def _undo(self) -> list:
        """Withdraw the latest (tentative) boundary: its ops go back to the instance before."""
        self.shapes.pop()
        self.similarity.pop()
        self.starts.pop()
        merged = self.previous + self.current
        self.previous, self.tentative = [], False
        return merged

    def push(self, node: Node) -> tuple:
        if self.frames:  # ``recent[-1]``: the op before ``node`` on the level
            self.frames = open_pending(node, self.recent[-1].end, self.frames)
        self.recent.append(node)
        current = self.current
        current.append(node)
        sym = node.sym
        if sym == self.trigger and not self.waiting:
            out = []
            if self.tentative:  # the previous trigger saw no anchor: it opened nothing
                out.append(RetractLast(f"no {self.names[self.anchor]} followed it"))
                current = self._undo()
            instance = current[:-1]
            self._begin(instance, node)
            self.previous, self.current, self.tentative = instance, [node], True
            out.append(self._boundary(node))
            return tuple(out)
        if sym != self.anchor or self.waiting:
            self.waiting = self.waiting and sym != self.anchor
            if len(current) > _MAX_INSTANCE_OPS:  # a runaway instance: keep its tail only
                del current[:len(current) - _MAX_INSTANCE_OPS]
            return ()
        j = len(current) - 1
        lowest = 0 if self.tentative else 1
        while j > lowest and current[j - 1].sym in self.head:
            j -= 1
        while self.after_sync and j > lowest and self._opens_after_sync(current[j - 1]):
            j -= 1
        if self.tentative:  # the anchor confirms the trigger's boundary, or moves it later
            self.tentative = False
            if j == 0:
                return ()
            instance = self.previous + current[:j]
            self._measure(instance, replace_last=True)
            self.seen.update(n.sym for n in current[:j])
            first = self.current[j]
            self.starts[-1] = first
            self.current = current[j:]
            return (self._boundary(first, moves_last=True,
                                   why="the instance begins after the op that triggered it"),)
        self._begin(current[:j], current[j])
        self.current = current[j:]
        return (self._boundary(current[j]),)

    def _boundary(self, first: Node, ceiling: float = float("inf"),
                  floor: float | None = None, upto: float | None = None,
                  **kw) -> FoundBoundary:
        """The boundary of an instance whose first op is ``first``: at the outermost Python
        frame that opens it, if one was
        read before it (the phase at the outermost frame of the step, as
        ``StructureDetector._at_outermost_frames`` at close), or at the op of the thread's
        other sections that opens it (``opening``: a ``zero_grad`` annotation before the
        step's first cpu_op, as ``StructureDetector._align_sections`` at close), whichever
        is first."""
        start, name = first.start, self.names[first.sym]
        frame = outermost_opener(first, ceiling)
        if frame is not None:
            start, name = frame[0], frame[2]
            self.at_frames += 1
        opening = self.opening
        if opening:
            # The opening ops after the previous instance's first op (it lies inside the
            # ``DistributedDataParallel.forward`` that opened it): the first of them with
            # little work of this level after it (noise ops inserted after ``zero_grad``,
            # not the previous instance's own ops).
            if floor is None:
                floor = self.starts[-2].start if len(self.starts) > 1 else float("-inf")
            if upto is None:
                upto = self.recent[-1].start  # the op being read: the anchor (or trigger)
            del opening[:bisect_right(opening, floor, key=_start_of_entry)]
            for o_start, o_name in opening:
                if o_start >= max(start, upto):
                    break
                # Before the first op, with little work of this level after it; or between
                # the first op and the anchor: the ops of the head before it (inserted after
                # the previous step's optimizer) are the previous instance's.
                if o_start > first.start or self._little_work_after(o_start, first.start):
                    start, name = o_start, o_name
                    break
        return FoundBoundary(start, self.thread, name, **kw)

    def _little_work_after(self, lo: float, hi: float) -> bool:
        """Do the ops of this level read lately (``recent``) that begin in [lo, hi) do
        little work (a small op's, ``small``)? Not when the ops kept do not reach back to
        ``lo``."""
        recent = self.recent
        if len(recent) == recent.maxlen and recent[0].start > lo:
            return False
        return sum(n.end - n.start for n in recent if lo <= n.start < hi) <= self.small

    def phase_note(self) -> str:
        """What the phase at the outermost frame did online, for the evidence."""
        if not self.at_frames:
            return ""
        return f", then at the outermost Python frame that opens the step ({self.at_frames} " \
               f"boundaries)"

    def observe_frame(self, start: float, end: float, name: str) -> None:
        """A Python frame of the loop thread, read before the op it may open."""
        if start > self.recent[-1].start and len(self.frames) < MAX_PENDING_FRAMES:
            self.frames.append((start, end, name))

    def _opens_after_sync(self, node: Node) -> bool:
        """A small op that is no sync, or an op of the head: between the previous sync and
        the anchor, it opens the instance."""
        return node.sym in self.head or (
            node.end - node.start <= self.small and node.sym not in self.syncs)

    def finish(self) -> tuple[list, float, list]:
        """Shapes of every instance, where the last one ends (``last_instance_end``), and the
        revision of a trigger still waiting for its anchor."""
        revisions = []
        if self.tentative:
            revisions.append(RetractLast(f"the input ended before a "
                                         f"{self.names[self.anchor]} followed it"))
            self.current = self._undo()
        last = self.current
        width = len(self.mode)
        self._measure(last[:width])
        return self.shapes, _last_end(last, [self.shortest], self.seen,
                                      [n.start for n in self.starts[-_TYPICAL_OF:]]), revisions


class StructureDetector:
    """Finds iterations from the call structure; see the module docstring."""

    name = "structure"

    def __init__(self, use_annotations: bool = True, level: int | None = None,
                 max_nodes: int = 100_000, max_depth: int = 8):
        #: LEARNING, STEPS or MATCHING (see the module docstring).
        self.mode = LEARNING
        self._use_annotations = use_annotations
        self._level = level or 0
        self._max_nodes = max_nodes
        self._max_depth = max_depth
        self._threads: dict = {}
        self._symbols = Symbols()
        self._names: list = self._symbols.names
        self._nodes = 0
        self._step_symbol = None
        # Online mode: once ProfilerStep#N repeats at the top of a thread, each new one is a
        # boundary the moment it is read.
        self._online_thread = None
        #: Launches, GPU work and Python frames are evidence until the unit is decided.
        self.wants_evidence = True
        self._online_last_end = None
        self._online_count = 0
        self._graph_launches: dict = {}  # correlation -> ops around a graph launch
        self._matcher: _RootMatcher | None = None
        self._matcher_key = None
        self._online_state = None
        self._modules: dict = {}  # thread -> its outermost nn.Module frames [(start, end)]
        self._online_evidence: dict = {}
        self._matcher_path: tuple = ()  # the containers around the matched level
        #: Python frames came before the ops they open (a file in time order, not Kineto's
        #: sections): the matcher keeps reading them.
        self._frames_before_ops = False
        self._early_frames: dict = {}  # thread -> Python frames read before its first op
        self._sections_of: dict = {}  # thread -> its skeletons (one per section), learning
        self._facts = TraceFacts()  # what the header says will (not) follow
        # The main thread whose CPU ops are being read, and the starts of its latest two
        # ops (Kineto writes them in start order): anything from before both (another
        # thread's op, a frame, a launch, GPU work) ends its section (one op of slack: a
        # live writer may be a little out of order).
        self._section_thread = None
        self._section_starts = (float("-inf"), float("-inf"))
        self._section_over = False  # the loop thread's CPU section has ended
        self._frames_read = False  # ... and a launch came since: Python frames are all read
        self._tried_at_end = False  # the online confirmation was tried on the whole section
        self._waited = ""  # why the decision could not be made at the section end
        self._early: DetectorResult | None = None  # the close decision, made at SECTION_END
        #: The last search on each level tried online lately, latest last (``_memo_for``).
        self._memos: list = []

    def note_facts(self, facts: TraceFacts) -> None:
        """What the header says will (not) follow the CPU ops (before the first event)."""
        self._facts = facts

    # -- streaming input ---------------------------------------------------------------

    def observe(self, thread, stack: list, start: float, end: float, name: str, section: int):
        if self.mode == STEPS:  # decided: only step annotations matter now
            if name.startswith(PROFILER_STEP_PREFIX) and thread == self._online_thread:
                return self._observe_step(self._online_state, start, end, name)
            return ()
        if self.mode == MATCHING:
            return self._observe_matching((thread, section), stack, start, end, name)
        if self.mode == SECTION_END:
            return ()
        if thread != self._section_thread:
            found = self._from_the_past(start, gpu_block=False)
            if found is not None:
                return found
        state = self._threads.get((thread, section))
        if state is None:
            state = self._threads[(thread, section)] = ThreadSkeleton(thread, 4 * MIN_INSTANCES)
            state.frames = self._early_frames.pop(thread, [])
            self._sections_of.setdefault(thread, []).append(state)
        if state.main and self._section_thread in (None, thread):
            self._section_thread = thread
            self._section_starts = (self._section_starts[1], start)
        depth = len(stack) - 1
        mine = state.stack
        del mine[depth:]
        is_step = name.startswith(PROFILER_STEP_PREFIX)
        parent = None
        for node in reversed(mine):
            if node is not None:
                parent = node
                break
        if parent is SKIPPED:
            mine.append(SKIPPED)
            return ()
        if is_step and not self._use_annotations:
            mine.append(None)  # transparent: its children take its place
            return ()
        found = self._observe_step(state, start, end, name) if is_step else ()
        if parent is None:
            node = Node(self._symbols.of(name), start, end, 0)
            if not state.main and len(state.roots) >= _SIDE_THREAD_ROOTS:
                mine.append(SKIPPED)  # a side thread's top level: enough to rank it
                return found
            state.add_root(node)
            state.seen[node.sym] += 1
            state.kid_seen.clear()
            if not found and self._online_allowed(state) and (
                    len(state.roots) >= state.next_try
                    or MIN_INSTANCES <= state.seen[node.sym] <= _EAGER_TRIES):
                mine.append(node)
                return self._try_online(state)
        elif state.main and parent.depth + 1 < self._max_depth and \
                self._nodes < self._max_nodes:
            node = Node(self._symbols.of(name), start, end, parent.depth + 1)
            if parent.kids is None:
                parent.kids = []
            parent.kids.append(node)
            self._nodes += 1
            if parent.depth < _CONTAINER_DEPTH and self._online_allowed(state):
                counts = state.kid_seen.get(parent)
                if counts is None:
                    counts = state.kid_seen[parent] = Counter()
                counts[node.sym] += 1
                if MIN_INSTANCES <= counts[node.sym] <= _EAGER_TRIES:
                    mine.append(node)
                    return self._try_container(state, [n for n in mine[:-1] if n is not None])
        else:
            node = SKIPPED  # beyond the skeleton's depth or size: not kept, nor its children
        mine.append(node)
        return found

    def _online_allowed(self, state: ThreadSkeleton) -> bool:
        pid, tid = state.key
        return pid == tid and not self._level and self.mode == LEARNING

    def _try_online(self, state: ThreadSkeleton):
        """Confirm the unit at the top of the main thread as soon as it is certain: the
        iteration test of the close path (``_iteration_test``) passes, and either three
        cycles of the loop (like the unit, or idle) open with the loop's input fetch, or three instances are
        exact and each is a whole piece of work (it contains a repeated sub-unit). Unlike
        instances among them (idle cycles) are allowed only once GPU work is known. Then
        boundaries stream."""
        roots = state.roots
        if len(roots) >= state.next_try:
            state.next_try = max(len(roots) + 8, int(len(roots) * 1.25))
        return self._confirm(state, roots, [])

    def _try_container(self, state: ThreadSkeleton, path: list):
        """Online inside a container (failure mode 3: the minor roots come only at the end):
        ``path`` holds the open ops around the latest one, outermost first. They must be a
        chain of dominant containers (``_dominant``, as the close path descends) and no
        ``ProfilerStep`` (steps are their own evidence); then the unit among the innermost
        one's children is confirmed like one at the top (``_confirm``)."""
        level = state.roots
        for container in path:
            if self._dominant(level) is not container or \
                    self._names[container.sym].startswith(PROFILER_STEP_PREFIX):
                return ()
            level = container.kids
        return self._confirm(state, level, path)

    def _confirm(self, state: ThreadSkeleton, roots: list, path: list,
                 section_read: bool = False):
        """The online decision on one level of the loop thread (its top, or the children of
        the containers ``path``); see ``_try_online``. Inside a container the loop's input
        fetch may be a copy of each instance's input to the device (``_opens_with_copy``).
        ``section_read``: the loop thread's whole CPU section is read (Kineto's layout), so
        no later instance can differ: a unit whose every instance is like it and turns the
        loop (a loop marker in each, once) is confirmed too. A coarser cut of several such
        instances loses to them at close (the super-period rule) and a finer one turns no
        loop, whatever the kernels that come later weigh."""
        unit = find_unit(roots, names=self._names, whole=False, memo=self._memo_for(roots))
        if unit is None:
            return ()
        verdict, why = self._iteration_test(state, roots, unit, path)
        if not verdict:
            return ()
        # Every instance so far like the unit? Among so few, an idle cycle or another path
        # could be taken for the unit when no GPU work is known yet (a Kineto file's CPU
        # section comes before its launches); with GPU work known, the unit is the busy one.
        alike = all(shape == 0 for shape in unit.shapes[:-1]) or any(n.gpu for n in roots)
        # Cycles of the loop head: like the unit, or idle (the fetch found nothing to do).
        cycles = unit.like + unit.idle if alike else 0
        if cycles >= MIN_INSTANCES and unit.like >= RULES.min_like and (
                unit.phase == PHASE_INPUT_FETCH and _every_fetch_opens(roots, unit)
                or path and _opens_with_copy(roots, unit)):
            why = f"{why}; each instance opens with the loop's input fetch"
        elif cycles >= MIN_INSTANCES and unit.like >= RULES.min_like and \
                unit.phase == PHASE_AFTER_SYNC and turns_the_loop(unit, self._names):
            # (A loop between syncs with no optimizer step in it may be the inner loop of a
            # step whose update is still to come: a rollout's tokens. It waits for close.)
            why = f"{why}; each instance begins right after the previous one's host sync"
        elif section_read and unit.n >= MIN_INSTANCES and unit.like == unit.n and \
                all(shape == 0 for shape in unit.shapes) and turns_the_loop(unit, self._names):
            why = (f"{why}; at the end of the loop thread's CPU section every instance is "
                   f"like the unit and turns the loop")
        else:
            if unit.exact < MIN_INSTANCES:
                return ()
            if unit.phase == PHASE_INPUT_FETCH and not _every_fetch_opens(roots, unit) \
                    and not any(n.gpu for n in roots):
                # A fetch opens no instance (the input-fetch branch above requires that it
                # does): an instance that fetches twice may be two turns of the loop, a busy
                # one and an idle poll (a server alternating them three times running), which
                # only the GPU work to come tells apart from a step of micro-batches. It waits
                # for that work (at close in a Kineto file).
                return ()
            whole, inner = self._inner_repeat(roots, unit,
                                              ONLINE_INNER_RULES if alike else INNER_RULES)
            if not whole:
                return ()
            why = f"{why}; {inner}"
        opening = [] if path else self._section_openers(state, roots, unit)
        self._matcher = _RootMatcher(state.key, roots, unit, self._names, opening)
        self._matcher_path = tuple(path)
        self.mode = MATCHING
        self._online_evidence = {
            "detector": self.name, "decided": f"online, after {unit.n} instances",
            "loop_thread": list(state.key),
            "levels": [dict(_level_entry([self._names[n.sym] for n in path], roots, unit,
                                         self._names), iteration_test=why)],
            **_unit_evidence(unit, [roots[unit.first].sym], why, self._names)}
        # Python frames read before the ops they open (a file in time order) still move
        # boundaries; else no more evidence is needed.
        self.wants_evidence = self._frames_before_ops
        self._matcher_key = next(k for k, v in self._threads.items() if v is state)
        self._threads = {self._matcher_key: state}  # the skeleton is no longer needed
        self._sections_of, self._early_frames, self._memos = {}, {}, []
        state.roots = []
        state.kid_seen = {}
        return tuple(self._matcher.found)

    def _memo_for(self, level: list) -> SearchMemo:
        """The memo of the last search on ``level`` (``units.SearchMemo``): the online tries
        search the same few levels again each time they grow by an op or a few. One memo
        per level tried lately, at most ``_MEMOS`` (the least recently tried goes)."""
        memos = self._memos
        for i, memo in enumerate(memos):
            if memo.level is level:
                memos.append(memos.pop(i))
                return memo
        memo = SearchMemo()
        memos.append(memo)
        del memos[:-_MEMOS]
        return memo

    def _observe_matching(self, key, stack, start, end, name):
        if key != self._matcher_key:
            return ()
        state = self._threads[key]
        depth = len(stack) - 1
        mine = state.stack
        del mine[depth:]
        is_step = name.startswith(PROFILER_STEP_PREFIX)
        path = self._matcher_path
        if any(node is not None and all(node is not c for c in path)
               for node in mine):  # not on the level (inside an op of it)
            mine.append(SKIPPED)
            return ()
        if is_step and not self._use_annotations:
            mine.append(None)
            return ()
        node = Node(self._symbols.of(name), start, end, 0)
        mine.append(node)
        return self._matcher.push(node)

    def _observe_step(self, state: ThreadSkeleton, start, end, name):
        if state.steps and start < state.steps[-1][1]:
            return ()  # nested in (or overlapping) the previous step: not a new step
        state.steps.append((start, end, name))
        if self.mode == LEARNING:
            if len(state.steps) < 2:
                return ()
            self.mode = STEPS
            self._online_thread = state.key
            self._online_state = state
            self.wants_evidence = False
            self._threads = {}  # the skeleton is no longer needed
            self._sections_of, self._early_frames, self._memos = {}, {}, []
            state.roots = []
            self._online_count = len(state.steps)
            self._online_last_end = max(s[1] for s in state.steps)
            return tuple(FoundBoundary(s, state.key, n) for s, _, n in state.steps)
        if state.key != self._online_thread:
            return ()
        self._online_count += 1
        self._online_last_end = max(self._online_last_end, end)
        return (FoundBoundary(start, state.key, name),)

    def observe_launch(self, thread, ts: float, correlation, graph: bool,
                       copy: bool = False) -> tuple:
        """A runtime call that launches GPU work: credit the ops around it with a kernel
        (a graph launch is credited per kernel as its kernels arrive), or a memory copy.
        The first launch from before the loop thread's latest ops begins Kineto's GPU block:
        the boundaries that the end of the CPU section decides are returned."""
        if self.mode != LEARNING:
            return ()
        found = self._from_the_past(ts, gpu_block=True)
        if found is not None:
            return found
        path = [node for state in self._threads.values() if state.key == thread
                for node in state.path_at(ts)]  # each section of the thread
        if not path:
            return ()
        if graph:
            self._graph_launches[correlation] = path
        for node in path:
            node.gpu += 1
            if copy:
                node.copies += 1
        return ()

    def observe_gpu_work(self, correlation, ts: float) -> tuple:
        """A kernel: one more for the ops of its graph launch, if it came from one. The
        first GPU work from before the loop thread's latest ops is in Kineto's GPU block
        (CUPTI may write a kernel before the first launch): as ``observe_launch``."""
        if self.mode != LEARNING:
            return ()
        found = self._from_the_past(ts, gpu_block=True)
        if found is not None:
            return found
        path = self._graph_launches.get(correlation)
        if path is not None:
            for node in path:
                node.gpu += 1
        return ()

    def observe_frame(self, thread, start: float, end: float, name: str) -> tuple:
        """A Python frame: the opener of the main thread's top-level op it opens (the phase
        at the outermost frame of the step, ``_at_outermost_frames``); outermost
        ``nn.Module`` calls are also kept (layer evidence). The first frame from before the
        loop thread's latest ops ends its CPU section: the boundaries that decides are
        returned."""
        if self.mode == MATCHING:
            if thread == self._matcher.thread:
                self._matcher.observe_frame(start, end, name)
            return ()
        if self.mode != LEARNING:
            return ()
        states = self._sections_of.get(thread, ())
        for state in states:
            if state.main:
                state.observe_frame(start, end, name)
                self._frames_before_ops = self._frames_before_ops or bool(state.frames)
        if not states and thread[0] == thread[1]:  # before the thread's first op
            early = self._early_frames.setdefault(thread, [])
            if len(early) < MAX_PENDING_FRAMES:
                early.append((start, end, name))
            self._frames_before_ops = True
        found = self._from_the_past(start, gpu_block=False)
        if found is not None:
            return found
        if not name.startswith(MODULE_FRAME_PREFIX):
            return ()
        modules = self._modules.setdefault(thread, [])
        if modules and start < modules[-1][1]:
            return ()  # nested in the previous outermost module call
        modules.append((start, end))
        return ()

    # -- decision at the end of the loop thread's CPU section (Kineto's layout) ---------

    def _from_the_past(self, ts: float, gpu_block: bool):
        """A frame, or (``gpu_block``) a launch or GPU work, at ``ts``: from before the loop
        thread's latest ops, it ends the section (a launch also the frames before the GPU
        block). Returns the boundaries decided then, or None while still learning."""
        if ts >= self._section_starts[0] or (
                self._frames_read if gpu_block else self._section_over):
            return None
        found = self._section_ended(launch=gpu_block)
        return found if self.mode != LEARNING else None

    def _section_ended(self, launch: bool) -> tuple:
        """The loop thread's CPU section has ended (see the module docstring); ``launch``:
        the GPU block has begun, so the Python frames are read too. Decides what no later
        evidence can change; returns the boundaries found."""
        self._section_over = True
        self._frames_read = self._frames_read or launch
        if self._facts.frames is not False and not self._frames_read:
            self._waited = ("Python frames (the header's with_stack), nn.Module evidence, "
                            "follow the CPU section")
            return ()
        if self._facts.gpu is False:
            return self._decide_at_section_end()
        if self._tried_at_end or self._level:
            return ()
        self._tried_at_end = True
        found = self._confirm_section()
        if not found:
            self._waited = (
                "GPU work follows the CPU section (the header's deviceProperties), and "
                "nothing that needs none confirms the unit (an input fetch or a host sync "
                "opening every instance, whole exact instances, every instance alike and "
                "turning the loop)")
        return found

    def _section_state(self) -> ThreadSkeleton | None:
        """The skeleton of the section just ended (of its thread, the one with most ops)."""
        states = [t for t in self._threads.values() if t.key == self._section_thread]
        return max(states, key=lambda t: len(t.roots), default=None)

    def _decide_at_section_end(self) -> tuple:
        """No GPU work and no Python frames follow: the close decision, now."""
        thread = self._loop_thread()
        state = self._section_state()
        if thread is None or thread is not state:
            return ()
        result = self._decide(thread)
        result.evidence["decided"] = "at the end of the loop thread's CPU section"
        result.evidence["why_then"] = ("the header says no GPU work and no Python frames "
                                       "follow it")
        self._early = replace(result, boundaries=[])
        self.mode = SECTION_END
        self.wants_evidence = False
        self._threads, self._memos = {}, []  # the skeleton is no longer needed
        return tuple(result.boundaries)

    def _confirm_section(self) -> tuple:
        """The online confirmation (``_confirm``), tried on the loop thread's whole CPU
        section: at its top, then down its chain of dominant containers (as ``_decide``
        descends). The ops after a container, read already, go to the matcher as the
        online path would have given them (the minor roots of failure mode 3)."""
        state = self._section_state()
        if state is None or not state.roots or not self._online_allowed(state):
            return ()
        level, path = state.roots, []
        while True:
            trailing = self._after_containers(state.roots, path)
            found = self._confirm(state, level, path, section_read=True)
            if found:
                self._online_evidence["decided"] = (
                    f"at the end of the loop thread's CPU section, after "
                    f"{len(self._matcher.shapes) + 1} instances")
                for node in trailing:
                    found += self._matcher.push(node)
                return found
            container = self._dominant(level)
            if container is None or not container.kids or len(path) >= _CONTAINER_DEPTH \
                    or self._names[container.sym].startswith(PROFILER_STEP_PREFIX):
                return ()
            path.append(container)
            level = container.kids

    @staticmethod
    def _after_containers(roots: list, path: list) -> list:
        """The ops after each container of ``path`` on its own level, in time order (the
        innermost level's first)."""
        levels = [roots] + [c.kids for c in path[:-1]]
        after = []
        for level, container in reversed(list(zip(levels, path))):
            i = next(i for i, node in enumerate(level) if node is container)
            after.extend(level[i + 1:])
        return after

    # -- decision at the end -----------------------------------------------------------

    def close(self) -> DetectorResult:
        if self.mode == SECTION_END:
            return self._early
        if self.mode == STEPS:
            return DetectorResult(
                last_end=self._online_last_end,
                evidence={"detector": self.name, "decided": "online",
                          "loop_thread": list(self._online_thread),
                          "unit": [PROFILER_STEP_PREFIX + "N"], "level": "top",
                          "instances": self._online_count, "confidence": 0.95,
                          "why": "ProfilerStep#N spans repeat at the top of the loop thread"})
        if self.mode == MATCHING:
            shapes, last_end, revisions = self._matcher.finish()
            sims = self._matcher.similarity
            evidence = dict(self._online_evidence, instances=len(shapes),
                            phase=self._online_evidence["phase"] + self._matcher.phase_note(),
                            variants=sum(1 for sh in shapes if sh != 0), similarity=sims,
                            like=sum(1 for x in sims if x >= RULES.like),
                            worst_similarity=min(sims, default=0.0))
            return DetectorResult(boundaries=revisions, last_end=last_end, shapes=shapes,
                                  evidence=evidence)
        thread = self._loop_thread()
        if thread is None:
            return DetectorResult(evidence={"detector": self.name, "decided": "at close",
                                            "why": "no CPU ops: nothing drives a loop",
                                            "instances": 0, "confidence": 1.0})
        result = self._decide(thread)
        if self._waited:
            result.evidence["waited"] = self._waited
        return result

    def _loop_thread(self):
        candidates = [t for t in self._threads.values() if t.roots]
        if not candidates:
            return None

        def rank(t: ThreadSkeleton):
            pid, tid = t.key
            busy = sum(n.end - n.start for n in t.roots)
            return (pid == tid, bool(t.steps) and self._use_annotations, busy)
        return max(candidates, key=rank)

    def _decide(self, thread: ThreadSkeleton) -> DetectorResult:
        names = self._names
        evidence = {"detector": self.name, "decided": "at close",
                    "loop_thread": list(thread.key), "levels": []}
        level, path = thread.roots, []
        chosen = None
        while level:
            unit = find_unit(level, names=names)
            entry = _level_entry([names[p.sym] for p in path], level, unit, names)
            evidence["levels"].append(entry)
            if unit is not None:
                verdict, why = self._iteration_test(thread, level, unit, path)
                entry["iteration_test"] = why
                if verdict:
                    chosen = (level, unit, why)
                elif path:
                    evidence["why"] = ("the unit inside the container is a layer ("
                                       + why + "): the container is one iteration")
                else:
                    evidence["why"] = ("the repeating unit is a layer (" + why
                                       + "): the trace is one unit of work")
                break
            container = self._dominant(level)
            if container is None or not container.kids:
                break
            path.append(container)
            level = container.kids
        if chosen is None:
            return self._single(thread, path, evidence)
        level, unit, why = chosen
        if self._level:
            level, unit = self._lower_level(level, unit, evidence)
        return self._result(thread, level, unit, path, why, evidence)

    @staticmethod
    def _dominant(level: list) -> Node | None:
        """The longest op, if it holds a good part (a third) of the level's time: a wrapper
        to look inside."""
        span = max(n.end for n in level) - level[0].start
        top = max(level, key=lambda n: n.end - n.start)
        if span > 0 and (top.end - top.start) >= span / 3:
            return top
        return None

    def _iteration_test(self, thread: ThreadSkeleton, level, unit: Unit, path) -> tuple[bool, str]:
        """The one test of both decision paths (online and at close): are the instances of
        ``unit``, found on ``level`` (inside the containers ``path``), iterations? At the
        top of the loop thread they are, unless one ``nn.Module`` call holds several of them
        (layers); inside a container see ``_not_a_layer``. Returns (verdict, why)."""
        if path:
            return self._not_a_layer(thread, level, unit, path)
        held = self._module_holding_several(thread, level, unit)
        if held:
            return False, held
        return True, "repeats at the top of the loop thread"

    def _not_a_layer(self, thread: ThreadSkeleton, level, unit: Unit, path) -> tuple[bool, str]:
        first = level[unit.positions[0]:unit.positions[0] + len(unit.mode)]
        size: list = []
        for node in first:
            flatten(node, size, MIN_UNIT_OPS)
        if len(size) < MIN_UNIT_OPS:  # a repeated aten::slice is no unit of work
            return False, f"an instance has fewer than {MIN_UNIT_OPS} ops"
        anchor = self._anchor(level, unit)
        outer_levels = [thread.roots] + [p.kids for p in path[:-1]]
        if any(self._matches(lv, anchor) for lv in outer_levels):
            return True, "the unit also recurs outside its container (minor roots)"
        if self._modules.get(thread.key):
            held = self._module_holding_several(thread, level, unit)
            if held:
                return False, held
            return True, "no nn.Module call holds two instances"
        if _opens_with_copy(level, unit):
            return True, "each instance opens by copying its input to the device"
        return self._inner_repeat(level, unit)

    @staticmethod
    def _inner_repeat(level, unit: Unit, rules: Rules = INNER_RULES) -> tuple[bool, str]:
        """Is one instance a whole piece of work (it repeats a sub-unit inside: a model's
        layers) rather than a layer?"""
        first = level[unit.positions[0]:unit.positions[0] + len(unit.mode)]
        flat: list = []
        for node in first:
            flatten(node, flat, 50_000)
        # Blocks of a real model differ a little (a downsampling block, a checkpointed
        # one): a quarter of them alike, covering a third of the ops, is a model.
        inner = find_unit(flat, rules)
        # ... and the repeated sub-unit is a block of work, not the q/k/v/o projections of
        # one attention layer.
        if inner is not None and len(inner.mode) >= MIN_UNIT_OPS:
            return True, (f"an instance contains a repeated sub-unit "
                          f"({inner.exact} x {len(inner.mode)} ops)")
        return False, "an instance contains no repeated sub-unit"

    def _module_holding_several(self, thread: ThreadSkeleton, level, unit: Unit) -> str | None:
        """Layers of one model: a single outermost nn.Module call holds several instances."""
        starts = [level[p].start for p in unit.positions]
        for m_start, m_end in self._modules.get(thread.key, ()):
            if sum(1 for s in starts if m_start <= s < m_end) >= 2:
                return "one nn.Module call holds several instances"
        return None

    def _anchor(self, level, unit: Unit) -> tuple:
        p = unit.positions[0]
        return (level[p].sym,)

    @staticmethod
    def _matches(level: list, anchor: tuple) -> list:
        w = len(anchor)
        syms = [n.sym for n in level]
        return [i for i in range(len(syms) - w + 1) if tuple(syms[i:i + w]) == anchor]

    def _lower_level(self, level, unit: Unit, evidence):
        """--level N: the unit N levels below (repeats inside one instance), if any."""
        for _ in range(self._level):
            p = unit.positions[0]
            inner_level = level[p:p + len(unit.mode)]
            if len(inner_level) == 1 and inner_level[0].kids:
                inner_level = inner_level[0].kids
            flat = inner_level
            inner = find_unit(flat, names=self._names)
            if inner is None:
                evidence["level_note"] = "no repeating unit below the chosen one"
                break
            # Apply the inner unit to the whole level: every instance's sub-units.
            anchor = (flat[inner.first].sym,)
            positions = self._matches(level, anchor)
            if len(positions) < 2:
                kids = [k for n in level for k in (n.kids or [])]
                positions = self._matches(kids, anchor)
                level = kids
            if len(positions) < 2:
                break
            mode = tuple(n.sym for n in level[positions[0]:positions[1]])
            new = Unit(positions=positions, mode=mode, similarity=[1.0] * len(positions),
                       like=len(positions), fragments=0, coverage=inner.coverage,
                       anchor=anchor[0], shapes=[0] * len(positions),
                       exact=len(positions), phase="level below")
            unit = new
            evidence["level"] = self._level
        return level, unit

    def _result(self, thread, level, unit: Unit, path, why, evidence) -> DetectorResult:
        names = self._names
        anchor = self._anchor(level, unit)
        starts = []
        for i, p in enumerate(unit.positions):
            starts.append((level[p].start, level[p].sym, unit.shapes[i], level, p))
        # Instances at shallower levels (failure mode 3), outside every container instance.
        for outer in [thread.roots] + [c.kids for c in path[:-1]]:
            if outer is level:
                continue
            for p in self._matches(outer, anchor):
                node = outer[p]
                if any(c is node for c in path):
                    continue
                segment = tuple(n.sym for n in outer[p:p + len(unit.mode)])
                segment = 0 if segment == unit.mode else segment
                starts.append((node.start, node.sym, segment, outer, p))
        starts.sort(key=lambda s: s[0])
        boundaries, shapes = [], []
        for start, sym, shape, _, _ in starts:
            if boundaries and start <= boundaries[-1].start_ts:
                continue
            boundaries.append(FoundBoundary(start, thread.key, names[sym]))
            shapes.append(shape)
        if not path:
            boundaries = self._align_sections(thread, level, unit, boundaries)
        _, _, _, last_level, last_p = starts[-1]
        width = len(unit.mode)
        pos = unit.positions
        last_end = _last_end(last_level[last_p:],
                             [b - a for a, b in zip(pos, pos[1:])] or [width],
                             {n.sym for n in level[pos[0]:pos[-1]]},
                             [level[p].start for p in pos])
        boundaries, last_end, moved = self._at_outermost_frames(thread, boundaries, last_end)
        evidence.update(_unit_evidence(unit, anchor, why, names), instances=len(boundaries),
                        exact=unit.exact, variants=sum(shape != 0 for shape in shapes))
        if moved:
            evidence["phase"] = f"{evidence['phase']}, then at the outermost Python frame " \
                                f"that opens the step ({moved} of {len(boundaries)})"
        return DetectorResult(boundaries=boundaries, last_end=last_end, shapes=shapes,
                              evidence=evidence)

    def _at_outermost_frames(self, thread: ThreadSkeleton, boundaries: list,
                             last_end: float) -> tuple[list, float, int]:
        """The phase at the outermost frame of the step: a boundary at a top-level op that
        Python frames open (``Node.opener``: each begins after the previous top-level op
        ended and holds this one: ``training_step`` around the step's first ``aten::`` op,
        one to three wrappers deep) moves back to the start of the outermost of them that
        ends before the next boundary (the program's own frame holds every step), so the
        user's own frames before the first op are the step's. The last iteration ends no
        earlier than its opening frame. Returns the boundaries, the last end and how many
        moved."""
        opened = {n.start: n for t in self._threads.values()
                  if t.key == thread.key for n in t.roots if n.opener is not None}
        if not opened:
            return boundaries, last_end, 0
        moved = []
        floor = float("-inf")
        last_frame = None
        for i, b in enumerate(boundaries):
            ceiling = boundaries[i + 1].start_ts if i + 1 < len(boundaries) else float("inf")
            node = opened.get(b.start_ts)
            frame = None if node is None else outermost_opener(node, ceiling)
            if frame is not None and floor < frame[0] < b.start_ts:
                b = FoundBoundary(frame[0], b.thread, frame[2])
            moved.append(b)
            floor = b.start_ts
            last_frame = frame
        if last_frame is not None and last_end is not None:
            last_end = max(last_end, last_frame[1])
        return moved, last_end, sum(a is not b for a, b in zip(moved, boundaries))

    def _opening_elsewhere(self, thread: ThreadSkeleton, level, unit: Unit):
        """The ops of the loop thread's other sections (in time order), and the kinds of them
        that open most instances of ``unit`` (found between the end of the previous instance
        and the instance's first op: ``aten::randn`` before a ``data_fwd`` annotation, a
        ``zero_grad`` annotation before the step's first cpu_op). Kineto writes a thread's
        sections apart, so no single section sees the whole step."""
        pos = unit.positions
        others = [n for t in self._threads.values() if t is not thread and t.key == thread.key
                  for n in t.roots]
        if not others or len(pos) < 3:
            return [], set()
        others.sort(key=start_of)
        starts = [n.start for n in others]
        gaps = []
        for i, p in enumerate(pos):
            before = level[pos[i - 1]:p] if i else level[:pos[0]]
            lo = max((n.end for n in before), default=float("-inf"))
            gaps.append(others[bisect_left(starts, lo):bisect_left(starts, level[p].start)])
        seen_in = Counter(sym for gap in gaps[1:] for sym in {n.sym for n in gap})
        opening = {sym for sym, c in seen_in.items() if c >= 0.5 * (len(gaps) - 1)}
        return others, opening

    def _section_openers(self, thread: ThreadSkeleton, level, unit: Unit) -> list:
        """Online: (start, name) of every op of the thread's other sections, read so far, of
        a kind that opens instances (``_opening_elsewhere``): the matcher begins each new
        instance at the one before its first op (``_RootMatcher._boundary``)."""
        others, opening = self._opening_elsewhere(thread, level, unit)
        return [(n.start, self._names[n.sym]) for n in others if n.sym in opening]

    def _align_sections(self, thread: ThreadSkeleton, level, unit: Unit, boundaries: list) -> list:
        """A unit found on one section of the loop thread (its annotations, say) begins with
        the ops of the thread's other sections that open most instances
        (``_opening_elsewhere``)."""
        pos = unit.positions
        if len(boundaries) != len(pos):
            return boundaries
        others, opening = self._opening_elsewhere(thread, level, unit)
        if not opening:
            return boundaries
        starts = [n.start for n in others]
        aligned = []
        for i, b in enumerate(boundaries):
            before = level[pos[i - 1]:pos[i]] if i else level[:pos[0]]
            lo = max((n.end for n in before), default=float("-inf"))
            gap = others[bisect_left(starts, lo):bisect_left(starts, b.start_ts)]
            first = next((n for n in gap if n.sym in opening), None)
            aligned.append(b if first is None else
                           FoundBoundary(first.start, b.thread, self._names[first.sym]))
        return aligned

    def _single(self, thread: ThreadSkeleton, path, evidence) -> DetectorResult:
        """No repeating unit: the loop thread's work is one iteration."""
        roots = thread.roots
        span_owner = path[0] if path else None
        start = span_owner.start if span_owner else roots[0].start
        end = span_owner.end if span_owner else max(n.end for n in roots)
        name = self._names[span_owner.sym] if span_owner else self._names[roots[0].sym]
        evidence.setdefault("why", "no op sequence repeats: the trace is one unit of work")
        evidence.update(unit=[name], instances=1, confidence=0.6)
        return DetectorResult(boundaries=[FoundBoundary(start, thread.key, name)],
                              last_end=end, evidence=evidence)
