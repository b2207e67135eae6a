"""Per-thread stacks of open CPU ops: the call structure, one op at a time.

Ops of one thread arrive in start order (Kineto writes each thread's CPU ops sorted), so an
op's parent is the innermost open op that still contains it. Real traces are not perfectly
nested: annotations cross each other and children end a little after their parents; an op
that outlives the top of the stack by more than ``tolerance_us`` is treated as its sibling.
Memory is the depth of the deepest open nesting per thread, never the length of the trace.
"""
from __future__ import annotations


class _Thread:
    """One thread's open ops, where its latest op started and how many sections it has."""
    __slots__ = ("stack", "last_start", "sections")

    def __init__(self):
        self.stack: list = []  # [(end, name, start), ...], outermost first
        self.last_start = float("-inf")
        self.sections = 0


class ThreadStacks:
    __slots__ = ("_threads", "_tolerance", "sections_started")

    def __init__(self, tolerance_us: float = 1.0):
        self._threads: dict = {}  # thread -> _Thread (one lookup per op)
        self._tolerance = tolerance_us
        self.sections_started = 0  # times a thread's ops went back in time

    def push(self, thread, name: str, start: float, end: float) -> list:
        """Open an op; returns the thread's stack *including* it: [(end, name, start), ...].

        Kineto sorts each (thread, category) stream, not each thread: a thread's
        ``user_annotation`` spans may all come before its ``cpu_op`` events. An op that
        starts before the previous one of its thread begins a new *section*: the stack is
        cleared rather than nesting ops under spans they cannot be inside."""
        state = self._threads.get(thread)
        if state is None:
            state = self._threads[thread] = _Thread()
        stack = state.stack
        if start < state.last_start:
            stack.clear()
            state.sections += 1
            self.sections_started += 1
        state.last_start = start
        tol = self._tolerance
        while stack:
            top_end, _, top_start = stack[-1]
            if start >= top_end or end > top_end + tol:
                stack.pop()  # finished before this op, or partially overlapping: a sibling
            else:
                break
        stack.append((end, name, start))
        return stack

    def section(self, thread) -> int:
        """How many times this thread's ops went back in time so far."""
        state = self._threads.get(thread)
        return state.sections if state is not None else 0
