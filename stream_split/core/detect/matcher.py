"""The online root matcher: after the unit is confirmed, each new op of its row is matched
against it, and each instance's first op is a boundary the moment it is read.

It keeps the ops of the current instance only (its shape), so memory does not grow with the
trace (``rules.OnlineRules`` bounds what it keeps).
"""
from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import replace

from stream_split.core.coded import CodedColumn
from stream_split.core.detect.base import FoundBoundary, RetractLast, found_boundary
from stream_split.core.detect.evidence import at_outermost_frame
from stream_split.core.detect.rules import RULES
from stream_split.core.detect.search import (
    OPENS_AFTER_SYNC, Unit, end_of_last, loop_edge_in, shape_and_similarity, time_reference,
    upper_median)
from stream_split.core.detect.skeleton import Node, open_pending, outermost_opener
from stream_split.native import NATIVE as _native  # (None: the Python fallbacks)
from stream_split.trace_format import BLOCKING_SYNC_NAMES


def _start_of_entry(entry: tuple) -> float:
    return entry[0]


class RootMatcher:
    """After the unit is confirmed at the top of the loop thread (or among a container's
    children: then the ops whose only open ancestors are those containers, and after them the
    top-level ops): each new op of that row is matched against the unit. Keeps the ops of the
    current instance only (its shape), so memory does not grow with the trace.

    - The **first op** of the unit (``trigger``: the op that opens every instance learned and
      occurs nowhere else in them) is a boundary the moment it is read. The unit's anchor,
      read later, confirms it; if the instance turns out to begin later (ops that are not
      head stand between the trigger and the anchor) the boundary moves there, and if the
      next trigger comes with no anchor in between, the boundary is retracted (the op
      opened nothing: the ops since belong to the instance before). A trigger left without
      its anchor at the end is retracted too.
    - Without a trigger (the unit opens with its anchor, or with ops that vary), the anchor
      is a boundary at once, at the first of the head ops just before it (``Unit.head``).
    - Where the loop's edge opens the unit (``search._loop_edge``), a trigger after an idle
      gap wider than any before the anchor keeps its boundary, whatever small ops noise put
      between them (``_at_loop_edge``).
    - Inside containers, the unit's instances at shallower levels read before them
      (``minor``: a warm-up step before the engine's loop) are instances too, as at close.
    """
    # (slots: each op reads and sets a dozen of them, none looked up in a dict)
    __slots__ = ("thread", "opening", "at_frames", "names", "pattern", "anchor", "head",
                 "seen", "unit", "shortest", "shapes", "similarity", "_measured",
                 "_measured_one", "_alike", "trigger", "tentative", "previous", "after_sync",
                 "small", "syncs", "starts", "frames", "recent", "found", "waiting", "current")

    def __init__(self, thread_key, row: list, unit: Unit, names: list, opening=(),
                 minor=()):
        self.thread = thread_key
        #: (start, name) of the ops of the thread's other sections that open instances, in
        #: time order (``close.section_openers``).
        self.opening = list(opening)
        self.at_frames = 0  # boundaries put at the outermost Python frame (evidence)
        self.names = names
        self.pattern = unit.pattern
        self.anchor = unit.anchor
        self.head = unit.head - {unit.anchor}
        pos = unit.positions
        self.seen = {n.sym for n in row[pos[0]:pos[-1]]}
        self.unit = unit
        self.shortest = min((b - a for a, b in zip(pos, pos[1:])), default=len(self.pattern))
        instances = [row[a:b] for a, b in zip(pos, pos[1:])]
        if instances:  # later ops carry no GPU work: compare by time, to the likest instance
            likest = max(range(len(instances)), key=unit.similarity.__getitem__)
            unit = self.unit = replace(unit, reference=time_reference(instances[likest]))
        #: Each instance's shape and its similarity to the unit (evidence, a float): a byte
        #: or two an instance each (``CodedColumn``: a loop of 1 M one-op iterations is
        #: matched online).
        self.shapes = CodedColumn()
        self.similarity = CodedColumn()
        self._measured = (None, None)  # the last instance measured: (its key, its measure)
        #: Where that instance is one op: its key's one entry (symbol, time, GPU work), else
        #: None (``push`` compares a one-op instance with it field by field, no key made).
        self._measured_one = None
        self._alike = 0  # instances measured alike it since, not appended yet
        for ops in instances:
            self._measure(ops)
        opener = row[pos[0]].sym
        self.trigger = opener if opener != self.anchor and opener in self.head and all(
            ops[0].sym == opener and sum(1 for n in ops if n.sym == opener) == 1
            for ops in instances) else None
        self.tentative = False  # the latest boundary came from a trigger, no anchor yet
        self.previous: list = []  # the instance before a tentative boundary (to merge back)
        # After a host sync (``search._begin_at``): the small ops between the previous sync
        # and the head open the instance too; a sync or a big op stops the walk back.
        self.after_sync = unit.opening == OPENS_AFTER_SYNC
        self.small = RULES.small_op_share * upper_median(
            (sum(n.end - n.start for n in ops) for ops in instances), 0.0)
        self.syncs = {sym for sym, name in enumerate(names) if name in BLOCKING_SYNC_NAMES}
        #: The latest instances' first ops, ``OnlineRules.typical_of`` of them kept (the
        #: oldest go as new ones come: a ``deque``'s bound, no list trimmed an instance).
        self.starts = deque((row[p] for p in pos), maxlen=RULES.online.typical_of)
        # Python frames read before the op they open (a file in time order): pending until
        # the next op of the row is read (``skeleton.open_pending``).
        self.frames: list = []
        self.recent = None  # the row's latest ops, once replayed (``_replay``)
        self.found = self._minor_roots(minor, row[pos[0]].start) + self._replay(row, pos)

    def _minor_roots(self, minor, first: float) -> list:
        """The boundaries of the instances at shallower levels read before the row's first
        one (``minor``: a warm-up step before the loop's container, failure mode 3), as the
        close path finds them (``close._instance_starts``)."""
        found = []
        self._append_alike()
        for node, after in zip(minor, [n.start for n in minor[1:]] + [first]):
            shape, sim = shape_and_similarity([node], self.unit)
            self.shapes.insert(len(found), shape)
            self.similarity.insert(len(found), float(sim))
            found.append(self._boundary(node, ceiling=after))
        return found

    def _replay(self, row: list, pos: list) -> list:
        """The boundaries of the instances learned (at ``pos`` in ``row``), and of those begun
        in the ops read after them."""
        firsts = [row[p] for p in pos]  # (every one: ``starts`` keeps the latest only)
        ceilings = [n.start for n in firsts[1:]] + [float("inf")]
        found = []
        for k, (n, c) in enumerate(zip(firsts, ceilings)):
            self.recent = deque(row[pos[k - 1] if k else 0:pos[k]],
                                maxlen=RULES.online.recent_ops)
            floor = firsts[k - 1].start if k else float("-inf")
            anchor = next((m for m in row[pos[k]:] if m.sym == self.anchor), n)
            found.append(self._boundary(n, ceiling=c, floor=floor, upto=anchor.start))
        self.recent = deque(row[pos[-1]:], maxlen=RULES.online.recent_ops)
        # The last instance so far, up to its anchor; the ops read after it (the unit may
        # have been found from its middle ops) are matched like any new op, so no instance
        # begun meanwhile is missed.
        cut = next((q for q in range(pos[-1], len(row)) if row[q].sym == self.anchor),
                   None)
        self.waiting = cut is None  # the last instance's own anchor is still to come
        self.current = list(row[pos[-1]:(len(row) if cut is None else cut + 1)])
        for node in row[len(self.current) + pos[-1]:]:
            found.extend(self.push(node))
        return found

    def _measure(self, instance: list, replace_last: bool = False) -> bool:
        """Append (or replace the last of) the instance's shape and similarity. Whether it
        is like the one measured before (the same symbols, durations and kernels: all that
        ``shape_and_similarity`` reads of it): it measures the same then (a loop of tiny
        identical iterations is measured once, not once an iteration), and its symbols are
        ``seen`` already (each instance measured is, but at ``finish``)."""
        # (the very same float object again: ``CodedColumn`` codes it without a look-up)
        if len(instance) == 1:  # (a loop of one-op instances: no list comprehension)
            n = instance[0]
            key = [(n.sym, n.end - n.start, n.gpu)]
        else:
            key = [(n.sym, n.end - n.start, n.gpu) for n in instance]
        alike = key == self._measured[0]
        if alike and not replace_last:
            self._alike += 1  # appended with the others alike (``_append_alike``)
            return True
        self._append_alike()
        if alike:
            shape, sim = self._measured[1]
        else:
            shape, sim = shape_and_similarity(instance, self.unit)
            sim = float(sim)
            self._measured = key, (shape, sim)
            self._measured_one = key[0] if len(key) == 1 else None
        if replace_last:
            self.shapes[-1], self.similarity[-1] = shape, sim
        else:
            self.shapes.append(shape)
            self.similarity.append(sim)
        return alike

    def _append_alike(self) -> None:
        """Append the shape and similarity of the instances measured alike the one measured
        last, not appended yet (``_alike``), a column at a time (``CodedColumn.append_many``:
        a loop of 1 M one-op iterations, two calls of Python fewer an instance). Before each
        read or change of ``shapes`` and ``similarity`` but an append alike."""
        if self._alike:
            shape, sim = self._measured[1]
            self.shapes.append_many(shape, self._alike)
            self.similarity.append_many(sim, self._alike)
            self._alike = 0

    @property
    def measured(self) -> int:
        """The instances measured so far (the length of ``shapes`` once appended)."""
        return len(self.shapes) + self._alike

    def _begin(self, instance: list, first: Node) -> None:
        """An instance ends (``instance``, its ops) and the next begins at ``first``."""
        if len(instance) < self.shortest:
            self.shortest = len(instance)
        if not self._measure(instance):  # (alike the one before: no symbol new to ``seen``)
            self.seen.update([n.sym for n in instance])
        self.starts.append(first)

    def _undo(self) -> list:
        """Withdraw the latest (tentative) boundary: its ops go back to the instance before."""
        self._append_alike()
        self.shapes.pop()
        self.similarity.pop()
        self.starts.pop()
        merged = self.previous + self.current
        self.previous, self.tentative = [], False
        return merged

    def push(self, node: Node) -> tuple:
        if node.sym == self.anchor and \
                (found := _anchor_after_alike(self, node, found_boundary)) is not None:
            return found  # (a loop of one-op instances: in one call)
        if self.frames:  # ``recent[-1]``: the op before ``node`` on the row
            self.frames = open_pending(node, self.recent[-1].end, self.frames)
        self.recent.append(node)
        current = self.current
        sym = node.sym
        if sym == self.anchor and len(current) == 1 and not self.waiting and \
                not self.tentative and sym != self.trigger:
            # An anchor right after the one op of the instance before (a loop of one-op
            # instances, ``anchor_after_alike`` declined it): a boundary at it, as below (no
            # head op before it to walk back over, nothing tentative), without the lists'
            # copies
            self._begin(current, node)
            self.current = [node]
            return (self._boundary(node),)
        current.append(node)
        if sym == self.trigger and not self.waiting:
            out = []
            if self.tentative:  # the previous trigger saw no anchor: it opened nothing
                out.append(RetractLast(f"no {self.names[self.anchor]} followed it"))
                current = self._undo()
            instance = current[:-1]
            self._begin(instance, node)
            self.previous, self.current, self.tentative = instance, [node], True
            out.append(self._boundary(node))
            return tuple(out)
        if sym != self.anchor or self.waiting:
            self.waiting = self.waiting and sym != self.anchor
            keep = RULES.online.max_instance_ops
            if len(current) > keep:  # a runaway instance: keep its tail only
                del current[:len(current) - keep]
            return ()
        j = len(current) - 1
        lowest = 0 if self.tentative else 1
        while j > lowest and current[j - 1].sym in self.head:
            j -= 1
        while self.after_sync and j > lowest and self._opens_after_sync(current[j - 1]):
            j -= 1
        if self.tentative:
            return self._after_trigger(current, j)
        self._begin(current[:j], current[j])
        self.current = current[j:]
        return (self._boundary(current[j]),)

    def _after_trigger(self, current: list, j: int) -> tuple:
        """The anchor read after a trigger's tentative boundary (``current``: the ops since
        the trigger, the anchor last; the instance begins at ``current[j]``): it confirms the
        boundary, or moves it later."""
        self.tentative = False
        if j == 0 or self._at_loop_edge(current):
            return ()
        instance = self.previous + current[:j]
        self._measure(instance, replace_last=True)
        self.seen.update(n.sym for n in current[:j])
        first = self.current[j]
        self.starts[-1] = first
        self.current = current[j:]
        return (self._boundary(first, moves_last=True,
                               why="the instance begins after the op that triggered it"),)

    def _at_loop_edge(self, ops: list) -> bool:
        """Where the loop's edge opens the unit (``search._fetch_edge``: the step's own first
        ops before its fetch): is the loop's edge (``search.loop_edge_in``) before ``ops``,
        from the trigger to the anchor, and are those before the anchor small? Then the
        trigger opened the step, whatever small ops noise put before the fetch."""
        if self.unit.fetch is None or not self.previous:
            return False
        return loop_edge_in([self.previous[-1], *ops], 1, len(ops)) == 1 and all(
            n.end - n.start <= self.small for n in ops[:-1])

    def _boundary(self, first: Node, ceiling: float = float("inf"),
                  floor: float | None = None, upto: float | None = None,
                  moves_last: bool = False, why: str = "") -> FoundBoundary:
        """The boundary of an instance whose first op is ``first``: at the outermost Python
        frame that opens it, if one was
        read before it (the boundary at the outermost frame of the step, as
        ``close.at_outermost_frames`` at close), or at the op of the thread's
        other sections that opens it (``opening``: a ``zero_grad`` annotation before the
        step's first cpu_op, as ``close.align_sections`` at close), whichever
        is first. ``moves_last`` and ``why``: ``FoundBoundary``'s (a revision)."""
        start, name = first.start, self.names[first.sym]
        # (``outermost_opener``'s common case, inline: no frame opens most ops)
        frame = None if first.opener is None else outermost_opener(first, ceiling)
        recent = self.recent
        if recent and recent[-1] is first and len(recent) > 1:
            opens_after = recent[-2].end  # (``_gap_before``'s common case, inline)
        else:
            opens_after = self._gap_before(first)
        if frame is not None:
            start, name, opens_after = frame[0], frame[2], None
            self.at_frames += 1
        opening = self.opening
        if opening:
            # The opening ops after the previous instance's first op (it lies inside the
            # ``DistributedDataParallel.forward`` that opened it): the first of them with
            # little work of this row after it (noise ops inserted after ``zero_grad``,
            # not the previous instance's own ops).
            if floor is None:
                floor = self.starts[-2].start if len(self.starts) > 1 else float("-inf")
            if upto is None:
                upto = self.recent[-1].start  # the op being read: the anchor (or trigger)
            del opening[:bisect_right(opening, floor, key=_start_of_entry)]
            for o_start, o_name in opening:
                if o_start >= max(start, upto):
                    break
                # Before the first op, with little work of this row after it; or between
                # the first op and the anchor: the ops of the head before it (inserted after
                # the previous step's optimizer) are the previous instance's.
                if o_start > first.start or self._little_work_after(o_start, first.start):
                    start, name = o_start, o_name
                    break
        return found_boundary(start, self.thread, name, moves_last, why, opens_after)

    def _gap_before(self, first: Node) -> float | None:
        """Where the gap before ``first`` begins on the row: the end of the op read before
        it (``recent``; -inf where the row has none), in which the Python frames that open
        its instance begin when a file brings them later (``core.owners.StepOpeners``).
        None where the ops kept no longer reach back to it."""
        recent = self.recent
        if recent is None:  # the minor roots before the row: no row read before them
            return None
        for i in range(len(recent) - 1, -1, -1):
            node = recent[i]
            if node is first:
                if i:
                    return recent[i - 1].end
                return None if len(recent) == recent.maxlen else float("-inf")
            if node.start < first.start:  # ``first`` not kept yet: the op read before it
                return node.end
        return None if recent else float("-inf")

    def _little_work_after(self, lo: float, hi: float) -> bool:
        """Do the ops of this row read lately (``recent``) that begin in [lo, hi) do
        little work (a small op's, ``small``)? Not when the ops kept do not reach back to
        ``lo``."""
        recent = self.recent
        if len(recent) == recent.maxlen and recent[0].start > lo:
            return False
        return sum(n.end - n.start for n in recent if lo <= n.start < hi) <= self.small

    def frames_note(self) -> str:
        """What the boundaries at the outermost frame did online, for the evidence."""
        if not self.at_frames:
            return ""
        return at_outermost_frame("", f"{self.at_frames} boundaries")

    def observe_frame(self, start: float, end: float, name: str) -> None:
        """A Python frame of the loop thread, read before the op it may open."""
        if start > self.recent[-1].start and len(self.frames) < RULES.memory.max_pending_frames:
            self.frames.append((start, end, name))

    def _opens_after_sync(self, node: Node) -> bool:
        """A small op that is no sync, or an op of the head: between the previous sync and
        the anchor, it opens the instance."""
        return node.sym in self.head or (
            node.end - node.start <= self.small and node.sym not in self.syncs)

    def finish(self) -> tuple[list, float, list]:
        """Shapes of every instance, where the last one ends (``last_instance_end``), and the
        revision of a trigger still waiting for its anchor."""
        revisions = []
        if self.tentative:
            revisions.append(RetractLast(f"the input ended before a "
                                         f"{self.names[self.anchor]} followed it"))
            self.current = self._undo()
        last = self.current
        width = len(self.pattern)
        self._measure(last[:width])
        self._append_alike()
        starts = [n.start for n in self.starts]
        end = end_of_last(last, [self.shortest], self.seen, starts)
        frame = outermost_opener(self.starts[-1])  # it holds the whole step, as at close
        if frame is not None and frame[0] <= self.starts[-1].start:
            end = max(end, frame[1])
        return self.shapes, end, revisions


