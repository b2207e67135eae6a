"""Where an iteration's GPU time goes: compute, communication, copies, idle; its top kernels;
the host side (time in ops, launch-to-start delay). Accumulated online, one small object per
iteration, as its work is decided (no kernel is kept).

The GPU span of an iteration (its first GPU work's start to its last one's end) is cut into
layers, as Holistic Trace Analysis's temporal breakdown does for a whole trace: ``compute_us``
is the time at least one compute kernel ran (the union over streams), ``comm_us`` the time
a collective ran and no compute kernel, ``memcpy_us`` a copy and neither, ``memset_us`` a
memset and none of those, and ``idle_us`` the time nothing ran. So the five add up to
``span_us`` (HTA's ``kernel_time(us)``, the span); ``compute_us`` is HTA's
``compute_time(us)``, ``idle_us`` its ``idle_time(us)``, and comm + memcpy + memset its
``non_compute_time(us)``. Collectives are NCCL / RCCL kernels (``nccl...``, ``rccl...``) and
other collective kernels by name (``COLLECTIVE_WORDS``: vLLM's custom all-reduce, ...), a
wider net than HTA's ``^nccl.*Kernel``.

Each layer is a union of at most ``KEPT_INTERVALS`` merged intervals: work decided in any
order is counted exactly while they suffice; beyond, the oldest half is summed and dropped:
exact for work that comes in time order, as a GPU's does within each block Kineto writes and
a thread's ops do, whatever order the blocks come in and whatever was held on the way; only
work that comes later and overlaps a dropped interval counts twice (capped by the span at the
end). (Closing the shortest gaps instead, as it did before 2026-12-01, counted idle time as
busy by an amount that depended on what ``--pending-limit`` held: in h100 owlv2's first
iteration, ~1000 kernels and 4700 ops, 2569 µs of GPU idle time or the exact 3177, and
103459 µs of time in ops against the exact 94029.)
An iteration whose GPU work is two behind the latest one's (the engine calls ``freeze_gpu``)
keeps only its latest ``FROZEN_KEPT`` intervals and ``FROZEN_KERNEL_NAMES`` kernel names, so
a long trace holds little GPU detail per iteration. The host's unions per thread are not
frozen (CPU events may be decided long after their iteration's end, held or spilled, and
the result must not depend on that): up to ``KEPT_INTERVALS`` per thread and iteration.
Collectives, written when they end, come long after the kernels they overlap: a window of
the latest intervals would count them whole.
``top_kernels`` keeps at most ``KEPT_KERNEL_NAMES`` names per iteration: when a new name comes
to a full table, the name with the least time so far gives way (a bounded approximation of
the top five that is exact when an iteration launches fewer distinct kernels).
"""
from __future__ import annotations

import re
import sys
from array import array
from bisect import bisect_left
from functools import lru_cache
from itertools import chain, islice, repeat, starmap
from operator import add, attrgetter, sub

import numpy as np

from stream_split.core.records import fresh_with_slots, rounded_us
from stream_split.native import NATIVE as _native  # (None: the Python fallbacks)
from stream_split.trace_format import MEMCPY_CATS, MEMSET_CATS

#: A kernel whose name matches is communication (collectives).
COLLECTIVE_WORDS = re.compile(
    r"^(nccl|rccl)|allreduce|all_reduce|allgather|all_gather|reducescatter|reduce_scatter"
    r"|alltoall|all_to_all|cross_device_reduce|broadcast_kernel|sendrecv", re.I)
#: Layers in priority order: time in a layer is time not in any earlier one.
COMPUTE, COMM, MEMCPY, MEMSET = range(4)
LAYER_NAMES = ("compute_us", "comm_us", "memcpy_us", "memset_us")
#: Merged intervals kept per layer and iteration (see the module's docstring).
KEPT_INTERVALS = 512
#: ... and once its iteration's GPU work is most likely done (``IterationBreakdown.freeze_gpu``:
#: a later one's two iterations on has come), the latest few only.
FROZEN_KEPT = 16
#: Kernel names an iteration keeps once its GPU work is frozen.
FROZEN_KERNEL_NAMES = 16
#: The fewest intervals that ``IntervalUnion.compact`` keeps in arrays: fewer take a few
#: hundred bytes as lists, and checking and converting them cost some 6 k instructions an
#: iteration on a trace of one-op iterations (``IterationBreakdown.compact_host``), for
#: nothing (integer times stay lists).
ARRAY_MIN_INTERVALS = 8
#: Distinct kernel names kept per iteration for ``top_kernels``.
KEPT_KERNEL_NAMES = 64
TOP_KERNELS = 5
#: Launches whose GPU work has not come yet, kept for the launch-to-start delay (oldest drop).
KEPT_LAUNCHES = 8192
#: GPU work that is no kernel (``top_kernels`` counts kernels only).
_COPY_CATS = MEMCPY_CATS | MEMSET_CATS


