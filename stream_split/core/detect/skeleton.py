"""The skeleton of the call tree that the structural detector searches: no decisions here.

Each structural CPU op becomes a ``Node``: its symbol (the op's name with digits folded, so
``layer_3`` and ``layer_7`` are one family: ``Symbols``), start, end, the kernels launched
beneath it (``gpu``, credited once launches arrive) and its children. A ``ThreadSkeleton``
holds one section of one thread: its top-level ops (``roots``), the open ops parallel to the
engine's stack, its top-level ``ProfilerStep`` spans and how often each symbol has occurred at
its top level (for the online tries); and for each top-level op, the Python frames that open
it (``Node.opener``: the wrappers of a step around its first op, for a boundary at the
outermost frame). ``SKIPPED`` stands for an op that is not kept (beyond
the skeleton's depth or size), nor are its children.

``Skeletons`` holds every thread's skeletons while the detector learns, builds them op by op
and credits the GPU work launched beneath each op and the Python frames that open it; which
ops it reads, and when the skeletons are dropped, is the mode machine's choice
(``structure.StructureDetector``). Memory: below the top level at most ``max_nodes`` ops,
kept only for main threads (pid == tid); a side thread keeps at most
``MemoryRules.side_thread_roots`` top-level ops; Python frames waiting for the op they open
at most ``MemoryRules.max_pending_frames``. A loop never confirmed online keeps its main
thread's top level (everything the engine waits on meanwhile is spilled), but of its ops of
names of their own only the latest ``MemoryRules.single_roots`` (``forget_singles``: a
million names each seen once kept 370 bytes each), and of all its ops at most
``MemoryRules.max_roots`` (``forget_oldest``, once the detector found no loop among them:
names drawn at random kept 450 bytes an op). The skeletons of idle threads are forgotten
once the engine knows more than ``stack.LIVE_THREADS`` threads (``forget``), all but the loop
thread's candidates. A thread's first op, at its top level, makes no skeleton: it is kept
alone, a tuple, until the thread's next op (``lone``; most threads of a trace of a million
threads never see a second).
"""
from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter
from itertools import count
from operator import attrgetter, sub

import numpy as np

from stream_split.native import NATIVE as _native  # (None: the Python class)
from stream_split.core.detect.rules import REPEAT, RULES
from stream_split.core.detect.search import marker_match
from stream_split.trace_format import LOOP_MARKER_SHORTEST, LOOP_MARKER_WORDS, is_main_thread

_DIGITS = re.compile(r"\d+")
#: A digit: where a name has none it is its own family, found with no ``_DIGITS.sub`` (a
#: search for one digit scans the name for it at once, where ``\d+`` tries each position:
#: half the instructions on names without digits).
_DIGIT = re.compile(r"\d")
#: The ASCII digits (``\d`` holds them, and others).
_ASCII_DIGITS = "0123456789"
#: How a Python frame of an ``nn.Module`` call is named.
MODULE_FRAME_PREFIX = "nn.Module: "


class PyNode:
    """An op of the skeleton: ``Node``'s fields, and ``Node`` itself where the native part is
    not built (``stream_split._native.Node`` holds the same fields, made without a Python
    frame: 0.7 k instructions an op, not 2.3 k, callgrind; the detector makes one for each op
    it keeps while it learns)."""
    __slots__ = ("sym", "start", "end", "kids", "depth", "gpu", "copies", "syncs", "opener")

    def __init__(self, sym: int, start: float, end: float, depth: int):
        self.sym = sym
        self.start = start
        self.end = end
        self.kids = None
        self.depth = depth
        self.gpu = 0  # kernels launched from this op's subtree (known once launches arrive)
        self.copies = 0  # memory copies launched from this op's subtree
        #: Blocking host syncs in this op's subtree (``cudaStreamSynchronize``...): the host
        #: waited there for the device (known once the runtime calls arrive).
        self.syncs = 0
        #: The Python frames that open this top-level op, (start, end, name) each: they
        #: begin after the previous top-level op ended and hold this one (the wrappers of
        #: a step around its first op, ``training_step``); None if none was seen.
        self.opener = None


#: The op's class: the native one where it is built (see ``PyNode``).
Node = PyNode if _native is None else _native.Node

SKIPPED = Node(-1, 0.0, 0.0, 0)
#: What a skeleton holds of a kind it has none of yet (its steps, its frames waiting): a list
#: is made at the first (a thread of one op, of which a trace may hold a million, makes none).
_NONE_YET = ()
#: Top-level ops of a new skeleton before its first online try.
_FIRST_TRY = RULES.online.first_try_per_instance * RULES.min_instances
#: ``Rules.min_instances``, read once (``RootCounts._pair`` asks it at each op of a row
#: whose kinds recur).
_MIN_INSTANCES = RULES.min_instances


