"""The detector contract: what a detector sees, and what it answers (and the steps detector).

A detector sees every structural CPU op (``cpu_op`` / ``user_annotation``) once, in file order,
with its thread's stack of open ops and the thread's section (a new one each time the thread's
ops go back in time: Kineto writes a thread's annotations and its ops as separate sorted
runs), and answers with the boundaries that became certain. A detector may also revise its latest
boundary (``FoundBoundary(moves_last=True)`` or ``RetractLast``), never an earlier one, and says
whether it still may (``revisable``). A launch,
GPU work or a Python frame (``observe_launch``, ``observe_gpu_work``, ``observe_frame``) may
answer with boundaries too: in a Kineto file the first one ends the loop thread's CPU section. It
never sees GPU events and never looks back at events: what it needs to remember it keeps in
bounded summaries. ``close()`` returns the boundaries still undecided at the end of the input
and where the last iteration ends. ``note_facts(TraceFacts)`` tells it, before the events, what
the trace's header promises (no GPU work, no Python frames): evidence that will not come.
``fast_read``, None or (reader, state), is an op pushed and read in one call in the
detector's present mode (``structure.StructureDetector.fast_read``; the engine asks it at
each op, a plain attribute: every detector that reads stacks has it).

Detectors:
- ``StepAnnotationDetector``: ``ProfilerStep#N`` spans (what HTA and tb-profiler rely on);
- ``structure.StructureDetector``: repeating units found from the structure.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from stream_split.core.records import made_one
from stream_split.trace_format import PROFILER_STEP_PREFIX

#: ``evidence["decided"]`` of a structural detector that took the iterations from
#: ``ProfilerStep#N`` spans as they came: no level below them was searched (``--level``).
DECIDED_FROM_STEPS = "online"


@dataclass(frozen=True, slots=True)
class TraceFacts:
    """What a trace's header says of the evidence that follows its CPU ops (Kineto writes the
    header first): ``None`` where it says nothing. The adapter reads the header and hands it
    over as data (``from_header``); the core never reads a file."""
    #: False: ``"deviceProperties": []``, the profiler saw no GPU: no launch, no kernel.
    gpu: bool | None = None
    #: False: neither ``with_stack`` nor ``with_modules`` is set (the profiler writes them
    #: only when set): no ``python_function`` frames, so no ``nn.Module`` evidence.
    frames: bool | None = None

    @classmethod
    def from_header(cls, header: dict | None) -> "TraceFacts":
        """The facts of the header keys written before the events (none: nothing known)."""
        if not header:
            return cls()
        devices = header.get("deviceProperties")
        gpu = bool(devices) if isinstance(devices, list) else None
        # The torch profiler writes the header's config keys only when they are set; a
        # header without ``deviceProperties`` is no torch header, and says nothing.
        frames = None if gpu is None else any(
            header.get(key) not in (None, 0, False) for key in ("with_stack", "with_modules"))
        return cls(gpu=gpu, frames=frames)


@dataclass(slots=True)
class FoundBoundary:
    start_ts: float
    thread: tuple
    first_op: str
    #: This replaces the latest boundary found (always later than it): the op that triggered
    #: it opened the instance, but the instance begins at this op.
    moves_last: bool = False
    why: str = ""
    #: Where the gap before the instance's first op begins (the end of the op before it on
    #: its row; -inf: none before it): Python frames of ``thread`` that begin there and hold
    #: the boundary open the step (``core.owners.StepOpeners``). None: no frame opens it here
    #: (the boundary is already at its opener, or no row is known).
    opens_after: float | None = None


#: A new ``FoundBoundary`` of every field's value, in order (``records.made_one``: no frame
#: of Python; a matcher finds one a boundary, 0.25 against 0.5 µs by its ``__init__``).
found_boundary = made_one(FoundBoundary)


@dataclass(slots=True)
class RetractLast:
    """The latest boundary found was none: the op that triggered it did not open an
    instance (the unit's anchor never followed it)."""
    why: str


@dataclass(slots=True)
class DetectorResult:
    """What a detector knows at the end of the input."""
    boundaries: list = field(default_factory=list)  # FoundBoundary not yet reported
    last_end: float | None = None  # end of the last iteration (None: no epilogue cut)
    #: Per iteration, a hashable "shape" (equal shapes = the same kind of cycle); empty when
    #: every iteration has the same shape. A list, or the matcher's ``CodedColumn``.
    shapes: list = field(default_factory=list)
    evidence: dict = field(default_factory=dict)  # for the manifest and `explain`


class StepAnnotationDetector:
    """Boundaries at ``ProfilerStep#N`` spans: each one is an iteration, known at once."""

    name = "profiler_step"
    #: Whether the engine should report launches, GPU work and Python frames.
    wants_evidence = False
    #: Whether ``observe`` reads the stack of open ops (else the engine keeps none).
    reads_stacks = False
    #: Whether the latest boundary found may still be revised (each step is final at once).
    revisable = False
    #: No op is read in one call with its push (it reads no stacks).
    fast_read = None

    def __init__(self):
        self.loop_thread = None
        self.count = 0
        self.last_end = None
        self._last_start = None

    def observe(self, thread, stack: list, start: float, end: float, name: str, section: int):
        if not name.startswith(PROFILER_STEP_PREFIX):
            return ()
        if self.loop_thread is None:
            self.loop_thread = thread
        elif thread != self.loop_thread or (self._last_start is not None
                                            and start <= self._last_start):
            return ()
        self.count += 1
        self._last_start = start
        self.last_end = end if self.last_end is None else max(end, self.last_end)
        return (FoundBoundary(start, thread, name),)

    def observe_frame(self, thread, start, end, name) -> None:
        """Python frames are no evidence for step annotations."""

    def observe_frames(self, threads, starts, ends, names, at) -> tuple:
        """Nor are they in bulk."""
        return len(threads), ()

    def observe_launch(self, thread, ts, correlation, graph, copy=False) -> None:
        """Nor is GPU work."""

    def observe_sync(self, thread, ts) -> tuple:
        """Nor is a host sync."""
        return ()

    def observe_gpu_work(self, correlation, ts=None) -> None:
        """Nor is GPU work."""

    def note_facts(self, facts: TraceFacts) -> None:
        """Nor is the header."""

    def threads_needed(self) -> set:
        """The loop thread is the one thread it keeps (its steps' order)."""
        return {self.loop_thread}

    def forget_threads(self, threads) -> None:
        """It keeps nothing of other threads."""

    def close(self) -> DetectorResult:
        return DetectorResult(
            last_end=self.last_end,
            evidence={"detector": self.name, "loop_thread": list(self.loop_thread or ()),
                      "unit": PROFILER_STEP_PREFIX + "N", "instances": self.count,
                      "confidence": 1.0 if self.count else 0.0})