@lru_cache(maxsize=4096)  # kernel names are few and long: one search per name
def gpu_layer(cat: str, name: str) -> int:
    """The layer of a GPU event (``COMPUTE``, ``COMM``, ``MEMCPY``, ``MEMSET``)."""
    if cat in MEMCPY_CATS or name.startswith("Memcpy"):
        return MEMCPY
    if cat in MEMSET_CATS or name.startswith("Memset"):
        return MEMSET
    if COLLECTIVE_WORDS.search(name):
        return COMM
    return COMPUTE


class IntervalUnion:
    """The length of a union of intervals, in any order: its merged intervals, sorted, at most
    ``KEPT_INTERVALS`` of them (past that, the oldest half summed: ``_bound``). Once
    ``freeze`` is called (its iteration is most likely done) it keeps the latest
    ``FROZEN_KEPT`` only, the rest summed.

    The intervals are lists while the union grows, and two float64 arrays once ``compact``
    is called (its iteration's GPU work frozen: ``IterationBreakdown.freeze_gpu``): 16 bytes
    an interval, where lists of float objects take some 64 (the host unions are kept to the
    end: 28 KB an iteration of the resnet tile, most of its state). An array is only read:
    an interval added later turns them back into lists (``_as_lists``)."""
    __slots__ = ("starts", "ends", "frozen_us", "frozen")

    def __reduce__(self):
        return _union_of, (_union_state(self),)

    def __init__(self):
        self.starts: list | array = []
        self.ends: list | array = []
        self.frozen_us = 0.0  # the length of the intervals dropped (``_drop_oldest``)
        self.frozen = False

    @property
    def total_us(self) -> float:
        """The union's length: the intervals dropped, and the sorted ones kept; the same in
        any order of ``add`` while nothing was dropped."""
        return _union_length(self.starts, self.ends, self.frozen_us)

    def freeze(self) -> None:
        """Keep only the latest ``FROZEN_KEPT`` intervals from now on, the older ones summed:
        work that comes later and starts before them counts whole (an over-count, capped by
        the span at the end)."""
        self.frozen = True
        self._drop_oldest()

    def _drop_oldest(self, keep: int = FROZEN_KEPT) -> None:
        """Sum the oldest intervals into ``frozen_us`` and drop them, ``keep`` left."""
        drop = len(self.starts) - keep
        if drop > 0:
            self.frozen_us += sum(map(sub, self.ends[:drop], self.starts[:drop]))
            del self.starts[:drop], self.ends[:drop]

    def _bound(self) -> None:
        self._drop_oldest(FROZEN_KEPT if self.frozen else KEPT_INTERVALS // 2)

    def compact(self) -> None:
        """Keep the intervals in float64 arrays (see the class), where every time is a float
        (an integer is kept as given: beyond 2**53 float64 would change it) and they are at
        least ``ARRAY_MIN_INTERVALS``."""
        starts, ends = self.starts, self.ends
        if starts.__class__ is list and len(starts) >= ARRAY_MIN_INTERVALS and \
                {*map(type, starts), *map(type, ends)} <= _FLOAT:
            self.starts, self.ends = array("d", starts), array("d", ends)

    def _as_lists(self) -> tuple[list, list]:
        """``starts`` and ``ends`` as lists again, to be changed (``compact`` made arrays)."""
        self.starts, self.ends = self.starts.tolist(), self.ends.tolist()
        return self.starts, self.ends

    def add(self, start: float, end: float) -> None:
        starts, ends = self.starts, self.ends
        if starts and start >= starts[-1]:  # in time order: the common cases first
            latest = ends[-1]
            if end <= latest:
                return  # inside the latest interval (a nested op)
            if start > latest:
                if starts.__class__ is not list:
                    starts, ends = self._as_lists()
                starts.append(start)
                ends.append(end)
                if len(starts) > KEPT_INTERVALS:
                    self._bound()
                return
        if starts.__class__ is not list:
            starts, ends = self._as_lists()
        i = bisect_left(starts, start)
        if i and ends[i - 1] >= start:  # joins the interval before it
            i -= 1
        j = i
        lo, hi = start, end
        while j < len(starts) and starts[j] <= end:
            lo, hi = min(lo, starts[j]), max(hi, ends[j])
            j += 1
        starts[i:j] = [lo]
        ends[i:j] = [hi]
        if len(starts) > (FROZEN_KEPT if self.frozen else KEPT_INTERVALS):
            self._bound()

    def add_many(self, starts: np.ndarray, ends: np.ndarray, integer: bool = False,
                 may_drop: bool = False) -> bool:
        """``add`` each interval of ``starts`` and ``ends`` (float64 arrays) in their order,
        at once, where the order cannot change the union; else nothing is added (False: the
        caller adds them one by one). While nothing is dropped (``_bound``) the union is the
        same in any order, its ends the inputs' own floats (min and max, no arithmetic), so
        ``total_us`` is the same float; nothing is dropped where the intervals kept plus the
        most that the batch's own make at any point of its order fit (``_merged``). Not at
        once where a kept time is no float (an integer and a float of one value: the order
        says which one stays), or an interval is reversed or not finite. An interval added
        again changes nothing then (it lies in one kept). Held ops come back from the spill
        in end order (children before their parent): one by one, 12 k of the 10x resnet
        tile's 76 k held ops took ``add``'s slow path.

        ``integer``: every time was given as an integer (the arrays hold them exactly), and
        the union keeps them so, as ``add`` would (it is refused where a kept time is not an
        integer). ``may_drop``: the caller adds none of these intervals again, so the oldest
        may be dropped as ``add`` drops them: intervals in start order after every one kept
        are added so at once, however many (``_extend_bounded``), unless the union is frozen
        (``add`` then drops at a merge too, not only past ``KEPT_INTERVALS``)."""
        if not len(starts):
            return True
        kept_starts = self.starts
        if kept_starts.__class__ is not list:  # arrays hold floats (``compact``)
            if integer:
                return False
        elif not {*map(type, kept_starts), *map(type, self.ends)} <= \
                (_INTEGER if integer else _FLOAT):
            return False
        kept_end = self.ends[-1] if len(kept_starts) else None
        extend = may_drop and not self.frozen and (kept_end is None or starts[0] > kept_end) \
            and bool((starts[1:] >= starts[:-1]).all())
        merged = _merged(starts, ends, None if extend else
                         (FROZEN_KEPT if self.frozen else KEPT_INTERVALS) - len(kept_starts))
        if merged is None:
            return False
        los, his = merged
        if integer:
            los, his = los.astype(np.int64).tolist(), his.astype(np.int64).tolist()
        else:
            los, his = los.tolist(), his.tolist()
        if extend:
            self._extend_bounded(los, his)
        elif not len(kept_starts):
            self.starts, self.ends = los, his
        elif los[0] > kept_end:  # after every interval kept (start order)
            if kept_starts.__class__ is not list:
                self._as_lists()
            self.starts.extend(los)
            self.ends.extend(his)
        else:
            add = self.add
            for lo, hi in zip(los, his):
                add(lo, hi)
        return True

    def _extend_bounded(self, los: list, his: list) -> None:
        """Merged intervals ``los``/``his``, sorted, each after the last kept, added to a
        union not frozen as ``add`` adds their intervals one by one in start order:
        appended, the oldest dropped (``_bound``) each time more than ``KEPT_INTERVALS`` are
        kept (a merge never makes more). A merged interval is final once
        the next one is appended (later intervals start after its end), so the ones dropped
        are summed as one by one would sum them. 200 k one-op iterations' worth of ops of one
        iteration, held: some 2,600 chunks of a list's slice, not 200 k ``add`` calls."""
        starts, ends = (self.starts, self.ends) if self.starts.__class__ is list \
            else self._as_lists()
        at, n = 0, len(los)
        while at < n:
            upto = min(n, at + max(1, KEPT_INTERVALS + 1 - len(starts)))
            starts.extend(los[at:upto])
            ends.extend(his[at:upto])
            at = upto
            if len(starts) > KEPT_INTERVALS:
                self._bound()


_FLOAT = {float}
_INTEGER = {int}


def _union_length(starts, ends, frozen_us: float, *_) -> float:
    """``IntervalUnion.total_us`` of a union whose slots hold these values (its state,
    ``_union_state``, spread: ``final_dicts`` reads it from a page as the file holds it)."""
    return frozen_us + sum(map(sub, ends, starts))


def _merged(starts: np.ndarray, ends: np.ndarray, room: int | None) \
        -> tuple[np.ndarray, np.ndarray] | None:
    """The union of the intervals ``starts``/``ends`` as its merged intervals (float64
    arrays of their starts and ends, sorted; touching ones merged, as ``IntervalUnion.add``
    merges them), or None when ``IntervalUnion.add`` one by one in their order might have
    held more than ``room`` intervals at some point (``_most_apart``; ``room`` None: no
    bound, the intervals in start order), or an interval is reversed or not finite."""
    if not (np.isfinite(starts).all() and np.isfinite(ends).all() and (ends >= starts).all()):
        return None
    in_start_order = bool((starts[1:] >= starts[:-1]).all())
    if not in_start_order:
        if _most_apart(starts, ends) > room:
            return None
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)  # the latest end so far, in start order
    first = np.flatnonzero(np.concatenate(([True], starts[1:] > reach[:-1])))
    if in_start_order and room is not None and len(first) > room:  # (they only grow)
        return None
    last = np.concatenate((first[1:] - 1, [len(starts) - 1]))
    return starts[first], reach[last]


