"""Iteration statistics: median, p90, outliers and the steady state. Pure: no I/O.

Takes plain lists (durations in µs, kinds, an optional grouping key per iteration such as a
serving phase) and returns plain values, so the manifest, the table, the plot and Beam all ask
the same function, and a caller can group iterations any way it likes.

The rules (also in the README, "Steady state and outliers"):

- Idle cycles (kind ``idle``) are never outliers and never part of the statistics.
- **Outlier**: an iteration whose duration is far from its group's median in both senses:
  its robust z-score ``|d - median| / (1.4826 * MAD)`` exceeds ``OUTLIER_Z`` (3.5, Iglewicz
  and Hoaglin's cut-off), *and* it takes at least ``OUTLIER_RATIO`` (1.5) times the median,
  or at most the median divided by it. The ratio keeps a very regular loop (MAD near 0) from
  flagging a step that is 3 % slower. Fewer than ``MIN_FOR_OUTLIERS`` (3) iterations in a
  group: nothing is an outlier (no robust median).
- **Steady state**: the iterations after the warm-up. Warm-up is the leading run of a group's
  iterations that are outliers or slower than ``WARMUP_RATIO`` (1.25) times the group's
  median; at most half of a group is warm-up. ``first`` is the first non-idle iteration after
  every group's warm-up, ``last`` the last non-idle iteration (a slow step later on stays in
  the steady state, flagged as an outlier: it is part of how the loop runs). With groups,
  ``steady_state["groups"]`` gives each group's own ``first`` (after its warm-up), ``last``
  and ``warmup``.
- Iteration records (``analyze_records``) are grouped by their serving phase when they have
  one: prefill, decode and mixed steps each have their own median, outliers and warm-up.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, eq, or_, sub

import numpy as np

from stream_split.core.finish import record_columns
from stream_split.core.records import KIND_IDLE, IterationRecord
from stream_split.core.serving import IDLE as PHASE_IDLE
from stream_split.native import NATIVE as _native  # (None: the Python fallbacks)
from stream_split.pages import reading

#: A time a manifest holds as null (beyond a double): in a column of float64, NaN.
_NOT_A_TIME = float("nan")

#: Robust z-score beyond which an iteration may be an outlier (Iglewicz & Hoaglin, 1993).
OUTLIER_Z = 3.5
#: ... and it must also be this many times slower (or faster) than the median.
OUTLIER_RATIO = 1.5
#: Fewer iterations than this in a group: no outliers.
MIN_FOR_OUTLIERS = 3
#: A leading iteration slower than this times the median is warm-up.
WARMUP_RATIO = 1.25
#: MAD -> standard deviation of a normal distribution.
_MAD_SCALE = 1.4826


def quantile(sorted_values: list, q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default ``percentile``)."""
    if len(sorted_values) == 0:
        return None
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(slots=True)
class GroupStats:
    """Statistics of one group of (non-idle) iterations."""
    count: int = 0
    median_us: float | None = None
    p90_us: float | None = None
    mad_us: float | None = None
    warmup: int = 0  # leading iterations of the group taken as warm-up


@dataclass(slots=True)
class IterationStats:
    """The verdicts for a list of ``count`` iterations (indices into the input)."""
    count: int
    #: {index: reason} of the outliers only (a million iterations with a handful of outliers
    #: hold a handful of entries, not two lists of a million).
    reasons: dict[int, str]
    #: ``{"first": i, "last": j}`` (indices into the input), or None with no iteration.
    steady_state: dict | None
    groups: dict = field(default_factory=dict)  # group key -> GroupStats

    @property
    def overall(self) -> GroupStats:
        return self.groups.get(None) or next(iter(self.groups.values()), GroupStats())

    @property
    def outlier(self) -> list[bool]:
        """Whether each iteration is an outlier, index for index (a list made when asked)."""
        reasons = self.reasons
        return [i in reasons for i in range(self.count)]

    @property
    def outlier_reason(self) -> list[str | None]:
        """Each iteration's reason (None: no outlier), index for index (made when asked)."""
        return [self.reasons.get(i) for i in range(self.count)]


