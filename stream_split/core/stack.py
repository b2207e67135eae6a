"""Per-thread stacks of open CPU ops: the call structure, one op at a time.

Ops of one thread arrive in start order (Kineto writes each thread's CPU ops sorted; a file
in another order is put back in it by ``core.order``), so an op's parent is the innermost open
op that still contains it. Real traces are not perfectly
nested: annotations cross each other and children end a little after their parents; an op
that outlives the top of the stack by more than ``tolerance_us`` is treated as its sibling.
Memory is the depth of the deepest open nesting per thread, never the length of the trace.
"""
from __future__ import annotations


_NO_STACK: list = []


class ThreadStacks:
    __slots__ = ("_stacks", "_tolerance", "_last_start", "_sections", "sections_started")

    def __init__(self, tolerance_us: float = 1.0):
        self._stacks: dict = {}
        self._tolerance = tolerance_us
        self._last_start: dict = {}
        self._sections: dict = {}
        self.sections_started = 0  # times a thread's ops went back in time

    def push(self, thread, name: str, start: float, end: float) -> list:
        """Open an op; returns the thread's stack *including* it: [(end, name, start), ...].

        Kineto sorts each (thread, category) stream, not each thread: a thread's
        ``user_annotation`` spans may all come before its ``cpu_op`` events. An op that
        starts before the previous one of its thread begins a new *section*: the stack is
        cleared rather than nesting ops under spans they cannot be inside."""
        stack = self._stacks.get(thread)
        if stack is None:
            stack = self._stacks[thread] = []
        if self._new_section(thread, start):
            stack.clear()
        tol = self._tolerance
        while stack:
            top_end, _, top_start = stack[-1]
            if start >= top_end or end > top_end + tol:
                stack.pop()  # finished before this op, or partially overlapping: a sibling
            else:
                break
        stack.append((end, name, start))
        return stack

    def note_start(self, thread, start: float) -> list:
        """What ``push`` counts of an op (its thread's sections), for a reader that never
        looks at the stacks; returns an empty stack."""
        self._new_section(thread, start)
        return _NO_STACK

    def _new_section(self, thread, start: float) -> bool:
        """Count an op's start: True when it goes back in time (a new section begins)."""
        last = self._last_start.get(thread)
        self._last_start[thread] = start
        if last is None:
            self._sections[thread] = 0
            return False
        if start < last:
            self._sections[thread] += 1
            self.sections_started += 1
            return True
        return False

    def section(self, thread) -> int:
        """How many times this thread's ops went back in time so far."""
        return self._sections.get(thread, 0)
