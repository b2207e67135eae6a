"""Per-thread stacks of open CPU ops: the call structure, one op at a time.

Ops of one thread arrive in start order (Kineto writes each thread's CPU ops sorted; a file
in another order is put back in it by ``core.order``), so an op's parent is the innermost open
op that still contains it. Real traces are not perfectly
nested: annotations cross each other and children end a little after their parents; an op
that outlives the top of the stack by more than ``tolerance_us`` is treated as its sibling.

Memory: per thread, the depth of its deepest open nesting, never the length of the trace;
and the threads are kept in the order they were last read (``least_recent``), so that the
engine can forget the idle ones once more than ``LIVE_THREADS`` are known (a trace of a
million threads of one op each: ``engine.Splitter._forget_idle_threads``).
"""
from __future__ import annotations

#: Threads known at once before the engine forgets the idle ones (least recently read first).
#: Real traces read ops of a few threads (the shared traces and tests/data: at most 2 with
#: CPU ops, 25 in all), so none of them ever reaches it.
LIVE_THREADS = 4096

_NO_STACK: list = []
#: ``ThreadStacks._latest`` before the first op is read (equal to no thread).
_NO_THREAD = object()


class _Thread:
    """One thread's open ops (their ends and names, outermost first: two lists, not a tuple
    per op, for a nesting a million deep), its last op's start and its sections so far.
    Made at the thread's second op: its first is kept as the tuple ``(start, end, name)``
    until then (``ThreadStacks.push``), so that a thread of one op, of which a trace may
    hold a million, makes none: 2.6 k instructions less per such thread)."""
    __slots__ = ("ends", "names", "last_start", "section")

    def __init__(self, start: float):
        self.ends: list = []
        self.names: list = []
        self.last_start = start
        self.section = 0


def _after_first(start: float, end: float, name: str) -> _Thread:
    """A thread's stack after its first op (``start`` to ``name``): that op open."""
    state = _Thread(start)
    state.ends.append(end)
    state.names.append(name)
    return state


class ThreadStacks:
    __slots__ = ("_threads", "_tolerance", "sections_started", "known", "last_section",
                 "_latest", "_latest_state")

    def __init__(self, tolerance_us: float = 1.0):
        #: thread -> its ``_Thread``, the least recently read first.
        self._threads: dict = {}
        self._tolerance = tolerance_us
        self.sections_started = 0  # times a thread's ops went back in time
        #: How many threads are known (``len``), and the section of the thread whose op was
        #: read last (``section``): attributes, for the engine's per-op path.
        self.known = 0
        self.last_section = 0
        #: The thread read last and its ``_Thread``: it is the most recent already, so its
        #: next op, in start order, is read without the dict (most ops come in long runs of
        #: one thread).
        self._latest = _NO_THREAD
        self._latest_state: _Thread | None = None

    def __len__(self) -> int:
        """How many threads are known."""
        return len(self._threads)

    def push(self, thread, name: str, start: float, end: float) -> list:
        """Open an op; returns the names of the thread's open ops *including* it, outermost
        first (its length is the op's depth, plus one).

        Kineto sorts each (thread, category) stream, not each thread: a thread's
        ``user_annotation`` spans may all come before its ``cpu_op`` events. An op that
        starts before the previous one of its thread begins a new *section*: the stack is
        cleared rather than nesting ops under spans they cannot be inside."""
        state = self._latest_state
        if thread == self._latest and start >= state.last_start:  # ``_read``'s common case
            state.last_start = start
        else:
            state = self._read(thread, start, end, name)
            if state is None:  # the thread's first op: kept as it came (``_Thread``)
                return [name]
        ends, names = state.ends, state.names
        tol = self._tolerance
        while ends:
            top_end = ends[-1]
            if start >= top_end or end > top_end + tol:
                ends.pop()  # finished before this op, or partially overlapping: a sibling
                names.pop()
            else:
                break
        ends.append(end)
        names.append(name)
        return names

    def pushes_at_once(self, thread, start: float) -> bool:
        """Whether ``push`` of an op of ``thread`` from ``start`` takes its common case: an op
        of the thread read last, starting no earlier than its previous one (an op read in
        one call asks it before it pushes: ``structure.step_op_read``). Reads, changes
        nothing."""
        return thread == self._latest and start >= self._latest_state.last_start

    def alone_at_top(self, thread, start: float, end: float) -> bool:
        """Whether ``push`` of this op takes its common case (``pushes_at_once``) and leaves
        it alone at the top (each open op finished before it, or partially overlapped): a
        top-level op read in one call (``structure.top_op_matched``) asks it before it
        pushes. Reads, changes nothing."""
        if not self.pushes_at_once(thread, start):
            return False
        tol = self._tolerance
        return all(start >= top_end or end > top_end + tol
                   for top_end in self._latest_state.ends)

    def note_start(self, thread, start: float) -> list:
        """What ``push`` counts of an op (its thread's sections), for a reader that never
        looks at the stacks; returns an empty stack."""
        self._read(thread, start)
        return _NO_STACK

    def _read(self, thread, start: float, end: float | None = None,
              name: str | None = None) -> _Thread | None:
        """Count an op's start, its thread now the most recently read: when it goes back in
        time a new section begins (its stack is cleared). A thread's first op, given its
        ``end`` and ``name`` (``push``), is kept as it came: None is returned."""
        state = self._threads.pop(thread, None)
        if state is None:
            self.known = len(self._threads) + 1
            if end is not None:
                self._threads[thread] = (start, end, name)
                self.last_section = 0
                self._latest, self._latest_state = _NO_THREAD, None  # (not a ``_Thread``)
                return None
            state = _Thread(start)
        else:
            if state.__class__ is tuple:  # its second op: the stack made from its first
                state = _after_first(*state)
            if start < state.last_start:
                state.section += 1
                self.sections_started += 1
                state.ends.clear()
                state.names.clear()
        state.last_start = start
        self._threads[thread] = state
        self.last_section = state.section
        self._latest, self._latest_state = thread, state
        return state

    def section(self, thread) -> int:
        """How many times this thread's ops went back in time so far."""
        state = self._threads.get(thread)
        return 0 if state is None or state.__class__ is tuple else state.section

    def least_recent(self):
        """The threads known, the least recently read first."""
        return iter(self._threads)

    def forget(self, threads) -> None:
        """Forget ``threads`` (idle): an op of one of them later begins it anew."""
        for thread in threads:
            self._threads.pop(thread, None)
        self.known = len(self._threads)
        self._latest, self._latest_state = _NO_THREAD, None  # (it may be among them)
