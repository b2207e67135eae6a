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

from collections.abc import Sequence

from stream_split.serialize import finite, strict_json

#: What stands for the entries while the rest of the manifest is encoded.
_PLACEHOLDER = "\x00iterations\x00"
#: The indentation of ``dump_manifest``'s JSON, and of an entry in it (an item of the list
#: that is the value of a top-level key: two levels down).
INDENT = 1
_ENTRY_INDENT = "\n" + " " * (2 * INDENT)


def manifest_entry(record, files: dict) -> dict:
    """The manifest's entry of an ``IterationRecord``: its dict without ``type``, with the
    file its piece was written to (None: not written), non-finite numbers as None."""
    entry = record.to_dict()
    entry.pop("type")
    entry["file"] = files.get(record.index)
    return finite(entry)


class ManifestIterations(Sequence):
    """The entries (``manifest_entry``) of ``records`` (a sequence of iteration records, in
    index order), made when asked for."""

    def __init__(self, records, files: dict):
        self._records = records
        self._files = files
        self._changed: dict = {}  # position -> {key: value} assigned since

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, position: int) -> dict:
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        if position < 0:
            position += len(self)
        return self._entry(position, self._records[position])

    def __iter__(self):
        for position, record in enumerate(self._records):
            yield self._entry(position, record)

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


def dump_manifest(manifest: dict, stream) -> None:
    """Write ``manifest`` to the text ``stream`` as strict JSON with ``INDENT`` (the text of
    ``serialize.strict_json(manifest, indent=INDENT)``), its ``iterations`` encoded one entry
    at a time."""
    head = dict(manifest, iterations=_PLACEHOLDER)
    before, after = strict_json(head, indent=INDENT).split(strict_json(_PLACEHOLDER))
    stream.write(before)
    entries = iter(manifest["iterations"])
    first = next(entries, None)
    if first is None:
        stream.write("[]")
    else:
        stream.write("[" + _ENTRY_INDENT + _entry_text(first))
        for entry in entries:
            stream.write("," + _ENTRY_INDENT + _entry_text(entry))
        stream.write(_ENTRY_INDENT[:-INDENT] + "]")
    stream.write(after)


def _entry_text(entry: dict) -> str:
    """An entry as it reads inside the manifest: its own JSON, each line indented two levels
    (a JSON string holds no raw newline: every one is the layout's)."""
    return strict_json(entry, indent=INDENT).replace("\n", _ENTRY_INDENT)