class ThreadSkeleton:
    """The skeleton of one section of one thread (key: its (pid, tid))."""
    __slots__ = ("key", "section", "read", "main", "roots", "busy", "below", "stack", "steps",
                 "next_try", "seen", "kid_seen", "frames", "_root_columns", "sifted", "sift_at",
                 "forgotten")

    def __init__(self, key, first_try: int, section: int = 0, frames=_NONE_YET, read: int = 0):
        self.key = key
        self.section = section
        #: When it was first read, among the skeletons (``Skeletons``: lower, later).
        self.read = read
        # The skeleton keeps depth only for a process's main thread (pid == tid): the one
        # that drives a loop; other threads (autograd, data loading) keep their top level.
        self.main = is_main_thread(*key)
        self.roots: list[Node] = []
        #: The time its top-level ops take, summed as they come (the rank of an idle thread
        #: among the loop thread's candidates: ``close.leading_threads``).
        self.busy = 0.0
        self.below = 0  # ops kept below its top level
        self.stack: list = []  # parallel to the engine's stack: Node or None (transparent)
        #: Top-level ProfilerStep spans: (start, end, name) (a list from the first).
        self.steps: list | tuple = _NONE_YET
        self.next_try = first_try  # top-level ops before the next online attempt
        #: Top-level symbol -> occurrences, and what may make a unit there believable
        #: online (``RootCounts``: for the online tries); of a side thread, never tried
        #: online, only the kinds it holds (a set: ``Skeletons._unused`` asks).
        self.seen = RootCounts() if self.main else set()
        #: Under the current top-level op: a shallow container -> its children's symbol
        #: counts (for online tries inside a container; cleared at each new top-level op;
        #: None before the first).
        self.kid_seen: dict | None = None
        #: Python frames that begin after the latest top-level op began (a file written in
        #: time order reads them before the op they open): (start, end, name), at most
        #: ``MemoryRules.max_pending_frames``, matched once the next top-level op is read
        #: (a list from the first).
        self.frames: list | tuple = frames
        #: (roots, how many of them, their starts, their ends) as read by ``observe_frames``.
        self._root_columns = None
        #: The top-level ops before this one were sifted by ``Skeletons.forget_singles`` ...
        self.sifted = 1
        #: ... which sifts again once more kinds than this are seen once; how many it forgot.
        self.sift_at = RULES.memory.single_roots
        self.forgotten = 0

    def parent_at(self, depth: int, transparent: bool = False):
        """The kept op that an op read at ``depth`` of the engine's stack opens under (None:
        the top level), the open ops cut to ``depth``. ``SKIPPED`` where the op is not read,
        and is already pushed: under an op not kept, or ``transparent`` (a ``ProfilerStep``
        read through: its children take its place)."""
        stack = self.stack
        del stack[depth:]
        parent = None
        if stack:  # (empty at the top level: no iterator made there)
            for node in reversed(stack):  # (a loop: no generator made for each op read)
                if node is not None:
                    parent = node
                    break
        if parent is SKIPPED:
            stack.append(SKIPPED)
            return SKIPPED
        if transparent:
            stack.append(None)
            return SKIPPED
        return parent

    def skips_below(self, depth: int) -> bool:
        """An op of a side thread (it keeps no op below its top level: ``Skeletons.add``),
        not a ``ProfilerStep``, read at ``depth`` of the engine's stack: True where it opens
        under the thread's top-level op read (kept or not), then it is pushed as not kept,
        as ``parent_at`` and ``Skeletons.add`` would push it, at a fraction of their cost
        (most ops of a trace's autograd thread). False at the top level, or where it may
        take a top-level op's place (under ``ProfilerStep`` spans read through:
        ``parent_at``)."""
        stack = self.stack
        if depth and stack and stack[0] is not None:
            del stack[depth:]
            stack.append(SKIPPED)
            return True
        return False

    def around_latest(self) -> list:
        """The kept ops open around the latest op read, outermost first."""
        return [node for node in self.stack[:-1] if node is not None]

    def count_under(self, container: Node, sym: int) -> int:
        """One more child of the symbol ``sym`` under ``container`` (a shallow container of
        the current top-level op): how many it has now (for the online tries)."""
        kid_seen = self.kid_seen
        if kid_seen is None:
            kid_seen = self.kid_seen = {}
        counts = kid_seen.get(container)
        if counts is None:
            counts = kid_seen[container] = Counter()
        counts[sym] += 1
        return counts[sym]

    def add_step(self, start: float, end: float, name: str) -> bool:
        """A ``ProfilerStep`` span read: kept unless nested in (or overlapping) the previous
        one. True if it is a new step."""
        steps = self.steps
        if steps and start < steps[-1][1]:
            return False
        if not steps:
            steps = self.steps = []
        steps.append((start, end, name))
        return True

    def observe_frame(self, start: float, end: float, name: str) -> None:
        """A Python frame of this thread: the opener of the top-level op it opens (see
        ``Node.opener``), or kept until that op is read."""
        roots = self.roots
        i = bisect_left(roots, start, key=start_of)
        if i == len(roots):
            if len(self.frames) < RULES.memory.max_pending_frames:
                self._wait_for_op(((start, end, name),))
            return
        _open_with(roots[i], roots[i - 1].end if i else float("-inf"), (start, end, name))

    def observe_frames(self, starts: np.ndarray, ends: np.ndarray, names: list) -> None:
        """Python frames of this thread, in order, as ``observe_frame`` takes them one by
        one: the top-level op each one would open found for all at once (on top-level ops
        in start order whose times are exact in float64, else one by one)."""
        roots = self.roots
        columns = self._columns_of_roots()
        if columns is None:
            for start, end, name in zip(starts.tolist(), ends.tolist(), names):
                self.observe_frame(start, end, name)
            return
        root_starts, root_ends = columns
        at = np.searchsorted(root_starts, starts, "left")  # bisect_left, on sorted starts
        inside = np.flatnonzero(at < len(roots))
        i = at[inside]
        after = np.concatenate(([-np.inf], root_ends[:-1]))[i]
        opens = (after <= starts[inside]) & (starts[inside] <= root_starts[i]) & \
            (ends[inside] >= root_ends[i])
        for k in inside[opens].tolist():  # the rare frames that open an op, in order
            r = int(at[k])
            _open_with(roots[r], roots[r - 1].end if r else float("-inf"),
                       (float(starts[k]), float(ends[k]), names[k]))
        room = RULES.memory.max_pending_frames - len(self.frames)
        if room > 0:
            later = np.flatnonzero(at == len(roots))[:room].tolist()
            self._wait_for_op((float(starts[k]), float(ends[k]), names[k]) for k in later)

    def _wait_for_op(self, frames) -> None:
        """``frames`` (start, end, name) kept until the next top-level op is read (a list
        made at the first: a thread of one op makes none)."""
        if self.frames:
            self.frames.extend(frames)
        else:
            self.frames = list(frames)

    def _columns_of_roots(self):
        """The top-level ops' (starts, ends) as float64 arrays when they are in start order
        and exact in float64 (a bisect on them is then a ``searchsorted``), else None; the
        ops added since the last call are read, no more."""
        roots = self.roots
        kept = self._root_columns
        if kept is None or kept[0] is not roots or kept[1] > len(roots):
            kept = (roots, 0, np.empty(0), np.empty(0))
        _, n, starts, ends = kept
        if n < len(roots):
            added = roots[n:]
            starts = np.concatenate((starts, np.array([node.start for node in added], np.float64)))
            ends = np.concatenate((ends, np.array([node.end for node in added], np.float64)))
            self._root_columns = kept = (roots, len(roots), starts, ends)
        if starts.size and not (bool((starts[1:] >= starts[:-1]).all()) and
                                max(np.abs(starts).max(), np.abs(ends).max()) < _EXACT_IN_FLOAT):
            return None
        return starts, ends

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


