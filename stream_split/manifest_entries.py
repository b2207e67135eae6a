"""The manifest's ``iterations`` made from the records as they are read, and written as made.

A manifest holds one entry (a dict of some 30 keys and the breakdown: about 2 KB in memory)
per iteration. Built as a list, a trace of hundreds of thousands of iterations needed that
many times 2 KB at its end, whatever the engine kept while it read. ``ManifestIterations``
is the same entries as a sequence made on demand from the iteration records (which a long
trace keeps in a file: ``pages.PagedList``), and ``dump_manifest`` writes the manifest with
its entries encoded a chunk at a time: the text is that of ``json.dump(manifest, indent=1)``,
byte for byte (made by the standard library's C encoder without ``indent``, or by msgspec's
where its text is the same: ``_plain_laid_out``, then laid out over lines by
``msgspec.json.format``: ``_laid_out``).

What changes an entry after the records are final (``analysis.explain_outliers``: an
outlier's reason) assigns the changed entry to its position; only the keys that differ are
kept. Pickled (a rank's manifest sent to the parent process) it is the list it stands for;
a caller that wants a list (the library's ``split``) takes ``list(...)``.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from itertools import chain, repeat
from operator import itemgetter, sub

import msgspec

import stream_split
from stream_split.core.finish import record_columns
from stream_split.core.records import (_ROUNDED_FIELDS, _SCALAR_FIELDS, IterationRecord,
                                       entry_layout, rounded_us, untyped_dict)
from stream_split.native import NATIVE as _native  # (None: the Python fallbacks)
from stream_split.pages import read_pages, reading
from stream_split.serialize import finite, strict_json

#: What stands for the entries while the rest of the manifest is encoded.
_PLACEHOLDER = "\x00iterations\x00"
#: The indentation of ``dump_manifest``'s JSON.
INDENT = 1


def manifest_entry(record, files: dict, shared: bool = False) -> dict:
    """The manifest's entry of an ``IterationRecord``: its dict without ``type``, with the
    file its piece was written to (None: not written), non-finite numbers as None.
    ``shared``: its nested values are the record's, and non-finite numbers are left (for
    ``dump_manifest``, which encodes it at once: see ``_chunk_text``)."""
    if shared:
        return _shared_entries([record], files)[0]
    entry = record.to_dict()
    del entry["type"]
    entry["file"] = files.get(record.index)
    return finite(entry)


def _shared_entries(records: list, files: dict) -> list:
    """``[manifest_entry(record, files, shared=True) for record in records]``, made a step
    at a time over all of them, each step a function written in C but the dict
    (``records.untyped_dict``) and the file's name: no other call of Python per entry
    (``to_dict``, its derived values, ``manifest_entry`` itself: some 3,000 instructions an
    entry of a manifest of 10 k one-op iterations)."""
    indices, extras, *spans = record_columns(records, _ENTRY_READS)
    entries = _entry_dicts(records, _names(files, indices), spans)
    if any(extras):  # (rare) spread as ``to_dict`` spreads it, the file kept
        for entry, record in zip(entries, records):
            if record.extra:
                file = entry["file"]
                entry.update(record.extra)
                entry["file"] = file
    return entries


def _names(files: dict, indices: list) -> list:
    """The names of the pieces of the iterations ``indices`` (None: not written): ``files``
    is ``{index: name}``, or a ``write.PieceFiles`` (a page's at once)."""
    names_of = getattr(files, "names_of", None)
    return names_of(indices) if names_of is not None else list(map(files.get, indices))


_KIND = itemgetter("kind")
#: The fields of each record that ``_shared_entries`` reads (``core.finish.record_columns``:
#: in one call), the last three ``_entry_dicts``' (its spans).
_ENTRY_READS = ("index", "extra", "end_ts", "start_ts", "gpu_start_ts")


def _entry_dicts(records: list, names: list, spans: list | None = None) -> list:
    """``list(map(records.untyped_dict, records, names))``: made by ``_native.slot_dicts``
    where built and every record is an ``IterationRecord`` (exactly), its derived values a
    column at a time (``duration_us`` rounded by ``_native.rounded``, which rounds a whole
    float without its decimal conversion), no call of Python an entry: callgrind, split of
    30 k one-op iterations, ``_shared_entries`` 391 -> 323 M instructions. ``spans``: their
    columns of ``end_ts``, ``start_ts`` and ``gpu_start_ts`` where read already."""
    if _native is None or not records or records[0].__class__ is not IterationRecord:
        return list(map(untyped_dict, records, names))
    durations, walls = _derived(records, spans)
    try:
        return _native.slot_dicts(records, _ENTRY_TEMPLATE, _ENTRY_SLOTS, _ROUNDED_FIELDS,
                                  (("file", names), ("duration_us", durations),
                                   ("wall_us", walls)))
    except TypeError:  # (a record of another class among them)
        return list(map(untyped_dict, records, names))


def _derived(records: list, spans: list | None = None) -> tuple:
    """``(duration_us, wall_us)`` of each of ``records`` (``IterationRecord``s), two lists, as
    their entries hold them: a column at a time (``duration_us`` rounded by
    ``_native.rounded`` where built; ``wall_us`` the same where a record has no GPU work,
    else its property). ``spans``: their columns of ``end_ts``, ``start_ts`` and
    ``gpu_start_ts`` where read already."""
    ends, starts, gpu_starts = spans or record_columns(records, _ENTRY_READS[2:])
    differences = list(map(sub, ends, starts))
    durations = _native.rounded(differences, False) if _native is not None else list(
        map(round, differences, repeat(3)))
    walls = durations if gpu_starts.count(None) == len(gpu_starts) else [
        duration if gpu_start is None else record.wall_us
        for record, duration, gpu_start in zip(records, durations, gpu_starts)]
    return durations, walls


#: An entry's keys in order (``records.untyped_dict``'s: the one place that orders them).
_ENTRY_TEMPLATE = dict.fromkeys(untyped_dict(IterationRecord(0), None))
#: The slots of a record an entry holds as they are (``_entry_dicts``): its fields but
#: ``file`` (the name given) and the rounded ones, and its breakdown (shared).
_ENTRY_SLOTS = tuple(name for name in _SCALAR_FIELDS
                     if name != "file" and name not in _ROUNDED_FIELDS) + ("breakdown",)


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
        # Once ``texts`` made every entry: {kind: how many} (``kinds``); None before.
        self._kinds: Counter | None = None

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

    def kinds(self) -> Counter:
        """{kind: how many entries are of it}, in the order first seen: counted by ``texts``
        as it made the entries, else read from the records (no entry made)."""
        if self._kinds is not None:
            return self._kinds
        return Counter(record.kind for record in reading(self._records))

    def to_read(self):
        """The entries, each as ``__iter__`` makes it but sharing its nested values with its
        record: for a caller that only reads them (``entries_to_read``)."""
        changed, not_finite = self._changed, self._not_finite
        for first, entries in self._shared_pages():
            for position, entry in enumerate(entries, first):
                if position not in changed and not_finite is not None and \
                        position not in not_finite:
                    yield entry  # encoded strictly by ``texts`` already: every number finite
                else:
                    yield finite(entry)

    def texts(self, read=None):
        """The text of the entries (ASCII bytes) as ``dump_manifest`` writes them,
        ``CHUNK_ENTRIES`` at a time (``_chunk_text``: each chunk's text begins with the line
        break before its first entry; joined by commas they are the list's inside). Counts
        the kinds on the way (``kinds``). ``read``: called with each chunk's entries (a
        list), in order, each as ``to_read`` makes it, once the chunk is encoded."""
        not_finite = set()
        kinds = Counter()
        for first, records in _chunks(read_pages(self._records)):
            text, entries = self._chunk(records, first, not_finite, kinds)
            yield text
            _hand_over(entries, first, not_finite, read)
        self._not_finite, self._kinds = not_finite, kinds

    def _chunk(self, records: list, first: int, not_finite: set, kinds: Counter) -> tuple:
        """(the text of the entries of ``records``, the position of the first ``first``, as
        ``_chunk_text`` makes it; the entries, as ``to_read`` gives them), their kinds counted
        into ``kinds``: written from the records' slots (``_record_chunk_text``) where none of
        them was changed since, the entries then made only where read (``RecordEntries``:
        callgrind, split of 30 k one-op iterations, ``dump_manifest`` with the table's
        ``add_many`` 779 -> 607 M instructions); else from the entries
        (``_shared_entries``)."""
        changed = self._changed
        if not changed or not any(map(changed.__contains__, range(first, first + len(records)))):
            names = _names(self._files, record_columns(records, _INDEX)[0])
            text = _record_chunk_text(records, names)
            if text is not None:
                entries = RecordEntries(records, names)
                add_kinds(kinds, entries.columns(_KIND_KEY)[0])
                return text, entries
        entries = self._changed_applied(_shared_entries(records, self._files), first)
        count_kinds(kinds, entries)
        return _chunk_text(entries, first, not_finite), entries

    def _shared_pages(self):
        """(the position of the first, the entries) of each page of the records
        (``pages.read_pages``), each entry as ``manifest_entry(shared=True)`` makes it, with
        what was assigned since."""
        first = 0
        for records in read_pages(self._records):
            entries = self._changed_applied(_shared_entries(records, self._files), first)
            yield first, entries
            first += len(entries)

    def _changed_applied(self, entries: list, first: int) -> list:
        """``entries`` (the position of the first ``first``) with what was assigned since."""
        changed = self._changed
        if changed:
            for position in range(first, first + len(entries)):
                if position in changed:
                    entries[position - first].update(changed[position])
        return entries

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


def _chunks(pages):
    """``(the position of the first, a list of ``CHUNK_ENTRIES`` items)`` of the items of
    ``pages`` (lists), in order (the last list fewer)."""
    chunk, first = [], 0
    for page in pages:
        chunk += page
        while len(chunk) >= CHUNK_ENTRIES:
            yield first, chunk[:CHUNK_ENTRIES]
            chunk = chunk[CHUNK_ENTRIES:]
            first += CHUNK_ENTRIES
    if chunk:
        yield first, chunk


class RecordEntries(Sequence):
    """The manifest's entries of ``records`` (``IterationRecord``s, a list; their pieces
    named ``names``, a list) as ``_entry_dicts`` makes them, made when asked for: what
    ``ManifestIterations.texts`` hands to its reader where it wrote their text from the
    records (``_record_chunk_text``). A reader that reads a few of them (the table's rows:
    ``summary.ShownRows``) and some columns (``columns``) makes no dict of the others."""

    def __init__(self, records: list, names: list):
        self._records, self._names = records, names

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, position):
        if isinstance(position, slice):
            return _entry_dicts(self._records[position], self._names[position])
        return _entry_dicts([self._records[position]], [self._names[position]])[0]

    def __iter__(self):
        return iter(_entry_dicts(self._records, self._names))

    def columns(self, keys: tuple) -> list:
        """A list a key of ``keys`` (a tuple, kept: ``record_columns``) of the entries'
        values of it, read from the records (no entry made): ``file`` their names,
        ``duration_us`` and ``wall_us`` as ``_derived`` makes them, the rounded fields
        rounded as their entries hold them, the others as the records hold them."""
        read = _COLUMN_READS.get(keys)
        if read is None:
            read = _COLUMN_READS[keys] = tuple(
                key for key in keys if key not in _NOT_READ) + _ENTRY_READS[2:]
        records = self._records
        values = dict(zip(read, record_columns(records, read)))
        if "duration_us" in keys or "wall_us" in keys:
            values["duration_us"], values["wall_us"] = _derived(records, [
                values[name] for name in _ENTRY_READS[2:]])
        values["file"] = self._names
        for name in _ROUNDED_FIELDS:
            if name in keys:
                values[name] = list(map(rounded_us, values[name]))
        return [values[key] for key in keys]


