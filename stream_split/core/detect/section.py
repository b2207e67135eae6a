"""Has the loop thread's CPU section of a Kineto file ended? (No decisions: ``structure.py``
decides what an ended section allows.)

A Kineto file holds each thread's CPU ops together (the loop thread's first), then Python
frames (``with_stack``), then the GPU block (launches and kernels). The loop thread's
section has ended when something from before its latest ops arrives: an op of another
thread, a Python frame or a launch (in a time-ordered stream nothing comes from the past, so
this never fires there). Then every CPU op of the loop thread has been read, and what the
close decision still lacks is only what comes after: GPU work (kernels per op weigh the
instances, copies tell a step from a layer) and Python frames (``nn.Module`` calls tell
layers). The header says whether they will come (``TraceFacts``, given by the adapter):
with neither (``deviceProperties: []``, no ``with_stack``) the close decision is made right
there, and is the same decision; the GPU block begins at the first launch or GPU work from
the past, and by then every frame is read (the GPU block follows the frames).
"""
from __future__ import annotations

import enum

#: ``evidence["waited"]`` where Python frames may still follow the ended section.
WAITED_FOR_FRAMES = ("Python frames (the header's with_stack), nn.Module evidence, follow the "
                     "CPU section")
#: ``evidence["waited"]`` where GPU work follows and the online confirmation failed.
WAITED_FOR_GPU = (
    "GPU work follows the CPU section (the header's deviceProperties), and nothing that needs "
    "none confirms the unit (an input fetch or a host sync opening every instance, whole exact "
    "instances, every instance alike and turning the loop)")
#: ``evidence["decided"]`` and ``["why_then"]`` of the close decision made at the section end.
DECIDED_AT_SECTION_END = "at the end of the loop thread's CPU section"
WHY_AT_SECTION_END = "the header says no GPU work and no Python frames follow it"


class Section(enum.Enum):
    """How far the loop thread's CPU section of a Kineto file has been read."""
    #: Still being read (or a file in time order: it never ends).
    OPEN = "open"
    #: Something from before its latest ops came (another thread's op, a Python frame): every
    #: CPU op of the loop thread is read; Python frames may still follow.
    ENDED = "ended"
    #: ... and a launch or GPU work came: Kineto's GPU block has begun, every frame is read.
    GPU_BLOCK = "gpu block"


#: The section's moves: (section, a launch or GPU work ended it?) -> the next section.
SECTION_TRANSITIONS = {
    (Section.OPEN, False): Section.ENDED,
    (Section.OPEN, True): Section.GPU_BLOCK,
    (Section.ENDED, True): Section.GPU_BLOCK,
}


class LoopSection:
    """The loop thread's CPU section as it is read (a fact of ``Mode.LEARNING``: once
    decided, the detector no longer watches it)."""

    def __init__(self):
        #: The main thread whose CPU ops are being read (the first main thread read) ...
        self.thread = None
        #: ... and the starts of its latest two ops (Kineto writes them in start order):
        #: anything from before both (another thread's op, a frame, a launch, GPU work) ends
        #: its section (one op of slack: a live writer may be a little out of order). The
        #: earlier of the two is ``since``: nothing from ``since`` on moves the section on
        #: (``ended_by``). Attributes, that the detector's per-op path sets as it reads an
        #: op of a main thread: ``StructureDetector._observe_learning``.
        self.since = self.latest = float("-inf")
        #: How far the section is read (``SECTION_TRANSITIONS``).
        self.state = Section.OPEN

    def follow(self, thread, start: float) -> None:
        """An op of a main thread, begun at ``start``: the section's latest, if it is its
        thread (the first main thread read)."""
        if self.thread == thread or self.thread is None:
            self.thread = thread
            self.since, self.latest = self.latest, start

    def ended_by(self, ts: float, gpu_block: bool) -> bool:
        """Does a frame, or (``gpu_block``) a launch or GPU work, at ``ts`` move the section
        on: from before its latest ops, while it is open (a launch: until the GPU block)?"""
        if ts >= self.since:
            return False
        if gpu_block:
            return self.state is not Section.GPU_BLOCK
        return self.state is Section.OPEN

    def end(self, launch: bool) -> None:
        """The section has ended; ``launch``: by a launch or GPU work (the GPU block)."""
        self.state = SECTION_TRANSITIONS[(self.state, launch)]

    @property
    def frames_read(self) -> bool:
        """Kineto's GPU block has begun: every Python frame is read."""
        return self.state is Section.GPU_BLOCK