class RootCounts:
    """How often each symbol has occurred at a thread's top level (``counts[sym]``), and
    whether a unit found there may yet be believed online (``may_confirm``).

    ``verdict.confirmed_online`` believes a unit at the top of a thread in two kinds of way:
    through the loop's own ops (an input fetch or an optimizer step: a *loop marker*,
    ``LOOP_MARKER_PATTERN``, among the unit's ops), or through three instances exactly alike
    (``Unit.exact``). Three exact instances of ``k`` ops each begin with the same two ops,
    so some op follows another of one kind three times (two ops of one kind in a row twice,
    for instances of one op). A row with neither (2,000 ops drawn at random from 400 names,
    which also looks like a loop to the search: any half is much like any other) holds no
    unit the online tries could believe, however long they searched: they are skipped
    (``StructureDetector._try_online``); the close decision searches it once.

    The pairs are counted exactly, and kept only for kinds that recur: for a kind seen once
    the dict holds, in place of its count, the node that followed it (a reference to a node
    kept anyway), so a row of a million names each seen once keeps no pair and nothing
    more than its counts did."""

    __slots__ = ("_seen", "_pairs", "_last", "last_count", "exact", "marked", "singles")

    def __init__(self):
        #: sym -> its count, or the node that followed its only occurrence (count 1).
        self._seen: dict = {}
        #: (sym, the next op's sym) -> times, for syms that recur (None before the first).
        self._pairs: dict | None = None
        self._last = None  # the latest op's symbol
        #: How often the latest op's kind has occurred (``self[its symbol]``, kept by
        #: ``add``: the online tries ask it of every op read,
        #: ``StructureDetector._observe_learning``).
        self.last_count = 0
        #: Some op followed another of one kind three times (one of its own kind twice).
        self.exact = False
        #: A loop marker occurred.
        self.marked = False
        #: Kinds seen once (``MemoryRules.single_roots``).
        self.singles = 0

    def __getitem__(self, sym: int) -> int:
        count = self._seen.get(sym, 0)
        return count if type(count) is int else 1

    def __contains__(self, sym: int) -> bool:
        return sym in self._seen

    def absent(self, syms) -> list:
        """Those of ``syms`` that have not occurred (``sym not in self``, asked of many at
        once: no Python call each, ``Skeletons.forget_oldest`` asks it of some 13 k kinds at
        a time)."""
        seen = self._seen
        return [sym for sym in syms if sym not in seen]

    def seen_once(self, nodes: list) -> list:
        """Those of ``nodes`` whose kind has occurred once (``self[node.sym] == 1``, asked
        of many at once)."""
        seen = self._seen
        return [n for n in nodes if type(count := seen.get(n.sym, 0)) is not int or count == 1]

    def forget(self, syms: list) -> None:
        """The only op of each kind of ``syms`` is forgotten (``Skeletons.forget_singles``):
        if the kind occurs again, that is its first occurrence."""
        seen = self._seen
        for sym in syms:
            del seen[sym]
        self.singles -= len(syms)

    def forget_ops(self, syms: list) -> None:
        """The ops of kinds ``syms`` (one entry an op, none the latest) were forgotten
        (``Skeletons.forget_oldest``): their counts go down, a kind with none left goes, and
        the pairs are counted anew from here (so they too stay bounded); what made a unit
        believable online stays so (``exact``, ``marked``). A kind left with one occurrence
        keeps the count 1 (the pair it begins is not counted at its next occurrence)."""
        seen = self._seen
        for sym, gone in Counter(syms).items():
            count = seen[sym]
            count = count if type(count) is int else 1
            if count == gone:
                del seen[sym]
                self.singles -= count == 1
            else:
                seen[sym] = count - gone
                self.singles += count - gone == 1
        self._pairs = None
        self.last_count = self[self._last]

    @property
    def may_confirm(self) -> bool:
        """May a unit found on this row be believed online (see the class docstring)?"""
        return self.exact or self.marked

    def add(self, node: Node, marker: bool) -> None:
        """The next top-level op (``marker``: its kind is a loop marker)."""
        seen, sym = self._seen, node.sym
        before = self._last
        if before is not None:
            # (``last_count`` is ``seen[before]``, read without the dict)
            if self.last_count == 1:  # its only occurrence, just before: ``node`` follows it
                seen[before] = node
            elif not self.exact:  # (once ``exact``, no pair is counted: they serve no more)
                # (``_pair``, inline: a Python call less at most ops of a row whose kinds
                # recur, 0.3 k instructions; a test ties both to a count of every pair,
                # ``test_the_root_counts_tell_when_three_instances_can_be_exact``)
                key = (before, sym)
                pairs = self._pairs
                if pairs is None:
                    pairs = self._pairs = {}
                n = pairs[key] = pairs.get(key, 0) + 1
                if n >= _MIN_INSTANCES or (before == sym and n >= _MIN_INSTANCES - 1):
                    self.exact = True
                    self._pairs = None
        count = seen.get(sym, 0)
        if type(count) is int:
            seen[sym] = self.last_count = count + 1
            if not count:
                self.singles += 1
            elif count == 1:
                self.singles -= 1
        else:  # its second occurrence: the pair of its first is counted now
            seen[sym] = self.last_count = REPEAT
            self.singles -= 1
            if not self.exact:
                self._pair(sym, count.sym)
        self._last = sym
        if marker:
            self.marked = True

    def _pair(self, sym: int, after: int) -> None:
        """An op of kind ``after`` followed one of kind ``sym`` (a kind that recurs): counted,
        and the row is ``exact`` once some pair is seen three times (one of a kind with
        itself, twice). Then the pairs are dropped. (``add`` holds an inline copy of its
        common call.)"""
        key = (sym, after)
        pairs = self._pairs
        if pairs is None:
            pairs = self._pairs = {}
        n = pairs[key] = pairs.get(key, 0) + 1
        if n >= _MIN_INSTANCES or (sym == after and n >= _MIN_INSTANCES - 1):
            self.exact = True
            self._pairs = None