#: ``RecordEntries.columns``: the keys an entry holds that its record has no field of, and
#: the fields read for each tuple of keys asked for.
_NOT_READ = frozenset(("file", "duration_us", "wall_us"))
_COLUMN_READS: dict = {}
#: The fields ``ManifestIterations._chunk`` reads of the records.
_INDEX, _KIND_KEY = ("index",), ("kind",)


def count_kinds(counts: dict, entries: list) -> None:
    """Add the kinds of ``entries`` (a list of entries) to ``counts`` ({kind: how many}, in
    the order first seen): where every one is of the first one's kind (mostly), by one count
    in C (``Counter.update`` hashed each entry's kind: some 700 instructions an entry)."""
    add_kinds(counts, list(map(_KIND, entries)))


def add_kinds(counts: dict, kinds: list) -> None:
    """``count_kinds`` of entries of these ``kinds`` (a list: each entry's)."""
    if kinds and kinds.count(kinds[0]) == len(kinds):
        counts[kinds[0]] = counts.get(kinds[0], 0) + len(kinds)
    else:
        for kind in kinds:
            counts[kind] = counts.get(kind, 0) + 1


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
        return entries.kinds()
    return Counter(entry["kind"] for entry in entries)


def dump_manifest(manifest: dict, stream, read=None) -> None:
    """Write ``manifest`` to the binary ``stream`` as strict JSON with ``INDENT`` (the
    ASCII text of ``serialize.strict_json(manifest, indent=INDENT)``), its ``iterations``
    encoded ``CHUNK_ENTRIES`` at a time. ``read``: called with the entries a chunk (a list)
    at a time, in order, each as ``entries_to_read`` gives it (its pass over them made in
    this one). Written as bytes: a text stream copied the text of every chunk once more
    to encode it, and the native layout made a str of its bytes (callgrind, split of 30 k
    one-op iterations, a manifest of 27 MB: dump_manifest 910 -> 884 M instructions)."""
    text = _head_text(dict(manifest, iterations=_PLACEHOLDER))
    placeholder = strict_json(_PLACEHOLDER).encode("ascii")
    at = text.rindex(placeholder)  # the last key but ``outside``'s counts
    _write_head(stream, text, at)
    after = text[at + len(placeholder):]
    del text
    entries = manifest["iterations"]
    if isinstance(entries, ManifestIterations):
        texts = entries.texts(read)
    else:
        texts = (_chunk_text(entries[at:at + CHUNK_ENTRIES], at)
                 for at in range(0, len(entries), CHUNK_ENTRIES))
        if read is not None:  # read as they are: ``entries_to_read`` of a list
            for at in range(0, len(entries), CHUNK_ENTRIES):
                read(entries[at:at + CHUNK_ENTRIES])
    stream.write(b"[")
    for count, text in enumerate(texts):  # written as made: 1 M entries' text is ~1 GB
        if count:  # (apart: ``b"," + text`` copied every chunk's text once more)
            stream.write(b",")
        stream.write(text)
    stream.write(b"\n" + b" " * INDENT + b"]" if entries else b"]")
    stream.write(after)