def takes_anchor(matcher: RootMatcher, node: Node) -> bool:
    """Whether ``anchor_after_alike`` takes ``node`` on ``matcher`` (see there). Reads,
    changes nothing."""
    current = matcher.current
    sym = node.sym
    if matcher.frames or not sym == matcher.anchor or len(current) != 1 or \
            matcher.waiting or matcher.tentative or sym == matcher.trigger:
        return False
    ended, one = current[0], matcher._measured_one
    if one is None or not (ended.sym == one[0] and ended.end - ended.start == one[1] and
                           ended.gpu == one[2] and matcher.shortest == 1):
        return False
    return node.opener is None and not matcher.opening and bool(matcher.recent)


def anchor_after_alike(matcher: RootMatcher, node: Node, made=found_boundary) -> tuple | None:
    """``RootMatcher.push``'s case of a loop of one-op instances, in one call: ``node`` is the
    unit's anchor (no trigger), read right after the one op of the instance before, which
    measures alike the one measured before it (field by field, as ``_measure`` compares
    their keys; the shortest instance one op: its symbol ``seen`` already); no Python frame
    waits, nothing is tentative, no op of another section opens it, an op was read before
    it. Then it is counted alike (``_append_alike`` appends it later), kept as the latest
    instance's first op, op read and instance (that instance's list, held by nothing else,
    takes it in place), and its boundary, made by ``made`` (``found_boundary``: ``_boundary``'s
    common case) is returned; else None, nothing done (``push`` reads it). The fallback of
    ``_native.anchor_after_alike`` (a test ties the two)."""
    if not takes_anchor(matcher, node):
        return None
    current, recent = matcher.current, matcher.recent
    opens_after = recent[-1].end  # the op read before it
    recent.append(node)
    matcher._alike += 1
    matcher.starts.append(node)
    current[0] = node
    return (made(node.start, matcher.thread, matcher.names[node.sym], False, "",
                 opens_after),)


#: ``anchor_after_alike`` in native code where it is built.
_anchor_after_alike = anchor_after_alike if _native is None else _native.anchor_after_alike
