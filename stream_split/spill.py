"""A temporary-file store for undecided events, so that waiting never costs unbounded memory.

The engine hands it batches of held events when more than ``pending_limit`` are undecided
(e.g. everything read before an unannotated loop's structure is decided, or a thread written
before the loop thread) and takes back, one batch at a time, only the batches that a new
boundary may decide: each batch remembers the earliest end among its events. Pickle is only
ever read back by the process that wrote it. What a held event keeps is already small (the
engine's ``_held_view``: a few fields, and its original bytes when they are written).
"""
from __future__ import annotations

import os
import pickle
import tempfile
from itertools import repeat

import numpy as np


class FrameColumns:
    """Held plain Python frames as columns (the engine's ``_hold_frames``): the end, arrival
    number and start of each as arrays (float64, int64, float64) and its original bytes (or
    None). A batch of them is stored and pickled as a few arrays and one list, instead of as
    many small tuples; ``items(event)`` gives the tuples the engine holds otherwise,
    (end, seq, start, event, None, raw) each."""
    __slots__ = ("ends", "seqs", "starts", "raws", "earliest")

    def __init__(self, ends, seqs, starts, raws: list):
        self.ends, self.seqs, self.starts, self.raws = ends, seqs, starts, raws
        self.earliest = float(ends.min()) if len(raws) else float("inf")

    def __len__(self) -> int:
        return len(self.raws)

    def take(self, index) -> "FrameColumns":
        """The frames at ``index`` (an index array or a slice), in that order."""
        raws = self.raws[index] if isinstance(index, slice) else \
            [self.raws[k] for k in index.tolist()]
        return FrameColumns(self.ends[index], self.seqs[index], self.starts[index], raws)

    def items(self, event: dict) -> list:
        return list(zip(self.ends.tolist(), self.seqs.tolist(), self.starts.tolist(),
                        repeat(event), repeat(None), self.raws))

    @staticmethod
    def joined(parts: list) -> "FrameColumns":
        if len(parts) == 1:
            return parts[0]
        return FrameColumns(np.concatenate([p.ends for p in parts]),
                            np.concatenate([p.seqs for p in parts]),
                            np.concatenate([p.starts for p in parts]),
                            [raw for p in parts for raw in p.raws])


def batch_key(items) -> float:
    """The earliest end in a batch. Events waiting for a launch (end None) are not decided by
    boundaries: a batch holding them is due only at the end (their launch may come later in
    the file, or never: GPU work launched before the trace)."""
    if isinstance(items, FrameColumns):
        return items.earliest
    ends = [item[0] for item in items]
    return float("inf") if any(e is None for e in ends) else min(ends)


def _batch(items):
    return items if isinstance(items, FrameColumns) else list(items)


class MemorySpill:
    """Batches kept in memory (library default; no file)."""

    def __init__(self):
        self._batches: dict = {}
        self._next = 0
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def put(self, items) -> None:
        """A batch: held items, or ``FrameColumns``."""
        items = _batch(items)
        self._batches[self._next] = (batch_key(items), items)
        self._next += 1
        self._count += len(items)

    def due(self, until: float) -> list:
        """Handles of the batches holding an event that ends by ``until``, oldest first."""
        return [h for h, (key, _) in self._batches.items() if key <= until]

    def take(self, handle) -> list:
        _, items = self._batches.pop(handle)
        self._count -= len(items)
        return items

    def close(self) -> None:
        """Drop what is held (idempotent); a file-backed store gives its file back."""
        self._batches.clear()
        self._count = 0

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
            self._file = tempfile.TemporaryFile(dir=self._directory,
                                                prefix="stream-split-spill-")
        self._file.seek(0, os.SEEK_END)
        offset = self._file.tell()
        pickle.dump(items, self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self._batches[self._next] = (batch_key(items), (offset, len(items)))
        self._next += 1
        self._count += len(items)
        self.spilled_total += len(items)

    def take(self, handle) -> list:
        _, (offset, n) = self._batches.pop(handle)
        self._file.seek(offset)
        items = pickle.load(self._file)
        self._count -= n
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
        self._count = 0