def _head_text(head: dict) -> bytes:
    """The text of the manifest ``head`` (its entries a placeholder), ASCII bytes: by
    ``_native.laid_out`` where built and every value is of the types it writes (its evidence
    may list a number per iteration: the standard library's encoder and ``msgspec.json.format`` took some 4,000
    instructions an iteration of a split of 30 k one-op iterations, as many as the rest of
    the head), else by ``_laid_out`` (a number that is not finite written as null)."""
    native = stream_split.decode._native  # (read here: the tests switch it)
    if native is not None:
        text = native.laid_out([head], INDENT, 0, True)
        if text is not None:
            return text[1:]  # (without the line break it writes before an item)
    try:
        return _laid_out(head).encode("ascii")
    except ValueError:  # a number that is not finite (rare): as null
        return _laid_out(finite(head)).encode("ascii")


def _write_head(stream, text: bytes, end: int) -> None:
    """``text[:end]`` written to ``stream`` ``WRITE_CHARS`` at a time, not as one copy (a slice
    of bytes is one): the evidence may list a number per iteration (a manifest of 1 M
    iterations: some 10 MB of similarities)."""
    for at in range(0, end, WRITE_CHARS):
        stream.write(text[at:min(at + WRITE_CHARS, end)])


#: Characters of the manifest's head written at once.
WRITE_CHARS = 1 << 20