def _most_apart(starts: np.ndarray, ends: np.ndarray) -> int:
    """The most merged intervals that ``IntervalUnion.add`` makes of these intervals alone,
    added in their order, at any point: exactly, in end order (a new interval, ending last,
    merges every one that ends at or after its start; those are the latest ones kept); else
    their number (a bound)."""
    n = len(ends)
    if not bool((ends[1:] >= ends[:-1]).all()):
        return n
    kept_ends: list = []
    most = 0
    for start, end in zip(starts.tolist(), ends.tolist()):
        while kept_ends and kept_ends[-1] >= start:
            kept_ends.pop()
        kept_ends.append(end)
        if len(kept_ends) > most:
            most = len(kept_ends)
    return most


def _shared(name: str) -> str:
    """One object for every copy of a kernel name (``sys.intern``): the decoder makes a new
    string for each event, and every iteration keeps its kernels by name (up to
    ``KEPT_KERNEL_NAMES``, ``FROZEN_KERNEL_NAMES`` to the end), long C++ names of some
    hundreds of bytes: 9.5 KB an iteration of the resnet tile, where one copy serves all."""
    return sys.intern(name) if name.__class__ is str else name


#: What ``_native.feed_lane`` adds GPU work to an ``IterationBreakdown`` with, as ``add_gpu``
#: adds it: its layer, the copies' categories, the intervals kept, the kernel names kept, and
#: the layer of collectives.
ADD_GPU_RULES = (gpu_layer, _COPY_CATS, KEPT_INTERVALS, KEPT_KERNEL_NAMES, COMM)