def add_root(state: ThreadSkeleton, node: Node, marker: bool, least: int = _MIN_INSTANCES,
             repeat: int = REPEAT) -> bool:
    """``node``, a new top-level op of a main thread's skeleton ``state`` (the Python frames
    read before it that open it already matched): appended to its top level, its time added
    to ``busy``, counted (``RootCounts.add``; ``marker``: its kind is a loop marker), the
    children counts of the op before it dropped. True where the top level now holds more
    kinds seen once than ``sift_at`` (``Skeletons.forget_singles`` is due). The Python
    fallback of ``_native.add_root``, which does it in one call (``least`` and ``repeat``:
    ``Rules.min_instances`` and ``REPEAT``, as ``RootCounts.add`` reads them; a test ties
    the two, op by op): the skeleton's most common step while it learns a row of names that
    do not repeat."""
    state.roots.append(node)
    state.busy += node.end - node.start
    seen = state.seen
    seen.add(node, marker)
    if state.kid_seen:
        state.kid_seen.clear()
    return seen.singles > state.sift_at


def root_op(skeletons: "Skeletons", state: ThreadSkeleton, start: float, end: float, name: str,
            least: int = _MIN_INSTANCES, repeat: int = REPEAT, marks: tuple = ()) -> Node:
    """A top-level op read into ``state``: ``skeletons.add(state, None, start, end, name)``. The
    Python fallback of ``_native.root_op``, which does it in one call where ``state`` is a
    main thread's skeleton with no Python frame waiting (the symbol, the node, ``add_root``,
    ``Skeletons.forget_singles`` where due, the push; elsewhere it calls ``add``), the op
    the detector reads most while it learns (``StructureDetector._observe_learning``): 0.75 k
    instructions an op less than ``add`` with ``add_root`` on 200 k ops drawn at random from
    40 k names (callgrind of the detector's calls alone; ``least`` and ``repeat`` as
    ``add_root`` reads them; a test ties the two, op by op). Given ``marks``
    (``NEW_FAMILY_MARKS``), the native code makes the symbol of a name that makes a family of
    its own itself, as ``Symbols.new`` makes it (``new`` took 5.8 k instructions a name of
    100 k numbered names each its own family, callgrind); here ``new`` reads them itself."""
    return skeletons.add(state, None, start, end, name)


