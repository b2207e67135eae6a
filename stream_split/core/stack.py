"""Per-thread stacks of open CPU ops: the call structure, one op at a time.

Ops of one thread arrive in start order (Kineto writes each thread's CPU ops sorted), so an
op's parent is the innermost open op that still contains it. Real traces are not perfectly
nested: annotations cross each other and children end a little after their parents; an op
that outlives the top of the stack by more than ``tolerance_us`` is treated as its sibling.
Memory is the depth of the deepest open nesting per thread, never the length of the trace.
"""
from __future__ import annotations


class ThreadStacks:
    __slots__ = ("_stacks", "_tolerance", "unsorted")

    def __init__(self, tolerance_us: float = 1.0):
        self._stacks: dict = {}
        self._tolerance = tolerance_us
        self.unsorted = 0  # ops that started before their predecessor on the same thread

    def push(self, thread, name: str, start: float, end: float) -> list:
        """Open an op; returns the thread's stack *including* it: [(end, name, start), ...]."""
        stack = self._stacks.get(thread)
        if stack is None:
            stack = self._stacks[thread] = []
        tol = self._tolerance
        while stack:
            top_end, _, top_start = stack[-1]
            if start >= top_end or end > top_end + tol:
                stack.pop()  # finished before this op, or partially overlapping: a sibling
                if start < top_start:
                    self.unsorted += 1
            else:
                break
        stack.append((end, name, start))
        return stack

    def threads(self):
        return self._stacks.keys()