#: The state of an ``IntervalUnion`` (its slots' values, read in C), as ``_union_of`` takes it.
_union_state = attrgetter(*IntervalUnion.__slots__)


def _union_of(state: tuple) -> IntervalUnion:
    """The union whose ``_union_state`` is ``state``."""
    union = IntervalUnion.__new__(IntervalUnion)
    union.starts, union.ends, union.frozen_us, union.frozen = state
    return union


#: A union whose slots hold these values, in the order of ``__slots__`` (``_native.
#: slot_maker`` where built, ``one_with_slots``'s object: no frame of Python; a breakdown's
#: first op of a thread, once an iteration on a trace of one-op iterations).
union_with = (_native.slot_maker(IntervalUnion, IntervalUnion.__slots__, None, None, None)
              if _native is not None else lambda *state: _union_of(state))


def _breakdown_of(layers: list, kernels: dict, cpu_ops: dict, *rest) -> "IterationBreakdown":
    """The breakdown ``IterationBreakdown.__reduce__`` describes."""
    return _breakdown_with(list(map(_union_of, layers)),  # (mapped in C: no frame per union)
                           kernels, dict(zip(cpu_ops, map(_union_of, cpu_ops.values()))), *rest)


def _breakdown_with(layers: list, kernels: dict, cpu_ops: dict, *rest) -> "IterationBreakdown":
    """A breakdown whose slots hold these values, in the order of ``__slots__``."""
    breakdown = IterationBreakdown.__new__(IterationBreakdown)
    breakdown.layers, breakdown.kernels, breakdown.cpu_ops = layers, kernels, cpu_ops
    (breakdown.delay_sum_us, breakdown.delay_max_us, breakdown.delays, breakdown.comm_kernels,
     breakdown.comm_kernel_us, breakdown.stream_work, breakdown.gpu_work) = rest
    return breakdown


def _breakdown_page(breakdowns: list) -> tuple:
    """A page of breakdowns as a file holds it (``pages.PAGE_PACK``): a column per slot, in
    which each one's layers are their count and its ``cpu_ops`` its threads, and the states
    (``_union_state``) of all their unions, layers first: read in C, no call per breakdown
    nor per union (a ``__reduce__`` each was some 40 k instructions a breakdown to write and
    read back on a trace of one-op iterations). A column whose every value is the very same
    object is that one in a 1-tuple (``_SLOT_COLUMNS``: ``_full`` makes it whole again).
    Where built, ``_native.page48_breakdown_page`` packs it in one call (its layers a list
    and its threads a dict each: always, but for a caller's own): the columns, the unions and
    their states without a list made between (callgrind, ``boundaries`` of 30 k one-op
    iterations: 4,183.9 -> 4,077.7 M instructions)."""
    if _native is not None and (packed := _native.page48_breakdown_page(
            breakdowns, IterationBreakdown.__slots__, IntervalUnion.__slots__,
            _LAYERS_AT, _THREADS_AT, _MOSTLY_EMPTY_SLOTS)) is not None:
        return packed
    columns = _SLOT_COLUMNS(breakdowns)
    count = len(breakdowns)
    layers, cpu_ops = _full(columns[0], count), _full(columns[2], count)
    unions = list(chain(chain.from_iterable(layers),
                        chain.from_iterable(map(dict.values, cpu_ops))))
    columns[0], columns[2] = list(map(len, layers)), list(map(tuple, cpu_ops))
    for at in _MOSTLY_EMPTY_SLOTS:
        if not any(columns[at]):  # (every dict empty: a truth test each, no ==)
            columns[at] = None
    return columns, _flat_states(unions)


def _full(column, count: int):
    """``column`` (a list or tuple of ``count`` values, or ``_SLOT_COLUMNS``' 1-tuple of the
    one value of them all) with its ``count`` values."""
    return column * count if column.__class__ is tuple and len(column) == 1 else column


def _full_columns(columns: list) -> list:
    """The columns of a page as ``_breakdown_page`` made them, each with a value a breakdown
    (``_full``; those left out as None stay so)."""
    count = len(columns[2])  # (its threads: a list of a tuple each)
    return [column if column is None else _full(column, count) for column in columns]