class Skeletons:
    """Every thread's skeletons while the detector learns: one ``ThreadSkeleton`` per section
    of each thread, built op by op, and credited with the GPU work launched beneath each op
    and the Python frames that open it; and each thread's outermost ``nn.Module`` calls
    (layer evidence). Below the top level only main threads (pid == tid) keep ops, at most
    ``max_nodes`` of them, ``max_depth`` deep; a side thread keeps at most
    ``MemoryRules.side_thread_roots`` top-level ops."""
    # (slots: ``_native.learning_op_read`` reads ``latest`` and ``symbols`` at each op)
    __slots__ = ("_max_nodes", "_max_depth", "_nodes", "symbols", "names", "threads", "_reads",
                 "_sections_of", "_early_frames", "_graph_launches", "_modules", "latest")

    def __init__(self, max_nodes: int, max_depth: int):
        self._max_nodes = max_nodes
        self._max_depth = max_depth
        self._nodes = 0  # ops kept below the top level
        self.symbols = Symbols()
        #: The names of the symbols (``Symbols.names``).
        self.names: list = self.symbols.names
        #: (thread, section) -> its ``ThreadSkeleton``, in the order first read; or, for a
        #: thread of one op so far, that op alone (a tuple: ``lone``).
        self.threads: dict = {}
        #: Numbers the skeletons (and ops kept alone) as first read, down from 0 (``read``).
        self._reads = count(0, -1)
        #: thread -> [its sections' skeletons], in the order first read
        self._sections_of: dict = {}
        self._early_frames: dict = {}  # thread -> Python frames read before its first op
        self._graph_launches: dict = {}  # correlation -> ops around a graph launch
        self._modules: dict = {}  # thread -> its outermost nn.Module frames [(start, end)]
        #: The skeleton ``of`` gave last, the row's once matching (``keep_only``); None: none,
        #: or forgotten since. The next op is most often of the same one (a caller may test
        #: its ``key`` and ``section`` before it asks ``of``).
        self.latest: ThreadSkeleton | None = None

    def of(self, thread, section: int) -> ThreadSkeleton:
        """The skeleton of ``thread``'s ``section`` (new at its first op)."""
        state = self.known(thread, section)
        return self.make(thread, section) if state is None else state

    def known(self, thread, section: int) -> ThreadSkeleton | None:
        """The skeleton of ``thread``'s ``section`` (made now where the thread has read one op
        alone: ``lone``), None before its first op."""
        state = self.threads.get((thread, section))
        if state is not None:
            if state.__class__ is tuple:
                state = self._made(thread, state)
            self.latest = state
        return state

    def make(self, thread, section: int) -> ThreadSkeleton:
        """A new skeleton for ``thread``'s ``section`` (not ``known``), with the Python frames
        that wait for its first op."""
        if section and (lone := self.threads.get((thread, 0))).__class__ is tuple:
            self._made(thread, lone)  # (its sections in the order first read)
        early = self._early_frames  # (most often empty: not asked then)
        state = self.threads[(thread, section)] = self.latest = ThreadSkeleton(
            thread, _FIRST_TRY, section, early.pop(thread, _NONE_YET) if early else _NONE_YET,
            next(self._reads))
        self._sections_of.setdefault(thread, []).append(state)  # (one lookup)
        return state

    def lone(self, thread, section: int, start: float, end: float, name: str,
             main: bool) -> bool:
        """A thread's first op, at its top level (not ``known``; ``main``: of a main thread),
        kept alone where no Python frame waits for it: no skeleton, but a tuple in
        ``threads``, ``(main, False, busy, 1, read, thread, symbol, start, end)``: what
        ``close.leading_threads`` ranks a skeleton by (``busy``: the op's time; no
        ``ProfilerStep``; one op held; when first read), then the op (a thread of one op, of
        which a trace may hold a million, makes no skeleton, node nor list: with those
        ranks, 17 % fewer instructions in the split of 200 k threads of one op, 21 % of
        200 k processes, callgrind). The skeleton ``make`` and ``add`` would have made is made from it at
        the thread's next op, or whenever it is asked for (``known``, ``whole``), and reads
        the same. False where the op is not kept so (the caller makes its skeleton)."""
        if section or thread in self._sections_of or \
                (self._early_frames and thread in self._early_frames):
            return False
        self.threads[(thread, 0)] = (main, False, end - start, 1, next(self._reads), thread,
                                     self.symbols.of(name), start, end)
        return True

    def _made(self, thread, lone: tuple) -> ThreadSkeleton:
        """The skeleton of ``thread``'s op kept alone (``lone``), in its place: what ``make``
        and ``add`` would have made of that op."""
        state = self.threads[(thread, 0)] = ThreadSkeleton(thread, _FIRST_TRY, read=lone[4])
        self._sections_of[thread] = [state]
        self.add(state, None, lone[7], lone[8], "", lone[6])
        return state

    def whole(self):
        """Every skeleton (``threads``' values), the ops kept alone made skeletons first."""
        threads = self.threads
        for key, state in [item for item in threads.items() if item[1].__class__ is tuple]:
            self._made(key[0], state)
        return threads.values()

    def _sections(self, thread) -> list | tuple:
        """The skeletons of ``thread``'s sections (made where it has read one op alone)."""
        states = self._sections_of.get(thread)
        if states is None:
            lone = self.threads.get((thread, 0))
            return (self._made(thread, lone),) if lone.__class__ is tuple else ()
        return states

    def add(self, state: ThreadSkeleton, parent: Node | None, start: float, end: float,
            name: str, sym: int | None = None) -> Node:
        """The op read joins ``state`` under ``parent`` (``ThreadSkeleton.parent_at``; None:
        the top level) and is pushed on its open ops (``sym``: its symbol, where known, at
        the top level). Returns its node, or ``SKIPPED`` where it is not kept (beyond the
        skeleton's depth or size, or a side thread's top level past enough to rank it): nor
        are its children then."""
        if parent is None:
            symbols = self.symbols
            # (its symbol even if skipped)
            if sym is None:
                sym = symbols.sym_of.get(name)  # (``Symbols.of``'s common case, inline)
                if sym is None:
                    sym = symbols.new(name)
            node = Node(sym, start, end, 0)
            roots, main = state.roots, state.main
            if main or len(roots) < RULES.memory.side_thread_roots:
                # A new top-level op; the Python frames read before it that open it are its
                # opener (here, not through a method: a Python call less per op)
                if state.frames:
                    state.frames = open_pending(node, roots[-1].end if roots else float("-inf"),
                                                state.frames)
                if main:
                    if _add_root(state, node, sym in symbols.markers, _MIN_INSTANCES, REPEAT):
                        self.forget_singles(state)
                else:
                    roots.append(node)
                    state.busy += end - start
                    state.seen.add(sym)
            else:
                node = SKIPPED
        elif state.main and parent.depth + 1 < self._max_depth and \
                self._nodes < self._max_nodes:
            node = Node(self.symbols.of(name), start, end, parent.depth + 1)
            if parent.kids is None:
                parent.kids = []
            parent.kids.append(node)
            self._nodes += 1
            state.below += 1
        else:
            node = SKIPPED
        state.stack.append(node)
        return node

    def forget_singles(self, state: ThreadSkeleton) -> None:
        """``state``'s top level holds more than ``MemoryRules.single_roots`` ops of kinds
        seen once: those read before the latest ``MemoryRules.single_roots_latest`` ops are
        forgotten (a kind not seen again within so many ops of their own is taken for new
        if it recurs), but the first (the single iteration's beginning where nothing repeats), ops with
        children (containers to look inside), and the longest and the latest-ending of
        those forgotten (``verdict.dominant``: the row's longest op and its end stay what
        they were). Their kinds leave the symbol table where no op kept holds them. The
        top level becomes a new list (what was kept of the old one for the online tries
        is dropped: ``StructureDetector``)."""
        roots, seen = state.roots, state.seen
        upto = len(roots) - RULES.memory.single_roots_latest
        lo = min(state.sifted, upto)
        sifted = roots[lo:upto]
        # (no op kept below the top level: no op sifted has children)
        gone = seen.seen_once([n for n in sifted if not n.kids] if state.below else sifted)
        if gone:
            gone = _parted(gone, _dominant(gone))[1]
        dropped = set(gone)
        kept = [n for n in sifted if n not in dropped]
        state.roots = roots[:lo] + kept + roots[upto:]
        state.sifted = lo + len(kept)
        state.forgotten += len(gone)
        syms = list(map(symbol_of, gone))
        seen.forget(syms)
        self.symbols.forget(self._unused(syms, state))
        # (ops kept that are seen once, containers among them, are sifted no more)
        _sift_again(state)

    def forget_oldest(self, state: ThreadSkeleton) -> None:
        """``state``'s top level holds more than ``MemoryRules.max_roots`` ops, whatever their
        kinds, and no loop was found there (``StructureDetector._at_the_bound``: names drawn
        at random, each seen a few times): those read before the latest half are forgotten,
        containers with what they hold, but the first (the single iteration's beginning) and
        the longest and the latest-ending of them (``verdict.dominant``: the row's longest op
        and its end stay what they were). The counts of the top level lose those ops
        (``RootCounts.forget_ops``), and kinds no op kept holds leave the symbol table. The
        top level becomes a new list, as in ``forget_singles``."""
        roots = state.roots
        upto = len(roots) - RULES.memory.max_roots // 2
        old = roots[1:upto]
        kept, gone = _parted(old, _dominant(old))
        state.roots = [roots[0]] + kept + roots[upto:]
        state.sifted = len(state.roots) - len(roots) + max(state.sifted, upto)
        # (no op kept below the top level: no op forgotten has children)
        below = [kid for n in gone if n.kids for kid in _descendants(n)] if state.below else []
        self._nodes -= len(below)
        state.below -= len(below)
        state.forgotten += len(gone)
        syms = list(map(symbol_of, gone))
        seen = state.seen
        seen.forget_ops(syms)
        _sift_again(state)
        kinds = set(syms).union(map(symbol_of, below))
        self.symbols.forget(self._unused(seen.absent(kinds), state))

    def _unused(self, syms: list, state: ThreadSkeleton) -> list:
        """Of ``syms`` (kinds forgotten from ``state``'s top level), those no op kept holds:
        at no other thread's top level, nor below any top level (none, unsure, where there
        are more than ``MemoryRules.memos`` other skeletons to ask)."""
        if len(self.threads) > RULES.memory.memos + 1:  # (``state`` is one of them)
            return []
        others = [t.seen for t in self.whole() if t is not state]
        below = set()
        for skeleton in self.threads.values():
            if skeleton.below:  # (none kept below its top level: no root has children)
                for root in skeleton.roots:
                    if root.kids:
                        below.update(n.sym for n in _descendants(root))
        if not others:  # (most often: the loop thread's skeleton alone)
            return [sym for sym in syms if sym not in below] if below else syms
        return [sym for sym in syms if sym not in below and not any(sym in o for o in others)]

    def on_row(self, state: ThreadSkeleton, path: tuple, depth: int,
               transparent: bool) -> bool:
        """Once matching: is the op read at ``depth`` on the row matched (the children of the
        containers ``path``, or the top level)? Its ancestors are cut to ``depth``; where it
        is not, it is pushed as ``SKIPPED`` (inside an op of the row) or None
        (``transparent``); where it is, the caller pushes its node
        (``StructureDetector._observe_matching``)."""
        stack = state.stack
        del stack[depth:]
        for node in stack:
            if node is not None and node not in path:  # (an op's == is its identity)
                stack.append(SKIPPED)  # inside an op of the row, not on it
                return False
        if transparent:
            stack.append(None)
            return False
        return True

    def credit_launch(self, thread, ts: float, correlation, graph: bool, copy: bool) -> None:
        """A launch at ``ts``: one kernel (or a memory copy) more for the ops of ``thread``
        open then; a graph launch's ops are credited per kernel as they arrive
        (``credit_graph_kernel``)."""
        states = self._sections_of.get(thread)  # (``_sections``' common case, inline)
        if states is None:
            states = self._sections(thread)
        path = [node for state in states for node in state.path_at(ts)]  # each section
        if not path:
            return
        if graph:
            self._graph_launches[correlation] = path
        for node in path:
            node.gpu += 1
            if copy:
                node.copies += 1

    def credit_sync(self, thread, ts: float) -> None:
        """A blocking host sync at ``ts``: the ops of ``thread`` open then waited for the
        device."""
        for state in self._sections(thread):
            for node in state.path_at(ts):
                node.syncs += 1

    def credit_graph_kernel(self, correlation) -> None:
        """A kernel: one more for the ops of its graph launch, if it came from one."""
        path = self._graph_launches.get(correlation)
        if path is not None:
            for node in path:
                node.gpu += 1

    def credit_frame(self, thread, start: float, end: float, name: str) -> bool:
        """A Python frame: the opener of the main thread's top-level op it opens
        (``Node.opener``). True where it waits for that op, read later (a file in time
        order, not Kineto's sections)."""
        return self._credit(thread, lambda state: state.observe_frame(start, end, name),
                            lambda: [(start, end, name)])

    def _credit(self, thread, observe, frames) -> bool:
        """``observe(state)`` on each main-thread skeleton of ``thread``; before the thread's
        first op, ``frames()`` (as (start, end, name)) wait for it, as many as are kept. True
        where a frame waits for the op it opens."""
        states = self._sections_of.get(thread)  # (``_sections``' common case, inline)
        if states is None:
            states = self._sections(thread)
        waits = False
        for state in states:
            if state.main:
                observe(state)
                waits = waits or bool(state.frames)
        if not states and is_main_thread(*thread):  # before the thread's first op
            early = self._early_frames.setdefault(thread, [])
            early.extend(frames()[:max(RULES.memory.max_pending_frames - len(early), 0)])
            waits = True
        return waits

    def credit_frames(self, threads: list, starts: np.ndarray, ends: np.ndarray,
                      names: list) -> bool:
        """Python frames, in order (``threads``: each one's (pid, tid)), credited as
        ``credit_frame`` and kept as ``note_module`` one by one would: each thread's at
        once. True where one waits for the op it opens (``credit_frame``)."""
        waits = False
        for thread, ks in _by_thread(threads).items():
            if ks is not None:
                starts_t, ends_t = starts[ks], ends[ks]
                names_t = [names[k] for k in ks]
            else:
                starts_t, ends_t, names_t = starts, ends, names
            waits = self._credit(
                thread, lambda state: state.observe_frames(starts_t, ends_t, names_t),
                lambda: list(zip(starts_t.tolist(), ends_t.tolist(), names_t))) or waits
            for k, name in enumerate(names_t):
                if name.startswith(MODULE_FRAME_PREFIX):
                    self.note_module(thread, float(starts_t[k]), float(ends_t[k]), name)
        return waits

    def note_module(self, thread, start: float, end: float, name: str) -> None:
        """A Python frame, kept where it is an outermost ``nn.Module`` call of ``thread``."""
        if not name.startswith(MODULE_FRAME_PREFIX):
            return
        modules = self._modules.setdefault(thread, [])
        if modules and start < modules[-1][1]:
            return  # nested in the previous outermost module call
        modules.append((start, end))

    def modules_of(self, thread) -> list | None:
        """``thread``'s outermost ``nn.Module`` calls as (start, end), None if none."""
        return self._modules.get(thread)

    def sections(self, state: ThreadSkeleton) -> list:
        """Every section's skeleton of ``state``'s thread, in the order first read."""
        return [t for t in self.threads.values()
                if t.__class__ is not tuple and t.key == state.key]

    def largest_section(self, thread) -> ThreadSkeleton | None:
        """The skeleton of ``thread``'s section with most top-level ops (None if none)."""
        self._sections(thread)  # (an op kept alone: made a skeleton)
        states = [t for t in self.threads.values()
                  if t.__class__ is not tuple and t.key == thread]
        return max(states, key=lambda t: len(t.roots), default=None)

    def keep_only(self, state: ThreadSkeleton) -> None:
        """The unit is confirmed on ``state``'s row: the rest of every skeleton is dropped,
        and ``state`` keeps only its open ops (``latest`` from now on)."""
        self.threads = {(state.key, state.section): state}
        self._sections_of, self._early_frames = {}, {}
        self.latest = state
        state.roots = []
        state.busy = 0.0
        state.seen = RootCounts()
        state.kid_seen = None

    def forget(self, threads) -> None:
        """Forget every skeleton of ``threads`` (idle, and not among the loop thread's
        candidates: ``StructureDetector.forget_threads``), and what waits for their ops."""
        skeletons, sections_of = self.threads, self._sections_of
        for thread in threads:
            states = sections_of.pop(thread, None)
            if states is None:
                skeletons.pop((thread, 0), None)  # its op kept alone, if any (``lone``)
            else:
                for state in states:
                    del skeletons[(thread, state.section)]
        latest = self.latest
        if latest is not None and (latest.key, latest.section) not in skeletons:
            self.latest = None
        for waiting in (self._early_frames, self._modules):  # most often empty
            if waiting:
                for thread in threads:
                    waiting.pop(thread, None)

    def drop(self) -> None:
        """The unit is decided: no skeleton is needed any more."""
        self.threads = {}
        self._sections_of, self._early_frames = {}, {}
        self.latest = None


