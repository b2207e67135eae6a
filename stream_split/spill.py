"""A temporary-file store for undecided events, so that waiting never costs unbounded memory.

The engine hands it batches of held events when more than ``pending_limit`` are undecided
(e.g. everything read before an unannotated loop's structure is decided, or a thread written
before the loop thread) and takes them back one batch at a time, oldest first, when they may
be decidable. Pickle is only ever read back by the process that wrote it.
"""
from __future__ import annotations

import os
import pickle
import tempfile


class TempFileSpill:
    def __init__(self, directory: str | None = None):
        self._file = tempfile.TemporaryFile(dir=directory, prefix="stream-split-spill-")
        self._count = 0
        self._read_at = 0
        self.spilled_total = 0

    def __len__(self) -> int:
        return self._count

    def put(self, items) -> None:
        self._file.seek(0, os.SEEK_END)
        pickle.dump(list(items), self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self._count += len(items)
        self.spilled_total += len(items)

    def take_batch(self) -> list:
        """The oldest batch still stored (FIFO), or [] when empty."""
        if not self._count:
            return []
        self._file.seek(self._read_at)
        batch = pickle.load(self._file)
        self._read_at = self._file.tell()
        self._count -= len(batch)
        if not self._count:  # empty: reuse the file from the start
            self._file.seek(0)
            self._file.truncate()
            self._read_at = 0
        return batch

    def close(self) -> None:
        self._file.close()
