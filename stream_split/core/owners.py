"""Assign stage: who owns an event, decided from boundaries and launch links, not from time.

- ``Windows``: the CPU windows ``[b_i, b_{i+1})`` (the last one ends where the detector says the
  last iteration ended). An op belongs to the window holding its start; an op that crosses one
  window edge belongs to the side holding most of it (jitter, Python frames opened just before
  the first op); an op that crosses two or more edges spans several iterations and belongs to
  none.
- ``MonotonicOwnerMap``: correlation id (or External id) -> owner. Ids grow with launch order,
  so the map is a short list of id ranges, one per run of launches with the same owner: its
  size follows the number of iterations, not the number of launches. Ids that break the order
  split a range and are counted.
"""
from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right

import numpy as np

from stream_split.core.records import OUTSIDE


class Windows:
    """The windows' edges: each iteration's start (``starts``, which only the methods here
    change), then where the last one ends. Kept for the whole run (an event from long ago may
    still come), as float64 (8 bytes an iteration, not a float object's 32: ``--follow`` for
    weeks) while every time given is exact there, as a list of the times given otherwise
    (an integer beyond 2**53): a comparison with either answers the same."""
    __slots__ = ("starts", "last_end", "closed", "_edges", "cached_lo", "cached_hi",
                 "cached_owner", "_edge_array")

    def __init__(self):
        self.starts = array("d")
        self.last_end: float | None = None
        self.closed = False
        self._edges = self.starts
        self.forget()

    def forget(self) -> None:
        """Drop the cached window (the edges changed). The cache is the last window an op
        fell in whole: an op with ``cached_lo <= start <= end < cached_hi`` is decidable and
        owned by ``cached_owner`` (callers may test it inline); ``owner`` gives the same answer
        with or without it."""
        self.cached_lo, self.cached_hi, self.cached_owner = 1.0, 0.0, OUTSIDE
        self._edge_array = None  # the edges as an array, for ``owners``: made on demand

    def add(self, ts: float) -> int:
        """A new iteration starts at ``ts`` (after the latest): returns its index."""
        self._exact_for(ts).append(ts)
        self.forget()
        return len(self.starts) - 1

    def move_last(self, ts: float) -> None:
        """The latest iteration starts at ``ts`` instead."""
        self._exact_for(ts)[-1] = ts
        self.forget()

    def drop_last(self) -> None:
        """The latest iteration is withdrawn."""
        self.starts.pop()
        self.forget()

    def _exact_for(self, ts) -> list | array:
        """``starts``, as a list from now on if ``ts`` is not exact in float64."""
        if ts.__class__ is not float and self.starts.__class__ is array and \
                not -_EXACT_IN_FLOAT <= ts <= _EXACT_IN_FLOAT:
            self.starts = self._edges = list(self.starts)
        return self.starts

    def close(self, last_end: float | None) -> None:
        self.closed = True
        if self.starts:
            self.last_end = last_end if last_end is not None else float("inf")
            self._edges = self._exact_for(self.last_end)[:]
            self._edges.append(self.last_end)
        self.forget()

    def decidable(self, end: float) -> bool:
        """Strictly before the latest boundary: an event at its very start waits, so that
        the latest boundary owns nothing until a later one comes, and can still be revised."""
        return self.closed or (bool(self.starts) and end < self.starts[-1])

    def owner(self, start: float, end: float) -> int:
        """Owner of an op spanning [start, end]; call only when ``decidable(end)``."""
        if self.cached_lo <= start <= end < self.cached_hi:  # most ops: the last window
            return self.cached_owner
        edges = self._edges
        if not edges:
            return OUTSIDE
        n_iter = len(self.starts)
        seg_s = bisect_right(edges, start) - 1
        seg_e = bisect_left(edges, end) - 1 if end > start else seg_s
        if seg_e == seg_s:
            owner = seg_s if 0 <= seg_s < n_iter else OUTSIDE
            if 0 <= seg_s < len(edges) - 1:
                self.cached_lo, self.cached_hi = edges[seg_s], edges[seg_s + 1]
                self.cached_owner = owner
            return owner
        if seg_e - seg_s >= 2:
            return OUTSIDE
        edge = edges[seg_s + 1]
        seg = seg_s if (edge - start) >= (end - edge) else seg_e
        return seg if 0 <= seg < n_iter else OUTSIDE

    def decidable_many(self, ends: np.ndarray) -> np.ndarray:
        """``decidable`` of each end (a bool array)."""
        if self.closed:
            return np.ones(ends.size, bool)
        if not self.starts:
            return np.zeros(ends.size, bool)
        return ends < self.starts[-1]

    def owners(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """``owner`` of each op (float64 arrays of starts and ends), all at once: the same
        rules on the same edges (call only where ``decidable_many``)."""
        if not self._edges:
            return np.full(starts.size, OUTSIDE, np.int64)
        if self._edge_array is None:
            edges = np.array(self._edges, np.float64)  # a copy: ``starts`` may still grow
            self._edge_array = edges, bool((edges[1:] >= edges[:-1]).all())
        edges, ordered = self._edge_array
        if not ordered:
            # A last end before the last start: the edges are not sorted, bisect on them
            # answers what it answers.
            return np.array([self.owner(s, e) for s, e in zip(starts.tolist(), ends.tolist())],
                            np.int64)
        n_iter = len(self.starts)
        seg_s = np.searchsorted(edges, starts, "right") - 1
        seg_e = np.where(ends > starts, np.searchsorted(edges, ends, "left") - 1, seg_s)
        # Across one edge: the side holding most of the op.
        edge = edges[np.minimum(seg_s + 1, edges.size - 1)]
        seg = np.where(seg_e == seg_s, seg_s,
                       np.where((edge - starts) >= (ends - edge), seg_s, seg_e))
        inside = (seg >= 0) & (seg < n_iter) & (seg_e - seg_s < 2)
        return np.where(inside, seg, OUTSIDE)


#: Times within this are exact in float64 (an integer beyond it may not be).
_EXACT_IN_FLOAT = 2 ** 53


class MonotonicOwnerMap:
    __slots__ = ("_los", "_his", "_owners", "order_breaks")

    def __init__(self):
        self._los: list[int] = []
        self._his: list[int] = []
        self._owners: list[int] = []
        self.order_breaks = 0

    def __len__(self) -> int:
        return len(self._los)

    def add(self, key: int, owner: int) -> None:
        los, his, owners = self._los, self._his, self._owners
        if not los or key > his[-1]:
            if los and owners[-1] == owner:
                his[-1] = key
            else:
                los.append(key)
                his.append(key)
                owners.append(owner)
            return
        i = bisect_right(los, key) - 1
        if i >= 0 and key <= his[i]:
            if owners[i] != owner:  # out of order: split the range around this key
                self.order_breaks += 1
                lo, hi, own = los[i], his[i], owners[i]
                parts = [(lo, key - 1, own), (key, key, owner), (key + 1, hi, own)]
                parts = [p for p in parts if p[0] <= p[1]]
                los[i:i + 1] = [p[0] for p in parts]
                his[i:i + 1] = [p[1] for p in parts]
                owners[i:i + 1] = [p[2] for p in parts]
            return
        # In a gap between ranges (or before the first): grow a neighbour or insert.
        self.order_breaks += 1
        if i >= 0 and owners[i] == owner:
            his[i] = key
        elif i + 1 < len(los) and owners[i + 1] == owner:
            los[i + 1] = key
        else:
            los.insert(i + 1, key)
            his.insert(i + 1, key)
            owners.insert(i + 1, owner)

    def lookup(self, key: int) -> int | None:
        """The owner of ``key``, or None while no launch with that id has been seen."""
        los = self._los
        i = bisect_right(los, key) - 1
        if i >= 0 and key <= self._his[i]:
            return self._owners[i]
        return None
