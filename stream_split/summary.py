"""The per-iteration table: built from a manifest (data), then rendered (text or JSON).

``build_table`` turns a manifest (``write.build_manifest``'s dict, read back from
``manifest.json`` or made for a trace without writing pieces) into plain rows and a footer;
``render_text`` draws it with ``rich``; ``--json`` prints the same data. A caller that knows
more per iteration (a serving phase, a rank) adds keys to the rows and a ``Column`` to
``COLUMNS`` (or passes its own list): rendering takes whatever columns it is given.
"""
from __future__ import annotations

import errno
import json
import os
import sys
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain, compress, islice, repeat
from operator import itemgetter
from types import MappingProxyType

from rich.console import Console
from rich.table import Table

from stream_split.core.records import KIND_IDLE
from stream_split.explain import shown
from stream_split.manifest_entries import add_kinds, entries_to_read
from stream_split.serialize import strict_json
from stream_split.stats import JUDGED_ON, judged_time, quantile
from stream_split.trace_format import profiler_step_number

MANIFEST_NAME = "manifest.json"


class PipeConsole(Console):
    """A ``rich`` console whose closed pipe (``| head``) raises ``BrokenPipeError`` for the
    command to end quietly (rich's own answer is ``SystemExit(1)``)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")


@dataclass(frozen=True, slots=True)
class Column:
    key: str      # key of the row dict
    header: str
    fmt: str = "{}"  # format of a non-None value
    right: bool = True
    #: Left out of the text table when no row has a value (e.g. ``phase`` outside serving).
    optional: bool = False


COLUMNS = (
    Column("index", "#"),
    Column("step", "step"),
    Column("kind", "kind", right=False),
    Column("phase", "phase", right=False, optional=True),
    Column("start_ms", "start ms", "{:.3f}"),
    Column("duration_ms", "CPU ms", "{:.3f}"),
    Column("wall_ms", "wall ms", "{:.3f}"),
    Column("cpu_ops", "CPU ops"),
    Column("kernels", "kernels"),
    Column("gpu_active_ms", "GPU active ms", "{:.3f}"),
    Column("comm_ms", "comm ms", "{:.3f}", optional=True),
    Column("idle_ms", "GPU idle ms", "{:.3f}", optional=True),
    Column("flags", "flags", right=False),
)


def step_number(first_op: str | None) -> int | None:
    """N of an iteration that begins with ``ProfilerStep#N``, else None (manifests written
    before iterations carried their ``step``)."""
    return profiler_step_number(first_op)


#: The fields of a manifest that ``build_table`` reads, and the types they must have:
#: required ones, then ones that may be absent or null. A manifest read from a folder (perhaps
#: edited by hand) is checked against them before use.
NUMBER = (int, float)
#: A number or null: a timestamp or duration beyond a double (``serialize.finite``).
SOME_NUMBER = (int, float, type(None))
MANIFEST_FIELDS = ({"iterations": (list,)}, {"input": (str,), "steady_state": (dict,)})
ITERATION_FIELDS = (
    {"index": (int,), "kind": (str,), "start_ts": SOME_NUMBER, "duration_us": SOME_NUMBER},
    {"step": (int,), "first_op": (str,), "phase": (str,), "cpu_ops": (int,),
     "kernels": (int,), "gpu_active_us": NUMBER, "gpu_busy_us": NUMBER, "complete": (bool,),
     "wall_us": SOME_NUMBER, "breakdown": (dict,),
     "outlier": (bool,), "outlier_reason": (str,), "file": (str,)})
RANGE_FIELDS = ({"first": (int,), "last": (int,)}, {"groups": (dict,), "warmup": (int,)})
_TYPE_NAMES = {NUMBER: "a number", (int,): "an integer", (str,): "a string",
               SOME_NUMBER: "a number or null", (bool,): "true or false", (dict,): "an object", (list,): "an array",
               (int, str): "an integer or a string"}


def check_fields(record, fields: tuple[dict, dict], where: str) -> None:
    """A ``ValueError`` naming the first field of ``record`` (``where``) that is missing or has
    another type than ``fields`` (required, optional: name -> types) gives it."""
    if not isinstance(record, dict):
        raise ValueError(f"{where} is {_json_text(record)}, not an object")
    required, optional = fields
    for key in required:
        if key not in record:
            raise ValueError(f"{where} has no {key!r}")
    for key, kinds in {**required, **optional}.items():
        value = record.get(key)
        if key in optional and value is None:
            continue
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ValueError(f"{where}.{key} is {_json_text(value)}, not {_TYPE_NAMES[kinds]}")


def _json_text(value) -> str:
    text = json.dumps(value, default=str)
    return shown(text if len(text) <= 40 else text[:37] + "...")


def check_manifest(manifest) -> None:
    """A ``ValueError`` naming the first field that ``build_table`` could not use."""
    check_fields(manifest, MANIFEST_FIELDS, "the manifest")
    for i, iteration in enumerate(manifest["iterations"]):
        check_fields(iteration, ITERATION_FIELDS, f"iterations[{i}]")
    steady = manifest.get("steady_state")
    if steady is not None:
        check_fields(steady, RANGE_FIELDS, "steady_state")
        for name, group in (steady.get("groups") or {}).items():
            check_fields(group, RANGE_FIELDS, f"steady_state.groups.{name}")


def load_json(path: str):
    """The JSON document at ``path``: OSError when it cannot be read, ValueError when it is
    not JSON (nested too deeply included)."""
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except RecursionError:
            raise ValueError("nested too deeply") from None


def load_manifest(out_dir: str) -> dict:
    """The manifest of a ``split`` output folder, checked (``check_manifest``); OSError when
    there is none, ValueError when it is not one that ``build_table`` can use."""
    return load_checked(os.path.join(out_dir, MANIFEST_NAME), check_manifest,
                        "stream-split manifest")


def load_checked(path: str, check, what: str):
    """The JSON document at ``path`` once ``check(document)`` passed; a ``ValueError`` saying
    ``not a <what>: <path>: <the first field that failed>`` otherwise (OSError: unreadable)."""
    try:
        document = load_json(path)
        check(document)
    except ValueError as e:
        raise ValueError(f"not a {what}: {path}: {e}") from None
    return document


def build_table(manifest: dict, limit: int | None = None) -> dict:
    """``{"input", "rows", "footer"}``: one row per iteration, times in ms from the start of
    the first iteration, the GPU breakdown's layers in ms; the footer has the median and p90
    of the wall span, CPU and GPU (what outliers are judged on: ``judged_on``; idle cycles
    aside), the steady-state range, the outliers and, for a serving loop, each phase's count
    and median (a row's warm-up flag is its phase's). With ``limit``, the rows are those
    ``render_text`` shows with that limit (``ShownRows``: a run of a million iterations
    does not hold a million rows). ``TableBuilder`` makes it an entry at a time."""
    builder = TableBuilder(limit)
    builder.start(manifest)
    entries = iter(entries_to_read(manifest.get("iterations") or []))  # once: made when read
    while chunk := list(islice(entries, TABLE_CHUNK_ENTRIES)):
        builder.add_many(chunk)
    return builder.table()


#: Entries that ``build_table`` hands to ``TableBuilder.add_many`` at once.
TABLE_CHUNK_ENTRIES = 256


class TableBuilder:
    """``build_table``'s table made from a manifest's entries as they are handed over, in
    order (``add``), after ``start`` with the manifest: ``split`` makes its table in the pass
    that writes the manifest (``write.finish_split``) rather than in another pass over the
    records. ``limit``: as ``build_table`` takes it. The entries are only read."""

    def __init__(self, limit: int | None = None):
        self._limit = limit
        self._manifest: dict = {}
        self._steady = None
        self._rows = None
        self._durations, self._outliers, self._by_phase = [], [], {}
        self._idle = 0

    def start(self, manifest: dict) -> None:
        """The manifest whose entries come next (its keys but ``iterations`` are read)."""
        self._manifest = manifest
        self._steady = steady = manifest.get("steady_state")
        def make_row(it):
            return _row(it, steady)
        self._make_row = make_row
        # With a limit, only the rows that may be shown are made (``ShownRows``: most are not).
        self._rows = [] if self._limit is None else ShownRows(self._limit, make_row)

    def add(self, it: dict) -> None:
        """The manifest's next entry."""
        self.add_many((it,))

    def add_many(self, entries) -> None:
        """The manifest's next entries (a sequence), as many calls of ``add``: a chunk at a
        time, each step over all of them (``dump_manifest`` hands them so), with no call of
        Python an entry where none is idle nor of a serving phase but ``judged_time``'s
        (``add`` an entry at a time, and ``ShownRows.append``: some 9,000 instructions an
        entry of a split of one-op iterations), what it reads of each entry read once
        (``_entry_columns``)."""
        columns = _entry_columns(entries)
        if self._limit is None:
            self._rows.extend(map(self._make_row, entries))
        else:
            self._rows.extend(entries, columns)
        kinds, _, phases, outliers, walls, _ = columns
        if _holds(kinds, KIND_IDLE) or any(phases):
            judged = walls if None not in walls else list(map(judged_time, entries))
            for kind, time, phase in zip(kinds, judged, phases):
                if kind == KIND_IDLE:
                    self._idle += 1
                elif time is not None:
                    self._durations.append(time)
                    if phase:
                        self._by_phase.setdefault(phase, []).append(time)
        elif None not in walls:  # (``None in``: a look at each, no frame of Python an entry)
            self._durations += walls
        else:  # (older manifests: no ``JUDGED_ON``) its duration
            self._durations += [time for time in map(judged_time, entries) if time is not None]
        self._outliers += [entries[at]["index"]  # (only the outliers' entries read)
                           for at in compress(range(len(entries)), outliers)]

    def table(self) -> dict:
        """The table of the entries added (``build_table``'s)."""
        rows, durations, manifest = self._rows, self._durations, self._manifest
        # in ms from the start of the first iteration (the rows hold their start in µs so far)
        if self._limit is None:
            kept = rows
            origin = min((row["start_ms"] for row in rows if row["start_ms"] is not None),
                         default=0.0)
        else:
            kept, origin = rows.kept(), rows.first_start or 0.0
        for row in kept:
            row["start_ms"] = _ms(row["start_ms"], origin)
        durations.sort()
        median, p90 = quantile(durations, 0.5), quantile(durations, 0.9)
        footer = {
            "judged_on": JUDGED_ON,
            "iterations": len(durations),
            "idle": self._idle,
            "median_ms": None if median is None else round(median / 1000, 3),
            "p90_ms": None if p90 is None else round(p90 / 1000, 3),
            "steady_state": self._steady,
            "outliers": self._outliers,
            "phases": _phase_footer(self._by_phase),
        }
        return {"input": manifest.get("input"), "complete": manifest.get("complete"),
                "rows": rows, "footer": footer}


