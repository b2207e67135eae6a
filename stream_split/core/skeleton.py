"""The skeleton of the call tree that the structural detector searches: no decisions here.

Each structural CPU op becomes a ``Node``: its symbol (the op's name with digits folded, so
``layer_3`` and ``layer_7`` are one family: ``Symbols``), start, end, the kernels launched
beneath it (``gpu``, credited once launches arrive) and its children. A ``ThreadSkeleton``
holds one section of one thread: its top-level ops (``roots``), the open ops parallel to the
engine's stack, its top-level ``ProfilerStep`` spans and how often each symbol has occurred at
its top level (for the online tries). ``SKIPPED`` stands for an op that is not kept (beyond
the skeleton's depth or size), nor are its children. How much is kept is the detector's
choice (``structure.StructureDetector``).
"""
from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter

_DIGITS = re.compile(r"\d+")


class Node:
    __slots__ = ("sym", "start", "end", "kids", "depth", "gpu", "copies")

    def __init__(self, sym: int, start: float, end: float, depth: int):
        self.sym = sym
        self.start = start
        self.end = end
        self.kids = None
        self.depth = depth
        self.gpu = 0  # kernels launched from this op's subtree (known once launches arrive)
        self.copies = 0  # memory copies launched from this op's subtree


SKIPPED = Node(-1, 0.0, 0.0, 0)


class ThreadSkeleton:
    """The skeleton of one section of one thread (key: its (pid, tid))."""
    __slots__ = ("key", "main", "roots", "stack", "steps", "next_try", "seen", "kid_seen")

    def __init__(self, key, first_try: int):
        self.key = key
        # The skeleton keeps depth only for a process's main thread (pid == tid): the one
        # that drives a loop; other threads (autograd, data loading) keep their top level.
        self.main = key[0] == key[1]
        self.roots: list[Node] = []
        self.stack: list = []  # parallel to the engine's stack: Node or None (transparent)
        self.steps: list = []  # top-level ProfilerStep spans: (start, end, name)
        self.next_try = first_try  # top-level ops before the next online attempt
        self.seen: Counter = Counter()  # top-level symbol -> occurrences (for online tries)
        #: Under the current top-level op: a shallow container -> its children's symbol
        #: counts (for online tries inside a container; cleared at each new top-level op).
        self.kid_seen: dict = {}

    def path_at(self, ts: float) -> list:
        """The ops open at ``ts``, outermost first (the ops a launch at ``ts`` runs under)."""
        path = []
        level = self.roots
        while level:
            i = bisect_right(level, ts, key=start_of) - 1
            if i < 0 or level[i].end < ts:
                break
            path.append(level[i])
            level = level[i].kids
        return path


class Symbols:
    """Op name -> symbol (digits folded into one family); ``names[sym]`` is the family."""

    def __init__(self):
        self._of: dict = {}
        self.names: list = []

    def of(self, name: str) -> int:
        sym = self._of.get(name)
        if sym is None:
            family = _DIGITS.sub("N", name)
            sym = self._of.get("\x00" + family)
            if sym is None:
                sym = len(self.names)
                self.names.append(family)
                self._of["\x00" + family] = sym
            self._of[name] = sym
        return sym


def start_of(node: Node) -> float:
    return node.start


def flatten(node: Node, out: list, limit: int) -> None:
    """``node`` and its descendants in call order, appended to ``out`` up to ``limit``."""
    stack = [node]
    while stack and len(out) < limit:
        n = stack.pop()
        out.append(n)
        if n.kids:
            stack.extend(reversed(n.kids))