class RowExtremes:
    """The latest end and the longest op (the first of the longest) of rows that only grow
    (a skeleton's rows), for ``verdict.dominant``: the online tries ask it of the same few
    rows at each op read, and each row's ops added since the last time are read, no more.
    At most ``MemoryRules.memos`` rows are remembered (the least recently asked goes)."""

    def __init__(self):
        self._rows: list = []  # [row, ops read, latest end, longest op], latest asked last

    def of(self, row: list) -> tuple:
        """(latest end, longest op) of ``row`` (not empty)."""
        rows = self._rows
        for i, kept in enumerate(rows):
            if kept[0] is row:
                rows.append(rows.pop(i))
                break
        else:
            kept = [row, 1, row[0].end, row[0]]
            rows.append(kept)
            del rows[:-RULES.memory.memos]
        if kept[1] < len(row):
            _, read, latest, top = kept
            longest = top.end - top.start
            for node in row[read:]:
                if node.end > latest:
                    latest = node.end
                if node.end - node.start > longest:
                    top, longest = node, node.end - node.start
            kept[1:] = len(row), latest, top
        return kept[2], kept[3]

    def clear(self) -> None:
        """Forget every row (the unit is decided: no more online tries)."""
        self._rows = []


class Symbols:
    """Op name -> symbol (digits folded into one family); ``names[sym]`` is the family.
    A name without digits is its own family: one string and one entry for both (a million
    unique names are a million strings in one table, not two million in two), and a new one
    costs a search for a digit, not a fold. Families and names with digits share one table
    (a family has no digits: no name with digits is one), so any name seen is found with one
    lookup. A name with digits joins the table once its family is known: at its second
    sighting, or at its first where another name made the family (a name that makes its
    family is most often seen once: 200 k numbered names each its own family are 200 k
    entries, not 400 k, and the table is never rebuilt for them: 2.4 % fewer instructions
    in their split, callgrind). Whether a family is a loop marker is asked once, when it is
    new (``markers``). Of names with digits at most ``MemoryRules.digit_names_remembered``
    are in the table at once (``_only_families``)."""

    def __init__(self):
        #: A family, or a name with digits -> its symbol (a name without digits is found
        #: as its family).
        self.sym_of: dict = {}
        self.names: list = []
        #: The symbols whose family is a loop marker (``LOOP_MARKER_PATTERN``).
        self.markers: set = set()
        self._digit_names = 0  # names with digits in the table

    def of(self, name: str) -> int:
        """The symbol of ``name``."""
        sym = self.sym_of.get(name)
        return self.new(name) if sym is None else sym

    def new(self, name: str) -> int:
        """The symbol of ``name``, not in ``sym_of``: its family (itself where it has no digit),
        found or made here."""
        sym_of = self.sym_of
        family = _family(name)
        if family is not name:  # it has digits: its family may be known
            sym = sym_of.get(family)
            if sym is not None:  # a family known: the name joins the table
                sym_of[name] = sym
                self._digit_names += 1
                if self._digit_names > RULES.memory.digit_names_remembered:
                    self._only_families()
                return sym
        # a family not seen (or forgotten) before
        sym = len(self.names)
        self.names.append(family)
        sym_of[family] = sym
        # (each family is asked once here: through ``loop_marker``'s cache, a million
        # names each seen once would push out the few that the online tries ask again
        # and again; one too short to be a marker is not asked: ``marker_match``'s first
        # test, inline, 0.4 k instructions less for each of 200 k unique names, callgrind)
        if len(family) >= LOOP_MARKER_SHORTEST and marker_match(family):
            self.markers.add(sym)
        return sym

    def _only_families(self) -> None:
        """The table keeps its families, and no name with digits (each is folded again
        when it next comes)."""
        names = self.names
        self.sym_of = {key: sym for key, sym in self.sym_of.items() if names[sym] is key}
        self._digit_names = 0

    def forget(self, syms: list) -> None:
        """The kinds ``syms`` are held by no op kept: their names go (a name read again is
        a new kind, numbered anew), and so do the names with digits in the table (they may
        be of those kinds: the table is not searched by kind)."""
        names, sym_of, markers = self.names, self.sym_of, self.markers
        for sym in syms:
            del sym_of[names[sym]]
            names[sym] = None
        if markers:  # (most often none: not asked of each kind)
            markers.difference_update(syms)
        if syms and self._digit_names:
            self._only_families()


