"""The skeleton of the call tree that the structural detector searches: no decisions here.

Each structural CPU op becomes a ``Node``: its symbol (the op's name with digits folded, so
``layer_3`` and ``layer_7`` are one family: ``Symbols``), start, end, the kernels launched
beneath it (``gpu``, credited once launches arrive) and its children. A ``ThreadSkeleton``
holds one section of one thread: its top-level ops (``roots``), the open ops parallel to the
engine's stack, its top-level ``ProfilerStep`` spans and how often each symbol has occurred at
its top level (for the online tries); and for each top-level op, the Python frames that open
it (``Node.opener``: the wrappers of a step around its first op, for a boundary at the
outermost frame). ``SKIPPED`` stands for an op that is not kept (beyond
the skeleton's depth or size), nor are its children. How much is kept is the detector's
choice (``structure.StructureDetector``, within ``rules.MemoryRules``).
"""
from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter

from stream_split.core.detect.rules import RULES

_DIGITS = re.compile(r"\d+")


class Node:
    __slots__ = ("sym", "start", "end", "kids", "depth", "gpu", "copies", "opener")

    def __init__(self, sym: int, start: float, end: float, depth: int):
        self.sym = sym
        self.start = start
        self.end = end
        self.kids = None
        self.depth = depth
        self.gpu = 0  # kernels launched from this op's subtree (known once launches arrive)
        self.copies = 0  # memory copies launched from this op's subtree
        #: The Python frames that open this top-level op, (start, end, name) each: they
        #: begin after the previous top-level op ended and hold this one (the wrappers of
        #: a step around its first op, ``training_step``); None if none was seen.
        self.opener = None


SKIPPED = Node(-1, 0.0, 0.0, 0)


class ThreadSkeleton:
    """The skeleton of one section of one thread (key: its (pid, tid))."""
    __slots__ = ("key", "main", "roots", "stack", "steps", "next_try", "seen", "kid_seen",
                 "frames")

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
        #: Python frames that begin after the latest top-level op began (a file written in
        #: time order reads them before the op they open): (start, end, name), at most
        #: ``MemoryRules.max_pending_frames``, matched once the next top-level op is read.
        self.frames: list = []

    def add_root(self, node: Node) -> None:
        """A new top-level op; the Python frames read before it that open it are its opener."""
        roots = self.roots
        if self.frames:
            self.frames = open_pending(node, roots[-1].end if roots else float("-inf"),
                                       self.frames)
        roots.append(node)

    def observe_frame(self, start: float, end: float, name: str) -> None:
        """A Python frame of this thread: the opener of the top-level op it opens (see
        ``Node.opener``), or kept until that op is read."""
        roots = self.roots
        i = bisect_left(roots, start, key=start_of)
        if i == len(roots):
            if len(self.frames) < RULES.memory.max_pending_frames:
                self.frames.append((start, end, name))
            return
        _open_with(roots[i], roots[i - 1].end if i else float("-inf"), (start, end, name))

    def path_at(self, ts: float) -> list:
        """The ops open at ``ts``, outermost first (the ops a launch at ``ts`` runs under)."""
        path = []
        row = self.roots
        while row:
            i = bisect_right(row, ts, key=start_of) - 1
            if i < 0 or row[i].end < ts:
                break
            path.append(row[i])
            row = row[i].kids
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


def _open_with(node: Node, after: float, frame: tuple) -> None:
    """``frame`` opens ``node`` when it begins after ``after`` (the end of the top-level op
    before it: a frame that began earlier holds the previous op too, the loop's own frame)
    and holds ``node``. The frames that open one op are nested: a short chain (at most
    ``MemoryRules.max_openers``, the outermost kept)."""
    start, end, _ = frame
    if after <= start <= node.start and end >= node.end:
        if node.opener is None:
            node.opener = []
        node.opener.append(frame)
        if len(node.opener) > RULES.memory.max_openers:
            node.opener.sort()
            del node.opener[RULES.memory.max_openers:]


def open_pending(node: Node, after: float, frames: list) -> list:
    """The frames read before ``node`` that open it become its openers (``_open_with``;
    ``after``: the end of the op before it among its siblings); returns those that begin after it
    (they may open a later op)."""
    for frame in frames:
        _open_with(node, after, frame)
    return [f for f in frames if f[0] > node.start]


def outermost_opener(node: Node, ceiling: float = float("inf")) -> tuple | None:
    """The outermost Python frame that opens ``node`` and ends by ``ceiling`` (the next
    instance's start, where known: the program's own frame opens the first op of all)."""
    return min((f for f in node.opener or () if f[1] <= ceiling), default=None)


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


def occurrences(row: list, sym: int) -> list:
    """Where ops of the symbol ``sym`` occur in ``row`` (a list of sibling ops)."""
    return [i for i, node in enumerate(row) if node.sym == sym]


def after_containers(roots: list, path: list) -> list:
    """The ops after each container of ``path`` (the open ops around a row, outermost
    first, the first on ``roots``) on its own row, in time order (the innermost row's
    first)."""
    rows = [roots] + [c.kids for c in path[:-1]]
    after = []
    for row, container in reversed(list(zip(rows, path))):
        i = next(i for i, node in enumerate(row) if node is container)
        after.extend(row[i + 1:])
    return after