#: Entries encoded at once (one call of an encoder and one of the layout).
CHUNK_ENTRIES = 256


def _chunk_text(entries: list, first: int = 0, not_finite: set | None = None) -> bytes:
    """The text (ASCII bytes) of ``entries`` (a list) inside the manifest's list of
    iterations: from the line break before the first to the end of the last (no comma after
    it), each at two levels down. A number that is not finite is null (``finite``); the positions (``first``
    the first's) of the entries that held one are added to ``not_finite``."""
    native = stream_split.decode._native  # (read here: the tests switch it)
    if native is not None and entries.__class__ is list:
        text = native.laid_out(entries, INDENT, _ENTRY_LEVEL, True)
        if text is not None:
            return text
    text = _plain_laid_out(entries)
    if text is not None:  # ASCII bytes of ``[[entries]]``: the entries at their depth already
        return text[_NESTED_HEAD:-_NESTED_TAIL]
    try:
        text = _laid_out(entries)
    except ValueError:  # a number that is not finite (rare): the entries that hold one
        text = _laid_out(_finite_entries(entries, first, not_finite))
    # "[\n {...},\n {...}\n]": one level deeper, without the brackets
    return text[1:-2].replace("\n", _DEEPER).encode("ascii")


def _record_chunk_text(records: list, names: list) -> bytes | None:
    """``_chunk_text`` of the entries of ``records`` (their pieces named ``names``), written
    from the records' slots by ``_native.entry_texts`` (no entry made: ``_entry_dicts`` and
    ``laid_out``'s pass over each dict's items were some 7,000 instructions an entry of a
    one-op iteration); None where not built, where they are not all ``IterationRecord``s,
    or where an entry is not made so (an ``extra`` spread, a value ``laid_out`` does not
    write, a number that is not finite): the caller makes the entries."""
    native = stream_split.decode._native  # (read here: the tests switch it)
    if native is None or not records or records[0].__class__ is not IterationRecord:
        return None
    return native.entry_texts(records, *_ENTRY_LAYOUT, names, INDENT, _ENTRY_LEVEL)