def family(name: str) -> str:
    """``name`` with each run of digits folded into ``N`` (``_DIGITS``); ``name`` itself where
    it holds no digit (``Symbols.of`` tells a new family by identity). The Python fallback of
    ``_native.family`` (a test ties the two), which answers in one call: a new name without
    digits 0.5 k instructions less, a numbered one 1 k (callgrind)."""
    if name and name[-1] in _ASCII_DIGITS:
        # (ends with a run of ASCII digits, ``layer_12``, the most common: where the rest holds
        # no digit, the run is folded without ``_DIGITS.sub``, nor a match object made: 3.2 k
        # instructions, not 4.5 k as through the first digit's match, callgrind)
        head = name.rstrip(_ASCII_DIGITS)
        return head + "N" if _DIGIT.search(head) is None else _DIGITS.sub("N", name)
    return name if _DIGIT.search(name) is None else _DIGITS.sub("N", name)


#: A name's family, in native code where it is built (``family``).
_family = family if _native is None else _native.family
#: A main thread's new top-level op, added in native code where it is built (``add_root``).
_add_root = add_root if _native is None else _native.add_root
#: A top-level op read, in native code where it is built (``root_op``).
top_level_op = root_op if _native is None else _native.root_op
#: What ``top_level_op`` tells a new family's loop marker by (``Symbols.new``'s test), its
#: ``marks``.
NEW_FAMILY_MARKS = (LOOP_MARKER_SHORTEST, LOOP_MARKER_WORDS, marker_match)

