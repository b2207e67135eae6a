"""What the core tells its callers: small immutable records, no behaviour.

``Boundary`` is known the moment an iteration's first CPU op is read (after the pattern is
confirmed); ``IterationRecord`` carries an iteration's numbers once they are final. The
protobuf messages in ``proto/`` mirror these fields one for one (``stream_split.schema``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, asdict

#: Owner of an event that belongs to no iteration (prologue, epilogue, spanning wrappers,
#: GPU work whose launch is not in the trace).
OUTSIDE = -1
#: Owner of a metadata event: it is copied into every output piece.
METADATA = -2

KIND_ITERATION = "iteration"
KIND_IDLE = "idle"


@dataclass(frozen=True, slots=True)
class Boundary:
    """Iteration ``index`` begins at ``start_ts`` with op ``first_op`` on the loop thread."""
    index: int
    start_ts: float
    pid: str
    tid: str
    first_op: str

    def to_dict(self) -> dict:
        return {"type": "boundary", **asdict(self)}


@dataclass(slots=True)
class IterationRecord:
    """The numbers of one iteration (or of a cycle of another kind, e.g. ``idle``)."""
    index: int
    kind: str = KIND_ITERATION
    start_ts: float = 0.0
    end_ts: float = 0.0
    first_op: str = ""
    events: int = 0
    cpu_ops: int = 0
    launches: int = 0
    kernels: int = 0
    gpu_events: int = 0
    gpu_busy_us: float = 0.0
    gpu_start_ts: float | None = None
    gpu_end_ts: float | None = None
    complete: bool = True
    file: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def duration_us(self) -> float:
        return self.end_ts - self.start_ts

    def to_dict(self) -> dict:
        d = asdict(self)
        extra = d.pop("extra")
        d["duration_us"] = round(self.duration_us, 3)
        d["gpu_busy_us"] = round(self.gpu_busy_us, 3)
        return {"type": "iteration", **d, **extra}