#: ``records.entry_layout()``: the keys, kinds and slots of ``_native.entry_texts``.
_ENTRY_LAYOUT = entry_layout()


#: The level of an entry's text in the manifest (in its list of iterations).
_ENTRY_LEVEL = 2
#: A line break of an entry's text as it lies in the manifest: one level deeper.
_DEEPER = "\n" + " " * INDENT
#: What ``_plain_laid_out``'s text of ``[[entries]]`` has before its first entry's line
#: break (``[``, a line break, the indent, ``[``) and after its last entry (a line break,
#: the indent, ``]``, a line break, ``]``).
_NESTED_HEAD, _NESTED_TAIL = 3 + INDENT, 4 + INDENT


def _finite_entries(entries: list, first: int, not_finite: set | None) -> list:
    """``entries``, those that hold a number that is not finite made ``finite`` (their
    positions, ``first`` the first's, added to ``not_finite``)."""
    made = []
    for position, entry in enumerate(entries, first):
        try:
            _COMPACT.encode(entry)
        except ValueError:
            entry = finite(entry)
            if not_finite is not None:
                not_finite.add(position)
        made.append(entry)
    return made


def _plain_laid_out(entries: list) -> bytes | None:
    """``_laid_out([entries])`` (as ASCII bytes: the entries laid out two levels deep, as
    the manifest holds them, with no pass of its own to indent them further) from msgspec's
    compact text (about a tenth of the C encoder's time), where it is the C encoder's: the
    entries ``_plain``, and the text ASCII without DEL (msgspec writes those as they are,
    the encoder as ``\\u`` escapes); None otherwise (the caller encodes them)."""
    if entries.__class__ is not list or not _plain(entries):
        return None
    try:
        compact = _MSGSPEC.encode([entries])
    except (ValueError, TypeError, OverflowError, msgspec.MsgspecError):
        return None
    if not compact.isascii() or b"\x7f" in compact:
        return None
    return msgspec.json.format(compact, indent=INDENT)


