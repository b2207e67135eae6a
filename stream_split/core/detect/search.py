"""Detect stage, the pure part: which repeating unit cuts a sequence of sibling ops.

Theory of operation
-------------------
A *row* is a list of sibling ops (the top of a thread, or the children of a container), each
a node with a symbol (its name, digits folded), start, end and the kernels launched beneath it.
``find_unit(row)`` answers which unit of work repeats there, or None. No I/O, no state: the
detector (``structure.py``) decides where to look and what a found unit means.

1. **Candidates.** Every symbol that occurs at least twice is a candidate *anchor*; its
   occurrences cut the row into *instances*.
2. **Tolerance.** Real steps are never the same twice: small ops come and go, a repeated small
   op varies in count, a sync appears now and then. Instances are compared by what their ops
   *cost*, not op for op: each instance is a bag of symbols weighted by its share of the
   instance's time, of its GPU work (kernels launched beneath) and, a little, of its ops. The
   similarity of an instance to a representative (the instance, among a few tried, that
   explains the most others) is the weighted Jaccard index of the two bags (sum of minima
   over sum of maxima), and at most a size factor that falls when the instance does far more
   or less work (two steps merged where the anchor was missing): 1.0 for the same work, low
   for another stage or model. An instance is *like* the unit when its similarity reaches
   ``Rules.like``. A missing ``aten::zeros`` costs its share of the step's time: next to
   nothing. An unlike instance that spends its time in ops of its own and launches little is
   an idle cycle: it counts neither for nor against the unit.
3. **Qualifying.** A candidate qualifies when enough instances are like the unit, few are
   fragments (the anchor also occurring inside the unit), its instances cover most of the
   row's work (GPU work where known, else time) and mean similarity times coverage is high
   enough. Two instances are enough only when they are nearly alike and together hold nearly
   all of the row's work (``Rules.two_*``): two steps of a ``schedule(active=2)`` profile,
   not two text-encoder calls.
4. **Choosing** (``_choose``). The coarsest qualifying unit wins (fewest instances: an eval
   pass every few steps is part of the step), except that:
   - a coarse unit with far fewer instances than a finer unit whose instances are whole steps
     (like it or idle, covering nearly all the work, none a layer-like stranger or a piece of
     a step) is a super-period (four steps plus an eval pass) and drops out;
   - of the cuts of about the same count (rotations of one loop, or a cut that lost an
     instance where its anchor was dropped), the clearly more regular one wins (summed
     similarity; each extra instance must pay for itself), else the fewer, then the earliest;
     the cuts near the winner are compared too (the coarsest cut may have lost a third of
     its instances);
   - after the opening: a cut into the same instances plus idle cycles (the loop head starts
     both: failure mode 2) wins over the one that swallows the idle cycles.
5. **Opening.** Where the loop begins among the unit's ops (``_opening``): before the op that
   fetches the next input when there is one, moved back over the step's own first ops when
   the loop's edge lies before them (``_fetch_edge``: the loop's edge among the small ops
   before each fetch, the kinds after it recurring there: the profiler's step bookkeeping);
   else right after the blocking host sync that ends
   the previous instance, with the small ops before the step's first spine op (never between a
   step's last op and its own sync); else, where the instances hold the loop's own
   once-per-turn ops (a loop marker: ``Optimizer.step``, ``zero_grad``), at the loop's edge:
   the loop's edge among the ops after the op that ends a turn (``_at_loop_edge``: a batch
   of any shape, made before ``zero_grad``, is its step's). The loop's edge is one rule in
   one place (``loop_edge_in``: the op after the widest idle gap of a window, the later of
   equals), for both openings and for the matcher online; each opening's evidence only says
   where the window lies; else at the anchor, extended to the left over the ops that
   precede it in every instance, then over those found before it in most instances (the
   *head*: the first ops of the step, each of which may be missing in a few instances). Noise
   only ever drops small ops, so a small head op is counted among the instances that show
   any head and a big one among all; the first instance votes too; a run of inserted tiny
   ops does not hide a head op behind it. A sync opens the loop only when it closes
   most instances, and the walk to the loop's first op takes each op as often as the
   representative has it before its anchor (a prologue op of the same kind stays out).
   A small op the vote cannot place (seen before one instance only) opens that instance when
   it lies after the loop's edge, the wider idle gap (``_after_loop_edge``), and so does a
   run of the first op's kind (one ``randn`` per request: ``_run_to_edge``).
6. **Turns that only waited** (``_waits_apart``, rows with no GPU work): a server's idle poll
   (a sleep, then one heartbeat op) shares no op with a busy turn; after a wait far wider than
   the loop's edge, ops of kinds the turns' own work never has, doing little, are a turn of
   their own.
7. **Turns that wait for the device** (``_turns_apart``, at the end of the input, GPU work
   known): a GPU server's turns take different paths (decode, prefill, mixed), so no anchor
   cuts every turn, but each ends with a blocking host sync beneath an op (``Node.syncs``)
   and the loop's own Python after it: where most instances of the unit begin after such a
   wait and a gap as wide as theirs, and such edges also lie inside instances, every one
   begins a turn.

Dynamic shapes (rows with no GPU work): time alone weighs ops there, and a step's time follows
its batch and sequence (50x apart), so by cost no two steps are alike. Ops that run once per
turn are the evidence then: a cut whose inner instances (three at least) each hold the spine,
a loop marker in it, counts each of them at least ``Rules.like`` for its quality
(``Unit.turn_score``), and of two cuts of one loop the one whose instances each hold a marker
once wins over one with instances that hold two turns (``Unit.merged``: an anchor dropped).

Also here, shared by both decision paths: where the last instance ends
(``last_instance_end``) and the kind of each cycle (``cycle_kinds``).

Cost. Online the same row is searched again each time it grows by a few ops: every anchor's
cut, up to ``Rules.medoid_trials`` representatives, every instance compared to each. A
``SearchMemo`` carries what a search computed to the next search on the same row (a cut's
instances but the last, what each search reads of them, and their likeness to each
representative, do not change as the row grows), computed by the same functions on the same
ops: the answers are the same with or without it. One search tries anchors only until their
cuts have covered ``search_cap`` ops (``search_work``, at most ``Rules.search_work_ratio``
per op of the row: far more than any real row needs; a row of thousands of names, each seen
a few times, would cost its ops times its names), and the online tries search only as often
as the ops read pay for (``SearchBudget``). Within a search, a cut is weighed only as far as
it can still qualify: its instances' bags are made once its count and coverage let it
(``_may_qualify``), each representative's comparisons stop once the instances read rule the
cut out whatever the others are (``_Hope``), and what only a candidate reads (its shapes,
the ops that differ most) is found for candidates alone: the same answers, less work. A
search that holds nothing of an earlier one (at close, and the first online try on a row)
rules out first, on bounds of every instance's similarity to each representative it would
try, computed at once in numpy, the cuts that no representative can make qualify
(``_ruled_out``): of 82 cuts of 2,000 ops drawn from 400 names, 78 go before their bags are
made. A caller that has no use for a unit of fewer than a few exact instances
(``find_unit``'s ``least_exact``: the online tries on a row that only exact instances can
confirm) has first evaluated only the cuts whose instances' ops could make that many
(``_most_exact``), and the other cuts and the choice only where one of those is a
candidate; the opening only where the unit it would open may have them
(``_may_end_exact``). Only the symbols that repeat are candidate anchors, and only theirs
are listed (``_Positions``): a row of a million names each seen once lists none.

Every threshold lives in ``rules.Rules`` with the reason for its value.
"""
from __future__ import annotations

import math
import re
from array import array
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import lru_cache, reduce
from itertools import chain, islice, repeat
from operator import add, attrgetter

import numpy as np

from stream_split.native import NATIVE as _native  # (None: the Python function)
from stream_split.core.coded import CodedList
from stream_split.core.detect.rules import (
    BOUND_CELLS, BOUND_MARGIN, BOUND_OPS, HOPE_MARGIN, HOPE_ROUNDING, HOPE_RUNS, REPEAT, RULES, Rules)
from stream_split.core.records import KIND_IDLE, KIND_ITERATION
from stream_split.trace_format import (BLOCKING_SYNC_NAMES, INPUT_FETCH_PATTERN,
                                       LOOP_MARKER_PATTERN, LOOP_MARKER_SHORTEST,
                                       LOOP_MARKER_WORDS, TURN_END_PATTERN)

_INPUT_FETCH = re.compile(INPUT_FETCH_PATTERN)
#: An op's symbol, kernels and end, read off each op of a row at once (``map``): a search
#: reads them all of a row of hundreds of ops at each online try.
_SYMBOL, _KERNELS, _END = attrgetter("sym"), attrgetter("gpu"), attrgetter("end")
_LOOP_MARKER = re.compile(LOOP_MARKER_PATTERN)


def marker_match(name: str) -> bool:
    """Whether an op of this name is a loop marker (``LOOP_MARKER_PATTERN``), unremembered:
    for a caller that asks once per name (``skeleton.Symbols``: a new family). The pattern's
    search (an alternation, partly case-insensitive) costs 4-25 k instructions a name of
    ``LOOP_MARKER_SHORTEST`` characters or more; a name too short for it, or ASCII and holding
    none of ``LOOP_MARKER_WORDS`` once lowered (most names: ``ascii_without``), is no marker,
    told in 0.3 k (short) or 0.5 k (callgrind). (A name not ASCII is searched: ``ſ`` is an
    ``s`` to the case-insensitive part.)"""
    if len(name) < LOOP_MARKER_SHORTEST or _ascii_without(name, LOOP_MARKER_WORDS):
        return False
    return _LOOP_MARKER.search(name) is not None


def ascii_without(name: str, words: tuple) -> bool:
    """Whether ``name`` is ASCII and holds none of ``words`` (lowercase) once lowered
    (``marker_match``'s first test). The Python fallback of ``_native.ascii_without`` (a test
    ties the two), which answers in one call: 1.2 k instructions less for each new family of
    ``LOOP_MARKER_SHORTEST`` characters or more (callgrind)."""
    if not name.isascii():
        return False
    lowered = name.lower()
    return not any(word in lowered for word in words)


#: ``ascii_without``, in native code where it is built.
_ascii_without = ascii_without if _native is None else _native.ascii_without
#: ``similarity``'s and ``_bag``'s sums in native code where it is built (None: in Python).
_native_similarity = None if _native is None else _native.weighted_jaccard
_native_bag = None if _native is None else _native.instance_bag
#: ``_likeness_of`` in native code where it is built (None: in Python).
_native_likeness = None if _native is None else _native.likeness


_TURN_END = re.compile(TURN_END_PATTERN)


@lru_cache(maxsize=RULES.memory.names_remembered)
def loop_marker(name: str) -> bool:
    """Whether an op of this name is a loop marker (``LOOP_MARKER_PATTERN``). Remembered: the
    online tries ask it of the same few names at every search, and the pattern (an
    alternation, partly case-insensitive) costs some 30 k instructions a name."""
    return marker_match(name)


@lru_cache(maxsize=RULES.memory.names_remembered)
def input_fetch(name: str) -> bool:
    """Whether an op of this name fetches the next input (``INPUT_FETCH_PATTERN``);
    remembered as ``loop_marker``."""
    return _INPUT_FETCH.search(name) is not None