def analyze(durations, kinds: list[str], groups: list | None = None) -> IterationStats:
    """Outliers and the steady state of iterations with these ``durations`` (µs: a sequence
    of numbers) and ``kinds``; ``groups`` (one key per iteration, e.g. a phase) computes each
    group's median and warm-up on its own. Without ``groups``, every iteration is in group
    ``None``. The durations are read as float64 columns (a million iterations: 8 bytes each,
    not a float object and an index object per iteration in each group's lists)."""
    n = len(durations)
    if len(kinds) != n:
        raise ValueError("durations, kinds and groups must have the same length")
    idle = np.fromiter((k == KIND_IDLE for k in kinds), dtype=bool, count=n)
    return _analyze(np.asarray(durations, dtype=np.float64) if n else np.zeros(0), idle,
                    groups)


def _analyze(times: np.ndarray, idle: np.ndarray, groups: list | None) -> IterationStats:
    """``analyze`` of the durations ``times`` (float64) and the flags of the idle cycles."""
    n = len(times)
    if groups is not None and len(groups) != n:
        raise ValueError("durations, kinds and groups must have the same length")
    busy = _indices(np.flatnonzero(~idle), n)
    reasons: dict[int, str] = {}
    stats: dict = {}
    warmup_end = -1
    members = _members(busy, groups)
    for key, idx in members.items():
        group = stats[key] = _group_stats(times[idx])
        _flag_outliers(times, idx, group, reasons)
        if group.median_us:
            warmup_end = max(warmup_end, _warm_up(times, idx, group, reasons))
    steady = None
    if len(busy):
        after = busy[np.searchsorted(busy, warmup_end, side="right"):]
        steady = {"first": int(after[0] if len(after) else busy[-1]), "last": int(busy[-1])}
        named = {key: idx for key, idx in members.items() if key is not None}
        if named:  # each group's own steady state: its members after its own warm-up
            steady["groups"] = {
                str(key): {"first": int(idx[stats[key].warmup]), "last": int(idx[-1]),
                           "warmup": stats[key].warmup}
                for key, idx in sorted(named.items(), key=lambda item: item[1][0])}
    return IterationStats(n, reasons, steady, stats)


def _indices(found: np.ndarray, n: int) -> np.ndarray:
    """Indices into ``n`` iterations (``found``, int64) as int32 where they fit: 4 bytes an
    iteration, not 8, held through the whole analysis."""
    return found.astype(np.int32) if n < 2 ** 31 else found


def _members(busy: np.ndarray, groups: list | None) -> dict:
    """{group key: the indices of its (non-idle) iterations (``_indices``)}, the keys in the
    order their first member comes."""
    if groups is None:
        return {None: busy} if len(busy) else {}
    codes: dict = {}
    of = np.fromiter((codes.setdefault(groups[i], len(codes)) for i in busy.tolist()),
                     dtype=np.int64, count=len(busy))
    keys = list(codes)
    return {keys[code]: busy[of == code] for code in range(len(keys))}


def _group_stats(values: np.ndarray) -> GroupStats:
    """Median, p90 and MAD of one group's durations (``values``: an array of its own, sorted
    here in place; ``quantile`` on the sorted values)."""
    values.sort()  # in place: a group of a million iterations sorts without another copy
    median = _float(quantile(values, 0.5))
    p90 = _float(quantile(values, 0.9))
    deviations = np.subtract(values, median, out=values)  # in place too: values are done
    np.abs(deviations, out=deviations)
    deviations.sort()
    mad = _float(quantile(deviations, 0.5))
    return GroupStats(count=len(values), median_us=median, p90_us=p90, mad_us=mad)


def _float(value) -> float | None:
    return None if value is None else float(value)