def _plain(entries: list) -> bool:
    """Whether ``entries`` (a list of entries) hold only string keys, values of the exact
    types that msgspec and the C encoder write alike (str, int, bool, None, dict, list), and
    floats that both write as ``float.__repr__`` does: 0, or from 1e-4 up to 1e16 (elsewhere
    ``repr`` writes an exponent: ``1e+16``, ``1e-05``; msgspec ``1e16``, ``0.00001``).
    Entries of the same keys (mostly all) are looked at a key at a time
    (``_plain_columns``), others one value at a time (``_plain_each``)."""
    plain = _plain_columns(entries)
    return _plain_each(entries) if plain is None else plain


def _plain_columns(dicts) -> bool | None:
    """``_plain`` of ``dicts`` (a sequence) where they are dicts of the same keys in the same
    order, looked at a column (a key's values) at a time, by functions written in C: its
    types at once, its floats at once (a loop in Python over every value was half the cost
    of a manifest's entry). The keys' types are read of the first dict: a key equal to a
    ``str`` is one (or of a subclass of ``str``, which both encoders write as its text).
    None where they are not dicts of the same keys (the caller looks at them one by one).

    Every value is read into one list (``_values``), a column its slice; where each value
    has the type of the first dict's value of its key (mostly: an entry's values are of the
    same types as the next one's), one comparison of lists tells each column's type: the
    columns made by ``zip`` and a set of each one's types were some 3 k instructions an
    entry more (callgrind, a manifest of one-op iterations: ``_plain`` 22 k an entry then,
    19 k now)."""
    if not dicts or set(map(type, dicts)) != _DICT:
        return None
    names = list(dicts[0])
    width = len(names)
    if not _same_keys(dicts, names):
        return None
    if not set(map(type, names)) <= _STR:
        return False
    values = _values(dicts)
    types = list(map(type, values))
    alike = types == types[:width] * len(dicts)  # (compared by identity first, in C)
    for at in range(width):
        kinds = {types[at]} if alike else set(types[at::width])
        if kinds <= _PLAIN_LEAVES:
            continue
        if not kinds <= _PLAIN_KINDS:
            return False
        column = values[at::width]
        if float in kinds and not _plain_floats(_of_kind(column, kinds, float)):
            return False
        if dict in kinds and not _plain_dicts(_of_kind(column, kinds, dict)):
            return False
        if list in kinds and not all(map(_plain_each, filter(None, _of_kind(column, kinds,
                                                                           list)))):
            return False
    return True


def _same_keys(dicts, names: list) -> bool:
    """Whether ``dicts`` (a sequence of dicts) each have the keys ``names`` (the first's), in
    that order: all their keys in one list equal to ``names`` repeated (equal keys are the
    same strings, compared by identity; none has a key twice, so one whose keys are fewer
    would make another's more, with one of them twice): some 3 k instructions an entry of
    30 keys, as a tuple of each one's keys counted equal to the first's was."""
    return list(chain.from_iterable(dicts)) == names * len(dicts)


def _values(dicts) -> list:
    """The values of ``dicts`` (dicts of the same keys), the first's first: the values of
    key ``at`` of a dict's ``width`` are ``_values(dicts)[at::width]``."""
    return list(chain.from_iterable(map(dict.values, dicts)))


def _of_kind(column: tuple, kinds: set, kind: type):
    """The items of ``column`` (of the types ``kinds``) of the exact type ``kind``."""
    return column if len(kinds) == 1 else [item for item in column if item.__class__ is kind]


def _plain_dicts(dicts) -> bool:
    """``_plain`` of ``dicts``, a sequence of dicts."""
    plain = _plain_columns(dicts)
    return all(map(_plain_each, dicts)) if plain is None else plain