#: What the table reads of every entry (``_entry_columns``), in this order.
_COLUMN_KEYS = ("kind", "start_ts", "phase", "outlier", JUDGED_ON, "breakdown")
_READ_COLUMNS = itemgetter(*_COLUMN_KEYS)


def _entry_columns(entries) -> tuple:
    """A list a key of ``_COLUMN_KEYS`` of ``entries``' (a sequence) values of it (None where
    an entry has none): read by one ``itemgetter`` an entry where each one has every key (a
    manifest's entries), one step over all of them, and the entries then turned into columns
    in one step (ten passes over them a key at a time, each a look at their types and a
    ``dict.get``: callgrind, ``TableBuilder.add_many`` of 30 k one-op entries, 217.0 ->
    130.6 M instructions); else ``entry.get`` a key at a time. Entries that give their
    columns themselves (``manifest_entries.RecordEntries``: from their records, no entry
    made) are asked for them."""
    columns = getattr(entries, "columns", None)  # (``manifest_entries.RecordEntries``)
    if columns is not None:
        return tuple(columns(_COLUMN_KEYS))
    try:
        rows = list(map(_READ_COLUMNS, entries))
    except (KeyError, TypeError):  # (rare) an entry without one of the keys
        return tuple([entry.get(key) for entry in entries] for key in _COLUMN_KEYS)
    return tuple(map(list, zip(*rows))) if rows else tuple([] for _ in _COLUMN_KEYS)