#: Times beyond this may not be exact in float64 (an integer ``ts``): compared one by one.
_EXACT_IN_FLOAT = 2.0 ** 53


def _by_thread(threads: list) -> dict:
    """Thread -> the indices of its frames in ``threads`` (None: all of them)."""
    if not threads or threads.count(threads[0]) == len(threads):
        return {threads[0]: None} if threads else {}
    indices: dict = {}
    for k, thread in enumerate(threads):
        indices.setdefault(thread, []).append(k)
    return indices


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
    if node.opener is None:  # most ops (and every op of a trace without frames)
        return None
    return min((f for f in node.opener if f[1] <= ceiling), default=None)


#: A node's start, its end and its symbol: keys (of ``bisect``, ``sort``, ``max``, ``map``)
#: that are attribute getters, which those call without a Python frame (``path_at`` bisects
#: at every launch, ``Skeletons.forget_singles`` takes the latest end of thousands of ops).
start_of = attrgetter("start")
end_of = attrgetter("end")
symbol_of = attrgetter("sym")


def _dominant(nodes: list) -> set:
    """Of top-level ops about to be forgotten (not empty), those kept (``verdict.dominant``:
    the row's longest op and its latest end stay what they were)."""
    return {_longest(nodes), max(nodes, key=end_of)}


def _parted(nodes: list, keep: set) -> tuple:
    """(those of ``nodes`` in ``keep``, a few of them, in their order; the others, in theirs),
    cut around the places of the few (``list.index``: no Python step for each of the
    thousands of ops that ``forget_oldest`` and ``forget_singles`` forget at a time)."""
    at = sorted(map(nodes.index, keep))
    others, lo = [], 0
    for i in at:
        others += nodes[lo:i]
        lo = i + 1
    others += nodes[lo:]
    return [nodes[i] for i in at], others


def _sift_again(state: ThreadSkeleton) -> None:
    """``forget_singles`` sifts ``state``'s top level again once this many more of its kinds
    are seen once."""
    state.sift_at = max(RULES.memory.single_roots,
                        state.seen.singles + RULES.memory.single_roots_latest)


def _longest(nodes: list) -> Node:
    """The first of the longest of ``nodes`` (not empty), as ``max`` keyed by each one's
    duration finds it, without a Python call per node (``forget_singles`` asks it of some
    30 k ops at a time: 0.8 k instructions an op through a key function)."""
    durations = list(map(sub, map(end_of, nodes), map(start_of, nodes)))
    return nodes[durations.index(max(durations))]


def _descendants(node: Node):
    """The ops below ``node``, at every depth."""
    stack = list(node.kids or ())
    while stack:
        n = stack.pop()
        yield n
        if n.kids:
            stack.extend(n.kids)


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


def before_containers(roots: list, path: list) -> list:
    """The ops before each container of ``path`` (the open ops around a row, outermost
    first, the first on ``roots``) on its own row, in time order (the outermost row's
    first)."""
    rows = [roots] + [c.kids for c in path[:-1]]
    before = []
    for row, container in zip(rows, path):
        before.extend(row[:next(i for i, node in enumerate(row) if node is container)])
    return before


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