def _flag_outliers(times: np.ndarray, idx: np.ndarray, group: GroupStats,
                   reasons: dict) -> None:
    """Flag the outliers of one group (see the module docstring): their ratio in
    ``reasons`` at their index."""
    median, mad = group.median_us, group.mad_us
    if not (len(idx) >= MIN_FOR_OUTLIERS and median > 0):
        return
    limit = OUTLIER_Z * _MAD_SCALE * mad
    for block in range(0, len(idx), _OUTLIER_BLOCK):  # a block's arrays at a time, not a group's
        members = idx[block:block + _OUTLIER_BLOCK]
        values = times[members]
        deviations = values - median
        np.abs(deviations, out=deviations)
        far = deviations > limit
        del deviations
        ratio = np.divide(values, median, out=values)  # in place
        flagged = far & ((ratio >= OUTLIER_RATIO) | (ratio <= 1 / OUTLIER_RATIO))
        for at in np.flatnonzero(flagged).tolist():
            reasons[int(members[at])] = f"{float(ratio[at]):.1f}x median"


#: How many of a group's iterations ``_flag_outliers`` reads at a time.
_OUTLIER_BLOCK = 1 << 16


def _warm_up(times: np.ndarray, idx: np.ndarray, group: GroupStats, reasons: dict) -> int:
    """Count the group's leading warm-up iterations (``group.warmup``); returns the index of
    the last of them (-1: none). The candidates (at most half of the group) are read a block
    at a time: the warm-up is short, the group may hold a million."""
    limit = WARMUP_RATIO * group.median_us
    last = -1
    half = len(idx) // 2
    for block in range(0, half, _WARMUP_BLOCK):
        for i in idx[block:min(block + _WARMUP_BLOCK, half)].tolist():
            if not (i in reasons or times[i] > limit):
                return last
            group.warmup += 1
            last = i
    return last


#: How many of a group's leading iterations ``_warm_up`` reads at a time.
_WARMUP_BLOCK = 1024


#: What outliers and the steady state of iteration records are judged on: the wall span
#: of an iteration's work, CPU and GPU (``IterationRecord.wall_us``), not its CPU window
#: (``duration_us``): a step whose GPU work runs long past its CPU window is that long.
JUDGED_ON = "wall_us"


def judged_time(record) -> float:
    """The time of an iteration record (an object or a manifest entry) that ``analyze_records``
    judges: its ``wall_us``, or its ``duration_us`` when it has none (older manifests)."""
    if isinstance(record, dict):
        wall = record.get(JUDGED_ON)
        return record.get("duration_us") if wall is None else wall
    wall = getattr(record, JUDGED_ON, None)  # no function made per record: one per iteration
    return getattr(record, "duration_us", None) if wall is None else wall


class RecordColumns:
    """What ``analyze_records`` judges of iteration records (``judged_time``, idle or not,
    the serving phase), gathered a record at a time (``add``): in a pass of its own, or in
    the one that makes the records final (``Splitter.watch_final``: a long trace's records
    are paged through a file, and each pass over them reads every page)."""
    __slots__ = ("times", "idle", "phases")

    def __init__(self):
        # ``phases``: a list once a record has a phase, None before
        self.times, self.idle, self.phases = array("d"), bytearray(), None

    def __len__(self) -> int:
        return len(self.idle)

    def add(self, record) -> None:
        # (most: ``judged_time`` inline; a record's ``JUDGED_ON`` is never None)
        if record.__class__ is IterationRecord:
            phase, judged = record.phase, getattr(record, JUDGED_ON)
        else:
            phase, judged = getattr(record, "phase", None), judged_time(record)
        self.times.append(_NOT_A_TIME if judged is None else judged)
        self.idle.append(phase == PHASE_IDLE or record.kind == KIND_IDLE)
        if self.phases is not None:
            self.phases.append(phase)
        elif phase is not None:
            self.phases = [None] * (len(self.idle) - 1) + [phase]

    def add_page(self, records: list) -> None:
        """``add`` each of ``records`` (a page of them, made final: ``Splitter.watch_final``),
        a column at a time where each is an ``IterationRecord``: no call of Python a record
        but its ``JUDGED_ON`` (a property)."""
        if set(map(type, records)) != _RECORD_CLASS:
            for record in records:
                self.add(record)
            return
        phases, kinds, *spans = record_columns(records, _PAGE_READS)
        self.times.extend(_judged_times(records, spans))  # (never None: see ``add``)
        if PHASE_IDLE in phases or KIND_IDLE in kinds:
            self.idle.extend(map(or_, map(eq, phases, repeat(PHASE_IDLE)),
                                 map(eq, kinds, repeat(KIND_IDLE))))
        else:  # (most pages: none idle, a zero each at once)
            self.idle.extend(bytes(len(phases)))
        if self.phases is not None:
            self.phases.extend(phases)
        elif phases.count(None) < len(phases):
            self.phases = [None] * (len(self.idle) - len(phases)) + phases

    def analyze(self, groups: list | None = None) -> IterationStats:
        """``analyze_records`` of the records added."""
        return _analyze(np.frombuffer(self.times, dtype=np.float64),
                        np.frombuffer(self.idle, dtype=bool),
                        self.phases if groups is None else groups)