def _holds(values: list, value) -> bool:
    """``value in values``: where every one of ``values`` is one object (mostly: every entry
    of a chunk of the same kind), by one count of it, by identity (``in`` compared each with
    ``value``: a kind not the same object as ``KIND_IDLE``, some 50 instructions)."""
    if values and values.count(values[0]) == len(values):
        return values[0] == value
    return value in values


def _may_have_optional(phases: list, breakdowns: list) -> bool:
    """Whether an entry may have a value for an optional column (``_optional_keys``), of
    the ``phases`` and ``breakdowns`` of the entries (``_entry_columns``): False where none
    has a phase and each breakdown is a dict without a span (a CPU-only trace's every entry:
    read over all of them at once, not a call of Python an entry)."""
    if phases.count(None) != len(phases):
        return True
    try:
        return any(map(dict.get, breakdowns, repeat("span_us")))
    except TypeError:  # not every one a dict
        return any(breakdowns)  # (None and {} have no span)


_DICT = {dict}


def _optional_keys(it: dict) -> list:
    """The optional columns (``_OPTIONAL_KEYS``) that the row of entry ``it`` (``_row``)
    has a value for: none of the breakdown's without GPU work (``_NO_BREAKDOWN_MS``, not
    looked through: a CPU-only trace's every entry comes here)."""
    columns = _breakdown_ms(it.get("breakdown"))
    keys = [] if columns is _NO_BREAKDOWN_MS else [
        key for key, value in columns.items() if value is not None and key in _OPTIONAL_KEYS]
    if it.get("phase") is not None:
        keys.append("phase")
    return keys


