"""A list of a few distinct values held as one byte per item: per-iteration answers of the
core's last pass (each cycle's kind, each iteration's phase) for a million iterations take a
megabyte, not the eight of a list of pointers."""
from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import repeat


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
        if isinstance(index, slice):  # (each code's value looked up in C: no bytecode an item)
            return list(map(self._values.__getitem__, self._codes[index]))
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
        return map(self._values.__getitem__, self._codes)

    def __eq__(self, other) -> bool:
        if isinstance(other, (list, CodedList)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"CodedList({list(self)!r})"


class CodedColumn:
    """A growable list (``append``, ``insert``, ``pop``, ``[i]``, ``[i] = value``, ``len``,
    iteration) of hashable values held as a code per item, in an array of the narrowest
    unsigned type its distinct values allow (one byte each while at most 256 are distinct,
    then two, then four), each distinct value kept once: a per-instance column of a loop's
    matcher (each instance's shape, its similarity: mostly one value, or one of a thousand)
    takes a byte or two an instance, not the eight of a list's pointer or an array's float.
    Values are told apart as a list's would hold them: 1 is not 1.0 (nor True), a float 0.0
    is not -0.0."""

    __slots__ = ("_values", "_codes_of", "_codes", "_last", "_last_code")

    _WIDER = {"B": "H", "H": "I"}

    def __init__(self):
        self._values: list = []
        self._codes_of: dict = {}  # ``_key(value)`` -> its code
        self._codes = array("B")
        # The value coded last and its code: a loop's instances mostly give the very same
        # object again (a matcher measures an instance like the one before once).
        self._last, self._last_code = _NOTHING, 0

    @staticmethod
    def _key(value):
        """What tells ``value`` apart: its class and itself (and a float zero's sign)."""
        if value.__class__ is float and not value:
            return float, value, str(value)
        return value.__class__, value

    def _code(self, value) -> int:
        if value is self._last:
            return self._last_code
        key = self._key(value)
        code = self._codes_of.get(key)
        if code is None:
            code = self._codes_of[key] = len(self._values)
            self._values.append(value)
            if code > _LARGEST[self._codes.typecode]:
                self._codes = array(self._WIDER[self._codes.typecode], self._codes)
        self._last, self._last_code = value, code
        return code

    def __len__(self) -> int:
        return len(self._codes)

    def __getitem__(self, index: int):
        return self._values[self._codes[index]]

    def __setitem__(self, index: int, value) -> None:
        code = self._code(value)
        self._codes[index] = code

    def append(self, value) -> None:
        # the value coded last (most often in a loop of alike instances): no call; coded
        # before ``_codes`` is read (a new code may widen it)
        code = self._last_code if value is self._last else self._code(value)
        self._codes.append(code)

    def append_many(self, value, count: int) -> None:
        """``append(value)`` ``count`` times, at once."""
        code = self._last_code if value is self._last else self._code(value)
        self._codes.extend(repeat(code, count))

    def insert(self, index: int, value) -> None:
        code = self._code(value)
        self._codes.insert(index, code)

    def pop(self):
        return self._values[self._codes.pop()]

    def __iter__(self):
        return map(self._values.__getitem__, self._codes)


#: What ``CodedColumn`` has coded last before its first value: no value is it.
_NOTHING = object()
#: The largest code of each type of ``CodedColumn``'s array.
_LARGEST = {"B": 0xFF, "H": 0xFFFF, "I": 0xFFFFFFFF}