_RECORD_CLASS = {IterationRecord}
_JUDGED = attrgetter(JUDGED_ON)
#: The fields ``RecordColumns.add_page`` reads of each record (``core.finish.record_columns``:
#: in one call), the last three its spans' (``_judged_times``).
_PAGE_READS = ("phase", "kind", "gpu_start_ts", "end_ts", "start_ts")


def _judged_times(records: list, spans: list | None = None):
    """The ``JUDGED_ON`` of each of ``records`` (``IterationRecord``s): where none has GPU
    work, its wall span is its CPU window (``IterationRecord.wall_us``), taken a column at a
    time and rounded by ``_native.rounded`` where built (a whole float is its own rounding:
    no decimal conversion: ``round`` of a float to 3 digits is some 2,000 instructions; its
    figure with ``core.finish._set_final``'s); else the property a record at a time.
    ``spans``: their columns of ``gpu_start_ts``, ``end_ts`` and ``start_ts`` where read
    already (``record_columns``)."""
    gpu_starts, ends, starts = spans or record_columns(records, _PAGE_READS[2:])
    if _native is None or JUDGED_ON != "wall_us" or gpu_starts.count(None) != len(gpu_starts):
        return map(_JUDGED, records)
    return _native.rounded(list(map(sub, ends, starts)), False)


def analyze_records(records: list, groups: list | None = None) -> IterationStats:
    """``analyze`` of iteration records (objects with ``wall_us`` or ``duration_us``,
    ``kind`` and maybe ``phase``), judged on ``judged_time``. ``groups`` defaults to the
    records' serving phases: a decode step is compared with decode steps, a prefill with
    prefills; a step of phase ``idle`` (it launches no GPU work) stays out like an idle
    cycle. The records are read once (a long trace's are paged through a file)."""
    columns = RecordColumns()
    add = columns.add
    for record in reading(records):
        add(record)
    return columns.analyze(groups)


def finish(records: list, groups: list | None = None,
           columns: RecordColumns | None = None) -> IterationStats:
    """The one step after the core that needs every iteration of a trace: set ``outlier``
    and ``outlier_reason`` on its iteration records (``analyze_records``); returns the
    analysis (the steady state too). Every front end takes it the same way, through
    ``run.drive``; a direct caller of ``Splitter`` calls it after ``close()``. ``columns``:
    what was gathered of every one of ``records`` as they were made final (else they are
    read again)."""
    if columns is not None and len(columns) == len(records):
        result = columns.analyze(groups)
    else:
        result = analyze_records(records, groups)
    for i in sorted(result.reasons):  # a record is made no outlier: only outliers are changed
        record = records[i]
        record.outlier, record.outlier_reason = True, result.reasons[i]
    return result