def _flat_states(unions: list):
    """The states (``_union_state``'s) of ``unions`` as a page holds them: where every
    union's intervals are lists, ``(their counts, every start, every end, each one's
    frozen_us, each one's frozen)``, columns of plain values (no list nor tuple a union to
    pickle and load; the last two a 1-tuple where each holds the very same object, most
    often: ``_SLOT_COLUMNS``); else a list of their states."""
    if not unions:
        return []
    count = len(unions)
    starts, ends, frozen_us, frozen = _UNION_COLUMNS(unions)
    starts, ends = _full(starts, count), _full(ends, count)
    if set(map(type, starts)) != _LIST or set(map(type, ends)) != _LIST:
        return list(zip(starts, ends, _full(frozen_us, count), _full(frozen, count)))
    return (list(map(len, starts)), list(chain.from_iterable(starts)),
            list(chain.from_iterable(ends)), frozen_us, frozen)


def _states_of(states) -> list:
    """The unions' states (``_union_state``'s) of a page's ``_flat_states``."""
    if states.__class__ is not tuple:
        return states
    counts, starts, ends, frozen_us, frozen = states
    starts, ends = iter(starts), iter(ends)
    return list(zip(map(list, map(islice, repeat(starts), counts)),
                    map(list, map(islice, repeat(ends), counts)),
                    _full(frozen_us, len(counts)), _full(frozen, len(counts))))


def _empty_dicts(columns: list) -> None:
    """The columns of a page that ``_breakdown_page`` left out as all empty dicts, made."""
    for at in _MOSTLY_EMPTY_SLOTS:
        if columns[at] is None:
            columns[at] = [{} for _ in columns[0]]


def _breakdowns_of(page: tuple) -> list:
    """The breakdowns of a page as ``_breakdown_page`` made it."""
    columns, states = page
    columns = _full_columns(columns)
    _empty_dicts(columns)
    unions = iter(list(map(_union_of, _states_of(states))))
    # each one's unions taken in turn from the one list: its layers' count, then its threads
    # (``zip`` stops at its threads' end before it takes another union)
    columns[0] = list(map(list, map(islice, repeat(unions), columns[0])))
    columns[2] = list(map(dict, map(zip, columns[2], repeat(unions))))
    return list(map(_breakdown_with, *columns))


