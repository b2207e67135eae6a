"""A temporary-file store for undecided events, so that waiting never costs unbounded memory.

The engine hands it batches of held events when more than ``pending_limit`` are undecided
(e.g. everything read before an unannotated loop's structure is decided, or a thread written
before the loop thread) and takes back, one batch at a time, only the batches that a new
boundary may decide: each batch remembers the earliest end among its events. Pickle is only
ever read back by the process that wrote it. What a held event keeps is already small (the
engine's ``_held_view``, or less: a few fields, and its original bytes when they are written).
"""
from __future__ import annotations

import os
import pickle
from itertools import compress, repeat
from operator import itemgetter

import numpy as np


#: The bits of ``HeldColumns.exact``: an event's end, its start, was given as an integer.
END_INTEGER, START_INTEGER = 1, 2


class HeldColumns:
    """Held CPU-side events (the engine's ``_hold_cpu``, ``_hold_frames``) as columns: the end,
    arrival number and start of each as arrays (float64, int64, float64), its original bytes
    (or None) in ``raws``, and in ``events`` what the engine keeps of it (``_hold_cpu``: its
    ``_held_view``, or less), or None for a plain Python frame (whose view is always the
    same) or an event only counted as one; ``events`` is None when every one is such.
    ``raws`` and ``events`` are object arrays (given as lists, they are made so), so that
    ``take`` and ``joined`` copy them in numpy, not item by item in Python (a boundary on the
    resnet 10x tile takes some 1,000 of 8,000 held events and keeps the rest: 24 us against
    346 us for lists; 10x ``boundaries`` -1.4 % instructions).
    ``exact``: None, or for each event which of its times were given as integers (an int8
    array: ``END_INTEGER``, ``START_INTEGER``; the float columns hold them exactly, the engine
    holds no other integers here), given back as such by ``times``: a trace stamped in
    integers pickles one byte an event for it, not a tuple of its two times.
    A batch of them is stored and pickled as a few arrays (numpy pickles an object array as
    a list), instead of as many small tuples; ``items(frame)`` gives the tuples the engine
    holds otherwise, (end, seq, start, event, None, raw) each, ``frame`` in place of None."""
    __slots__ = ("ends", "seqs", "starts", "raws", "events", "exact", "earliest", "rising")

    def __init__(self, ends, seqs, starts, raws, events=None, exact: np.ndarray | None = None,
                 *, rising: bool | None = False):
        self.ends, self.seqs, self.starts = ends, seqs, starts
        self.raws = _objects(raws)
        self.events = None if events is None else _objects(events)
        self.exact = exact
        #: True: ``ends`` never fall; None: to be looked at by the next ``split_before``
        #: (the part kept by a split before); False: not known (``split_before`` masks).
        self.rising = rising
        if not len(ends):
            self.earliest = float("inf")
        else:  # (rising: the first, no pass over them)
            self.earliest = float(ends[0] if rising else ends.min())

    def __len__(self) -> int:
        return len(self.ends)

    def take(self, index) -> "HeldColumns":
        """The events at ``index`` (an index array or a slice), in that order."""
        exact = None if self.exact is None else self.exact[index]
        return HeldColumns(self.ends[index], self.seqs[index], self.starts[index],
                           self.raws[index], None if self.events is None else self.events[index],
                           exact)

    def split_before(self, until: float) -> tuple:
        """``(taken, kept)``: the events that end before ``until`` and the others (None where
        none), each in their order. Where those that end before come first (columns back from
        the spill, sorted by end, decided a boundary at a time: the first iterations of a
        loop the detector held until it was sure), views of both (slices), not copies of
        the columns kept at each boundary (split of 30 k one-op iterations, whose first
        1,243 boundaries took one event each of those held: 9,877.1 -> 9,680.3 M
        instructions); where ``ends`` never fall, found by a binary search, without a pass
        over them: looked at where the part kept by a split is split again (``rising``: a
        loop's first iterations, some 1,200 boundaries of one event each; not columns joined
        anew at each boundary, the resnet tile's) and known for its slices from then on."""
        ends = self.ends
        n = len(ends)
        if self.rising is None:
            self.rising = bool((ends[1:] >= ends[:-1]).all())
        if self.rising:
            count = int(ends.searchsorted(until))  # (those before: ends < until)
            return self._part(0, count), None if count == n else self._part(count, n)
        due = ends < until
        count = int(np.count_nonzero(due))
        if count == n:
            return self, None
        if due[:count].all():
            kept = self.take(slice(count, n))
            kept.rising = None  # (split again before anything joins it: looked at then)
            return self.take(slice(0, count)), kept
        return self.take(np.flatnonzero(due)), self.take(np.flatnonzero(~due))

    def _part(self, lo: int, hi: int) -> "HeldColumns":
        """The events from ``lo`` to ``hi`` of columns whose ends never fall (views)."""
        return HeldColumns(self.ends[lo:hi], self.seqs[lo:hi], self.starts[lo:hi],
                           self.raws[lo:hi], None if self.events is None else self.events[lo:hi],
                           None if self.exact is None else self.exact[lo:hi], rising=True)

    def in_arrival_order(self) -> "HeldColumns":
        """The same events sorted by ``seqs`` (the order they came): itself when they are."""
        seqs = self.seqs
        if (seqs[1:] > seqs[:-1]).all():
            return self
        return self.take(np.argsort(seqs, kind="stable"))

    def times(self) -> tuple[list, list]:
        """Each event's end and start as given (integers where ``exact`` says so, else the
        floats)."""
        if self.exact is None:
            return self.ends.tolist(), self.starts.tolist()
        return (_as_given(self.ends, self.exact & END_INTEGER),
                _as_given(self.starts, self.exact & START_INTEGER))

    def items(self, frame: dict) -> list:
        ends, starts = self.times()
        events = repeat(frame) if self.events is None else \
            [frame if event is None else event for event in self.events.tolist()]
        return list(zip(ends, self.seqs.tolist(), starts, events, repeat(None),
                        self.raws.tolist()))

    @staticmethod
    def joined(parts: list) -> "HeldColumns":
        if len(parts) == 1:
            return parts[0]
        events = None
        if any(p.events is not None for p in parts):
            events = np.concatenate([np.full(len(p), None, object) if p.events is None
                                     else p.events for p in parts])
        return HeldColumns(np.concatenate([p.ends for p in parts]),
                           np.concatenate([p.seqs for p in parts]),
                           np.concatenate([p.starts for p in parts]),
                           np.concatenate([p.raws for p in parts]), events,
                           _joined_exact(parts))


