"""A list of a few distinct values held as one byte per item: per-iteration answers of the
core's last pass (each cycle's kind, each iteration's phase) for a million iterations take a
megabyte, not the eight of a list of pointers."""
from __future__ import annotations

from collections.abc import Sequence


class CodedList(Sequence):
    """``count`` items, each one of ``values`` (at most 256 distinct, compared by equality),
    all ``values[0]`` at first; ``coded[i] = value`` sets one. Equal to a list of the same
    items."""

    __slots__ = ("_values", "_codes")

    def __init__(self, values, count: int):
        self._values = list(values)
        self._codes = bytearray(count)

    def __len__(self) -> int:
        return len(self._codes)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._values[code] for code in self._codes[index]]
        return self._values[self._codes[index]]

    def __setitem__(self, index: int, value) -> None:
        try:
            code = self._values.index(value)
        except ValueError:
            if len(self._values) == 256:
                raise ValueError("a CodedList holds at most 256 distinct values") from None
            code = len(self._values)
            self._values.append(value)
        self._codes[index] = code

    def __iter__(self):
        values = self._values
        return (values[code] for code in self._codes)

    def __eq__(self, other) -> bool:
        if isinstance(other, (list, CodedList)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"CodedList({list(self)!r})"