class IterationBreakdown:
    """The accumulators of one iteration: four layered unions, the kernels by name, the host
    side. ``add_gpu`` per GPU event, ``add_launch_delay`` per kernel whose launch is known,
    ``add_op`` per CPU op; ``to_dict`` with the iteration's GPU span."""
    __slots__ = ("layers", "kernels", "cpu_ops", "delay_sum_us", "delay_max_us", "delays",
                 "comm_kernels", "comm_kernel_us", "stream_work", "gpu_work")

    pack_page, unpack_page = staticmethod(_breakdown_page), staticmethod(_breakdowns_of)

    def __reduce__(self):
        """Pickled as plain values (its unions as tuples) and rebuilt by one call: an
        iteration's breakdown is paged through a file (``pages.PagedList``) on a long trace,
        and the default for its five objects with slots took some 25 µs to write and read."""
        return _breakdown_of, (
            list(map(_union_state, self.layers)), self.kernels,
            dict(zip(self.cpu_ops, map(_union_state, self.cpu_ops.values()))),
            self.delay_sum_us, self.delay_max_us, self.delays, self.comm_kernels,
            self.comm_kernel_us, self.stream_work, self.gpu_work)

    def __init__(self):
        #: layers[k]: the union of layers 0..k (compute, then + comm, + memcpy, + memset);
        #: empty until the first GPU work (most iterations of a trace of tiny ones have
        #: none: four unions fewer to make and to page).
        self.layers: list = []
        self.kernels: dict = {}  # name -> [count, total µs]
        self.cpu_ops: dict = {}  # thread -> the union of its ops in the iteration
        self.delay_sum_us = 0.0
        self.delay_max_us = 0.0
        self.delays = 0
        self.comm_kernels = 0
        #: The collectives' durations summed: a rank that waits for a late one at each
        #: collective has longer ones (``ranks.py``: stragglers by collectives).
        self.comm_kernel_us = 0.0
        #: For the record's busy and active GPU time (``engine._extend_union``): per GPU
        #: stream (pid, tid) and over all of them, the (latest start, latest end) of the
        #: iteration's work there; kept here, with the iteration, so that they are paged with
        #: it (``pages.PagedList``), not kept for every iteration of a long run.
        self.stream_work: dict = {}
        self.gpu_work: tuple | None = None

    def _made_layers(self) -> list:
        """``layers``, made at their first use (see ``__init__``)."""
        if not self.layers:
            self.layers = [IntervalUnion() for _ in LAYER_NAMES]
        return self.layers

    def add_gpu(self, cat: str, name: str, start: float, end: float) -> None:
        layer = gpu_layer(cat, name)
        for union in (self.layers or self._made_layers())[layer:]:
            starts, ends = union.starts, union.ends
            # ``add``'s most common case inline: a new interval after the latest, in lists
            if starts and start > ends[-1] and start >= starts[-1] and \
                    starts.__class__ is list and len(starts) < KEPT_INTERVALS:
                starts.append(start)
                ends.append(end)
            else:
                union.add(start, end)
        if layer == COMM:
            self.comm_kernels += 1
            self.comm_kernel_us += end - start
        if cat in _COPY_CATS:
            return
        kernels = self.kernels
        seen = kernels.get(name)
        if seen is None:
            if len(kernels) >= KEPT_KERNEL_NAMES:
                del kernels[min(kernels, key=lambda k: kernels[k][1])]
            kernels[_shared(name)] = [1, end - start]
        else:
            seen[0] += 1
            seen[1] += end - start

    def freeze_gpu(self) -> None:
        """Its GPU work is most likely all decided: keep little of it (bounded memory), and
        its unions, the host's too, compact (``IntervalUnion.compact``)."""
        for union in self._made_layers():  # frozen before its first GPU work: later work too
            union.freeze()
            union.compact()
        self.compact_host()  # its host side is most likely done too
        if len(self.kernels) > FROZEN_KERNEL_NAMES:
            kept = sorted(self.kernels.items(), key=lambda item: -item[1][1])
            self.kernels = dict(kept[:FROZEN_KERNEL_NAMES])

    def compact_host(self) -> None:
        """Its CPU window closed a boundary ago: its host unions of ``ARRAY_MIN_INTERVALS`` or
        more kept as arrays (``IntervalUnion.compact``: the same values in a quarter of the
        memory; an op decided later turns its thread's union back into lists). Kineto writes
        every CPU section of a trace before its GPU work, so until ``freeze_gpu`` every
        iteration's unions would stay lists: on the 180x stripped resnet tile 540 iterations
        of some 28 KB each."""
        for union in self.cpu_ops.values():
            if len(union.starts) >= ARRAY_MIN_INTERVALS:  # (``compact``'s first check, no call)
                union.compact()

    def add_launch_delay(self, delay_us: float) -> None:
        if not delay_us > 0.0:  # as HTA: clipped at 0 (``max(0.0, delay_us)``, without a call)
            delay_us = 0.0
        self.delay_sum_us += delay_us
        self.delays += 1
        if delay_us > self.delay_max_us:
            self.delay_max_us = delay_us

    def add_op(self, thread, start: float, end: float) -> None:
        """A CPU op: the time in ops is the union of ops per thread (a nested op adds
        nothing), summed over threads."""
        union = self.cpu_ops.get(thread)
        if union is None:  # the thread's first op: its interval (as ``add`` keeps it)
            self.cpu_ops[thread] = union_with([start], [end], 0.0, False)
            return
        starts = union.starts
        if starts and start >= starts[-1] and end <= union.ends[-1]:
            return  # inside the latest interval (``add``'s first case, inline: most ops nest)
        union.add(start, end)

    def add_ops(self, thread, starts: np.ndarray, ends: np.ndarray, integer: bool = False,
                may_drop: bool = False) -> bool:
        """CPU ops of ``thread``, as ``add_op`` one by one in their order, at once
        (``IntervalUnion.add_many``, with its ``integer`` and ``may_drop``: False where they
        are not added)."""
        union = self.cpu_ops.get(thread)
        if union is None:
            union = self.cpu_ops[thread] = IntervalUnion()
        return union.add_many(starts, ends, integer, may_drop)

    def gpu_dict(self, span_us: float | None) -> dict:
        """``{"span_us", "compute_us", "comm_us", "memcpy_us", "memset_us", "idle_us"}``: the
        layers capped so that they add up to the span."""
        if span_us is None:  # no GPU work (its layers are empty): every layer 0
            return dict(_NO_GPU)
        span = max(0.0, span_us)
        out = {"span_us": round(span, 3)}
        below = 0.0
        totals = [union.total_us for union in self.layers] or [0.0] * len(LAYER_NAMES)
        for name, total in zip(LAYER_NAMES, totals):
            upto = min(max(total, below), span)
            out[name] = round(upto - below, 3)
            below = upto
        out["idle_us"] = round(span - below, 3)
        return out

    def top_kernels(self) -> list:
        if not self.kernels:
            return []
        ranked = sorted(self.kernels.items(), key=lambda item: (-item[1][1], item[0]))
        return [{"name": name, "count": count, "total_us": round(total, 3)}
                for name, (count, total) in ranked[:TOP_KERNELS]]

    def host_dict(self) -> dict:
        return _host_dict([union.total_us for union in self.cpu_ops.values()], self.delays,
                          self.delay_sum_us, self.delay_max_us)

    def to_dict(self, span_us: float | None) -> dict:
        # (no GPU work, most iterations of a trace of tiny ones: no call to make its layers,
        # nor for the kernels it has none of)
        return _final_dict(dict(_NO_GPU) if span_us is None else self.gpu_dict(span_us),
                           self.top_kernels() if self.kernels else [], self.host_dict(),
                           self.comm_kernels, self.comm_kernel_us)