def _integer_times(ends: list, starts: list) -> np.ndarray | None:
    """``HeldColumns.exact`` of times given as ``ends`` and ``starts`` (floats, or integers):
    None where every one is a float (``HeldRows`` asks only where it was given an integer:
    asked of the 10x resnet tile's floats too, its ``split`` took about 0.2 % more
    instructions)."""
    codes = _integer_bits(ends, END_INTEGER) | _integer_bits(starts, START_INTEGER)
    if codes.__class__ is int:
        return np.full(len(ends), codes, np.int8) if codes else None
    return codes.astype(np.int8)


def _integer_bits(times: list, bit: int):
    """``bit`` where a time of ``times`` is an integer: as an int where all are, or none
    (most often: the types gathered in C, ``set(map(type, ...))``), else an array (the types
    compared in numpy). With ``HeldRows.columns`` reading its lists by ``fromiter``: a split
    of 200 k ops stamped in integers, all held (``testing.attacks.processes``), 15,104 ->
    15,010 M instructions."""
    kinds = set(map(type, times))
    if float not in kinds:
        return bit
    if len(kinds) == 1:
        return 0
    return (np.fromiter(map(type, times), object, len(times)) != float) * bit


def _as_given(column: np.ndarray, integer: np.ndarray) -> list:
    """The times of a float ``column`` as given: integers where ``integer`` is set (the
    column holds them exactly), all at once where every one is."""
    if integer.all():
        return column.astype(np.int64).tolist()
    times = column.tolist()
    at = np.flatnonzero(integer)
    for k, given in zip(at.tolist(), column[at].astype(np.int64).tolist()):
        times[k] = given
    return times


