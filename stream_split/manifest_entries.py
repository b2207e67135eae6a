"""The manifest's ``iterations`` made from the records as they are read, and written as made.

A manifest holds one entry (a dict of some 30 keys and the breakdown: about 2 KB in memory)
per iteration. Built as a list, a trace of hundreds of thousands of iterations needed that
many times 2 KB at its end, whatever the engine kept while it read. ``ManifestIterations``
is the same entries as a sequence made on demand from the iteration records (which a long
trace keeps in a file: ``pages.PagedList``), and ``dump_manifest`` writes the manifest with
its entries encoded one at a time: the text is that of ``json.dump(manifest, indent=1)``,
byte for byte.

What changes an entry after the records are final (``analysis.explain_outliers``: an
outlier's reason) assigns the changed entry to its position; only the keys that differ are
kept. Pickled (a rank's manifest sent to the parent process) it is the list it stands for;
a caller that wants a list (the library's ``split``) takes ``list(...)``.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from stream_split.pages import reading
from stream_split.serialize import finite, strict_json

#: What stands for the entries while the rest of the manifest is encoded.
_PLACEHOLDER = "\x00iterations\x00"
#: The indentation of ``dump_manifest``'s JSON, and of an entry in it (an item of the list
#: that is the value of a top-level key: two levels down).
INDENT = 1
_ENTRY_INDENT = "\n" + " " * (2 * INDENT)


def manifest_entry(record, files: dict, shared: bool = False) -> dict:
    """The manifest's entry of an ``IterationRecord``: its dict without ``type``, with the
    file its piece was written to (None: not written), non-finite numbers as None.
    ``shared``: its nested values are the record's, and non-finite numbers are left (for
    ``dump_manifest``, which encodes it at once: see ``_entry_text``)."""
    entry = record.to_dict(shared)
    del entry["type"]
    entry["file"] = files.get(record.index)
    return entry if shared else finite(entry)


class ManifestIterations(Sequence):
    """The entries (``manifest_entry``) of ``records`` (a sequence of iteration records, in
    index order), made when asked for."""

    def __init__(self, records, files: dict):
        self._records = records
        self._files = files
        self._changed: dict = {}  # position -> {key: value} assigned since
        # Once ``texts`` made every entry: the positions of those that held a number that is
        # not finite (the others need no ``finite`` when read again); None before.
        self._not_finite: set | None = None

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, position: int) -> dict:
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        if position < 0:
            position += len(self)
        return self._entry(position, self._records[position])

    def __iter__(self):
        for position, record in enumerate(reading(self._records)):
            yield self._entry(position, record)

    def positions_where(self, field: str) -> list[int]:
        """The positions of the entries whose ``field`` is true, read from the records (no
        entry made; ``field`` one that nothing assigned since changed)."""
        return [position for position, record in enumerate(reading(self._records))
                if getattr(record, field)]

    def counts_of(self, field: str) -> dict:
        """{value: how many entries hold it} of ``field``, read from the records (no entry
        made; ``field`` one that nothing assigned since changed), in the order first seen."""
        return Counter(getattr(record, field) for record in reading(self._records))

    def to_read(self):
        """The entries, each as ``__iter__`` makes it but sharing its nested values with its
        record: for a caller that only reads them (``entries_to_read``)."""
        changed, not_finite = self._changed, self._not_finite
        for position, record in enumerate(reading(self._records)):
            entry = manifest_entry(record, self._files, shared=True)
            if position in changed:
                entry.update(changed[position])
            elif not_finite is not None and position not in not_finite:
                yield entry  # encoded strictly by ``texts`` already: every number finite
                continue
            yield finite(entry)

    def texts(self):
        """The text of each entry as ``dump_manifest`` writes it (``_entry_text``), made
        without looking at each of its keys where the entry is as its record makes it: every
        key before ``breakdown`` (the last: no ``extra``) holds a field's scalar."""
        changed = self._changed
        files = self._files
        not_finite = set()
        for position, record in enumerate(reading(self._records)):
            entry = manifest_entry(record, files, shared=True)
            if position in changed:
                entry.update(changed[position])
            try:
                text = _record_entry_text(entry) if position not in changed \
                    and not record.extra else _indented(entry, _ENTRY_DEPTH)
            except ValueError:  # a number that is not finite (rare): as null
                not_finite.add(position)
                text = _indented(finite(entry), _ENTRY_DEPTH)
            yield text
        self._not_finite = not_finite

    def __setitem__(self, position: int, entry: dict) -> None:
        """Entry ``position`` is ``entry`` from now on (the keys that differ are kept)."""
        made = manifest_entry(self._records[position], self._files)
        self._changed[position] = {key: value for key, value in entry.items()
                                   if key not in made or made[key] != value}

    def _entry(self, position: int, record) -> dict:
        entry = manifest_entry(record, self._files)
        if position in self._changed:
            entry.update(self._changed[position])
        return entry

    def __eq__(self, other) -> bool:
        if isinstance(other, (list, ManifestIterations)):
            return list(self) == list(other)
        return NotImplemented

    def __reduce__(self):
        return list, (list(self),)


def entries_to_read(entries):
    """A manifest's ``iterations`` (a list of entries, or ``ManifestIterations``) to be read
    once and changed in nothing: made without copying what they share with the records."""
    if isinstance(entries, ManifestIterations):
        return entries.to_read()
    return entries