def _host_dict(thread_us: list, delays: int, delay_sum_us: float, delay_max_us: float) -> dict:
    """``IterationBreakdown.host_dict`` of a breakdown whose unions of ops per thread have
    the lengths ``thread_us``, with these launch delays."""
    # one thread (most iterations): its union's length, without a sum
    cpu_op_us = thread_us[0] if len(thread_us) == 1 else sum(thread_us)
    if not delays:
        return {"cpu_op_us": rounded_us(cpu_op_us), "launch_delay_mean_us": None,
                "launch_delay_max_us": None, "launches_timed": 0}
    return {"cpu_op_us": rounded_us(cpu_op_us),
            "launch_delay_mean_us": round(delay_sum_us / delays, 3),
            "launch_delay_max_us": round(delay_max_us, 3),
            "launches_timed": delays}


def _final_dict(gpu: dict, top_kernels: list, host: dict, comm_kernels: int,
                comm_kernel_us: float) -> dict:
    """``IterationBreakdown.to_dict``'s dict of its parts: ``gpu`` (``gpu_dict``'s, a new
    dict: the other keys follow its layers), ``top_kernels``, ``host`` (``host_dict``'s),
    and its collectives."""
    gpu["top_kernels"] = top_kernels
    gpu["host"] = host
    gpu["comm_kernels"] = comm_kernels
    gpu["comm_kernel_us"] = rounded_us(comm_kernel_us)
    return gpu


def final_dicts(page, spans: list) -> list:
    """``to_dict(span)`` of each breakdown of ``page`` with ``spans``, index for index:
    ``page`` a list of breakdowns, or ``(IterationBreakdown, _breakdown_page's value)``, a
    page as a file holds it (``PagedList.read_page(..., packed=True)``). Where no breakdown
    of a packed page has a span or kernels (every one of a trace of tiny CPU iterations),
    their dicts are made straight from its values: no union nor breakdown is rebuilt for
    one dict (some 7 k instructions a breakdown fewer, split of 30 k one-op iterations);
    else they are made of their objects (``_breakdowns_of``)."""
    if page.__class__ is list:
        return list(map(IterationBreakdown.to_dict, page, spans))
    _, packed = page
    columns, states = packed
    if columns[1] is not None and any(columns[1]) or spans.count(None) < len(spans):
        return list(map(IterationBreakdown.to_dict, _breakdowns_of(packed), spans))  # objects
    # each one's threads' union lengths taken in turn (they come after every layer's union,
    # which no span leaves to read)
    skip = sum(columns[0])
    if states.__class__ is tuple and states[0].count(1) == len(states[0]):
        # (``_flat_states``, an interval a union: ``_union_length``'s sum of one, 0 + it)
        counts, starts, ends, frozen_us, _ = states
        frozen_us = _full(frozen_us, len(counts))
        lengths = iter(list(map(add, frozen_us[skip:], map(add, repeat(0), map(
            sub, ends[skip:], starts[skip:])))))
    else:
        lengths = iter(list(starmap(_union_length, islice(_states_of(states), skip, None))))
    columns = _full_columns(columns)
    threads_of, delays_of = columns[2], columns[5]
    if delays_of.count(0) == len(delays_of) and list(map(len, threads_of)).count(1) == len(
            threads_of):  # one thread each, no launch timed (a trace of CPU iterations):
        # ``_final_dict`` and ``_host_dict`` inline, ``rounded_us`` too (no call a breakdown)
        if _native is not None:  # (each dict a copy of its keys, its values stored in C)
            return _native_cpu_dicts(lengths, columns[6], columns[7])
        return [{**_NO_GPU, "top_kernels": [], "host": {
                    "cpu_op_us": round(us, 3) if us and not (
                        us.__class__ is float and us.is_integer()) else us,
                    "launch_delay_mean_us": None, "launch_delay_max_us": None,
                    "launches_timed": 0},
                 "comm_kernels": comm_kernels,
                 "comm_kernel_us": round(comm_us, 3) if comm_us and not (
                     comm_us.__class__ is float and comm_us.is_integer()) else comm_us}
                for us, comm_kernels, comm_us in zip(lengths, columns[6], columns[7])]
    return [_final_dict(dict(_NO_GPU), [], _host_dict(list(islice(lengths, len(threads))),
                                                      delays, delay_sum_us, delay_max_us),
                        comm_kernels, comm_kernel_us)
            for threads, delay_sum_us, delay_max_us, delays, comm_kernels, comm_kernel_us
            in zip(columns[2], *columns[3:8])]


def _native_cpu_dicts(lengths, comm_kernels: tuple, comm_kernel_us: tuple) -> list:
    """``final_dicts``' dicts of a page of breakdowns of one thread each, without GPU work
    nor a launch timed (a trace of CPU iterations): each a copy of ``_CPU_FINAL`` (and its
    host's of ``_CPU_HOST``) with its values stored by ``_native.column_dicts``, rounded by
    ``_native.rounded`` (``rounded_us``): no frame of Python a breakdown (callgrind: with
    the other columns of ``core.finish._set_final``, whose figure it shares)."""
    rounded, column_dicts = _native.rounded, _native.column_dicts
    hosts = column_dicts(_CPU_HOST, (("cpu_op_us", rounded(list(lengths), True)),))
    return column_dicts(_CPU_FINAL, (("top_kernels", list(map(list, repeat((), len(hosts))))),
                                     ("host", hosts), ("comm_kernels", list(comm_kernels)),
                                     ("comm_kernel_us", rounded(list(comm_kernel_us), True))))


