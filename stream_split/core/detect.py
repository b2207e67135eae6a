"""Detect stage: where iterations begin, decided from the CPU call structure as it streams.

A detector sees every structural CPU op (``cpu_op`` / ``user_annotation``) once, in file order,
with its thread's stack of open ops and the thread's section (a new one each time the thread's
ops go back in time: Kineto writes a thread's annotations and its ops as separate sorted
runs), and answers with the boundaries that became certain. A detector may also revise its latest
boundary (``FoundBoundary(moves_last=True)`` or ``RetractLast``), never an earlier one. It
never sees GPU events and never looks back at events: what it needs to remember it keeps in
bounded summaries. ``close()`` returns the boundaries still undecided at the end of the input
and where the last iteration ends.

Detectors:
- ``StepAnnotationDetector``: ``ProfilerStep#N`` spans (what HTA and tb-profiler rely on);
- ``stream_split.core.structure.StructureDetector``: repeating units found from the structure.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from stream_split.trace_format import PROFILER_STEP_PREFIX


@dataclass(slots=True)
class FoundBoundary:
    start_ts: float
    thread: tuple
    first_op: str
    #: This replaces the latest boundary found (always later than it): the op that triggered
    #: it opened the instance, but the instance begins at this op.
    moves_last: bool = False
    why: str = ""


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
    #: every iteration has the same shape.
    shapes: list = field(default_factory=list)
    evidence: dict = field(default_factory=dict)  # for the manifest and `explain`


class StepAnnotationDetector:
    """Boundaries at ``ProfilerStep#N`` spans: each one is an iteration, known at once."""

    name = "profiler_step"
    #: Whether the engine should report launches, GPU work and Python frames.
    wants_evidence = False

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

    def observe_launch(self, thread, ts, correlation, graph, copy=False) -> None:
        """Nor is GPU work."""

    def observe_gpu_work(self, correlation) -> None:
        """Nor is GPU work."""

    def close(self) -> DetectorResult:
        return DetectorResult(
            last_end=self.last_end,
            evidence={"detector": self.name, "loop_thread": list(self.loop_thread or ()),
                      "unit": PROFILER_STEP_PREFIX + "N", "instances": self.count,
                      "confidence": 1.0 if self.count else 0.0})