def _row(it: dict, steady: dict | None) -> dict:
    """The table's row of a manifest entry, its ``start_ms`` still its start in µs."""
    flags = []
    if it.get("outlier"):  # the ratio; what accounts for it is below the table
        flags.append(f"outlier ({str(it.get('outlier_reason')).split(', ')[0]})")
    if _warming_up(it, steady):
        flags.append("warm-up")
    if not it.get("complete", True):
        flags.append("incomplete")
    return {
        "index": it["index"], "kind": it["kind"],
        "step": it["step"] if it.get("step") is not None else step_number(it.get("first_op")),
        "phase": it.get("phase"),
        "start_ms": it["start_ts"],
        "duration_ms": _ms(it["duration_us"]), "wall_ms": _ms(judged_time(it)),
        "cpu_ops": it.get("cpu_ops"), "kernels": it.get("kernels"),
        "gpu_active_ms": round(_gpu_active(it) / 1000, 3),
        **_breakdown_ms(it.get("breakdown")),
        "outlier": bool(it.get("outlier")), "reason": it.get("outlier_reason"),
        "flags": flags, "file": it.get("file")}


class ShownRows:
    """The rows of a table as ``render_text`` shows them with ``limit`` (``shown_rows``),
    from the manifest's entries as they are appended, and what it says of the others: how
    many (``len``), which optional columns any of them has a value for (``has``) and the
    outliers explained below the table (``explained``). An entry's row is made (``make``)
    only where it may be shown or explained: the first ``limit`` entries, then the first and
    last ``limit // 4`` and the outliers; of the others only their kind, start and optional
    columns are read. Memory: about ``limit`` rows, whatever the entries appended."""

    def __init__(self, limit: int, make):
        self._limit = limit
        self._edge = max(1, limit // 4)
        self._make = make
        # Entries kept as [entry, its row once made] (``_row_of``):
        self._first: list = []  # every one while there are at most ``limit``, then the first
        self._tail: deque = deque(maxlen=self._edge)  # and the last ``edge``
        self._middle: list = []  # rows: the outliers after the first ones, up to the room
        self._n = 0
        self._optional: set = set()  # the optional columns a row has a value for
        self._said: list = []  # rows: the outliers with a reason, the slowest kept
        #: The earliest start (µs) of the entries appended (None: none has one), and how many
        #: entries of each kind.
        self.first_start = None
        self.kinds: dict = {}

    def __len__(self) -> int:
        return self._n

    def append(self, it: dict) -> None:
        self.extend((it,))

    def extend(self, entries, columns: tuple | None = None) -> None:
        """``append`` each of ``entries`` (a sequence), each step over all of them at once
        (``TableBuilder.add_many``); ``columns``: their ``_entry_columns`` (read here if
        None)."""
        before = self._n
        self._n += len(entries)
        kinds, starts, phases, outliers, _, breakdowns = columns or _entry_columns(entries)
        add_kinds(self.kinds, kinds)  # (in the order first seen)
        # their rows' ``start_ms``, in µs until ``build_table`` is done (finite: the manifest's)
        if None in starts:
            starts = [start for start in starts if start is not None]
        if starts and (self.first_start is None or min(starts) < self.first_start):
            self.first_start = min(starts)
        if len(self._optional) < len(_OPTIONAL_KEYS) and _may_have_optional(phases,
                                                                            breakdowns):
            for it in entries:  # (only entries with GPU work or a phase have an optional
                breakdown = it.get("breakdown")  # column: ``_optional_keys``)
                if breakdown and breakdown.get("span_us") or it.get("phase") is not None:
                    self._optional.update(_optional_keys(it))
        first = max(0, self._limit - before)  # those among the first ``limit``
        items = self._items(entries, outliers, first)
        for item in compress(items, outliers):  # (most are not)
            if ", " in (item[0].get("outlier_reason") or ""):
                self._said.append(self._row_of(item))
                if len(self._said) > 8 * OUTLIERS_EXPLAINED:
                    self._said = _slowest(self._said)[:OUTLIERS_EXPLAINED]
        self._first += items[:first]
        if len(items) <= first:
            return
        if not self._tail:  # one more than ``limit``: the first rows, the middle, the last
            kept, self._first = self._first, self._first[:self._edge]
            self._tail.extend(kept[len(kept) + 1 - self._edge:])
            for item in kept[self._edge:len(kept) + 1 - self._edge]:
                self._to_middle(item)
        # the last ``edge`` kept (``_tail``'s ``maxlen``), the outliers among those that fall
        # out to the middle, in order (a step over all of them, not a call of Python an entry):
        # of the tail's as their entries say, of this chunk's as read above
        tail, items = self._tail, items[first:]
        out = len(tail) + len(items) - self._edge
        if out > 0:
            left = list(islice(tail, out))
            flags = _gets(list(map(_ENTRY, left)), "outlier") + outliers[first:]
            left += items[:out - len(left)]
            for item in compress(left, flags):  # (most are not)
                self._to_middle(item)
        tail.extend(items)

    def _items(self, entries, outliers: list, first: int) -> list:
        """The items ``[entry, its row once made]`` of ``entries`` (``outliers``: each one's
        outlier flag), made only where they may be kept (``_row_of``): the first ``first``,
        the last ``edge`` (the tail), the outliers; None for the others, which leave the
        tail at once, not shown (a split of 30 k one-op iterations, a table of 40 rows:
        30 k lists made for nothing)."""
        count = len(entries)
        last = max(first, count - self._edge)
        if last <= first:
            return list(map(list, zip(entries, repeat(None))))
        items = list(map(list, zip(entries[:first], repeat(None))))
        items += repeat(None, last - len(items))
        items += map(list, zip(entries[last:], repeat(None)))
        for at in compress(range(first, last), outliers[first:last]):
            items[at] = [entries[at], None]
        return items

    def _row_of(self, item: list) -> dict:
        """The row of a kept ``[entry, row]``, made once."""
        if item[1] is None:
            item[1] = self._make(item[0])
        return item[1]

    def _to_middle(self, item: list) -> None:
        if item[0].get("outlier") and len(self._middle) < self._limit - 2 * self._edge:
            self._middle.append(self._row_of(item))

    def _rows(self, items) -> list:
        return [self._row_of(item) for item in items]

    def kept(self) -> list:
        """Every row kept (once each), the shown ones among them."""
        rows = (*self._rows(self._first), *self._middle, *self._rows(self._tail), *self._said)
        return list({id(row): row for row in rows}.values())

    def has(self, key: str) -> bool:
        """Whether a row appended has a value for ``key``, an optional column's."""
        return key in self._optional

    def shown(self) -> list:
        """``shown_rows`` of every row appended, with the limit."""
        if self._n <= self._limit:
            return shown_rows(self._rows(self._first), self._limit)
        return shown_rows(self._rows(self._first) + self._middle + self._rows(self._tail),
                          None, gaps=True)

    def explained(self) -> list:
        """``outlier_lines`` of every row appended."""
        return outlier_lines(self._said)


def _slowest(rows: list) -> list:
    """``rows`` the slowest first (the first of equals first)."""
    return sorted(rows, key=lambda r: -(r.get("wall_ms") or 0))


def _ms(us: float | None, origin: float = 0.0) -> float | None:
    """``us`` - ``origin`` in ms (None: a time beyond a double, null in the manifest)."""
    return None if us is None else round((us - origin) / 1000, 3)


def _warming_up(it: dict, steady: dict | None) -> bool:
    """Before the steady state: of its phase's (serving loops), else of the whole loop's."""
    if not steady or it["kind"] == "idle":
        return False
    own = (steady.get("groups") or {}).get(it.get("phase"))
    return it["index"] < (own or steady)["first"]


def _phase_footer(by_phase: dict) -> dict:
    """Per serving phase (idle cycles aside): count, median and p90 in ms; {} without
    phases. ``by_phase``: {phase: [judged time of each of its iterations]}."""
    out = {}
    for phase, durations in by_phase.items():
        durations.sort()
        out[phase] = {"iterations": len(durations),
                      "median_ms": round(quantile(durations, 0.5) / 1000, 3),
                      "p90_ms": round(quantile(durations, 0.9) / 1000, 3)}
    return out


#: The entry of a kept ``[entry, its row]`` (``ShownRows``).
_ENTRY = itemgetter(0)


def _gets(entries, key: str) -> list:
    """``entry.get(key)`` of each of ``entries`` (a sequence): read in C over all of them
    (``dict.get``) where each is a dict (a ``methodcaller`` took some 720 instructions an
    entry, ``dict.get`` mapped 180)."""
    if set(map(type, entries)) == _DICT:
        return list(map(dict.get, entries, repeat(key)))
    return [entry.get(key) for entry in entries]


#: The layers of ``breakdown`` (µs in the manifest) that a row has, in ms (the text table
#: shows communication and idle time; ``--json`` all of them).
BREAKDOWN_COLUMNS = ("compute", "comm", "memcpy", "memset", "idle")
#: ``_breakdown_ms`` of an iteration without GPU work (shared: a row takes a copy of its items).
_NO_BREAKDOWN_MS = MappingProxyType({f"{name}_ms": None for name in BREAKDOWN_COLUMNS})
#: The keys of the columns left out of the text table when no row has a value.
_OPTIONAL_KEYS = frozenset(column.key for column in COLUMNS if column.optional)


def _breakdown_ms(breakdown: dict | None) -> Mapping:
    """``compute_ms``, ``comm_ms``, ``memcpy_ms``, ``memset_ms``, ``idle_ms`` of an
    iteration's breakdown; None without GPU work (the columns are left out of a CPU-only
    trace's table), ``comm_ms`` None without communication (left out of a single GPU's)."""
    if not breakdown or not breakdown.get("span_us"):
        return _NO_BREAKDOWN_MS
    row = {f"{name}_ms": _ms(breakdown.get(f"{name}_us")) for name in BREAKDOWN_COLUMNS}
    if not row["comm_ms"]:
        row["comm_ms"] = None
    return row


def _gpu_active(it: dict) -> float:
    """Time the GPU was busy for this iteration (union of streams; older manifests: the
    per-stream sum)."""
    value = it.get("gpu_active_us")
    return value if value is not None else (it.get("gpu_busy_us") or 0.0)


def _cell(column: Column, row: dict) -> str:
    value = row.get(column.key)
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return column.fmt.format(value)


def shown_rows(rows: list[dict], limit: int | None, gaps: bool = False) -> list[dict | None]:
    """At most about ``limit`` rows: the first and last few and every outlier between them
    (up to ``limit``), None where rows are left out. All of them when ``limit`` is None (and
    ``gaps``: None where their indices jump, as where rows were left out)."""
    if (limit is None or len(rows) <= limit) and not gaps:
        return list(rows)
    if limit is None or len(rows) <= limit:
        kept = list(rows)
    else:
        edge = max(1, limit // 4)
        middle = [r for r in rows[edge:-edge] if r.get("outlier")][:limit - 2 * edge]
        kept = rows[:edge] + middle + rows[-edge:]
    out: list[dict | None] = []
    last = -1
    for row in kept:
        if out and row["index"] != last + 1:
            out.append(None)
        out.append(row)
        last = row["index"]
    return out


#: The width of a table written to a pipe or a file (a terminal's own width otherwise).
PIPED_TABLE_WIDTH = 120


def table_console(stream=None) -> PipeConsole:
    """The console the tables are drawn on: ``stream`` (stdout), as wide as the terminal, or
    ``PIPED_TABLE_WIDTH`` columns when it is not one. Text is drawn as written: no emoji codes
    (a path ``runs/a:fire:b.json`` stays so)."""
    stream = stream if stream is not None else sys.stdout
    return PipeConsole(file=stream, width=None if stream.isatty() else PIPED_TABLE_WIDTH,
                       highlight=False, soft_wrap=False, emoji=False)


def render_text(table: dict, stream, columns=COLUMNS, limit: int | None = None) -> None:
    """The table, drawn with ``rich`` on ``stream`` (plain text when it is not a terminal);
    with ``limit``, long tables keep their first and last rows and the outliers."""
    console = table_console(stream)
    if table.get("input"):  # a line of its own: a title would be padded to the table's width
        console.print(shown(table["input"]), highlight=False, soft_wrap=True, markup=False)
    view = Table()
    rows = table["rows"]
    kept = isinstance(rows, ShownRows)  # ``build_table`` with a limit
    columns = [c for c in columns if not c.optional or (
        rows.has(c.key) if kept else any(r.get(c.key) is not None for r in rows))]
    for column in columns:
        view.add_column(column.header, justify="right" if column.right else "left")
    shown_list = rows.shown() if kept else shown_rows(rows, limit)
    for row in shown_list:
        if row is None:
            view.add_row(*(["..."] + [""] * (len(columns) - 1)), style="dim")
            continue
        style = "red" if row.get("outlier") else ("dim" if row.get("kind") == "idle" else None)
        view.add_row(*(shown(_cell(c, row)) for c in columns), style=style)
    console.print(view)
    left_out = len(rows) - len([r for r in shown_list if r])
    if left_out:
        console.print(f"({left_out} rows left out: stream-split summary shows them all)",
                      highlight=False)
    console.print(footer_line(table["footer"]), highlight=False)
    for line in rows.explained() if kept else outlier_lines(rows):
        console.print(line, highlight=False, soft_wrap=True)


#: Outliers whose reason the text table spells out below it (the largest first).
OUTLIERS_EXPLAINED = 5


def outlier_lines(rows: list[dict]) -> list[str]:
    """``#1: 7.1x median, +5.4 ms: eval x1, ...`` for the outliers whose reason says more than
    the ratio (``analysis.explain_outliers``), at most ``OUTLIERS_EXPLAINED``, the slowest
    first, then a pointer to ``stream-split why``."""
    said = _slowest([r for r in rows if r.get("outlier") and ", " in (r.get("reason") or "")])
    lines = [f"#{r['index']}: {r['reason']}" for r in said[:OUTLIERS_EXPLAINED]]
    if lines:
        lines.append("(stream-split why DIR N: what makes iteration N differ, in detail)")
    return lines


def footer_line(footer: dict) -> str:
    n = footer["iterations"]
    parts = [f"{n} iteration{'' if n == 1 else 's'}"]
    if footer["idle"]:
        parts.append(f"{footer['idle']} idle")
    if footer["median_ms"] is not None:
        parts.append(f"median {footer['median_ms']:.3f} ms, p90 {footer['p90_ms']:.3f} ms "
                     "(wall)")
    steady = footer.get("steady_state")
    if steady:
        parts.append(f"steady state: #{steady['first']}-#{steady['last']}")
    outliers = footer["outliers"]
    parts.append(f"outliers: {', '.join(f'#{i}' for i in outliers)}" if outliers
                 else "no outliers")
    for phase, numbers in (footer.get("phases") or {}).items():
        own = ((steady or {}).get("groups") or {}).get(phase)
        parts.append(f"{phase}: {numbers['iterations']}, median {numbers['median_ms']:.3f} ms"
                     + (f", steady from #{own['first']}" if own and own["warmup"] else ""))
    return "; ".join(parts)


def render_json(table: dict, stream) -> None:
    """The table as JSON (strict: a number that is not finite is null)."""
    stream.write(strict_json(table, indent=1))
    stream.write("\n")


__all__ = ["COLUMNS", "Column", "PipeConsole", "TableBuilder", "build_table", "check_fields",
           "check_manifest", "load_json", "load_manifest", "render_text", "render_json",
           "step_number", "footer_line"]