#: The slots (their places in ``__slots__``) that a page holds as None where every one of
#: its breakdowns has an empty dict there (kernels, the work per stream: those of a trace of
#: CPU iterations): a pickle of 64 empty dicts, each one remembered by the pickler, was a
#: third of the time to write a page.
_MOSTLY_EMPTY_SLOTS = (IterationBreakdown.__slots__.index("kernels"),
                       IterationBreakdown.__slots__.index("stream_work"))
#: Where a breakdown's layers and its threads' unions (``cpu_ops``) are among its slots
#: (``_breakdown_page``; the Python one reads them at 0 and 2 by name, as the page lays out).
_LAYERS_AT, _THREADS_AT = (IterationBreakdown.__slots__.index("layers"),
                           IterationBreakdown.__slots__.index("cpu_ops"))
_LIST = {list}


def _slot_columns(cls):
    """A function of a list of objects of ``cls`` (exactly, at least one) giving a column a
    slot, in the order of ``__slots__``: every object's value there (a list), or, by
    ``_native.slot_columns`` where built, that value in a 1-tuple where every object holds
    the very same object there (a breakdown's zeros and Nones: each pickled once a page,
    not once a breakdown); read at each slot's offset, no look-up in the type a value
    (``attrgetter`` a row at a time: ``_breakdown_page``, callgrind, a page of 64 breakdowns
    of one-op iterations, 587 k -> 397 k instructions by ``_native.slot_rows`` then)."""
    names = cls.__slots__
    if _native is None:
        get = attrgetter(*names)
        return lambda objects: list(map(list, zip(*map(get, objects))))
    slot_columns = _native.slot_columns
    return lambda objects: slot_columns(objects, names)


#: Every slot's column of a page of breakdowns, and of unions (``_breakdown_page``).
_SLOT_COLUMNS, _UNION_COLUMNS = _slot_columns(IterationBreakdown), _slot_columns(IntervalUnion)


def _breakdown_maker():
    """``IterationBreakdown`` itself, or where built a function giving what its ``__init__``
    makes without a frame of Python (``records.fresh_with_slots``: the values of a new one,
    each empty dict or list made anew; once a boundary, ``engine.Splitter._add_boundary``)."""
    if _native is None:
        return IterationBreakdown
    values = _BREAKDOWN_STATE(IterationBreakdown())
    return fresh_with_slots(IterationBreakdown, IterationBreakdown.__slots__, values,
                            [type(v) if type(v) in _FRESH_EMPTY else None for v in values], ())


_BREAKDOWN_STATE, _FRESH_EMPTY = attrgetter(*IterationBreakdown.__slots__), (dict, list)
#: A new ``IterationBreakdown`` (``_breakdown_maker``).
new_breakdown = _breakdown_maker()


#: ``IterationBreakdown.gpu_dict`` of an iteration without GPU work.
_NO_GPU = {"span_us": 0.0, **dict.fromkeys(LAYER_NAMES, 0.0), "idle_us": 0.0}
#: ``host_dict`` of a breakdown without a launch timed, and ``to_dict`` of one without GPU
#: work, their other values to be stored (``_native_cpu_dicts``).
_CPU_HOST = _host_dict([0.0], 0, 0.0, 0.0)
_CPU_FINAL = _final_dict(dict(_NO_GPU), None, None, 0, 0.0)


class LaunchTimes:
    """The end of each launch whose GPU work has not come yet (by correlation id), for the
    launch-to-start delay (HTA's ``launch_delay``: kernel start - launch end); and the first
    GPU work of each launch not known yet (a launch held or spilled while its kernel was
    decided), timed when the launch comes. At most ``KEPT_LAUNCHES`` of each, the oldest
    dropped."""
    __slots__ = ("ends", "early")

    def __init__(self):
        self.ends: dict = {}
        self.early: dict = {}  # corr -> (owner, start) of GPU work decided before its launch

    def add(self, corr, end: float):
        """A launch, ending at ``end``: ``(owner, delay)`` when its first GPU work was decided
        before it (``early``), else None (its delay comes with its work: ``delay``)."""
        early = self.early
        if early and (first := early.pop(corr, None)) is not None:
            return first[0], first[1] - end
        ends = self.ends  # (``_bounded_put``, inline: once a launch)
        ends[corr] = end
        if len(ends) > KEPT_LAUNCHES:
            del ends[next(iter(ends))]
        return None

    def delay(self, corr, start: float, owner: int = -1) -> float | None:
        """The delay of the first GPU work of launch ``corr``, starting at ``start`` (None
        when the launch is not known, or its work was timed already: a replayed graph's
        later kernels wait for the earlier ones, not for the host). A launch not known yet
        keeps ``owner`` and ``start`` (the first only) for ``add``."""
        end = self.ends.pop(corr, None)
        if end is None:
            if corr is not None and corr not in self.early:
                _bounded_put(self.early, corr, (owner, start))
            return None
        return start - end


def _bounded_put(table: dict, key, value) -> None:
    table[key] = value
    if len(table) > KEPT_LAUNCHES:
        del table[next(iter(table))]