def _joined_exact(parts: list) -> np.ndarray | None:
    """The ``exact`` column of ``HeldColumns`` over ``parts`` (None where all are None)."""
    if all(p.exact is None for p in parts):
        return None
    return np.concatenate([np.zeros(len(p), np.int8) if p.exact is None else p.exact
                           for p in parts])


def _objects(column) -> np.ndarray:
    """A list column of ``HeldColumns`` as an object array (an array: itself). Not
    ``np.array``, which would make a tuple in it (an op's thread) a row of its own."""
    if column.__class__ is np.ndarray:
        return column
    return np.fromiter(column, object, len(column))


def _picker(index):
    """A function giving the items of a list column at ``index`` (a slice, or a list of
    positions), in that order (``take``)."""
    if isinstance(index, slice):
        return lambda column: column[index]
    return lambda column: list(map(column.__getitem__, index))


class HeldLinks:
    """Held events that wait for another event's owner (the engine's ``_hold_linked``): GPU
    work and launch flows for their launch's (by correlation id), GPU annotations for their
    CPU annotation's (by External id), in the order they came, as columns: ``keys`` the ids
    (None: none), ``by_ext`` whether each waits by an External id, ``events`` what the
    engine keeps of each (None: only counted), ``raws`` its original bytes (or None).
    ``add`` appends one (while held in memory); ``owners`` looks them all up at once.
    ``head``: None, or held CPU-side events (items or ``HeldColumns``) that share their
    spill batch and are decided first (``spill.batch_key``: due at the end only)."""
    __slots__ = ("keys", "by_ext", "events", "raws", "head")

    def __init__(self, keys=None, by_ext=None, events=None, raws=None, head=None):
        self.keys, self.by_ext = keys or [], by_ext or []
        self.events, self.raws, self.head = events or [], raws or [], head

    def __len__(self) -> int:
        return len(self.raws) + (0 if self.head is None else len(self.head))

    def add(self, key, by_ext: bool, event, raw) -> None:
        self.keys.append(key)
        self.by_ext.append(by_ext)
        self.events.append(event)
        self.raws.append(raw)

    def take(self, index) -> "HeldLinks":
        """The links at ``index`` (a list of positions, or a slice), without the head."""
        pick = _picker(index)
        return HeldLinks(pick(self.keys), pick(self.by_ext), pick(self.events),
                         pick(self.raws))

    def owners(self, correlations, annotations) -> list:
        """Each link's owner now (None: not known yet), from the owner maps of correlation
        ids and of External ids (``owners.MonotonicOwnerMap.lookup_many``)."""
        owners = correlations.lookup_many(self.keys)
        if True in self.by_ext:
            at = list(compress(range(len(self.by_ext)), self.by_ext))
            for k, owner in zip(at, annotations.lookup_many([self.keys[k] for k in at])):
                owners[k] = owner
        return owners


class HeldRows:
    """Held CPU-side events as the engine holds them one at a time, until they are made
    ``HeldColumns`` (``columns``) or taken back (``items_before``; all at once by the engine
    itself where each ends before a boundary and none is a plain frame, emptying ``items``
    and ``exact``: ``Splitter._resolve_pending``): in ``items`` the engine's held items
    ``(end, seq, start, event, None, raw)`` (``event`` None: counted as a plain Python frame;
    ``end`` and ``start`` floats, or integers that a float holds exactly), appended by the
    engine itself, which sets ``exact`` where a time is not a float (``Splitter._hold_cpu``:
    a call less per held event; a boundary hands its items on as they are)."""
    __slots__ = ("items", "exact")

    def __init__(self):
        self.items: list = []
        self.exact = False  # a time that is not a float was added

    def __len__(self) -> int:
        return len(self.items)

    def _taken(self) -> list:
        """Every item, no longer here."""
        items = self.items
        self.items, self.exact = [], False
        return items

    def items_before(self, until: float, frame: dict) -> list:
        """The items that end before ``until`` in the order added (a plain frame's event:
        ``frame``), no longer here; the others stay."""
        items = self.items
        if not items:
            return []
        if max(map(HELD_END, items)) < until:  # most often every one (the times are finite)
            due = self._taken()
        else:
            due = [item for item in items if item[0] < until]
            if not due:
                return []
            self.items = [item for item in items if not item[0] < until]
        if None not in map(HELD_EVENT, due):
            return due
        return [item if item[3] is not None else (*item[:3], frame, *item[4:])
                for item in due]

    def columns(self) -> HeldColumns | None:
        """What was added, as columns (None if nothing), no longer here."""
        if not self.items:
            return None
        exact = self.exact
        ends, seqs, starts, events, _, raws = zip(*self._taken())
        n = len(ends)  # (``fromiter``: a list of numbers read in a seventh of the
        # instructions ``np.array`` takes, which looks for nested sequences first)
        return HeldColumns(np.fromiter(ends, np.float64, n), np.fromiter(seqs, np.int64, n),
                           np.fromiter(starts, np.float64, n), raws, events,
                           _integer_times(ends, starts) if exact else None)