def upper_median(values, default=None):
    """The upper median element of ``values``: the middle one of the sorted values, the
    later of the two middle ones when their count is even (no average); ``default`` when
    there are none."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else default


def _upper_median_of(values: np.ndarray) -> int:
    """``upper_median`` of a non-empty array of integers (sorted in place: a million cycles'
    counts sort without a list of a million ints, and another sorted one)."""
    values.sort()
    return int(values[len(values) // 2])


#: ``Unit.opening`` of a unit whose instances begin where ``find_unit``'s anchor cut them.
OPENS_AT_ANCHOR = "at the anchor"
#: ``Unit.opening`` of a unit whose instances begin at the step's first op, before the anchor.
OPENS_AT_HEAD = "at the step's first op (the head before the anchor)"
#: ``Unit.opening`` of a unit whose instances open with the loop's input fetch.
OPENS_AT_INPUT_FETCH = "before the input fetch"
#: ``Unit.opening`` of a unit whose instances begin right after the previous one's host sync
#: (with the small ops back to that sync: ``_begin_at``).
OPENS_AFTER_SYNC = "right after the previous instance's blocking sync"
#: ``Unit.opening`` of a unit whose instances begin after the host waited for the device and
#: the loop turned (``_turns_apart``).
OPENS_AT_TURN_EDGE = "at the loop's edge after each turn's wait for the device"
#: ``Unit.opening`` of a unit whose instances begin at the loop's edge: the widest idle gap
#: between the once-per-turn ops that end one turn and begin the next (``_at_loop_edge``).
OPENS_AT_LOOP_EDGE = "at the loop's edge (the widest gap between two turns' own ops)"


@dataclass(slots=True)
class Unit:
    """A qualifying cut of one row: where its instances begin and how alike they are."""
    positions: list            # index in the row where each instance begins (after ``_opening``)
    pattern: tuple                # the representative instance's symbols
    similarity: list           # each instance's similarity to the representative
    like: int                  # instances at least ``Rules.like`` similar
    fragments: int
    coverage: float
    anchor: int                # the symbol that cut the row
    shapes: list = field(default_factory=list)  # per instance: 0 if like the unit, else its ops
    exact: int = 0             # instances whose ops are exactly the representative's
    opening: str = OPENS_AT_ANCHOR  # how the beginning was chosen (see ``_opening``)
    differing: list = field(default_factory=list)  # (symbol, weight gap) most unlike, worst
    #: The representative's bag and totals: to compare instances that come later (online).
    reference: tuple = ()
    #: The least similarity of an instance that is not idle, first or last.
    inner_worst: float = 1.0
    #: Unlike instances (not idle, first or last) doing less work than the representative.
    pieces: int = 0
    #: Every instance (but the last) has about the representative's number of ops: cycles of
    #: one loop head (an idle poll is as long as a step), not a step and a sub-step.
    even: bool = True
    #: Ops that may come before the anchor at an instance's beginning (the opening's head): a
    #: matcher reading later ops walks back over them from the anchor.
    head: frozenset = frozenset()
    #: Unlike instances that do (almost) none of the representative's GPU work: cycles that
    #: took another path (``idle_step``). They neither count for nor against the unit.
    idle: int = 0
    #: The symbol of the input fetch that opened the instances, when the loop's edge moved
    #: their beginnings before it (``_fetch_edge``: the profiler's step bookkeeping).
    fetch: int | None = None
    #: Kinds of op found exactly once in every inner instance (``_loop_body``), when there are
    #: at least ``Rules.spine_ops`` of them: the program's own loop body.
    spine: frozenset = frozenset()
    #: Inner instances that hold a loop marker more than once (``_merged_turns``): two turns
    #: of the loop in one, where the anchor was missing.
    merged: int = 0
    #: ``score`` with each instance that holds the whole spine, where the spine holds a loop
    #: marker and no GPU work is known, counted at least ``Rules.like`` (``_unit_of``): for
    #: ``_qualifies``.
    turn_score: float = 0.0

    @property
    def n(self) -> int:
        return len(self.positions)

    @property
    def first(self) -> int:
        return self.positions[0]

    @property
    def score(self) -> float:
        return sum(self.similarity)

    @property
    def worst(self) -> float:
        return min(self.similarity) if self.similarity else 0.0


# -- weights and similarity ------------------------------------------------------------


def _bag(row: list, a: int, b: int) -> tuple[dict, float, float, int]:
    """Symbol -> [time, kernels, count] of ``row[a:b]``, and the three totals (in C where
    the ops are native ``Node`` objects of float times: ``_native.instance_bag``, the same
    sums in the same order; else ``_bag_read``)."""
    if _native_bag is not None:
        made = _native_bag(row, a, b)
        if made is not None:
            return made
    return _bag_read(row, a, b)


def _bag_read(row: list, a: int, b: int) -> tuple[dict, float, float, int]:
    """``_bag`` in Python: each op of ``row[a:b]`` read in turn."""
    bag: dict = {}
    cell_of = bag.get
    time = gpu = 0.0
    for node in row[a:b]:
        dt = node.end - node.start
        kernels = node.gpu
        cell = cell_of(node.sym)
        if cell is None:  # (as a cell of zeros added to: the same sums)
            bag[node.sym] = [0.0 + dt, 0.0 + kernels, 1]
        else:
            cell[0] += dt
            cell[1] += kernels
            cell[2] += 1
        time += dt
        gpu += kernels
    return bag, time, gpu, b - a


def _weights(bag: dict, totals: tuple, active: tuple, rules: Rules) -> dict:
    """An instance's composition: each symbol's share of the instance's time, kernels and op
    count (scaled by the rule's weights), for the components ``active`` in the reference."""
    time, gpu, count = totals
    if not rules.weigh:
        return {s: n / count for s, (_, _, n) in bag.items()} if count else {}
    wt, wg, wc = _component_weights(active, rules)
    t = wt / time if time > 0 else 0.0
    g = wg / gpu if gpu > 0 else 0.0
    c = wc / count if count else 0.0
    return {s: x * t + k * g + n * c for s, (x, k, n) in bag.items()}


def _component_weights(active: tuple, rules: Rules) -> tuple:
    """The weights of an op's time, kernels and count in a composition whose reference has
    time and kernels as ``active`` says: a component the reference lacks gives its weight
    to the next (kernels to time, time to count)."""
    wt, wg, wc = rules.time_weight, rules.gpu_weight, rules.count_weight
    use_time, use_gpu = active
    if not use_gpu:
        wt, wg = wt + wg, 0.0
    if not use_time:
        wc, wt = wc + wt, 0.0
    return wt, wg, wc


def similarity(a: dict, b: dict) -> float:
    """Weighted Jaccard index of two compositions (in C where their weights are floats:
    ``_native.weighted_jaccard``, the same sums in the same order; else
    ``_similarity_summed``)."""
    if _native_similarity is not None:
        made = _native_similarity(a, b)
        if made is not None:
            return made
    return _similarity_summed(a, b)


def _similarity_summed(a: dict, b: dict) -> float:
    """``similarity`` in Python: each symbol of either, in the order of ``a.keys() |
    b.keys()``, its lesser weight added to one sum, its greater to the other."""
    lo = hi = 0.0
    in_a, in_b = a.get, b.get
    for s in a.keys() | b.keys():
        x, y = in_a(s, 0.0), in_b(s, 0.0)
        if x < y:
            lo += x
            hi += y
        else:
            lo += y
            hi += x
    return lo / hi if hi > 0 else 1.0


def _size_ratio(totals: tuple, reference: tuple, parts: list) -> float:
    """How much work an instance does against the reference: its time and kernels, and a
    little its op count (tiny noise ops add count, not work), as ``parts`` weighs them
    (``_size_parts`` of the reference: made once for all the instances compared to it).
    Summed left to right from 0, as ``_native.likeness`` sums (``sum`` of floats is so up
    to Python 3.11, compensated from 3.12: the last bit could differ)."""
    weight = share = 0.0
    for k, w in parts:
        weight += w
        share += w * (totals[k] / reference[k + 1])
    return share / weight if weight else 0.0


def _size_parts(reference: tuple, rules: Rules) -> list:
    """What ``_size_ratio`` weighs, in order: (which part of the totals, its weight) for
    time (0) and kernels (1) where ``reference`` has any (weighed rules only), and the op
    count (2)."""
    _, ref_time, ref_gpu, ref_count = reference
    parts = []
    if rules.weigh and ref_time > 0:
        parts.append((0, rules.time_weight))
    if rules.weigh and ref_gpu > 0:
        parts.append((1, rules.gpu_weight))
    if ref_count:
        parts.append((2, rules.count_weight if rules.weigh else 1.0))
    return parts


def _work_ratio(bag_totals: tuple, reference: tuple) -> float:
    """An instance's work against the reference's: kernels where the reference has any, else
    time."""
    _, time, gpu, _ = bag_totals
    _, ref_time, ref_gpu, _ = reference
    if ref_gpu > 0:
        return gpu / ref_gpu
    return time / ref_time if ref_time > 0 else 1.0


def _size_factor(ratio: float, rules: Rules) -> float:
    """Composition ignores size: two steps merged into one instance (its anchor missing) look
    like one. An instance doing far more or less work than the reference loses similarity."""
    if ratio <= 0:
        return 0.0
    return min(1.0, rules.length_slack / max(ratio, 1 / ratio)) ** 2


def _likeness(bag_totals: tuple, reference: tuple, rules: Rules) -> tuple[float, dict]:
    bag, time, gpu, count = bag_totals
    w = _weights(bag, (time, gpu, count), _active(reference), rules)
    return _likeness_of(w, (time, gpu, count), reference, rules,
                        _size_parts(reference, rules)), w


def _measure(reference: tuple, rules: Rules) -> tuple:
    """What instances are weighed and sized by against ``reference``: its ``_active``
    components and its ``_size_parts``."""
    return _active(reference), _size_parts(reference, rules)


def _active(reference: tuple) -> tuple:
    """The components of an instance's composition that count against ``reference``: time
    and kernels where the reference has any (``_weights``)."""
    return reference[1] > 0, reference[2] > 0


def _likeness_of(w: dict, totals: tuple, reference: tuple, rules: Rules, parts: list) -> float:
    """The similarity of an instance (its composition ``w``, its totals) to ``reference``
    (``parts``: its ``_size_parts``): in one native call where it is built
    (``_native.likeness``, the same doubles), else here."""
    if _native_likeness is not None:
        made = _native_likeness(w, totals, reference, parts, rules.length_slack)
        if made is not None:
            return made
    return _likeness_summed(w, totals, reference, rules, parts)


def _likeness_summed(w: dict, totals: tuple, reference: tuple, rules: Rules,
                     parts: list) -> float:
    """``_likeness_of`` in Python."""
    # The lesser of the two: an eval step is unlike a plain one by what it adds, not twice.
    ratio = _size_ratio(totals, reference, parts)
    return min(similarity(w, reference[0]), _size_factor(ratio, rules))


def _reference(bag_totals: tuple, rules: Rules) -> tuple:
    """(composition, time, kernels, ops) of the representative instance."""
    bag, time, gpu, count = bag_totals
    return (_weights(bag, (time, gpu, count), (time > 0, gpu > 0), rules), time, gpu, count)


def time_reference(nodes: list, rules: Rules = RULES) -> tuple:
    """A reference like ``Unit.reference``, from the instance ``nodes``, by time and op count
    only: to compare instances whose GPU work is not counted (read after the unit was
    decided online, when launches are no longer credited to ops)."""
    bag, time, _, count = _bag(nodes, 0, len(nodes))
    for cell in bag.values():
        cell[1] = 0.0
    return _reference((bag, time, 0.0, count), rules)


def _differing(a: dict, b: dict, top: int) -> list:
    gaps = sorted(((abs(a.get(s, 0.0) - b.get(s, 0.0)), s) for s in a.keys() | b.keys()),
                  reverse=True)
    return [(s, round(g, 3)) for g, s in gaps[:top] if g > 0]


# -- what one search keeps for the next --------------------------------------------------

class SearchMemo:
    """What the unit search computed on one row, kept for the next search on it.

    Online the detector searches a row again each time it has grown by an op or a few
    (``structure.StructureDetector._confirm``), and most of what it evaluates is the same as
    the last time: a cut's instances but the last do not change as the row grows, nor do
    their likenesses to the same representative. This holds:

    - per cut (the positions of an anchor's occurrences): its instances but the last, their
      bags and median size, and what each search reads of them: their ops, the cut's spine,
      the representatives tried, their part of its coverage (``_Cut``); against each
      representative tried, each one's likeness, how many are like it, which are idle, and
      what a hope that read them all found (``cut_likeness``, ``_Hope.lost``; the cut of an
      anchor that occurred again since extends those of the shorter one);
    - per span ``(a, b)`` of the row: its bag (``_bag``), its kernels (``_coverage``), its
      composition against each set of active components (``_weights``); per (representative
      span, span): the share of time in ops the representative lacks (``_own_ops``).

    Each value is computed exactly as the search computes it without the memo (the same
    functions, on the same ops, in the same order), so the decisions are the same.

    Invalidation. Every value depends only on the ops inside its spans: their symbol, start
    and end never change once read and a row only grows at its end; their kernels
    (``Node.gpu``, counts) only grow as launches are credited. ``begin`` starts each search:
    on another row (another list) or with other rules, everything goes; where an op's
    kernels changed since the previous search, every value whose spans reach that op goes.
    Values the previous search did not use go too: the memo holds at most two searches'
    worth (the last one's, and what the current one has used so far), never the row's
    history.

    Memory. A search without a memo holds one cut's bags at a time; kept, every cut's stay.
    So each search keeps values only up to ``MemoryRules.memo_budget`` (counted in the ops they cover);
    beyond, values are made and not kept (as without a memo). A search on a huge row then
    costs what it did without one, and the memo stays bounded (the budget for each of the
    two searches), however long the trace.

    ``find_unit`` without a memo uses a fresh one: within one search too, each span and pair
    is computed once.
    """

    __slots__ = ("row", "rules", "_gpu", "_current", "_previous", "_gpu_total",
                 "_row_end", "_size", "markers", "compared", "_durations", "fresh",
                 "_columns", "_occurrences")

    def __init__(self):
        self.row: list | None = None
        self.rules: Rules | None = None
        self._gpu: list = []  # each op's kernels when the latest search began
        self._current: dict = {}  # key -> (reach, size, value), used by the current search
        self._previous: dict = {}  # ... by the one before it (dropped unless used again)
        self._size = 0  # the ops covered by the values in ``_current``
        self._gpu_total = 0  # kernels of the whole row (``_coverage``)
        self._row_end = 0.0  # where its last op ends (``_coverage``)
        #: The loop markers of the row searched (set by ``find_unit`` for ``_unit_of``).
        self.markers: frozenset = frozenset()
        #: Instances compared to a representative so far (``_likenesses``): the work of
        #: the searches with this memo, counted.
        self.compared = 0
        self._durations = array("d")  # each op's end - start, made once a cut asks
        #: The search begun holds nothing of an earlier one (``_ruled_out``).
        self.fresh = True
        self._columns = None  # the row as arrays, once a search asks (``columns``)
        #: (n, symbol -> where it occurs among the row's first n ops, every symbol in the
        #: order they first occur): ``positions``, from the row's second search on; None
        #: until then.
        self._occurrences: tuple | None = None

    def begin(self, row: list, rules: Rules) -> None:
        """A search on ``row`` with ``rules`` begins: drop what can have changed."""
        gpu = list(map(_KERNELS, row))
        self.fresh = row is not self.row or rules is not self.rules
        if self.fresh:
            self.row, self.rules = row, rules
            self._previous = {}
            self._durations = array("d")
            self._occurrences = None
        else:
            old = self._gpu
            self._previous = self._current
            if gpu[:len(old)] != old:  # kernels credited: keep what lies before the first
                changed = next(i for i, (x, y) in enumerate(zip(gpu, old)) if x != y)
                self._previous = {k: v for k, v in self._previous.items()
                                  if v[0] <= changed}
        self._current = {}
        self._size = 0
        self._gpu = gpu
        self._columns = None
        self._gpu_total = sum(gpu)
        self._row_end = max(map(_END, row))

    def __len__(self) -> int:
        """How many values are held."""
        return len(self._current) + len(self._previous)

    @property
    def size(self) -> int:
        """The ops covered by the values held (``MemoryRules.memo_budget``)."""
        return self._size + sum(hit[1] for hit in self._previous.values())

    def columns(self) -> tuple:
        """The row as arrays, made once a search asks: each op's kind of op (numbered from
        0 in the order of their symbols), the symbol of each kind, each op's time and its
        kernels (``_ruled_out``)."""
        if self._columns is None:
            kinds, local = np.unique(np.fromiter((node.sym for node in self.row), np.int64,
                                                 len(self.row)), return_inverse=True)
            self._columns = (local, kinds,
                             np.frombuffer(self.durations(), dtype=np.float64),
                             np.asarray(self._gpu, dtype=np.float64))
        return self._columns

    @property
    def gpu_total(self) -> int:
        """The kernels of the whole row."""
        return self._gpu_total

    @property
    def row_end(self) -> float:
        """Where the last op of the row ends."""
        return self._row_end

    def _get(self, key, reach: int, size: int, make, *args):
        """The value under ``key`` (its spans end by ``reach``; it covers ``size`` ops):
        kept, or ``make(*args)``."""
        value = self._lookup(key)
        if value is None:
            value = self._keep(key, reach, size, make(*args))
        return value

    def _lookup(self, key):
        """The value kept under ``key`` (now the current search's, within the budget), or
        None."""
        hit = self._current.get(key)
        if hit is None:
            hit = self._previous.get(key)
            if hit is None:
                return None
            if self._size + hit[1] <= self.rules.memory.memo_budget:
                del self._previous[key]
                self._current[key] = hit
                self._size += hit[1]
        return hit[2]

    def _keep(self, key, reach: int, size: int, value):
        """Keep ``value`` under ``key`` for the next search, while within the budget."""
        old = self._current.get(key)
        grows = size - (old[1] if old else 0)
        if self._size + grows <= self.rules.memory.memo_budget:
            self._current[key] = (reach, size, value)
            self._size += grows
        return value

    def cut(self, positions: tuple) -> _Cut:
        """The instances but the last of the cut at ``positions`` (``_Cut``)."""
        return self._get(("cut", positions), positions[-1],
                         positions[-1] - positions[0] + len(positions), self._make_cut,
                         positions)

    def _make_cut(self, positions: tuple) -> _Cut:
        spans = [(positions[k], positions[k + 1]) for k in range(len(positions) - 1)]
        if not spans:
            return _Cut(positions, spans, 0, 0.0, [])
        ops = upper_median(b - a for a, b in spans)
        if not self.rules.weigh:
            return _Cut(positions, spans, ops, 0.0)
        durations = self.durations()
        return _Cut(positions, spans, ops, upper_median(sum(durations[a:b]) for a, b in spans))

    def positions(self, syms: list) -> _Positions:
        """``_Positions`` of the row searched (``syms``: each op's symbol). A fresh search
        makes it at once (``_Positions``, by numpy: a row of a million ops may be searched
        once); the next searches of the row make it from where each symbol occurs, kept
        and extended by the ops added since the last one (a row only grows at its end, and
        an op's symbol never changes): the same positions, the same order, without sorting
        the row again at each try."""
        if self.fresh:
            self._occurrences = None
            return _Positions(syms)
        if self._occurrences is None or self._occurrences[0] > len(syms):
            self._occurrences = 0, {}
        done, occurrences = self._occurrences
        for i in range(done, len(syms)):
            where = occurrences.get(syms[i])
            if where is None:
                occurrences[syms[i]] = [i]
            else:
                where.append(i)
        self._occurrences = len(syms), occurrences
        return _Positions(syms, occurrences)

    def durations(self) -> array:
        """Each op's time (end - start) of the row, as float64: those added since the last
        call are read, no more (a row only grows at its end)."""
        durations = self._durations
        if len(durations) < len(self.row):
            durations.extend(node.end - node.start for node in self.row[len(durations):])
        return durations

    def bags(self, cut: _Cut) -> list:
        """The ``_bag`` of each instance of ``cut`` but the last (kept with the cut)."""
        if cut.bags is None:
            cut.bags = [self.bag(span) for span in cut.spans]
        return cut.bags

    def cut_likeness(self, ref: tuple, cut: _Cut, hope: _Hope | None = None) -> tuple | None:
        """The instances of ``cut`` but its last one against the representative ``ref``
        (its span and ``reference``): each one's likeness (``likeness``), its similarity,
        how many are like it (``Rules.like``) and which are idle (``_idle_flags``). Kept per
        anchor (its first occurrence): as the row grows its cut only gains instances at the
        end, so the row kept for a shorter cut is extended by the new ones. With ``hope``,
        None as soon as ``hope`` says that the cut cannot qualify against ``ref`` (the
        instances read so far are kept, to go on from, and what a hope found reading them
        all: the next search's hopes begin by reading them again, ``_Hope.lost``)."""
        key = ("row", ref[0], cut.positions[0])
        spans = cut.spans
        done, scored, sims, like_n, idle_at, reads = self._lookup(key) or (0, [], [], 0, [], {})
        if hope is not None and done and hope.lost(sims, idle_at, reads):
            return None  # lost already on what an earlier search read
        if done < len(spans):
            scored, sims, idle_at = list(scored), list(sims), list(idle_at)  # kept: not changed
            bags = self.bags(cut)
            like = self.rules.like
            measure = _measure(ref[1], self.rules)  # (once for the runs)
            while done < len(spans):  # with ``hope``: one by one, then in runs of an eighth
                end = min(len(spans), done + max(1, done // HOPE_RUNS)) if hope is not None \
                    else len(spans)
                new = list(self._likenesses(ref[1], spans[done:end], bags[done:end], measure))
                new_sims = [x for x, _ in new]
                scored += new
                sims += new_sims
                like_n += sum(1 for x in new_sims if x >= like)
                idle_at += _idle_flags(new_sims, bags[done:end], spans[done:end], ref, self)
                done = end
                if hope is not None and hope.lost(sims, idle_at):
                    break
            self._keep(key, cut.positions[-1], 3 * len(spans),
                       (done, scored, sims, like_n, idle_at, {}))
        if hope is not None and hope.gone:
            return None
        return scored, sims, like_n, idle_at

    def bag(self, span: tuple) -> tuple:
        """``_bag`` of ``span``."""
        return self._get(("bag", span), span[1], span[1] - span[0], _bag, self.row, *span)

    def gpu(self, span: tuple) -> int:
        """The kernels of the ops of ``span``, as ``_coverage`` sums them."""
        return self._get(("gpu", span), span[1], 1, _summed_gpu, self.row, *span)

    def reference(self, span: tuple, bag: tuple) -> tuple:
        """``_reference`` of the instance ``span`` (``bag``, its ``_bag``)."""
        return self._get(("reference", span), span[1], 1, self._make_reference, span, bag)

    def _make_reference(self, span: tuple, bag: tuple) -> tuple:
        _, time, gpu, count = bag
        return self.weights(span, bag, (time > 0, gpu > 0)), time, gpu, count

    def weights(self, span: tuple, bag: tuple, active: tuple) -> dict:
        """``_weights`` of the instance ``span`` (``bag``, its ``_bag``) for the components
        ``active``."""
        return self._get(("weights", span, active), span[1], span[1] - span[0],
                         _weights_of, bag, active, self.rules)

    def likeness(self, reference: tuple, span: tuple, bag: tuple) -> tuple[float, dict]:
        """``_likeness`` of the instance ``span`` (``bag``, its ``_bag``) to the
        representative's ``reference`` (not kept: ``cut_likeness`` keeps those of the
        instances that recur)."""
        return next(self._likenesses(reference, [span], [bag]))

    def _likenesses(self, reference: tuple, spans: list, bags: list, measure: tuple = ()):
        """``_likeness`` of each instance of ``spans`` (``bags``, theirs) to the
        representative's ``reference``, one by one (``measure``: its ``_measure``, if
        made already)."""
        rules = self.rules
        active, parts = measure or _measure(reference, rules)
        previous = None  # an instance's bag equal to the one before: the same answer
        for span, bag in zip(spans, bags):
            if bag != previous:
                w = self.weights(span, bag, active)
                done = (_likeness_of(w, bag[1:], reference, rules, parts), w)
                previous = bag
                self.compared += 1
            yield done

    def own_ops(self, ref: tuple, span: tuple, bag: tuple) -> float:
        """``_own_ops`` of the instance ``span`` (``bag``, its ``_bag``) against the
        representative ``ref`` (its span and reference)."""
        return self._get(("own", ref[0], span), max(ref[0][1], span[1]), 1,
                         _own_ops, bag, ref[1])


class RecentMemos:
    """The memo of the last search on each row tried lately (``SearchMemo``): the online
    tries search the same few rows again each time they grow by an op or a few. At most
    ``MemoryRules.memos`` rows are remembered (the least recently tried goes)."""

    def __init__(self):
        self._memos: list = []  # latest last

    def of(self, row: list) -> SearchMemo:
        """The memo of ``row`` (a new one if it was not tried lately)."""
        memos = self._memos
        for i, memo in enumerate(memos):
            if memo.row is row:
                memos.append(memos.pop(i))
                return memo
        memo = SearchMemo()
        memos.append(memo)
        del memos[:-RULES.memory.memos]
        return memo

    def clear(self) -> None:
        """Forget every memo (the unit is decided: no more online tries)."""
        self._memos = []


def search_work(m: int, rules: Rules = RULES) -> int:
    """The most work one search of a row of ``m`` ops does, counted in the ops its anchors'
    cuts cover (``Rules.search_work``): the anchors are tried in the order they first occur
    until their cuts have covered this many."""
    return rules.search_work + rules.search_work_per_op * m


class SearchBudget:
    """How much unit search the online tries may still do: the search time bounded per op.

    A search of a row of ``m`` ops with ``a`` candidate anchors (symbols that repeat) costs
    about ``m * a`` (each anchor's cut covers most of the row), and the online tries search
    the row again as it grows: on a row of many names each seen a few times, every sighting
    would be a new full search (cubic). Each op read earns ``OnlineRules.search_work_per_op``
    units of work; a try first needs ``m`` of them (to count the anchors, paid), then
    ``m * a``, or ``OnlineRules.search_work_per_instance`` per instance the anchors cut where
    that is more (short instances), (paid) or is put off: a later op retries it once the
    credit covers it
    (amortised). The first ``OnlineRules.search_work_free`` units are free: a loop found
    among a few dozen names, as every real trace's is, is tried exactly as without a budget.
    Whatever the online tries could not afford, the close decision searches once, whole.
    The units are counts of ops (never time), so the decisions are deterministic."""

    __slots__ = ("credit", "_wanted")

    def __init__(self):
        self.credit = RULES.online.search_work_free
        self._wanted = (None, 0)  # the row last put off, and what its search would cost

    def earn(self) -> None:
        """One more op read."""
        self.credit += RULES.online.search_work_per_op

    def forget_row(self) -> None:
        """The row last put off is no longer tried (nor held)."""
        self._wanted = (None, 0)

    def affords(self, row: list) -> bool:
        """Whether a search of ``row`` is within the credit; if so, it is paid. A row put
        off is not counted again until the credit covers what it would have cost."""
        m = len(row)
        wanted_row, wanted = self._wanted
        if self.credit < m or (wanted_row is row and self.credit < wanted):
            return False
        self.credit -= m  # counting the anchors
        counts = Counter(map(_SYMBOL, row))
        repeated = [n for n in counts.values() if n > 1]
        instances = RULES.online.search_work_per_instance * sum(repeated)
        cost = min(max(m * len(repeated), instances), search_work(m))
        if self.credit < cost:
            self._wanted = (row, m + cost)  # counted again when retried
            return False
        self.credit -= cost
        self._wanted = (None, 0)
        return True


@dataclass(slots=True)
class _Cut:
    """The instances of a cut but the last: what the row's growth does not change."""
    positions: tuple  # where each instance begins (the anchor's occurrences)
    spans: list       # (start, end) of each instance but the last
    ops: int          # the median of their op counts
    time: float       # ... and of their summed times (weighed rules only)
    #: Their ``_bag`` (``SearchMemo.bags``): made once the cut's count and coverage let it
    #: qualify (``_may_qualify``), None until then.
    bags: list | None = None
    #: What each search of the row reads of these instances, made at its first use (None
    #: until then) by the function named, and kept with them: the row's growth changes
    #: only the last instance, and a launch credited to one of these ops drops the cut
    #: (``SearchMemo.begin``). Their ops, a tuple each (``_shapes``) ...
    shapes: list | None = None
    #: ... how many of them are alike, for ``_most_exact`` (``_cut_shapes``) ...
    alike: tuple | None = None
    #: ... the cut's spine (``_loop_body``) ...
    spine: frozenset | None = None
    #: ... the instances tried as the representative (``_trials``) ...
    trials: list | None = None
    #: ... and those that count for its coverage (``_covered``). The last instance's span
    #: on a row of so many ops, ``(ops, span)`` (``_last_segment``): each search asks it
    #: twice (``_most_exact``, ``_evaluate``), the row's growth changes it.
    covered: _Covered | None = None
    last: tuple | None = None


@dataclass(slots=True)
class _Covered:
    """The instances of a cut but the last that count for its coverage (``_coverage``):
    those of about the median instance's length (``Rules.cover_shortest`` to
    ``Rules.cover_longest`` times it). Kept with the cut (``_Cut.covered``): only the
    last instance's part is new at each search."""
    spans: list
    ops: int  # their ops, summed
    #: Their kernels, summed (``SearchMemo.gpu``), once GPU work is known; None until then.
    gpu: int | None = None
    #: Each one's window (its start to the next instance's start), sorted; None until a
    #: row without GPU work asks.
    times: list | None = None


def _weights_of(bag_totals: tuple, active: tuple, rules: Rules) -> dict:
    bag, time, gpu, count = bag_totals
    return _weights(bag, (time, gpu, count), active, rules)


def _summed_gpu(row: list, a: int, b: int) -> int:
    return sum(row[i].gpu for i in range(a, b))


# -- one candidate ---------------------------------------------------------------------


def _segments(cut: _Cut, row: list, rules: Rules, memo: SearchMemo) -> list:
    """(start, end) of each instance: those of the cut's inner instances, then the last
    one's (``_last_segment``)."""
    return cut.spans + [_last_segment(cut, row, rules, memo)]


def _last_segment(cut: _Cut, row: list, rules: Rules, memo: SearchMemo) -> tuple:
    """(start, end) of the last instance. It runs into whatever follows the loop: it ends
    once it has about the median instance's ops and time (noise may add ops to it).
    Unweighed (a flattened subtree: a parent's time holds its children's), by ops alone:
    the last of four layers a little faster than the others is still one layer, not one
    layer and the loss after it. (Without inner instances: to the row's end.)"""
    m = len(row)
    last = cut.positions[-1]
    if not cut.spans:
        return last, m
    ops = cut.ops
    if not rules.weigh:
        return last, min(m, last + ops)
    if cut.last is not None and cut.last[0] == m:  # (its ops' times never change)
        return cut.last[1]
    durations = memo.durations()
    end = min(m, last + ops)  # its ops first, then until it has its share of the time
    done = reduce(add, durations[last:end], 0.0)  # added one by one, in order
    while end < m and done < rules.last_time_share * cut.time:
        done += durations[end]
        end += 1
    cut.last = m, (last, end)
    return last, end


def _evaluate(pos: tuple | list, anchor: int, row: list, syms: list, rules: Rules,
              memo: SearchMemo) -> Unit | None:
    """Cut ``row`` at ``pos``: the representative, each instance's similarity, coverage;
    None when its count and coverage alone rule it out (``_may_qualify``): no similarity
    could make it qualify, so none is computed."""
    cut = memo.cut(tuple(pos))
    inner = cut.spans
    spans = _segments(cut, row, rules, memo)
    last = spans[-1]
    coverage = _coverage(row, cut, last, rules, memo)
    if not _may_qualify(len(pos), coverage, rules):
        return None
    shapes = _shapes(cut, syms) + [tuple(syms[last[0]:last[1]])]
    if memo.fresh and cut.bags is None and cut.ops >= BOUND_OPS and \
            _ruled_out(cut, spans, shapes, coverage, memo):
        return None
    if cut.spine is None:
        cut.spine = _loop_body(cut.shapes, rules)
    spine = cut.spine
    held = _spine_held(shapes, spine)
    turns = _turns(spine, len(inner), memo)
    bags = memo.bags(cut) + [memo.bag(spans[-1])]
    hope = _Hope(len(pos), coverage, held, turns, rules)
    against = _representative(cut, spans, bags, shapes, hope, memo)
    if against is None:
        return None
    return _unit_of(pos, anchor, (spans, bags, shapes), against, (coverage, spine, held, turns),
                    rules, memo)


def _turns(spine: frozenset, inner: int, memo: SearchMemo) -> bool:
    """Is a cut's ``spine`` evidence of turns (``inner``: its instances but the last)? Once
    it held in ``min_instances`` inner instances, on a row with no GPU work known: there
    time alone weighs the ops, and a step's time follows its shapes (kernel counts do not:
    with them, unlike turns are unlike work)."""
    return bool(spine & memo.markers) and inner >= memo.rules.min_instances \
        and not memo.gpu_total


def _ruled_out(cut: _Cut, spans: list, shapes: list, coverage: float,
               memo: SearchMemo) -> bool:
    """Can no representative that ``_representative`` would try make the cut qualify
    (``_qualifies``)? Answered on upper bounds of every instance's similarity to each of
    them (``_similarities``), all computed at once, before the instances' bags are
    made and compared one by one (``_likeness``, in Python: some 100 µs an instance of 400
    ops). A cut it keeps is weighed as without it; one it rules out could not qualify, so
    the answers are the same. ``coverage``: the cut's. False (not asked) where the
    instances times the row's kinds of op exceed ``BOUND_CELLS``. (Each similarity
    lies within ``BOUND_MARGIN`` of the one ``_likeness`` finds: its sums run in another
    order.)"""
    rules = memo.rules
    local, kinds, durations, kernels = memo.columns()
    n, width = len(spans), len(kinds)
    if n * width > BOUND_CELLS:
        return False
    lo, hi = spans[0][0], spans[-1][1]
    ops = np.array([b - a for a, b in spans], dtype=np.float64)
    keys = np.repeat(np.arange(n) * width, ops.astype(np.int64)) + local[lo:hi]
    parts = tuple(np.bincount(keys, weights, n * width).reshape(n, width)
                  for weights in (durations[lo:hi], kernels[lo:hi], None))
    totals = (parts[0].sum(1), parts[1].sum(1), ops)
    inner = len(cut.spans)
    # Every inner instance where there are few (``_trials`` tries each of up to
    # ``medoid_trials``): the same representatives, no ``Counter`` of the shapes.
    trials = np.arange(inner) if inner <= rules.medoid_trials else \
        np.array(_trials(cut, totals[1][:inner].tolist(), shapes, rules))
    near = _similarities(parts, totals, trials, rules)
    if n < rules.min_instances:  # (``Unit.similarity`` rounds each up by at most 0.0005)
        return not ((near + BOUND_MARGIN).min(1) + HOPE_ROUNDING >= rules.two_similarity).any()
    held_at, turns = _spine_of(parts[2], kinds, memo)
    return not _may_qualify_near(near, (totals[1], trials), held_at, turns, coverage,
                                 rules).any()


def _spine_of(counts: np.ndarray, kinds: np.ndarray, memo: SearchMemo) -> tuple:
    """``_loop_body``, ``_spine_held`` and ``_turns`` of a cut from its instances' op counts
    per kind (instances x kinds; ``kinds``: the symbol of each column): which instances hold
    its spine, and whether that is evidence of turns."""
    rules = memo.rules
    n = len(counts)
    once = (counts[:-1] == 1).all(0) if n - 1 >= REPEAT and rules.weigh else None
    if once is None or once.sum() < rules.spine_ops:
        return np.zeros(n, dtype=bool), False
    held = np.ones(n, dtype=bool)
    held[-1] = bool((counts[-1][once] == 1).all())
    return held, _turns(frozenset(kinds[once].tolist()), n - 1, memo)


def _may_qualify_near(near: np.ndarray, kernels: tuple, held_at: np.ndarray, turns: bool,
                      coverage: float, rules: Rules) -> np.ndarray:
    """Per representative (a row of ``near``, each instance's similarity to it within
    ``BOUND_MARGIN``): may the cut pass ``_qualifies`` (``n >= min_instances``) against it?
    ``kernels``: each instance's, and the representatives' indices."""
    x = near + BOUND_MARGIN  # at least each similarity
    n = x.shape[1]
    like = ((x >= rules.like) | held_at).sum(1)
    # An idle cycle counts neither for nor against: each instance that may be one
    # (``_idle_flags``, its own ops aside) is taken for one.
    gpu, trials = kernels
    ref_gpu = gpu[trials][:, None]
    idle = ((~held_at) & (near - BOUND_MARGIN < rules.like)
            & (gpu < rules.idle_work_share * ref_gpu) & (ref_gpu > 0)).sum(1)
    score = x.sum(1) + HOPE_ROUNDING * n  # as ``Unit.similarity`` rounds each
    if turns:
        score = np.maximum(score, np.where(held_at, np.maximum(x, rules.like), x).sum(1))
    return (like >= rules.min_like) & (like >= rules.like_share * (n - idle)) & \
        (score * (1 + HOPE_MARGIN) / n * coverage >= rules.min_quality)


def _similarities(parts: tuple, totals: tuple, trials: np.ndarray, rules: Rules) -> np.ndarray:
    """Per representative of ``trials`` (a row) and instance (a column): the instance's
    similarity to it (``_likeness``, within ``BOUND_MARGIN``). ``parts``: each instance's
    time, kernels and ops per kind of op (instances x kinds); ``totals``: its sums."""
    time, kernels, ops = totals
    x = np.empty((len(trials), len(ops)))
    # Per representative, whether it has time and kernels, as one code (0 to 3): the
    # representatives grouped by code in its order (what ``np.unique(axis=0)`` of the pairs
    # gives, without the ``numpy.ma`` import it costs a process: 20 ms).
    codes = (time[trials] > 0) * 2 + (kernels[trials] > 0)
    for code in sorted(set(codes.tolist())):
        rows = np.flatnonzero(codes == code)
        refs = trials[rows]
        shares = _shares(parts, totals, (code > 1, code & 1 == 1), rules)
        own = shares[refs]
        lo = np.minimum(shares[None, :, :], own[:, None, :]).sum(2)
        hi = shares.sum(1)[None, :] + own.sum(1)[:, None] - lo
        sims = np.divide(lo, hi, out=np.ones_like(lo), where=hi > 0)
        ratio = _size_ratios(totals, refs, rules)
        inverse = np.divide(1.0, ratio, out=np.full_like(ratio, np.inf), where=ratio > 0)
        factor = np.minimum(1.0, rules.length_slack / np.maximum(ratio, inverse)) ** 2
        x[rows] = np.minimum(sims, factor)  # (0 where the ratio is: ``_size_factor``)
    return x


def _shares(parts: tuple, totals: tuple, active: tuple, rules: Rules) -> np.ndarray:
    """Each instance's composition (``_weights``: instances x kinds of op) for the
    components ``active``."""
    time, kernels, ops = totals
    if not rules.weigh:
        return parts[2] / ops[:, None]
    wt, wg, wc = _component_weights(active, rules)
    per_time = np.divide(wt, time, out=np.zeros_like(time), where=time > 0)
    per_gpu = np.divide(wg, kernels, out=np.zeros_like(kernels), where=kernels > 0)
    return parts[0] * per_time[:, None] + parts[1] * per_gpu[:, None] + \
        parts[2] * (wc / ops)[:, None]


def _size_ratios(totals: tuple, refs: np.ndarray, rules: Rules) -> np.ndarray:
    """``_size_ratio`` of every instance (a column) against each representative of
    ``refs`` (a row; all with time and kernels alike: ``_similarities``)."""
    r = int(refs[0])
    weight, weighted = 0.0, 0.0
    for k, w in _size_parts((None, totals[0][r], totals[1][r], totals[2][r]), rules):
        weight += w
        weighted = weighted + w * (totals[k][None, :] / totals[k][refs][:, None])
    return weighted / weight


class _Hope:
    """Can a cut still qualify (``_qualifies``) against a representative, given the
    similarities of its first instances to it? ``lost`` reads them as they come: a cut of
    two instances cannot once one is less alike than ``Rules.two_similarity``; a longer one
    once too many instances are neither like the unit, nor hold its spine, nor are idle
    (even if every other one were like it), or once its quality could not reach
    ``Rules.min_quality`` even if every other instance were exactly like the unit. Only a
    bound: a cut it keeps may still fail. (Its sums are bounds with a margin: floating
    point never makes it give up on a cut that qualifies.)"""

    __slots__ = ("n", "coverage", "held", "turns", "rules", "read", "unlike", "score",
                 "least", "gone")

    def __init__(self, n: int, coverage: float, held: list, turns: bool, rules: Rules):
        self.n, self.coverage, self.held, self.turns, self.rules = n, coverage, held, turns, rules
        self.read = self.unlike = 0
        self.score = 0.0
        self.least = 1.0  # the least similarity read, as ``Unit.similarity`` rounds it
        self.gone = False

    def fresh(self) -> _Hope:
        """The same test for another representative."""
        return _Hope(self.n, self.coverage, self.held, self.turns, self.rules)

    def lost(self, sims: list, idle_at: list, reads: dict | None = None) -> bool:
        """Has the cut lost, with these similarities of its first instances and their idle
        flags (``_idle_flags``)? ``reads``: what hopes that had read none of them found
        reading them all (``_read``), kept with them (``SearchMemo.cut_likeness``: each
        search's hopes read again what the last one's did), per what else it depends on:
        whether the inner instances hold the spine, and whether that is evidence of turns."""
        if len(sims) > self.read:
            if self.read or reads is None:
                self._add(self._read(sims[self.read:], idle_at[self.read:]))
            else:
                key = (self.held[0], self.turns)
                if key not in reads:
                    reads[key] = self._read(sims, idle_at)
                self._add(reads[key])
        self.read = n_read = len(sims)
        rules = self.rules
        n = self.n
        if n < rules.min_instances:
            self.gone = self.least < rules.two_similarity
            return self.gone
        best_like = n - self.unlike
        best_score = (self.score + (n - n_read)) * (1 + HOPE_MARGIN)
        self.gone = best_like < rules.min_like or best_like < rules.like_share * n or \
            best_score / n * self.coverage < rules.min_quality
        return self.gone

    def _read(self, new: list, idle: list) -> tuple:
        """What the similarities ``new`` that follow those read (``idle``: their idle
        flags) add: (instances unlike the unit, their summed score, how many, the least
        similarity as ``Unit.similarity`` rounds it)."""
        like = self.rules.like
        if len(new) == 1:  # (the first runs read one by one: the same counts, no sums made)
            x, h = new[0], self.held[self.read]
            return (0 if h or x >= like or idle[0] else 1,
                    max(x, like) if h and self.turns else x, 1, round(x, 3))
        held = self.held[self.read:self.read + len(new)]
        if any(held) or any(idle):
            unlike = sum(1 for x, h, i in zip(new, held, idle) if not h and x < like and not i)
        else:
            unlike = len(new) - sum(map(like.__le__, new))
        # at least as ``Unit.similarity`` rounds each, and as ``Unit.turn_score`` counts it
        score = sum(max(x, like) if h else x for x, h in zip(new, held)) \
            if self.turns and any(held) else sum(new)
        return unlike, score, len(new), round(min(new), 3)

    def _add(self, read: tuple) -> None:
        """Count what ``_read`` found."""
        unlike, score, count, lowest = read
        self.unlike += unlike
        self.score += score
        self.score += HOPE_ROUNDING * count
        if lowest < self.least:
            self.least = lowest


def _representative(cut: _Cut, spans: list, bags: list, shapes: list, hope: _Hope | None,
                    memo: SearchMemo) -> tuple | None:
    """The representative: the one that explains the most instances (like it, or idle beside
    it), tried among the most common exact shape, a few instances spread over the row and
    the busiest one (idle cycles may be the majority). The last instance is cut short:
    never a representative. Returns its index, each instance's similarity and composition
    against it, its reference and which instances are idle beside it; None when ``hope``
    (``_Hope``) says that the cut qualifies against none of those tried."""
    rules = memo.rules
    if cut.trials is None:  # (of the instances but the last: kept with the cut)
        cut.trials = _trials(cut, [bag[2] for bag in bags], shapes, rules)
    tried = cut.trials
    trials = [(spans[r], memo.reference(spans[r], bags[r])) for r in tried]
    # The instances but the last, as the previous search on this row found them.
    got = [memo.cut_likeness(ref, cut, hope and hope.fresh()) for ref in trials]
    if hope is not None and all(g is None for g in got):
        return None
    best = None
    for r, ref, kept in zip(tried, trials, got):
        scored, sims, like_n, idle_at = kept or memo.cut_likeness(ref, cut)
        last = memo.likeness(ref[1], spans[-1], bags[-1])
        scored, sims = scored + [last], sims + [last[0]]
        idle_at = idle_at + _idle_flags(sims[-1:], bags[-1:], spans[-1:], ref, memo)
        key = (like_n + (last[0] >= rules.like) + sum(idle_at),
               upper_median(sims))
        if best is None or key > best[0]:
            best = (key, r, sims, [w for _, w in scored], ref, idle_at)
    return best[1:]


def _trials(cut: _Cut, kernels: list, shapes: list, rules: Rules) -> list:
    """The instances tried as the representative, in order: the first of the most common
    exact shape, a few spread over the row and the busiest one (``kernels``: each instance's
    kernels)."""
    inner = cut.spans
    counts = Counter(shapes[:-1]) if len(shapes) > 1 else Counter(shapes)
    pattern = counts.most_common(1)[0][0]
    trial_idx = {shapes.index(pattern)}
    if len(inner) > 1:
        step = max(1, len(inner) // rules.medoid_trials)
        trial_idx.update(list(range(0, len(inner), step))[:rules.medoid_trials])
        trial_idx.add(max(range(len(inner)), key=kernels.__getitem__))
    return sorted(trial_idx)


def _unit_of(pos: list, anchor: int, instances: tuple, against: tuple, found: tuple,
             rules: Rules, memo: SearchMemo) -> Unit:
    """The cut at ``pos`` as a ``Unit``: ``instances`` are each instance's span, bag and
    shape; ``against`` what ``_representative`` found; ``found`` its coverage, spine, which
    instances hold the spine and whether that is evidence of turns."""
    spans, bags, shapes = instances
    rep, sims, ws, ref, idle_at = against
    coverage, spine, held, turns = found
    reference = ref[1]
    inner = spans[:-1]
    rep_shape = shapes[rep]
    liked = [x >= rules.like or h for x, h in zip(sims, held)]
    idle_at = [idle and not h for idle, h in zip(idle_at, held)]
    # A fragment has under half the representative's ops and, where work is weighed, under
    # half its work: a step without the four inserted ``detach`` ops of the representative
    # is no fragment of it.
    fragments = sum(1 for k, (a, b) in enumerate(inner)
                    if b - a < rules.fragment_ops * len(rep_shape)
                    and (not rules.weigh
                         or _work_ratio(bags[k], reference) < rules.piece_work_share))
    worst = min(range(len(sims)), key=sims.__getitem__)
    # The least similar instance that is not an idle cycle, nor at an edge of the row (the
    # first may hold a prologue, the last an epilogue): unlike and busy is what a layer's
    # neighbour holding the loss, backward and optimizer looks like.
    inner_sims = [x for x, idle in zip(sims[1:-1], idle_at[1:-1]) if not idle]
    # An unlike instance doing less work than the representative, on its path, is a piece of
    # a step (an eval forward cut out of its step): such a cut is no cut into whole steps.
    pieces = sum(1 for ok, idle, bag in zip(liked[1:-1], idle_at[1:-1], bags[1:-1])
                 if not idle and not ok
                 and _work_ratio(bag, reference) < rules.piece_work_share)
    unit = Unit(positions=list(pos), pattern=rep_shape, similarity=[round(s, 3) for s in sims],
                like=sum(liked), fragments=fragments, coverage=coverage, anchor=anchor,
                reference=reference, idle=sum(idle_at),
                inner_worst=min(inner_sims) if inner_sims else 1.0, pieces=pieces,
                even=all(rules.even_shortest * len(rep_shape) <= b - a
                         <= rules.even_longest * len(rep_shape) for a, b in inner),
                spine=spine,
                turn_score=sum(max(x, rules.like) if h and turns else x
                               for x, h in zip(sims, held)))
    if _qualifies(unit, rules):  # what only a candidate's choice, opening and evidence read
        unit.shapes = [0 if ok else _other_path_marked(memo.own_ops(ref, span, bag), shape,
                                                       rules)
                       for ok, span, bag, shape in zip(liked, spans, bags, shapes)]
        unit.exact = sum(1 for sh in shapes if sh == rep_shape)
        unit.differing = _differing(ws[worst], ws[rep], rules.differing_ops)
    return unit


def _loop_body(inner: list, rules: Rules) -> frozenset:
    """The cut's spine: the kinds of op found exactly once in every inner instance (``inner``:
    their shapes; the last instance may be cut short: not asked), when there are at least
    ``Rules.spine_ops`` of them."""
    if len(inner) < REPEAT or not rules.weigh:
        return frozenset()
    spine = None
    for shape in inner:
        once = {s for s, c in Counter(shape).items() if c == 1}
        spine = once if spine is None else spine & once
        if len(spine) < rules.spine_ops:
            return frozenset()
    return frozenset(spine)


def turns_the_loop(unit: Unit, names: list) -> bool:
    """Does each instance hold a loop marker once (the optimizer's step, ``zero_grad``, the
    input fetch: ``LOOP_MARKER_PATTERN``)? Then an instance is a whole turn of the training
    loop, not the inner loop of a step (the tokens of a rollout, seen before its update)."""
    return any(loop_marker(names[s]) for s in unit.spine)


def _spine_held(shapes: list, spine: frozenset) -> list:
    """Per instance: does it hold the whole spine, each kind exactly once? Then it is one turn
    of the loop, like the unit, however much else it does."""
    if not spine:
        return [False] * len(shapes)
    last = Counter(shapes[-1])
    return [True] * (len(shapes) - 1) + [all(last.get(s) == 1 for s in spine)]


#: Marks the shape of an instance that took another path (ops of its own): a candidate idle
#: cycle, if it also launches (almost) nothing (``cycle_kinds``).
OTHER_PATH = "another path"


def _took_another_path(shape) -> bool:
    return isinstance(shape, tuple) and shape[:1] == (OTHER_PATH,)


def _own_ops(bag_totals: tuple, reference: tuple) -> float:
    """The share of an instance's time (its ops where it has no time) in ops of kinds the
    reference does not have: an idle cycle spends it in ``idle_step``; an eval forward cut
    out of its step, in the step's own kinds of ops."""
    bag, time, _, count = bag_totals
    ref_w = reference[0]
    if time > 0:
        return sum(t for s, (t, _, _) in bag.items() if s not in ref_w) / time
    return sum(n for s, (_, _, n) in bag.items() if s not in ref_w) / count if count else 0.0


def _unlike_shape(bag_totals: tuple, reference: tuple, shape: tuple, rules: Rules):
    return _other_path_marked(_own_ops(bag_totals, reference), shape, rules)


def _other_path_marked(own_ops: float, shape: tuple, rules: Rules):
    """The shape of an unlike instance, marked when it spends ``own_ops`` (``_own_ops``) of
    its time in ops of its own: it took another path."""
    if own_ops >= rules.idle_own_ops:
        return (OTHER_PATH, shape)
    return shape


def shape_of(nodes: list, unit: Unit, rules: Rules = RULES):
    """An instance's shape as ``Unit.shapes`` has it: 0 if it is like the unit, else its
    symbols, marked when it took another path (for instances read after the unit was
    decided)."""
    return shape_and_similarity(nodes, unit, rules)[0]


def shape_and_similarity(nodes: list, unit: Unit, rules: Rules = RULES) -> tuple:
    """``shape_of`` and the instance's similarity to the unit (as ``Unit.similarity``)."""
    shape = tuple(node.sym for node in nodes)
    if not unit.reference:
        return shape, 1.0 if shape == unit.pattern else 0.0
    bag = _bag(nodes, 0, len(nodes))
    sim = _likeness(bag, unit.reference, rules)[0]
    if sim >= rules.like:
        return 0, round(sim, 3)
    return _unlike_shape(bag, unit.reference, shape, rules), round(sim, 3)


def _idle_flags(sims: list, bags: list, spans: list, ref: tuple, memo: SearchMemo) -> list:
    """Per instance: is it an idle cycle, one that took another path: unlike the
    representative (``ref``: its span and reference), doing (almost) none of its GPU work,
    with ops of its own (``idle_step``)? An eval forward cut out of a step is a part of the
    step's ops instead."""
    rules = memo.rules
    ref_gpu = ref[1][2]
    if not ref_gpu > 0:
        return [False] * len(sims)
    return [sim < rules.like and bag[2] < rules.idle_work_share * ref_gpu
            and memo.own_ops(ref, span, bag) >= rules.idle_own_ops
            for sim, bag, span in zip(sims, bags, spans)]


def _coverage(row: list, cut: _Cut, last: tuple, rules: Rules, memo: SearchMemo) -> float:
    """The share of the row's work in the instances of ``cut`` (``last``: the last one's
    span): GPU work where it is known, else time (unweighed: ops). Every instance of about
    the unit's length counts (an eval step is unlike a plain one, yet part of the loop; the
    like share is what judges regularity); the length is the median instance's (the
    representative may carry a run of inserted small ops). The last one counts whatever its
    length. The inner instances' part is kept with the cut (``_covered``)."""
    m = len(row)
    covered = _covered(cut, rules)
    a, b = last
    if not rules.weigh:
        return (covered.ops + b - a) / m
    gpu_total = memo.gpu_total
    if gpu_total > 0:  # GPU work decides where it is known (kernels launched per op)
        # Kernels are counts: summed span by span they add up exactly as op by op.
        if covered.gpu is None:
            covered.gpu = sum(memo.gpu(span) for span in covered.spans)
        return (covered.gpu + memo.gpu(last)) / gpu_total
    # CPU time of the instances' windows (start to next start: idle gaps belong to the
    # iteration), each capped, so that one blocking sync cannot make tiny instances cover.
    total = memo.row_end - row[0].start
    if covered.times is None:  # (an inner instance's next start is in the row)
        covered.times = sorted(row[q].start - row[p].start for p, q in covered.spans)
    times = covered.times.copy()
    # (the last instance's latest end where it ends the row: read with ``map``, no Python
    # frame per op; it is the row's tail, 2 k ops an evaluation of 200 k names at random)
    insort(times, (row[b].start if b < m else max(map(_END, row[a:b]))) - row[a].start)
    cap = rules.time_cap * times[len(times) // 2]  # (``upper_median``)
    # Summed in order, each capped (``min(t, cap)``): the times up to the cap, then the cap
    # for each of the others.
    under = bisect_right(times, cap)
    capped = chain(islice(times, under), repeat(cap, len(times) - under))
    return sum(capped) / total if total > 0 else 0.0


def _covered(cut: _Cut, rules: Rules) -> _Covered:
    """The instances of ``cut`` but the last that count for its coverage (``_Covered``),
    kept with it."""
    if cut.covered is None:
        width = cut.ops  # the median instance's ops
        spans = [(a, b) for a, b in cut.spans
                 if rules.cover_shortest * width <= b - a <= rules.cover_longest * width]
        cut.covered = _Covered(spans, sum(b - a for a, b in spans))
    return cut.covered


def _shapes(cut: _Cut, syms: list) -> list:
    """The ops of each instance of ``cut`` but the last (a tuple each), kept with it."""
    if cut.shapes is None:
        cut.shapes = [tuple(syms[a:b]) for a, b in cut.spans]
    return cut.shapes


def _may_qualify(n: int, coverage: float, rules: Rules) -> bool:
    """The tests of ``_qualifies`` that a cut's number of instances and its coverage decide
    alone: a cut that fails them is not evaluated further (``_evaluate``)."""
    if n < REPEAT:
        return False
    if n < rules.min_instances:
        return n == REPEAT and rules.weigh and coverage >= rules.two_coverage
    return coverage >= rules.min_coverage


def _qualifies(unit: Unit | None, rules: Rules) -> bool:
    if unit is None or not _may_qualify(unit.n, unit.coverage, rules):
        return False
    n = unit.n
    if n < rules.min_instances:
        return unit.worst >= rules.two_similarity
    # An instance holding the loop's own once-per-turn ops once is a turn, however its shapes
    # make its work differ (dynamic shapes): its similarity counts at least as ``like``.
    score = max(unit.score, unit.turn_score)
    return (unit.like >= rules.min_like
            and unit.like >= rules.like_share * (n - unit.idle)
            and score / n * unit.coverage >= rules.min_quality
            and unit.fragments <= rules.fragment_share * n)


def _super_period(coarse: Unit, fine: Unit, rules: Rules, markers: frozenset) -> bool:
    """Is each of ``coarse``'s instances, on average, several of ``fine``'s? Not when the
    coarse cut's spine holds a loop marker (the optimizer's step, the input fetch) that the
    finer cut's instances do not each hold: the finer one cuts a part of the loop's turn (the
    forwards of an eval pass, the tokens of a rollout)."""
    if (coarse.spine & markers) - fine.spine:
        return False
    return fine.n >= rules.super_period_ratio * coarse.n


def _same_loop(a: Unit, b: Unit, rules: Rules) -> bool:
    return min(a.n, b.n) >= rules.same_loop_ratio * max(a.n, b.n)


def _whole_steps(unit: Unit, rules: Rules) -> bool:
    """Is every instance (but a few) a whole step: like the unit or an idle cycle, covering
    nearly all of the work? Layers are not: one of them holds the rest of the step."""
    return (unit.like + unit.idle >= rules.super_period_like * unit.n
            and unit.coverage >= rules.super_period_coverage
            and unit.inner_worst >= rules.super_period_floor and not unit.pieces)


def _more_regular(a: Unit, b: Unit, rules: Rules, markers: frozenset = frozenset()) -> bool:
    """Of two cuts of one loop: the one whose every instance holds the loop's own
    once-per-turn ops exactly once (its spine holds a loop marker of ``markers``: one
    ``Optimizer.step`` each, however unlike their shapes make them) when the other's do not;
    else the one with fewer instances holding two turns (``Unit.merged``: an instance that
    lost its anchor to noise holds two optimizer steps); else the one whose summed
    similarity is clearly higher, where each extra instance must pay for itself by being
    like the unit (an eval forward cut out of its step does not); else the fewer instances,
    then the earlier."""
    turns_a, turns_b = bool(a.spine & markers), bool(b.spine & markers)
    if turns_a != turns_b:
        return turns_a
    if a.merged != b.merged:
        return a.merged < b.merged
    margin = rules.score_margin * max(a.n, b.n)
    if a.n != b.n:
        fine, coarse = (a, b) if a.n > b.n else (b, a)
        fine_wins = fine.score > coarse.score + (fine.n - coarse.n) * rules.like
        return (fine is a) == fine_wins
    if abs(a.score - b.score) > margin:
        return a.score > b.score
    return a.first < b.first


def _merged_turns(unit: Unit, syms: list, markers: frozenset) -> int:
    """How many inner instances of ``unit`` hold one of the loop's ``markers`` (its
    once-per-turn ops) more than once: two turns in one, where the anchor was missing. A
    marker missing from an instance says less: noise drops a small op, never adds a turn."""
    pos = unit.positions
    merged = 0
    for a, b in zip(pos, pos[1:]):
        counts = Counter(syms[q] for q in range(a, b) if syms[q] in markers)
        merged += any(c > 1 for c in counts.values())
    return merged


def _choose(candidates: list, rules: Rules, markers: frozenset = frozenset()) -> Unit:
    """The coarsest candidate that is not a super-period of whole finer steps; of the cuts of
    that same loop, the clearly more regular one, else the earliest."""
    fine = [c for c in candidates if _whole_steps(c, rules)]
    pool = [c for c in candidates
            if not any(f.n > c.n and not _same_loop(c, f, rules) and _super_period(c, f, rules, markers)
                       for f in fine)] or candidates
    coarsest = min(pool, key=lambda c: c.n)
    same = [c for c in pool if _same_loop(c, coarsest, rules)]
    best = same[0]
    for c in same[1:]:
        best = c if _more_regular(c, best, rules, markers) else best
    # The cuts of the winner's loop too: the coarsest cut may have lost a third of its
    # instances (its anchor dropped by noise), so a cut of every step is out of its reach.
    while True:
        more = [c for c in pool if c not in same and _same_loop(c, best, rules)]
        if not more:
            return best
        same.extend(more)
        for c in more:
            best = c if _more_regular(c, best, rules, markers) else best


def _idle_cycles_apart(best: Unit, candidates: list, rules: Rules) -> Unit | None:
    """Idle cycles are their own records: a cut whose instances begin where the chosen one's
    do (after ``_opening``), plus idle cycles begun by the same loop head, wins over the chosen one,
    which swallows them."""
    starts = set(best.positions)
    heads = [c for c in candidates if c.idle and abs(c.n - c.idle - best.n) <= 1
             and c.like + c.idle >= rules.super_period_like * c.n
             and c.coverage >= best.coverage - rules.score_margin and c.even
             and starts <= set(c.positions)]
    return max(heads, key=lambda c: (c.like + c.idle, c.score)) if heads else None


# -- the search ------------------------------------------------------------------------


def search_cap(m: int, rules: Rules = RULES) -> int:
    """The work one search of a row of ``m`` ops does at most: ``search_work``, and at most
    ``Rules.search_work_ratio`` per op of the row, so that a short row's search is short
    too. (``SearchBudget`` charges the online tries ``search_work``: the same as before this
    bound, so that they are tried when they were.)"""
    return min(search_work(m, rules), rules.search_work_ratio * m)


def find_unit(row: list, rules: Rules = RULES, names: list | None = None,
              whole: bool = True, memo: SearchMemo | None = None,
              least_exact: int = 0, wide=None) -> Unit | None:
    """The outermost repeating unit of a sequence of sibling ops, or None. ``names``: the
    name of each symbol, for the opening rules that read names (input fetch, sync). ``whole``:
    the row is complete (at the end of the input), not cut off in the middle of an
    instance (online): only then can its end tell where an instance ends. ``memo``: what
    the previous search on this row computed (``SearchMemo``), to search it again after
    it grew; the answer is the same with or without it. ``least_exact``: the caller has no
    use for a unit with fewer exact instances (``Unit.exact``; ``verdict.exact_needed``):
    None, without choosing nor opening a unit, where no candidate has that many
    (``_exact_candidate``), and without opening one where the unit it would open has fewer
    (``_may_end_exact``); else the same answer as without it. ``wide``: with
    ``least_exact``, the caller has no use either for a unit whose instances of so many ops
    are not ``wide(ops)`` (``verdict.exact_possible``): None where every candidate of
    enough exact instances has such instances."""
    m = len(row)
    if m < REPEAT:
        return None
    if memo is None:
        memo = SearchMemo()
    memo.begin(row, rules)
    syms = list(map(_SYMBOL, row))
    positions = memo.positions(syms)
    # (A marker seen once in the row is in no spine and never twice in an instance: of no
    # use to the rules that read markers.)
    markers = frozenset(s for s in positions if names and loop_marker(names[s]))
    memo.markers = markers
    anchors = _anchors(positions, m, rules)
    units: dict = {}  # anchor's index -> its cut evaluated (``_evaluate``), once
    if least_exact and not _exact_candidate(anchors, units, least_exact, row, syms, rules,
                                            memo, wide):
        return None
    candidates = []
    for k, (sym, pos) in enumerate(anchors):
        unit = units[k] if k in units else _evaluate(pos, sym, row, syms, rules, memo)
        if _qualifies(unit, rules):
            candidates.append(unit)
    if not candidates:
        return None
    for unit in candidates if markers else ():
        unit.merged = _merged_turns(unit, syms, markers)
    chosen = _choose(candidates, rules, markers)
    if least_exact and not _may_end_exact(chosen, candidates, least_exact, movable=(
            names is not None and any(loop_marker(names[s]) or names[s] in BLOCKING_SYNC_NAMES
                                      for s in set(syms)))):
        return None
    best = _opened(chosen, row, syms, positions, names, rules, whole, memo)
    apart = _idle_cycles_apart(best, candidates, rules)
    if apart is not None:
        best = _opened(apart, row, syms, positions, names, rules, whole, memo)
    best = _waits_apart(best, row, syms, rules)
    return _turns_apart(best, row, syms, names, rules) if whole and names is not None \
        else best


def _may_end_exact(chosen: Unit, candidates: list, least: int, movable: bool) -> bool:
    """May the unit ``find_unit`` answers, ``chosen`` among ``candidates``, have ``least``
    exact instances? It is ``chosen``, or a candidate with idle cycles
    (``_idle_cycles_apart``), opened: the opening keeps ``Unit.exact`` (``_opened``, and so
    do ``_waits_apart`` and ``_turns_apart``) unless it moves the cut to another kind of op
    (``_begin_at``, ``_at_loop_edge``), which only a row with a loop marker (an input
    fetch is one) or a blocking sync allows, and only with ``names`` (``movable``: then it
    may). Where none of them has that many, the online tries on a row that only exact
    instances can confirm (``verdict.exact_needed``) spare the opening, and the iteration
    test."""
    return movable or any(c.exact >= least for c in [chosen] + [c for c in candidates if c.idle])


def _anchors(positions: _Positions, m: int, rules: Rules) -> list:
    """The anchors one search of a row of ``m`` ops tries, in the order they first occur:
    (symbol, its positions as a tuple: the key of its cut), one per cut, until their cuts
    have covered ``search_cap`` ops (the anchors that first occur later are not tried)."""
    anchors = []
    seen = set()
    work = search_cap(m, rules)
    for sym, pos in positions.items():
        key = tuple(pos)
        if key in seen:
            continue
        seen.add(key)
        work -= pos[-1] - pos[0]
        if work < 0:
            break
        anchors.append((sym, key))
    return anchors


def _exact_candidate(anchors: list, units: dict, least: int, row: list, syms: list,
                     rules: Rules, memo: SearchMemo, wide=None) -> bool:
    """Does a candidate among the cuts of ``anchors`` have at least ``least`` exact instances
    (``Unit.exact``)? Only the cuts that could (``_most_exact``) are evaluated, and kept in
    ``units`` (anchor's index -> ``_evaluate``'s answer) for the search to go on with: each
    cut is evaluated alone (through ``memo``), so the candidates are the same whichever are
    evaluated first. The unit chosen is one of the candidates, opened (its instances'
    beginnings moved, ``Unit.exact`` kept), or one of them cut again where it waited
    (``_waits_apart``, ``Unit.exact`` kept too): without such a candidate, it has fewer.
    ``wide``: of use only where it holds for the number of ops of the representative (a
    shape that recurs, alike, ``least`` times among the instances)."""
    for k, (sym, pos) in enumerate(anchors):
        cut = memo.cut(tuple(pos))
        if _most_exact(cut, row, syms, rules, memo, least) >= least and (
                wide is None or any(wide(width) for width in _exact_widths(cut, least))):
            unit = units[k] = _evaluate(pos, sym, row, syms, rules, memo)
            if _qualifies(unit, rules) and unit.exact >= least:
                return True
    return False


def _most_exact(cut: _Cut, row: list, syms: list, rules: Rules, memo: SearchMemo,
                least: int = 0) -> int:
    """The most exact instances a unit of ``cut`` can have (``Unit.exact``: those whose ops
    are exactly the representative's, which is one of its inner instances), from the ops
    alone: the most inner instances alike, and the last one if it is like them too. Only
    instances of one length can be alike: the ops are compared where lengths recur, and
    the last one with the inner one of its length (``_cut_shapes``, kept with the cut:
    the row's growth changes the last instance only). Where the inner instances alone
    leave fewer than ``least`` (``_cut_shapes``' bound: the last instance alike the most of
    them), that bound, below ``least`` as the answer is: the last instance is not read."""
    if not cut.spans:
        return 0
    if cut.alike is None:
        cut.alike = _cut_shapes(cut.spans, syms)
    alike, lone, bound = cut.alike
    if bound < least:
        return bound
    a, b = _last_segment(cut, row, rules, memo)
    width = b - a  # (only a shape of its length can be the last one's)
    shape = lone.get(width)  # the inner instance of the last one's length, if alone
    last = tuple(syms[a:b]) if shape is not None or any(len(s) == width for s in alike) \
        else None
    most = max([n + (ops == last) for ops, n in alike.items()], default=0)
    if shape is not None:
        return max(most, 1 + (shape == last))
    return most or 1


def _exact_widths(cut: _Cut, least: int) -> set:
    """The op counts of the representatives of a unit of ``cut`` with ``least`` exact
    instances (inner instances alike, ``least`` - 1 at least, or one alone where that is
    enough: ``_cut_shapes``, asked once ``_most_exact`` has counted them)."""
    alike, lone, _ = cut.alike
    return {len(shape) for shape, n in alike.items() if n + 1 >= least} | \
        (set(lone) if least <= REPEAT else set())


def _cut_shapes(spans: list, syms: list) -> tuple:
    """The ops of the inner instances ``spans`` (their symbols, a tuple each), for
    ``_most_exact``: how many instances have each one among those of a length that recurs
    (a ``Counter``), and for each length of one instance alone, its ops; and the most exact
    instances a unit of the cut can have whatever its last instance holds (the most alike
    and the last one, one alone and the last one, or the last one alone)."""
    lengths = Counter(b - a for a, b in spans)
    alike = Counter(tuple(syms[a:b]) for a, b in spans if lengths[b - a] > 1)
    lone = {b - a: tuple(syms[a:b]) for a, b in spans if lengths[b - a] == 1}
    return alike, lone, max(max(alike.values(), default=0), bool(lone)) + 1


class _Positions(dict):
    """Symbol -> where it occurs in the row (``syms``: each op's symbol), for the symbols
    that repeat, in the order they first occur: the candidate anchors. Those of a symbol
    seen once are found when asked for (the opening rules may ask for a spine's kind that
    one like instance alone holds). A row of a million names each seen once holds no
    candidate, and none of its symbols is kept here."""

    __slots__ = ("_syms",)

    def __init__(self, syms: list, occurrences: dict | None = None):
        """``occurrences``: where each symbol of ``syms`` occurs, every symbol in the order
        they first occur (``SearchMemo.positions``), if known; else read from ``syms``."""
        super().__init__()
        self._syms = syms
        if occurrences is not None:
            for sym, where in occurrences.items():
                if len(where) >= REPEAT:
                    self[sym] = where[:]  # (the caller's own list: the kept one grows)
            return
        if len(syms) < REPEAT:
            return
        values = np.asarray(syms, dtype=np.int64)
        order = np.argsort(values, kind="stable")  # each symbol's occurrences, in order
        ordered = values[order]
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        ends = np.append(starts[1:], len(ordered))
        repeated = np.flatnonzero(ends - starts >= REPEAT)
        firsts = order[starts[repeated]]
        chosen = repeated[np.argsort(firsts, kind="stable")]
        # (the lists sliced from one list, not each from the array: thousands of kinds
        # recur in a row of names drawn at random)
        where = order.tolist()
        for sym, lo, hi in zip(ordered[starts[chosen]].tolist(), starts[chosen].tolist(),
                               ends[chosen].tolist()):
            self[sym] = where[lo:hi]

    def __missing__(self, sym: int) -> list:
        return [i for i, s in enumerate(self._syms) if s == sym]


def _turn_edges(row: list, starts: list, rules: Rules) -> list:
    """The positions of the ops after a *turn edge*: an op that waited for the device (a
    blocking host sync beneath it, ``Node.syncs``), then an idle gap among the wide ones.
    The instances' beginnings ``starts`` that lie after such an op say how wide the loop's
    edge is: among the gaps after such ops up to the median of theirs (an anchor inside a
    turn, after a copy, does not lower it), the widest ratio
    between two consecutive ones, when at least ``Rules.turn_edge_ratio``, parts the
    host's work after a copy inside a turn from the loop's own Python between two turns;
    else every such gap is an edge."""
    gaps = {q: _gap_before(row, q) for q in range(1, len(row)) if row[q - 1].syncs}
    known = [gaps[q] for q in starts if gaps.get(q, 0) > 0]
    if not known:
        return []
    values = sorted(g for g in gaps.values() if 0 < g <= upper_median(known))
    threshold, best = values[0], rules.turn_edge_ratio
    for lo, hi in zip(values, values[1:]):
        if hi >= best * lo:
            threshold, best = hi, hi / lo
    return [q for q, g in gaps.items() if g >= threshold]


def _turns_apart(unit: Unit, row: list, syms: list, names: list, rules: Rules) -> Unit:
    """Turns of a loop that each end waiting for the device take different paths (a server's
    scheduler step: a decode replays a CUDA graph, a prefill runs eager kernels over a
    prompt, a mixed step does both), so no anchor cuts every turn: the one chosen cuts some
    and merges the others into them. Evidence, not names: where more than
    ``Rules.turn_start_share`` of the unit's instances (the first aside) begin at a turn
    edge (``_turn_edges``) and at least ``Rules.min_instances`` turn edges lie inside
    instances (turns merged), every turn edge begins a turn, and an anchor not at one (a
    second request's prefill in one step) begins none; the ops before the first turn edge
    are a turn when they are exactly the ops of another turn (a prologue is not). Only with
    GPU work known (syncs are runtime calls) and where nothing stronger opened the unit (an
    input fetch, the loop's once-per-turn ops: a training step's own ops say where it
    turns; its eval pass waits for the device too)."""
    pos = unit.positions
    if len(pos) < REPEAT or not unit.reference or not unit.reference[2] \
            or unit.opening in (OPENS_AT_INPUT_FETCH, OPENS_AT_LOOP_EDGE) \
            or any(loop_marker(names[s]) for s in unit.spine):
        return unit
    edges = _turn_edges(row, pos[1:], rules)
    at_edge = set(edges) & set(pos[1:])
    if len(at_edge) <= rules.turn_start_share * (len(pos) - 1) or \
            sum(1 for q in edges if q > pos[0] and q not in at_edge) < rules.min_instances:
        return unit
    starts = edges if edges[0] <= pos[0] else [pos[0]] + edges
    ends = starts[1:] + [len(row)]
    if starts[0] > 0 and tuple(syms[:starts[0]]) in {tuple(syms[a:b]) for a, b in
                                                     zip(starts, ends)}:
        starts, ends = [0] + starts, [starts[0]] + ends
    shapes, sims = zip(*(shape_and_similarity(row[a:b], unit, rules)
                         for a, b in zip(starts, ends)))
    return replace(unit, positions=starts, shapes=list(shapes), similarity=list(sims),
                   opening=OPENS_AT_TURN_EDGE)


def _waits_apart(unit: Unit, row: list, syms: list, rules: Rules) -> Unit:
    """Turns of the loop that only waited (a server's idle poll: a sleep, then a heartbeat
    op) are turns of their own, though no op of theirs recurs in the unit. A *wait* is an idle
    gap ``Rules.wait_gap_ratio`` times the narrowest gap before an instance (the loop's own
    Python between two turns) and the typical gap between two ops; the ops of kinds never read
    but after a wait and not in the spine (``body``: the turns' own work) that follow one are
    a turn of their own when they do little work (``_only_waited``), and the op after them
    begins the rest of the instance (in the last instance only where all that follows only
    waited). Idle turns recur (``Rules.min_instances`` of them at least). Only where no GPU
    work is known (``cycle_kinds`` tells idle cycles by it); where the loop never waits,
    nothing changes."""
    pos = unit.positions
    if len(pos) < rules.min_instances or not unit.reference or len(unit.shapes) != len(pos) \
            or unit.reference[2]:
        return unit  # (with GPU work known, a cycle that launches none is told idle by it)
    gaps = _gaps_before(row)
    wait = rules.wait_gap_ratio * max(min(gaps[p] for p in pos[1:]),
                                      upper_median(gaps[1:], 0.0))
    if not 0 < wait < math.inf:
        return unit
    body = {syms[q] for q, gap in enumerate(gaps) if gap < wait} | unit.spine
    bounds = pos[1:] + [len(row)]
    starts, shapes, sims = [], [], []
    for i, (p, end) in enumerate(zip(pos, bounds)):
        pieces = _idle_runs(row, syms, gaps, p, end, wait, body, unit, rules)
        if end == len(row):
            pieces = _last_turns(pieces, row, unit, rules)
        if len(pieces) == 1:
            starts.append(p)
            shapes.append(unit.shapes[i])
            sims.append(unit.similarity[i])
            continue
        for a, b in zip(pieces, pieces[1:] + [end]):
            shape, sim = shape_and_similarity(row[a:b], unit, rules)
            starts.append(a)
            shapes.append(shape)
            sims.append(sim)
    if len(starts) - len(pos) < rules.min_instances:
        return unit  # a pause now and then is no server's idle poll: a poll recurs
    return replace(unit, positions=starts, shapes=shapes, similarity=sims)


def _idle_runs(row: list, syms: list, gaps: list, p: int, end: int, wait: float, body: set,
               unit: Unit, rules: Rules) -> list:
    """Where the turns begin in the instance ``row[p:end]`` (``gaps``: ``_gaps_before``): at
    ``p``, at each run of ops outside ``body`` after a wait that only waited
    (``_only_waited``), and at the op of ``body`` that follows such a run."""
    pieces = [p]
    q = p
    while q < end:
        if (q == p or gaps[q] >= wait) and syms[q] not in body:
            r = q
            while r < end and syms[r] not in body and (r == q or gaps[r] < wait):
                r += 1
            if _only_waited(row[q:r], unit, rules):
                if q > p:
                    pieces.append(q)
                if r < end and (q > p or r > p):
                    pieces.append(r)
                q = r
                continue
        q += 1
    return sorted(set(pieces))


def _last_turns(starts: list, row: list, unit: Unit, rules: Rules) -> list:
    """The turns of the last instance (beginning at ``starts``): it runs into whatever
    follows the loop, so after its first busy turn only idle turns to the row's end are
    turns; an epilogue after a pause is none."""
    ends = starts[1:] + [len(row)]
    idle = [_only_waited(row[a:b], unit, rules) for a, b in zip(starts, ends)]
    busy = next((k for k, x in enumerate(idle) if not x), len(starts))
    return starts if all(idle[busy + 1:]) else starts[:busy + 1]


def _only_waited(ops: list, unit: Unit, rules: Rules) -> bool:
    """Did a turn of these ``ops`` only wait: little work (``Rules.wait_work_share`` of the
    unit's representative's time) and almost none of its GPU work?"""
    _, ref_time, ref_gpu, _ = unit.reference
    return (sum(n.end - n.start for n in ops) <= rules.wait_work_share * ref_time
            and sum(n.gpu for n in ops) <= rules.idle_work_share * ref_gpu)


def _opened(unit: Unit, row, syms, positions, names, rules, whole, memo) -> Unit:
    """``_opening``, and the head it found: the kinds of op between each instance's new
    beginning and its anchor."""
    anchors = list(unit.positions)
    unit = _opening(unit, row, syms, positions, names, rules, memo, whole)
    if unit.positions != anchors and len(unit.positions) == len(anchors):
        unit.head = unit.head | frozenset(syms[q] for a, b in zip(unit.positions, anchors)
                                          for q in range(a, b))
    return unit


def _opening(unit: Unit, row: list, syms: list, positions: dict, names,
           rules: Rules, memo: SearchMemo, whole: bool = True) -> Unit:
    """Where the loop begins among the unit's ops (see the module docstring, step 5)."""
    pos = unit.positions
    seen_in: Counter = Counter()
    for shape, times in _inner_shapes(unit, syms).items():
        for s in set(shape):
            seen_in[s] += times
    # Noise: small ops of kinds seen in few instances. A walk over a step's head steps over
    # them, never over a big op (an eval pass) or a common one.
    common = {s for s, c in seen_in.items() if c > rules.sporadic_share * max(1, len(pos) - 1)}
    small = rules.small_op_share * upper_median(
        (sum(row[q].end - row[q].start for q in range(a, b)) for a, b in zip(pos, pos[1:])),
        0.0)
    tiny = {q for q, node in enumerate(row) if node.end - node.start <= small}
    noise = {q for q in tiny if syms[q] not in common}
    if names is not None:
        spine = _spine(unit, syms, rules)
        # An input fetch may occur twice in an instance that swallowed an idle cycle.
        fetch = [s for s in _spine(unit, syms, rules, once=False)
                 if input_fetch(names[s])]
        if fetch:
            return _begin_at(unit, fetch[0], row, syms, positions, noise, memo,
                             OPENS_AT_INPUT_FETCH)
        after_sync = _after_sync(unit, spine, names, syms, rules)
        if after_sync is not None:
            syncs = {q for q, x in enumerate(syms) if names[x] in BLOCKING_SYNC_NAMES}
            return _begin_at(unit, after_sync, row, syms, positions, noise, memo,
                             OPENS_AFTER_SYNC,
                             tiny - syncs)
        edge = _at_loop_edge(unit, spine, row, syms, positions, names, memo)
        if edge is not None:
            return edge
    return _extend_head(unit, row, syms, noise, rules, whole, tiny)


def _gap_before(row: list, q: int) -> float:
    """The host's idle time before the op at ``q`` (since the op before it ended); the row's
    first op has no op before it: an edge of its own."""
    return row[q].start - row[q - 1].end if q > 0 else math.inf


def _gaps_before(row: list) -> list:
    """``_gap_before`` of every op of ``row``, in order (one pass, for a rule that reads
    them all)."""
    return [math.inf] + [op.start - before.end for before, op in zip(row, row[1:])]


def loop_edge_in(row: list, lo: int, hi: int) -> int:
    """The loop's edge among the ops ``row[lo..hi]`` (both included), the one rule of it:
    between two turns the host runs the loop itself (``prof.step()``, the ``for`` statement,
    the fetch's Python), so the turn begins at the op after the widest idle gap; of equal
    gaps the later (an op joins a turn only on a wider gap). Where the edge may lie (the
    window) comes from the evidence of each opening: the small ops before an input fetch
    (``_fetch_edge``), the ops after the op that ends a turn (``_at_loop_edge``)."""
    return max(range(lo, hi + 1), key=lambda q: (_gap_before(row, q), q))


def _edge_pair(kinds: list, row: list, syms: list, names: list, rules: Rules) -> tuple | None:
    """Of the once-per-turn ``kinds`` (``_spine``, in the representative's order), taken
    cyclically, the pair (the one before, the one after) between which the loop turns: next
    to the loop's own markers (``_edge_candidates``), where the widest idle gap lies in every
    instance: its median over the instances is ``Rules.loop_edge_ratio`` times that of any
    other candidate. None where no pair stands out."""
    if len(kinds) < REPEAT:
        return None
    at = {s: [q for q in range(len(syms)) if syms[q] == s] for s in kinds}
    widest = []
    for j in _edge_candidates(kinds, names):
        before, after = at[kinds[j - 1]], kinds[j]
        gaps = []
        for q in at[after]:
            k = bisect_left(before, q) - 1
            if k >= 0:
                gaps.append(max(_gap_before(row, x) for x in range(before[k] + 1, q + 1)))
        widest.append((upper_median(gaps, 0.0), kinds[j - 1], after))
    widest.sort(reverse=True)
    if not widest or widest[0][0] <= 0:
        return None
    top, before, after = widest[0]
    if len(widest) > 1 and top < rules.loop_edge_ratio * widest[1][0]:
        return None
    return before, after


def _edge_candidates(kinds: list, names: list) -> list:
    """Where among the once-per-turn ``kinds`` (cyclic) the loop may turn: each index ``j``
    stands for the pair (``kinds[j - 1]``, ``kinds[j]``). After the op that ends a turn
    (``Optimizer.step``: ``TURN_END_PATTERN``) and after each marker that follows it at once
    (``zero_grad`` at a turn's end); where no op ends a turn, after any marker or before one
    that may open a turn (``_opens_turn``). A gap inside the forward is never the edge, however
    wide (an op the profiler missed)."""
    ends = [j for j, s in enumerate(kinds) if _TURN_END.search(names[s])]
    if ends:
        out = [(ends[0] + 1) % len(kinds)]
        while loop_marker(names[kinds[out[-1]]]) and len(out) < len(kinds) - 1:
            out.append((out[-1] + 1) % len(kinds))
        return out
    return [j for j, after in enumerate(kinds)
            if _opens_turn(names[after]) or loop_marker(names[kinds[j - 1]])]


def _opens_turn(name: str) -> bool:
    """May an op of this name be a turn's first own op? A loop marker but the one that ends
    a turn (``TURN_END_PATTERN``)."""
    return loop_marker(name) and not _TURN_END.search(name)


def _at_loop_edge(unit: Unit, spine: list, row: list, syms: list, positions: dict,
                  names: list, memo: SearchMemo) -> Unit | None:
    """A unit whose instances hold the loop's own once-per-turn ops (``spine``: the kinds
    once in most like instances, ``_spine``; one a loop marker: ``Optimizer.step``,
    ``zero_grad``) and no input fetch nor closing sync opens:
    each instance begins at the loop's edge (``loop_edge_in``) among the ops between the
    spine's kind that ends a turn and the one that begins the next (``_edge_pair``), so the ops that make the step's input (a batch of any shape,
    padded or bucketed) are its own. The cut moves to the kind after the edge when it cuts
    as many turns as well (as ``_begin_at``). None where the edge is not clear."""
    if not any(loop_marker(names[s]) for s in spine):
        return None
    rules = memo.rules
    pair = _edge_pair(spine, row, syms, names, rules)
    if pair is None:
        return None
    before, after = pair
    if after != unit.anchor:
        moved = _evaluate(positions[after], after, row, syms, rules, memo)
        if not (_qualifies(moved, rules) and moved.n == unit.n
                and moved.score >= unit.score - rules.score_margin * unit.n):
            return None
        unit = moved
    pos = unit.positions
    ends = positions[before]
    cuts = {}
    for i in range(len(pos) - 1, -1, -1):  # the first turn last: it reads the others' reach
        p = pos[i]
        k = bisect_left(ends, p) - 1
        lo = max(ends[k] + 1 if k >= 0 else 0, pos[i - 1] + 1 if i else 0)
        if not i and k < 0:  # no turn before: back no further than the others reach
            lo = max(0, p - max((pos[j] - cuts[j] for j in cuts), default=0))
        cuts[i] = loop_edge_in(row, lo, p)
    unit.positions = [cuts[i] for i in range(len(pos))]
    unit.opening = OPENS_AT_LOOP_EDGE
    return unit


def _spine(unit: Unit, syms: list, rules: Rules, once: bool = True) -> list:
    """Symbols that occur in most like instances (exactly once there, with ``once``), in the
    representative's order."""
    seen: Counter = Counter()
    like = _inner_shapes(unit, syms, like_only=True)
    for shape, times in like.items():
        for s, n in Counter(shape).items():
            if n == 1 or not once:
                seen[s] += times
    like_n = sum(like.values())
    if not like_n:
        return []
    order = {s: i for i, s in reversed(list(enumerate(unit.pattern)))}
    return sorted((s for s, n in seen.items() if n >= rules.spine_share * like_n and s in order),
                  key=order.__getitem__)


def _inner_shapes(unit: Unit, syms: list, like_only: bool = False) -> Counter:
    """The symbols of each instance of ``unit`` but the last (``like_only``: of those like
    it), and how many instances have them: a loop of a million one-op instances has one."""
    pos = unit.positions
    return Counter(tuple(syms[pos[k]:pos[k + 1]]) for k in range(len(pos) - 1)
                   if not like_only or unit.shapes[k] == 0)


def _after_sync(unit: Unit, spine: list, names: list, syms: list, rules: Rules):
    """The first spine op after a blocking sync that closes most instances (cyclically)."""
    pattern = unit.pattern
    inner = None  # the kinds of op in each instance but the last, once a sync asks
    for i, s in enumerate(pattern):
        if names[s] not in BLOCKING_SYNC_NAMES or s not in spine:
            continue
        if inner is None:
            inner = _inner_shapes(unit, syms)
        # A stray sync is noise: it is in the spine of the like instances, and in most of all
        # the instances (with one like step beside an eval step, any op of it is "spine").
        if sum(times for shape, times in inner.items() if s in shape) >= \
                rules.spine_share * (len(unit.positions) - 1):
            for k in range(1, len(pattern)):
                nxt = pattern[(i + k) % len(pattern)]
                if nxt in spine and names[nxt] not in BLOCKING_SYNC_NAMES:
                    return nxt
    return None


def _walk_left(unit: Unit, syms: list, head, noise: set, take_noise: bool = False) -> list:
    """Each instance's beginning moved left from its anchor to the leftmost op of ``head``
    reachable over head ops and ``noise`` positions (not past the previous anchor); with
    ``take_noise``, to the leftmost noise op too (everything after a sync is the step's).
    A ``Counter`` head is taken at most as often as it counts each kind of op: the ops that
    precede the anchor in the representative, no more (``model.to(device)`` before the first
    fetch is the prologue's, though an ``aten::to`` follows each fetch)."""
    pos = unit.positions
    new = []
    for i, p in enumerate(pos):
        lo = pos[i - 1] + 1 if i else 0
        left = Counter(head) if isinstance(head, Counter) else None
        start = p
        q = p - 1
        while q >= lo and (syms[q] in head or q in noise):
            if syms[q] in head and left is not None:
                if not left[syms[q]]:
                    break
                left[syms[q]] -= 1
            if take_noise or syms[q] in head:
                start = q
            q -= 1
        new.append(start)
    return new


def _begin_at(unit: Unit, first: int, row: list, syms: list, positions: dict,
              noise: set, memo: SearchMemo, why: str, after_sync: set | None = None) -> Unit:
    """The loop begins at ``first``: cut at it when it cuts the same loop as well as the
    anchor did; else (it is missing in some instances) each instance begins at it, or where
    it is missing at the next of the representative's ops that follow it up to the anchor.
    ``after_sync``: the positions of the small ops that are no syncs: those between the
    previous sync and ``first`` open the step too (an eval pass after the sync does not)."""
    if first != unit.anchor:
        rules = memo.rules
        moved = _evaluate(positions[first], first, row, syms, rules, memo)
        if _qualifies(moved, rules) and moved.n >= rules.same_loop_ratio * unit.n and \
                moved.score >= unit.score - rules.score_margin * unit.n:
            unit = moved
        else:
            pattern = unit.pattern
            head = Counter(s for s in pattern[pattern.index(first):] if s != unit.anchor)
            unit.positions = _walk_left(unit, syms, head, noise)
    if after_sync:  # the small ops back to the previous sync open the step
        unit.positions = _walk_left(unit, syms, set(), after_sync, take_noise=True)
    elif why == OPENS_AT_INPUT_FETCH:
        _fetch_edge(unit, row, syms, memo.rules)
    unit.opening = why
    return unit


def _fetch_edge(unit: Unit, row: list, syms: list, rules: Rules) -> None:
    """Move each instance's beginning back from its input fetch over the step's own first
    ops: the profiler's step bookkeeping (``aten::empty``, ``aten::zeros`` > ``aten::fill_``)
    runs at the very start of each step, before the fetch. Evidence, not names: between two
    steps the host runs the loop itself, so the widest idle gap among the small ops before
    a fetch is where the step begins (``_edge_run``: ``loop_edge_in`` among them), and the
    kinds found after it recur
    there, in ``Rules.head_share`` of the instances after the first and in at least
    ``Rules.head_windows`` (noise drops some). Each instance whose run holds one of them
    then begins at its run, the first one as ``_first_edge`` says."""
    pos = unit.positions
    small = rules.edge_op_share * upper_median(
        (row[b].start - row[a].start for a, b in zip(pos, pos[1:])), 0.0)
    runs = [_edge_run(row, pos[i - 1] + 1, p, small, rules) for i, p in enumerate(pos) if i]
    votes = Counter(k for run in runs for k in set(syms[q] for q in range(*run)))
    edge = {k for k, c in votes.items()
            if c >= max(rules.head_windows, rules.head_share * len(runs))}
    if not edge:
        return
    runs.insert(0, (_first_edge(row, syms, pos[0], edge, runs, small, rules), pos[0]))
    unit.fetch = syms[pos[0]]
    unit.positions = [a if any(syms[q] in edge for q in range(a, b)) else p
                      for (a, b), p in zip(runs, pos)]
    unit.head = unit.head | edge


def _first_edge(row: list, syms: list, p: int, edge: set, runs: list, small: float,
                rules: Rules) -> int:
    """Where the first instance begins before its fetch at ``p``: back over small ops, as
    many of the ``edge`` kinds as the longest of the other instances' ``runs`` holds (noise
    puts others among them), up to the op after a gap like the loop's edge before the
    others (``Rules.edge_gap_share`` of its typical width: a prologue's last op may be of
    the same kind, before that gap), or to the row's first op."""
    typical = upper_median((row[a].start - row[a - 1].end for a, _ in runs), 0.0)
    left = max(b - a for a, b in runs)
    first = p
    while first > 0 and p - first < rules.max_head and \
            row[first - 1].end - row[first - 1].start <= small and \
            row[first].start - row[first - 1].end < rules.edge_gap_share * typical:
        if syms[first - 1] in edge:
            if not left:
                break
            left -= 1
        first -= 1
    return first


def _edge_run(row: list, lo: int, p: int, small: float, rules: Rules) -> tuple[int, int]:
    """The ops after the loop's edge (``loop_edge_in``) among the ``small`` ops just before
    ``row[p]`` (back to ``lo``, at most ``Rules.max_head`` of them, the gap before ``row[p]``
    included). Returns (start, p); start == p: the edge
    is right before ``row[p]``."""
    a = p
    while a > lo and p - a < rules.max_head and row[a - 1].end - row[a - 1].start <= small:
        a -= 1
    return loop_edge_in(row, max(a, 1), p) if p >= 1 else p, p


def _last_instance_ops(unit: Unit, row: list, syms: list, rules: Rules) -> set:
    """The kinds of op of the last instance: from its start until it has done the
    representative's work (time) and has its number of ops; not an epilogue after it."""
    start = unit.positions[-1]
    ref_time = unit.reference[1] if unit.reference else 0.0
    done = 0.0
    out = set()
    for q in range(start, len(row)):
        if q - start >= len(unit.pattern) and done >= ref_time:
            break
        out.add(syms[q])
        done += row[q].end - row[q].start
    return out


def _exact_head(unit: Unit, syms: list) -> int:
    """How far every instance, the first included, is preceded by the same ops (an exact
    loop's head, however long: a bucketed all-reduce of sixty copies before the forward)."""
    pos = unit.positions
    shift = 0
    while shift + 1 < len(unit.pattern):
        k = shift + 1
        if pos[0] - k < 0:
            break
        before = syms[pos[0] - k]
        if any(p - k < 0 or syms[p - k] != before or (i and p - k <= pos[i - 1])
               for i, p in enumerate(pos)):
            break
        shift = k
    return shift


def _extend_head(unit: Unit, row: list, syms: list, noise: set, rules: Rules,
                 whole: bool, tiny: set = frozenset()) -> Unit:
    """Move each instance's beginning left over the head: the ops that come just before the
    anchor in most instances, so the boundary is the step's first op. The head is read right
    to left by vote: at each step the op found next to the left in most of the instances
    that have a candidate there joins it, and only the instances where it was found move on
    (noise drops small head ops: elsewhere it is simply missing; an inserted op gets a
    minority of the votes). An op that also occurs
    in the last instance is not head: it closes each instance (the anchor cut a rotation of
    the same loop). A row cut off mid-instance (online) has no last instance to read:
    there the head must also come before the first instance."""
    pos = unit.positions
    n = len(pos)
    if n < REPEAT:
        return unit
    shift = _exact_head(unit, syms)
    if shift:  # where every instance agrees no vote is needed; the vote goes on from there
        unit.positions = pos = [p - shift for p in pos]
        unit.opening = OPENS_AT_HEAD
    if whole:
        closing = _last_instance_ops(unit, row, syms, rules)
    else:
        before_first = set(syms[max(0, pos[0] - len(unit.pattern)):pos[0]])
        closing = set(syms) - before_first
    windows = _head_windows(unit, syms, noise, closing, whole)
    head, head_only = _head_vote(unit, syms, windows, closing, rules, whole, tiny)
    later = windows[1:] if whole else windows
    region = {s for w in later for s in w}
    if head:
        unit.positions = _walk_left(unit, syms, head, noise)
        # The first instance has no previous one: what comes just before it of the head's
        # region (a head op a common-op test cannot vouch for with so few instances) is its own.
        first = unit.positions[0]
        while first > 0 and syms[first - 1] in region - closing:
            first -= 1
        unit.positions[0] = first
    moved = _after_loop_edge(unit, row, syms, head_only, rules)
    moved = _run_to_edge(unit, row, syms) or moved
    if head or moved:
        unit.opening = OPENS_AT_HEAD
    return unit


def _run_to_edge(unit: Unit, row: list, syms: list) -> bool:
    """Move each instance's beginning left over a run of ops of its own first op's kind (one
    ``randn`` per request of a batch, however many arrived) while the idle gap before the
    earlier op is the wider: the loop's edge lies before the run. Returns whether a beginning
    moved."""
    pos = unit.positions
    moved = False
    for i, p in enumerate(pos):
        lo = pos[i - 1] + 1 if i else 0
        start = p
        while start - 1 >= lo and syms[start - 1] == syms[p] and \
                _gap_before(row, start - 1) > _gap_before(row, start):
            start -= 1
        if start != p:
            pos[i] = start
            moved = True
    return moved


def _head_windows(unit: Unit, syms: list, noise: set, closing: set, whole: bool) -> list:
    """Each instance's head window: the ops just before its anchor, back to the first op that
    closes instances (the previous instance's tail) or the previous anchor; not where the
    previous instance took another path. The first instance's window (complete rows only)
    votes too: with three steps, two of which lost their small head ops to noise, it is half
    the evidence. It may hold the prologue's last ops, but they are seldom found before
    another instance."""
    pos = unit.positions
    windows = []
    for i in range(0 if whole else 1, len(pos)):
        if i and _took_another_path(unit.shapes[i - 1]):
            continue  # after an idle poll: its last op is no evidence of a step's head
        window = []
        q = pos[i] - 1
        kept = 0  # a run of inserted small ops (noise) does not use up the window
        while q > (pos[i - 1] if i else -1) and syms[q] not in closing and \
                syms[q] != unit.anchor and kept < len(unit.pattern):
            window.append(syms[q])
            kept += q not in noise
            q -= 1
        windows.append(window)
    return windows


def _head_vote(unit: Unit, syms: list, windows: list, closing: set, rules: Rules,
               whole: bool, tiny) -> tuple[set, set]:
    """The head ops by vote of the head ``windows``, and the kinds the vote cannot place
    (seen in head windows only: ``_after_loop_edge``)."""
    pos = unit.positions
    in_window = Counter(s for w in windows for s in set(w))
    # Kinds of op that are small wherever they occur (``tiny``: positions of small ops).
    big = {syms[q] for q in range(len(syms)) if q not in tiny}
    anywhere = Counter(syms[pos[0] - len(windows[0]) if whole and windows else pos[0]:])
    filled = sum(1 for w in windows if w)
    # Head ops: in many head windows (counting those noise left empty only for small
    # ops: noise drops small ops, a big one missing is missing), or (small ones dropped by
    # noise in the other instances) seldom seen anywhere else; either way in at least
    # ``head_windows``. An eval pass that ends every third step is no head of the next step,
    # though only ever seen before it.
    head = {s for s, c in in_window.items()
            if c >= rules.head_windows
            and (c >= rules.head_share * (len(windows) if s in big else filled)
                 or (c >= rules.head_only_share * anywhere[s] and s not in big))}
    # Small kinds of op never seen in the row but in head windows: a step's own first op
    # that noise dropped from the other steps is one of them (``_after_loop_edge``). A big
    # one seen once is no head op noise dropped elsewhere (noise drops small ops only): a
    # prologue's ``load_weights`` before the first step.
    head_only = {s for s, c in in_window.items() if c >= anywhere[s]} - closing - big \
        - {unit.anchor}
    return head, head_only


def _after_loop_edge(unit: Unit, row: list, syms: list, head_only: set,
                     rules: Rules) -> bool:
    """Move each instance's beginning left over the ops the vote could not place (each seen
    in one head window only: the step's first op where noise dropped it from the others) that
    lie after the loop's edge: an op joins the step when the idle gap before it is wider than
    the one after it. Between two steps the host runs the loop itself (``prof.step()``, the
    ``for`` statement, the fetch's Python), so the widest gap is where one step ends and the
    next begins; an op the previous step ended with (inserted there by noise, its own sync)
    lies before that gap. The row's first op has no gap before it: it opens the first
    instance when the gap after it is narrower than the loop's edge before the other
    instances (a prologue ends with a wider one). Only kinds seen in head windows and nowhere
    else in the row move (``head_only``): a kind that also occurs inside instances is no
    head. Returns whether a beginning moved."""
    pos = unit.positions
    moved = False
    for i in list(range(1, len(pos))) + [0]:
        lo = pos[i - 1] + 1 if i else 0
        start = p = pos[i]
        while start - 1 >= lo and syms[start - 1] in head_only:
            q = start - 1
            after = row[start].start - row[q].end
            if q > 0:
                before = row[q].start - row[q - 1].end
            else:  # the row's first op: the loop's edge as the other instances show it
                before = upper_median((row[b].start - row[b - 1].end for b in pos[1:]), 0.0)
            if before <= rules.edge_gap_ratio * after:
                break
            start = q
        if start != p:
            pos[i] = start
            moved = True
    return moved


# -- where the last instance ends -------------------------------------------------------


def last_instance_end(tail: list, width: int, seen: set, typical_us: float,
                      rules: Rules = RULES) -> float:
    """Where the last instance ends, given the ops from its start on: its first ``width``
    ops (``sure_ops``), then ops of kinds seen inside earlier instances (an eval pass after
    the last step too), stepping over small ops of new kinds (noise) when a known kind
    follows, or a big op of a new kind: that one begins the epilogue (``save_checkpoint``);
    small ones at the very end are the epilogue too (``vae_decode`` of a long request)."""
    i = min(max(1, width), len(tail))
    end = max(node.end for node in tail[:i])
    small = rules.small_op_share * typical_us
    while i < len(tail):
        if tail[i].sym in seen:
            end = max(end, tail[i].end)
            i += 1
            continue
        k = i
        while k < len(tail) and k - i < rules.max_head and tail[k].sym not in seen and \
                tail[k].end - tail[k].start <= small:
            k += 1
        if k == i or k >= len(tail):
            break  # a big op of a new kind begins the epilogue; small ones at the end may too
        if tail[k].sym not in seen and k - i >= rules.max_head:
            break  # a long run of new small ops is no noise
        # Small ops of new kinds are noise of the step: before a known op or before the
        # epilogue.
        end = max(end, max(node.end for node in tail[i:k]))
        i = k
    return end


def end_of_last(tail: list, lengths: list, seen: set, starts: list,
             rules: Rules = RULES) -> float:
    """Where the last instance ends (``last_instance_end``), from its ops (``tail``), the
    lengths in ops of the instances before it, the kinds of op seen in them and their
    starts (both decision paths: online and at close)."""
    return last_instance_end(tail, sure_ops(lengths, rules), seen, typical_duration(starts),
                             rules)


def sure_ops(lengths, rules: Rules = RULES) -> int:
    """Ops the last instance has for sure: most of the shortest instance's (noise may have
    taken a few from the last one; more would reach into the epilogue)."""
    shortest = min(lengths, default=1)
    return max(1, math.ceil(rules.sure_share * shortest))


def typical_duration(starts: list) -> float:
    """The median time from one instance's start to the next's."""
    return upper_median((b - a for a, b in zip(starts, starts[1:])), 0.0)


# -- kinds of cycles -------------------------------------------------------------------


def cycle_kinds(shapes: list, kernels: list, rules: Rules = RULES) -> CodedList:
    """Kind of each cycle from its shape (``Unit.shapes``: 0 for instances like the unit) and
    its kernels: a cycle that took another path and does (almost) none of the GPU work of
    the median cycle like the unit is ``idle`` (reported, never splitting an iteration), and
    so is a last cycle unlike the unit that does none. A prefill among decode steps is unlike
    them too, but busier, and on the same path. One byte a cycle (``CodedList``)."""
    kinds = CodedList((KIND_ITERATION, KIND_IDLE), len(kernels))
    if len(shapes) != len(kernels) or not any(kernels):
        return kinds  # (no kernel: no cycle does less GPU work than the median, 0)
    # int32: a cycle's kernels are far below 2**31 (4 bytes a cycle, 1 M cycles)
    like = np.fromiter((k for shape, k in zip(shapes, kernels) if shape == 0), dtype=np.int32)
    median = _upper_median_of(like if len(like) else np.fromiter(kernels, dtype=np.int32))
    del like
    last = len(kernels) - 1
    for i, (shape, k) in enumerate(zip(shapes, kernels)):
        # The last cycle unlike the unit may be the loop's exit: a final fetch that finds no
        # data (``StopIteration``) does no GPU work either.
        exit_or_other = _took_another_path(shape) or (i == last and shape != 0)
        if exit_or_other and median > 0 and k < rules.idle_gpu_share * median:
            kinds[i] = KIND_IDLE
    return kinds