def _plain_floats(floats) -> bool:
    """Whether every one of ``floats`` is 0 or of a magnitude from ``_FIXED_LOW`` up to
    ``_FIXED_HIGH`` (not inf nor NaN: those the encoder refuses, as it decides). Their sum
    is finite where each one is (finite ones that add up past the largest float are said
    not to be: the encoder writes them); where all are zero, or all at least ``_FIXED_LOW``
    from it on one side, their least and greatest tell (a third of the cost of a look at
    each one's magnitude, below). All zero (most of a breakdown's columns without GPU work),
    one pass tells (``count``: NaN is equal to nothing): some 3 k instructions an entry
    fewer of ``_plain``'s 26 k on a manifest of one-op iterations."""
    if not floats[0] and floats.count(0.0) == len(floats):
        return True
    total = sum(floats)
    if total - total != 0.0:  # inf or NaN
        return False
    lo, hi = min(floats), max(floats)
    if lo >= _FIXED_LOW or hi <= -_FIXED_LOW or lo == hi == 0.0:
        return -_FIXED_HIGH < lo and hi < _FIXED_HIGH
    magnitudes = list(map(abs, filter(None, floats)))
    return not magnitudes or (min(magnitudes) >= _FIXED_LOW and max(magnitudes) < _FIXED_HIGH)


def _plain_each(value) -> bool:
    """``_plain`` of ``value`` (a list of entries, an entry, or a dict or list inside one),
    one value at a time."""
    keyed = value.__class__ is dict
    for key, item in value.items() if keyed else enumerate(value):
        if keyed and key.__class__ is not str:
            return False
        kind = item.__class__
        if kind is float:  # not 0 nor within the range: inf, nan (the encoder's ValueError
            if item and not _FIXED_LOW <= abs(item) < _FIXED_HIGH:  # decides), an exponent
                return False
        elif kind is dict or kind is list:
            if not _plain_each(item):
                return False
        elif kind not in _PLAIN_LEAVES:
            return False
    return True


#: The exact types of leaves that ``_plain`` lets msgspec write (besides finite floats).
_PLAIN_LEAVES = frozenset((str, int, bool, type(None)))
#: ... and every type it lets msgspec write (``_plain_columns``).
_PLAIN_KINDS = _PLAIN_LEAVES | {float, dict, list}
_DICT, _STR = frozenset((dict,)), frozenset((str,))
#: The magnitudes of the floats other than 0 that ``float.__repr__`` and msgspec write
#: alike (without an exponent): ``_plain``.
_FIXED_LOW, _FIXED_HIGH = 1e-4, 1e16
#: msgspec's compact encoder (``_plain_laid_out``).
_MSGSPEC = msgspec.json.Encoder()


def _hand_over(chunk: list, first: int, not_finite: set, read) -> None:
    """The entries of an encoded ``chunk`` (``first`` the position of its first) to ``read``
    (None: nobody) at once, each as ``ManifestIterations.to_read`` gives it: ``finite`` where
    ``_chunk_text`` found a number that is not finite (changed entries are finite then)."""
    if read is None:
        return
    if not_finite:  # (rare)
        chunk = [finite(entry) if position in not_finite else entry
                 for position, entry in enumerate(chunk, first)]
    read(chunk)


def _laid_out(value) -> str:
    """``json.dumps(value, indent=INDENT, allow_nan=False)``, made faster: the compact text of
    the standard library's C encoder (its texts of numbers and strings), laid out over lines
    by ``msgspec.json.format``, which moves no token and changes none (the ``indent`` of
    ``json.dumps`` takes its pure-Python encoder: most of the cost of a manifest of many
    iterations). ``ValueError`` for a number that is not finite."""
    text = _COMPACT.encode(value)
    try:
        return msgspec.json.format(text, indent=INDENT)
    except msgspec.DecodeError:  # a text it refuses to read: a lone surrogate's escape
        return json.dumps(value, indent=INDENT, allow_nan=False)


#: Compact and strict: the text ``_laid_out`` lays out.
_COMPACT = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