#: A held item's end and what it keeps of its event (``HeldRows``; the engine, which holds
#: the items, reads them so too).
HELD_END, HELD_EVENT = itemgetter(0), itemgetter(3)


def batch_key(items) -> float:
    """The earliest end in a batch. Events waiting for a link (``HeldLinks``, or an item
    whose end is None) are not decided by boundaries: a batch holding them is due only at
    the end (their launch may come later in the file, or never: GPU work launched before
    the trace)."""
    if isinstance(items, HeldColumns):
        return items.earliest
    if isinstance(items, HeldLinks):
        return float("inf")
    ends = [item[0] for item in items]
    return float("inf") if any(e is None for e in ends) else min(ends)


def _batch(items):
    return items if isinstance(items, (HeldColumns, HeldLinks)) else list(items)


class MemorySpill:
    """Batches kept in memory (library default; no file)."""

    def __init__(self):
        self._batches: dict = {}
        self._next = 0
        #: The events held (``len``; read without a call at each boundary: the engine's
        #: ``_resolve_pending``).
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def put(self, items) -> None:
        """A batch: held items, ``HeldColumns`` or ``HeldLinks``."""
        items = _batch(items)
        self._batches[self._next] = (batch_key(items), items)
        self._next += 1
        self.count += len(items)

    def due(self, until: float) -> list:
        """Handles of the batches holding an event that ends by ``until``, oldest first."""
        return [h for h, (key, _) in self._batches.items() if key <= until]

    def take(self, handle) -> list:
        _, items = self._batches.pop(handle)
        self.count -= len(items)
        return items

    def close(self) -> None:
        """Drop what is held (idempotent); a file-backed store gives its file back."""
        self._batches.clear()
        self.count = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TempFileSpill(MemorySpill):
    """Batches pickled to an unnamed temporary file; only their keys stay in memory.

    The file exists only while it holds a batch: made at the first ``put``, closed when the
    last batch is taken back (every run ends by draining the store), so no caller has a file
    to close, and a run that never spills never makes one."""

    def __init__(self, directory: str | None = None):
        super().__init__()
        self._directory = directory
        self._file = None
        self.spilled_total = 0

    def put(self, items) -> None:
        items = _batch(items)
        if self._file is None:
            # Imported here: a run that never spills never loads tempfile (with shutil, bz2,
            # lzma, random: 9 M instructions, 1.5 % of a `boundaries` run of two events).
            import tempfile
            self._file = tempfile.TemporaryFile(dir=self._directory,
                                                prefix="stream-split-spill-")
        self._file.seek(0, os.SEEK_END)
        offset = self._file.tell()
        pickle.dump(items, self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self._batches[self._next] = (batch_key(items), (offset, len(items)))
        self._next += 1
        self.count += len(items)
        self.spilled_total += len(items)

    def take(self, handle) -> list:
        _, (offset, n) = self._batches.pop(handle)
        self._file.seek(offset)
        items = pickle.load(self._file)
        self.count -= n
        if not self._batches:  # empty: give the file back
            self.close()
        return items

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if not self._batches:
            return
        self._batches.clear()
        self.count = 0
