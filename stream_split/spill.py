"""A temporary-file store for undecided events, so that waiting never costs unbounded memory.

The engine hands it batches of (end, start, event) when more than ``pending_limit`` events are
undecided (e.g. a thread written before the loop thread, or a very long first iteration) and
takes them all back when a boundary may decide them. Pickle is only ever read back by the same
process that wrote it.
"""
from __future__ import annotations

import pickle
import tempfile


class TempFileSpill:
    def __init__(self, directory: str | None = None):
        self._file = tempfile.TemporaryFile(dir=directory, prefix="stream-split-spill-")
        self._count = 0
        self.spilled_total = 0

    def __len__(self) -> int:
        return self._count

    def put(self, items) -> None:
        pickle.dump(list(items), self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self._count += len(items)
        self.spilled_total += len(items)

    def take_all(self) -> list:
        if not self._count:
            return []
        self._file.seek(0)
        out = []
        while True:
            try:
                out.extend(pickle.load(self._file))
            except EOFError:
                break
        self._file.seek(0)
        self._file.truncate()
        self._count = 0
        return out

    def close(self) -> None:
        self._file.close()