def outlier_positions(entries) -> list[int]:
    """The positions of the outliers among a manifest's ``iterations`` (a list of entries,
    or ``ManifestIterations``: read from its records, no entry made)."""
    if isinstance(entries, ManifestIterations):
        return entries.positions_where("outlier")
    return [position for position, entry in enumerate(entries) if entry.get("outlier")]


def kind_counts(entries) -> dict:
    """{kind: how many} of a manifest's ``iterations`` (a list of entries, or
    ``ManifestIterations``: read from its records, no entry made), in the order first seen."""
    if isinstance(entries, ManifestIterations):
        return entries.counts_of("kind")
    return Counter(entry["kind"] for entry in entries)


def dump_manifest(manifest: dict, stream) -> None:
    """Write ``manifest`` to the text ``stream`` as strict JSON with ``INDENT`` (the text of
    ``serialize.strict_json(manifest, indent=INDENT)``), its ``iterations`` encoded one entry
    at a time."""
    head = dict(manifest, iterations=_PLACEHOLDER)
    # the C encoder's way (``_indented``): the detection's evidence of a loop of a million
    # instances holds a million similarities, which ``json.dumps(indent=...)`` made in Python
    before, after = _entry_text(head, 0).split(strict_json(_PLACEHOLDER))
    stream.write(before)
    entries = manifest["iterations"]
    texts = iter(entries.texts() if isinstance(entries, ManifestIterations)
                 else map(_entry_text, entries))
    first = next(texts, None)
    if first is None:
        stream.write("[]")
    else:
        stream.write("[" + _ENTRY_INDENT + first)
        for text in texts:
            stream.write("," + _ENTRY_INDENT + text)
        stream.write(_ENTRY_INDENT[:-INDENT] + "]")
    stream.write(after)


#: The depth of an entry inside the manifest (an item of the list that is the value of a
#: top-level key).
_ENTRY_DEPTH = 2 * INDENT


def _entry_text(entry: dict, depth: int = _ENTRY_DEPTH) -> str:
    """An entry as it reads inside the manifest: its own JSON (``strict_json``, non-finite
    numbers as null), each line indented ``depth`` spaces (two levels: an entry's)."""
    try:
        return _indented(entry, depth)
    except ValueError:  # a number that is not finite (rare): as null
        return _indented(finite(entry), depth)


def _record_entry_text(entry: dict) -> str:
    """``_indented`` of an entry at ``_ENTRY_DEPTH`` whose keys all hold scalars but its last,
    ``breakdown`` (None or a dict): the scalars encoded at once, the breakdown as
    ``_indented`` makes it. Strict: ``ValueError`` for a number that is not finite."""
    breakdown = entry["breakdown"]
    if not breakdown:  # None: a scalar like the others
        return _indented(entry, _ENTRY_DEPTH)
    inner = _ENTRY_DEPTH + INDENT
    del entry["breakdown"]  # the last key: its text follows the others'
    try:
        scalars = _flat(inner).encode(entry)[1:-1]
        nested = _indented(breakdown, inner)
    finally:
        entry["breakdown"] = breakdown
    return _enclosed("{", scalars + _separator(inner) + '"breakdown": ' + nested, "}",
                     _ENTRY_DEPTH)


def _indented(value, depth: int) -> str:
    """``json.dumps(value, indent=INDENT, allow_nan=False)`` as it reads at ``depth`` spaces
    (the lines of its items at ``depth + INDENT``), made with the standard library's C
    encoder (its pure-Python one, which ``indent`` takes, was most of the cost of a manifest
    of many iterations): runs of items that hold no container are encoded at once, with the
    line break and indentation as their separator; a container is made alike, a level
    deeper."""
    inner = depth + INDENT
    if isinstance(value, dict) and value and all(k.__class__ is str for k in value):
        encode = _flat(inner).encode
        items, run = [], {}
        for key, item in value.items():
            if item and isinstance(item, _CONTAINERS):
                if run:
                    items.append(encode(run)[1:-1])
                    run = {}
                items.append(encode(key) + ": " + _indented(item, inner))
            else:
                run[key] = item
        if run:
            items.append(encode(run)[1:-1])
        return _enclosed("{", _separator(inner).join(items), "}", depth)
    if isinstance(value, (list, tuple)) and value:
        if not any(item and isinstance(item, _CONTAINERS) for item in value):
            return _enclosed("[", _flat(inner).encode(value)[1:-1], "]", depth)
        return _enclosed("[", _separator(inner).join(_indented(item, inner) for item in value),
                         "]", depth)
    if isinstance(value, dict) and value:  # keys that are not strings: the library's way
        text = json.dumps(value, indent=INDENT, allow_nan=False)
        return text.replace("\n", "\n" + " " * depth)
    return _flat(inner).encode(value)


#: What ``_indented`` lays out over lines (a non-empty one).
_CONTAINERS = (dict, list, tuple)


def _enclosed(opening: str, items: str, closing: str, depth: int) -> str:
    return opening + "\n" + " " * (depth + INDENT) + items + "\n" + " " * depth + closing


def _separator(depth: int) -> str:
    return ",\n" + " " * depth


@lru_cache(maxsize=None)
def _flat(depth: int) -> json.JSONEncoder:
    """An encoder without ``indent`` (the C one) whose items are separated by a line break and
    ``depth`` spaces, strict (``allow_nan=False``)."""
    return json.JSONEncoder(allow_nan=False, separators=(_separator(depth), ": "))
