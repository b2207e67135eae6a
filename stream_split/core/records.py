"""What the core tells its callers: small immutable records, no behaviour.

``Boundary`` is known the moment an iteration's first CPU op is read (after the pattern is
confirmed); ``IterationRecord`` carries an iteration's numbers once they are final. Its
``start_ts`` is its boundary's, or earlier where a Python frame that opens the step came after
the boundary was out (Kineto writes frames after every op: ``core.owners.StepOpeners``).

Which records are final: ``IterationRecord`` always (they come at the end). A ``Boundary`` is
provisional while it is the latest one: when the events after it show it was wrong (the op
that triggered it did not open an instance after all), a ``Revision`` of that boundary follows,
either ``move`` (to a later op, a new ``start_ts``) or ``retract`` (no iteration begins there;
the next boundary reuses its index). Once a boundary with a higher index has come out, every
boundary before it is final. ``apply_revision`` is how a consumer applies one. The
protobuf messages in ``proto/`` mirror these fields one for one (``stream_split.schema``).
"""
from __future__ import annotations

import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from functools import cache, partial
from itertools import repeat, starmap
from operator import attrgetter, is_

from stream_split.native import NATIVE as _native  # (None: the Python fallbacks)

#: Owner of an event that belongs to no iteration (prologue, epilogue, spanning wrappers,
#: GPU work whose launch is not in the trace).
OUTSIDE = -1
#: Owner of a metadata event: it is copied into every output piece.
METADATA = -2

KIND_ITERATION = "iteration"
KIND_IDLE = "idle"


def rounded_us(us: float) -> float:
    """``us`` rounded to the nanosecond, a 0 (an iteration without GPU work) or a whole
    number of µs (a trace whose times are integers: ``is_integer``, some 200 instructions) as
    it is: ``round`` of a float is a decimal conversion, some 2,000 instructions, and leaves
    such a float as it was."""
    return round(us, 3) if us and not (us.__class__ is float and us.is_integer()) else us


#: Keys of ``IterationRecord.to_dict()`` that are not scalar columns: ``breakdown`` (a nested
#: object: a ``Breakdown`` message of its own in ``records.proto``, no Parquet column) and
#: ``extra`` (spread into the dict).
NESTED_FIELDS = ("breakdown", "extra")
#: The fields whose values ``to_dict`` gives ``rounded_us``.
_ROUNDED_FIELDS = ("gpu_busy_us", "gpu_active_us")


def with_to_dict(record_type: str, scalars_only: bool = True):
    """Class decorator: the dataclass gets its ``to_dict(shared=False)`` method, a function
    generated from its fields (``_scalar_to_dict`` where every field is a scalar, else
    ``_dict_of``: ``IterationRecord``'s), ``{"type": record_type}`` first. Made once, when
    the class is: a method like any other, no cost a call."""
    def decorate(cls):
        cls.to_dict = _scalar_to_dict(record_type, cls) if scalars_only \
            else _dict_of(cls, record_type, method=True)
        return cls
    return decorate


def _scalar_to_dict(record_type: str, cls):
    """``to_dict(shared=False)`` of the dataclass ``cls``, whose fields are all scalars:
    ``{"type": record_type}`` and its fields in order, their values as they are, as one dict
    display of a function made from the names (``dataclasses.asdict`` copies each value
    deeply, a third of ``boundaries``' time on a trace of one-op iterations; a dict updated
    with the names and the values zipped, two frames and a call of the cached names more,
    took some three times as long as the display: 0.85 against 0.27 µs a ``Boundary``)."""
    names = _fields_of(cls)[0]
    items = "".join(f"{name!r}: r.{name}, " for name in names)
    scope: dict = {}
    exec(f"def to_dict(r, shared=False):\n    return {{'type': {record_type!r}, {items}}}",
         scope)  # the names: ours (``_values_of`` checks them)
    to_dict = scope["to_dict"]
    to_dict.__qualname__ = f"{cls.__name__}.to_dict"
    to_dict.__doc__ = f"Its fields in order after ``type`` ({record_type!r}); ``shared`` as " \
                      f"``IterationRecord.to_dict``'s (every field is a scalar: nothing to share)."
    return to_dict


@cache
def _fields_of(cls) -> tuple:
    """(the names of the fields of the dataclass ``cls``, in the constructor's order; a
    function giving a record's values of them: ``_values_of``)."""
    names = tuple(f.name for f in fields(cls))
    return names, _values_of(names)


def _values_of(names: tuple):
    """A function of an object giving the tuple of its attributes ``names``, in order: a
    function of one expression (``(r.index, r.kind, ...)``), whose attribute loads the
    interpreter specializes for slots, where ``operator.attrgetter`` looks each one up in
    the type: a third of the time for the 26 fields of an ``IterationRecord`` (1.39 against
    0.48 µs; a page of records written is read so, ``_record_values``), 0.12 against
    0.08 µs for a ``Boundary``'s 5."""
    if not all(map(str.isidentifier, names)):
        raise ValueError(f"not attribute names: {names!r}")
    scope: dict = {}
    exec(f"def values(r):\n    return ({''.join(f'r.{name}, ' for name in names)})",
         scope)  # the names: ours
    return scope["values"]


def _copied(value):
    """A copy of ``value`` (nested dicts and lists of JSON values) sharing no container."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) for v in value)
    return value


def _scalar_fields(cls) -> tuple:
    """The fields of the dataclass ``cls`` that ``to_dict`` copies as they are, in order
    (``NESTED_FIELDS`` aside)."""
    return tuple(f.name for f in fields(cls) if f.name not in NESTED_FIELDS)


#: The kinds of value of ``_record_items`` (a letter each: ``_native.record_lines`` reads them).
_AS_IS, _ROUNDED, _DURATION, _WALL, _CONSTANT = "v", "r", "d", "w", "c"


def _record_items(cls) -> list:
    """``(key, kind)`` of each item of ``IterationRecord.to_dict``'s dict after ``type`` and
    before ``extra``'s keys, in order, for the dataclass ``cls``: the one place that orders
    them (``_dict_of`` writes its functions from them, ``line_layout`` its layout). Its
    fields but ``NESTED_FIELDS`` as they are (``_AS_IS``; ``_ROUNDED_FIELDS``:
    ``rounded_us``, ``_ROUNDED``), then ``duration_us`` (``_DURATION``: ``end_ts - start_ts``
    rounded), ``wall_us`` (``_WALL``: ``duration_us`` where ``gpu_start_ts`` is None, else
    the property) and ``breakdown``."""
    scalars = _scalar_fields(cls)
    if not all(map(str.isidentifier, scalars)):
        raise ValueError(f"not field names: {scalars!r}")
    return [(name, _ROUNDED if name in _ROUNDED_FIELDS else _AS_IS) for name in scalars] + [
        ("duration_us", _DURATION), ("wall_us", _WALL), ("breakdown", _AS_IS)]


def _dict_of(cls, record_type: str | None, method: bool = False):
    """A function of a record of ``cls`` (``IterationRecord``) and a file name giving
    ``to_dict(shared=True)``'s dict before ``extra`` is spread: ``{"type": record_type}``
    (none where None), the fields ``_scalar_fields(cls)`` in order (``file`` the name given; ``gpu_busy_us`` and
    ``gpu_active_us`` ``rounded_us``), ``duration_us``, ``wall_us`` and ``breakdown`` (shared),
    made from the names with no call per derived value (``dict.update`` with the names and
    the values zipped took about twice the instructions; with
    ``manifest_entries._shared_entries`` some 3,000 instructions fewer an entry than
    ``to_dict`` and ``manifest_entry`` a record at a time, split of 10 k one-op iterations).
    The dict is a copy of one holding every key in order (``type``'s value with it), each
    value then stored under its key: a dict display of its 26 keys is built in parts that
    are merged (past 15 items the compiler splits it), each part growing and the merge
    inserting anew, some 14 k instructions a dict against 9.9 k for the copy and the stores
    (callgrind, 2,048 records of one-op iterations).

    ``method``: ``IterationRecord.to_dict`` instead, a function of a record and ``shared``:
    the same dict, its file the record's, ``breakdown`` copied unless ``shared``, and
    ``extra``'s keys spread at the end (one frame of Python a record, not two: a
    ``boundaries`` run writes every record so)."""
    expressions = {  # each kind of ``_record_items``' value (``rounded_us`` inline; without
        # GPU work its wall span is its CPU window: no second ``round``, some 2,000
        # instructions)
        _AS_IS: "r.{}", _ROUNDED: "round(r.{0}, 3) if r.{0} else r.{0}",
        _DURATION: "duration = round(r.end_ts - r.start_ts, 3)",
        _WALL: "duration if r.gpu_start_ts is None else r.wall_us"}
    stores = [(name, "file" if name == "file" and not method else expressions[how].format(name))
              for name, how in _record_items(cls)]
    template = {} if record_type is None else {"type": record_type}
    template.update(dict.fromkeys(name for name, _ in stores))
    lines = ["def to_dict(r, shared=False):" if method else "def dict_of(r, file):",
             "    d = template.copy()"]
    lines += [f"    d[{name!r}] = {value}" for name, value in stores]
    if method:
        lines += ["    if not shared:", "        d['breakdown'] = copied(r.breakdown)",
                  "    if r.extra:", "        d.update(r.extra if shared else copied(r.extra))"]
    lines.append("    return d")
    scope = {"template": template, "copied": _copied}
    exec("\n".join(lines), scope)  # the names: ours
    if not method:
        return scope["dict_of"]
    to_dict = scope["to_dict"]
    to_dict.__qualname__ = f"{cls.__name__}.to_dict"
    to_dict.__doc__ = ("Its fields in order as a new dict (``breakdown`` and ``extra`` copied, "
                       "not shared; ``shared``: shared, for a dict that is encoded at once and "
                       "dropped), with the derived ``duration_us`` and ``wall_us``; ``extra``'s "
                       "keys spread at the end.")
    return to_dict


@with_to_dict("boundary")
@dataclass(frozen=True, slots=True)
class Boundary:
    """Iteration ``index`` begins at ``start_ts`` with op ``first_op`` on the loop thread
    ``pid``, ``tid``: as the trace gives them (numbers stay numbers; a trace's string ids,
    ``"Spans"``, stay strings; the protobuf message has them as text)."""
    index: int
    start_ts: float
    pid: int | str
    tid: int | str
    first_op: str

    # to_dict(shared=False) -> dict: its fields in order after ``type``; ``shared`` as
    # ``IterationRecord.to_dict``'s (every field is a scalar here: nothing to share). Made
    # from the fields by the decorator ``with_to_dict`` (``_scalar_to_dict``).


REVISION_MOVE = "move"
REVISION_RETRACT = "retract"


@with_to_dict("revision")
@dataclass(frozen=True, slots=True)
class Revision:
    """Boundary ``index`` (always the latest one emitted) was wrong: ``move`` puts it at
    ``start_ts`` / ``first_op`` (always later than before); ``retract`` withdraws it
    (``start_ts`` None): iteration ``index`` - 1 goes on, and the next boundary is ``index``."""
    index: int
    action: str
    start_ts: float | None
    pid: int | str  # as in ``Boundary``
    tid: int | str
    first_op: str
    reason: str

    # to_dict(shared=False) -> dict: as ``Boundary.to_dict`` (``with_to_dict``).


def apply_revision(boundaries: list, revision: dict) -> list:
    """The boundary records (dicts, in order) after ``revision`` (a revision record's dict):
    what a live consumer does on a ``revision`` record."""
    kept = [b for b in boundaries if b["index"] != revision["index"]]
    if revision["action"] == REVISION_MOVE:
        kept.append({"type": "boundary", **{k: revision[k] for k in (
            "index", "start_ts", "pid", "tid", "first_op")}})
    return kept


@with_to_dict("iteration", scalars_only=False)
@dataclass(slots=True)
class IterationRecord:
    """The numbers of one iteration (or of a cycle of another kind, e.g. ``idle``)."""
    index: int
    kind: str = KIND_ITERATION
    start_ts: float = 0.0
    end_ts: float = 0.0
    first_op: str = ""
    events: int = 0
    cpu_ops: int = 0
    launches: int = 0
    kernels: int = 0
    gpu_events: int = 0
    #: GPU busy time: the union of work per stream, summed over streams (stream-time: with
    #: concurrent streams it can exceed the iteration's duration).
    gpu_busy_us: float = 0.0
    #: Time at least one GPU stream was busy (union over all streams): at most the busy time
    #: and the span of the iteration's GPU work. Counted in the order its work is decided:
    #: exact when that is time order; work decided out of order counts whole (a slight
    #: over-count, capped). See ``Splitter._own_linked``.
    gpu_active_us: float = 0.0
    gpu_start_ts: float | None = None
    gpu_end_ts: float | None = None
    complete: bool = True
    file: str = ""
    #: Far from the median iteration time (``stream_split.stats``); set once all are known.
    outlier: bool = False
    outlier_reason: str | None = None
    #: N of the ``ProfilerStep#N`` annotation inside the iteration; None without one.
    step: int | None = None
    #: Runtime calls that replay a captured CUDA graph (``cudaGraphLaunch``), among ``launches``.
    graph_launches: int = 0
    #: Serving loops: "prefill", "decode", "mixed" or "idle" (``core.serving``); None otherwise.
    phase: str | None = None
    #: What decided ``phase``: "annotation", "kind", "graph", "shapes" or "graph+shapes".
    phase_evidence: str | None = None
    #: Where its GPU and host time went (``core.breakdown``): ``span_us``, ``compute_us``,
    #: ``comm_us``, ``memcpy_us``, ``memset_us``, ``idle_us`` (adding up to ``span_us``),
    #: ``top_kernels`` and ``host``; set with the final record.
    breakdown: dict | None = None
    extra: dict = field(default_factory=dict)

    @property
    def duration_us(self) -> float:
        """``end_ts - start_ts``, rounded to 0.001 µs as in the manifest: the CPU window."""
        return round(self.end_ts - self.start_ts, 3)

    @property
    def wall_us(self) -> float:
        """The wall span of its work, CPU and GPU: from the earlier of its start and its
        first GPU work's start to the later of its end and its last GPU work's end (rounded
        to 0.001 µs). Outliers and the steady state are judged on it (``stats``)."""
        start, end = self.start_ts, self.end_ts
        if self.gpu_start_ts is not None:
            start, end = min(start, self.gpu_start_ts), max(end, self.gpu_end_ts)
        return round(end - start, 3)

    # to_dict(shared=False) -> dict: its fields in order as a new dict (``breakdown`` and
    # ``extra`` copied, not shared; ``shared``: shared, for a dict that is encoded at once
    # and dropped), with the derived ``duration_us`` and ``wall_us``; ``extra``'s keys spread
    # at the end. Made from the fields by the decorator ``with_to_dict`` (``_dict_of``), not
    # ``dataclasses.asdict``. (``pack_page`` and ``unpack_page``, for ``pages.PagedList``:
    # given at the end of the module, ``_native_record_values`` where built.)

    def __reduce__(self):
        """Pickled as its fields' values, rebuilt by the constructor: a quarter of the time
        of the default for slots (a long trace's records are paged through a file,
        ``pages.PagedList``, and read back a few times at the end)."""
        return IterationRecord, _RECORD_VALUES(self)


def _field_type(hint) -> tuple[type, bool]:
    """``(type, nullable)`` of a field annotation: ``float | None`` is ``(float, True)``."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], True
    return hint, False


@cache
def iteration_fields() -> tuple[tuple[str, type, bool], ...]:
    """``(name, type, nullable)`` of every scalar key of ``IterationRecord.to_dict()``, in its
    order (``extra`` keys and ``NESTED_FIELDS`` aside): the one source of the JSON fields and
    of the Parquet schema (``stream_split.beam``), derived from the dataclass;
    ``tests/output/test_schema.py`` checks it against the ``Iteration`` message of
    ``records.proto``. Made when first asked for (``typing.get_type_hints`` evaluates every
    annotation: 2.4 M instructions at each start-up of a command that never asks)."""
    hints = typing.get_type_hints(IterationRecord)
    out = [("type", str, False)]
    out += [(f.name, *_field_type(hints[f.name])) for f in fields(IterationRecord)
            if f.name not in NESTED_FIELDS]
    for name in ("duration_us", "wall_us"):
        prop = getattr(IterationRecord, name)
        out.append((name, *_field_type(typing.get_type_hints(prop.fget)["return"])))
    return tuple(out)


#: The fields of ``IterationRecord`` that ``to_dict`` copies as they are, in order.
_SCALAR_FIELDS = _scalar_fields(IterationRecord)


#: The same without ``type``: a manifest's entry (``manifest_entries``) before its ``extra``.
untyped_dict = _dict_of(IterationRecord, None)
#: Every field's value of a record, in the constructor's order (``IterationRecord.__reduce__``).
_RECORD_VALUES = _fields_of(IterationRecord)[1]


def _record_values(records: list) -> list:
    """A page of records as a file holds it (``pages.PAGE_PACK``): the tuple of each one's
    values (``_RECORD_VALUES``), not a ``__reduce__`` call each (some 15 % fewer
    instructions to write and read back)."""
    return list(map(_RECORD_VALUES, records))


def _records_of(values: list) -> list:
    """The records of a page as ``_record_values`` made it."""
    return list(starmap(IterationRecord, values))


#: The names of the fields of ``IterationRecord``, in the constructor's order.
_RECORD_FIELDS = _fields_of(IterationRecord)[0]
#: Where ``extra`` is among them (``_native_record_columns``).
_EXTRA_AT = _RECORD_FIELDS.index("extra")


def _native_record_columns(records: list):
    """A page of records as a file holds it where the native part is built: ``(how many,
    a column a field)`` (``_native.slot_columns``: a field's values in a list, or, where
    every record holds the very same object there, that one in a 1-tuple). Most of a page's
    fields hold the same defaults (a trace of one-op iterations: 24 of 26), each pickled
    once then, not once a record: a page of 64 such records pickled in 3.2 µs against 17.3
    as rows (``_record_values``), and loaded in 3.3 against 17.1. Their ``extra`` (a dict of
    its own each, most often empty) is None where every one is empty: 64 empty dicts, each
    remembered by the pickler, were a third of the instructions to pickle a page of one-op
    records and a quarter to load it (callgrind: 86.7 k -> 54.5 k, 53.2 k -> 40.6 k a page)."""
    if not records:
        return []
    columns = _native.slot_columns(records, _RECORD_FIELDS)
    extras = columns[_EXTRA_AT]
    if extras.__class__ is list and not any(extras):  # (a truth test each, in C)
        columns[_EXTRA_AT] = None
    return len(records), columns


def _native_records_of(packed) -> list:
    """The records of a page as ``_native_record_columns`` made it (``_native.
    with_slot_columns``: each record made with every field's value, as its ``__init__``
    makes it, without a frame of Python), or as ``_record_values`` made it (a list of rows:
    ``_native.with_slots``). A long trace's records are paged through a file and read back
    twice (``core.finish``)."""
    if packed.__class__ is tuple:
        count, columns = packed
        if columns[_EXTRA_AT] is None:  # every one empty: a new dict each
            columns = columns.copy()  # (the page as given stays as it is)
            columns[_EXTRA_AT] = list(starmap(dict, repeat((), count)))
        return _native.with_slot_columns(IterationRecord, _RECORD_FIELDS, columns, count)
    return _native.with_slots(IterationRecord, _RECORD_FIELDS, packed)


def made_of(cls):
    """A function of a list of rows (each a tuple of every field's value of the dataclass
    ``cls``, in the constructor's order) giving the records they make, as ``cls(*row)``
    makes each (no ``__post_init__``): ``_native.with_slots`` where built, no frame of
    Python a record. For a frozen dataclass (``Boundary``, whose ``__init__`` calls
    ``object.__setattr__`` for each field): 0.61 against 1.5 µs a record; an
    ``IterationRecord`` is made as fast by its ``__init__`` (its row is built first)."""
    if _native is None:
        return lambda rows: list(starmap(cls, rows))
    return partial(_native.with_slots, cls, _fields_of(cls)[0])


def made_one(cls):
    """``made_of(cls)`` for one record: a function of every field's value, in the
    constructor's order, giving the record, as ``cls(*values)`` makes it
    (``_native.slot_maker`` where built: no list nor row made for one record, no argument
    tuple parsed, nor copied as a ``partial`` of ``_native.one_with_slots`` copied its 7;
    0.22 against 0.48 µs a ``Boundary`` through ``made_of``)."""
    if _native is None:
        return cls
    return _native.slot_maker(cls, _fields_of(cls)[0], None, None, None)


def made_fresh(cls, given: tuple):
    """A function of the values of the fields ``given`` (names, in that order) giving a new
    record of the dataclass ``cls`` whose other fields hold their defaults (a
    ``default_factory``'s value made anew each time), as ``cls(**dict(zip(given, values)))``
    makes it: ``_native.fresh_with_slots`` where built (no frame of Python: a new
    ``IterationRecord`` a boundary), else by ``made_one``, every value given by position,
    from a function made from the names (0.35 against 0.62 µs by its ``__init__``, which
    stores its 26 fields one by one)."""
    if not all(map(str.isidentifier, given)) or set(given) - {f.name for f in fields(cls)}:
        raise ValueError(f"not field names of {cls.__name__}: {given!r}")
    if _native is not None:
        names = _fields_of(cls)[0]
        return fresh_with_slots(cls, names, [f.default for f in fields(cls)],
                                [None if f.default_factory is MISSING else f.default_factory
                                 for f in fields(cls)], tuple(map(names.index, given)))
    scope = {"made": made_one(cls)}
    values = []
    for k, f in enumerate(fields(cls)):
        if f.name in given:
            values.append(f.name)
        elif f.default_factory is dict:
            values.append("{}")
        elif f.default_factory is not MISSING:
            values.append(f"factory_{k}()")
            scope[f"factory_{k}"] = f.default_factory
        elif f.default.__class__ in _LITERAL_TYPES and f.default == f.default and \
                f.default not in (_INF, -_INF):
            values.append(repr(f.default))
        else:
            values.append(f"default_{k}")
            scope[f"default_{k}"] = f.default
    exec(f"def fresh({', '.join(given)}):\n    return made({', '.join(values)})",
         scope)  # the names: ours
    return scope["fresh"]


def fresh_with_slots(cls, names: tuple, defaults, factories, given: tuple):
    """A function of values (one an index of ``given``, each an index into ``names``, the
    slots of ``cls``) giving a new object of ``cls`` (no ``__init__`` called) whose slots
    hold ``defaults`` (the objects themselves) or, where ``factories`` has a callable, what it
    gives (a new empty dict, list, ...), those at ``given`` the values:
    ``_native.fresh_with_slots`` (call only where built), no frame of Python an object,
    made by ``_native.slot_maker`` (its layout read once, its values not copied)."""
    return _native.slot_maker(cls, names, tuple(defaults), tuple(factories), given)


#: Defaults written as literals in ``made_fresh``'s functions (``repr`` gives them back).
_LITERAL_TYPES = (bool, int, float, str, type(None))
_INF = float("inf")


IterationRecord.pack_page, IterationRecord.unpack_page = (
    (_record_values, _records_of) if _native is None
    else (_native_record_columns, _native_records_of))


def line_layout(cls, record_type: str) -> tuple:
    """How ``_native.record_lines`` writes a record of the dataclass ``cls`` as its
    ``to_dict(shared=True)``'s JSON line, from its slots, no dict made: ``(keys, kinds,
    slots, constants, spread)``, a key and a kind (an ASCII letter of ``_record_items``') an
    item in order, ``type`` first (``_CONSTANT``: ``constants``' value at the same place);
    ``slots``, the names of the slots read, in order: one an item ``_AS_IS`` or ``_ROUNDED``,
    ``end_ts`` and ``start_ts`` for ``_DURATION``, ``gpu_start_ts`` for ``_WALL`` (its value
    else the property of the key's name), then, where ``spread`` (``IterationRecord``),
    ``extra``, whose dict, where not empty, is spread at the end (the record is then written
    from its dict). A dataclass of scalars (``Boundary``): its fields in order, as they are."""
    items = _record_items(cls) if cls is IterationRecord else [
        (name, _AS_IS) for name in _fields_of(cls)[0]]
    reads = {_AS_IS: None, _ROUNDED: None, _DURATION: ("end_ts", "start_ts"),
             _WALL: ("gpu_start_ts",)}
    spread = cls is IterationRecord
    slots = tuple(name for key, how in items for name in (reads[how] or (key,)))
    return (("type", *(key for key, _ in items)),
            (_CONSTANT + "".join(how for _, how in items)).encode("ascii"),
            slots + ("extra",) * spread, (record_type, *(None for _ in items)), spread)


#: The kind of an entry's item (``entry_layout``) whose value is its piece's name, given.
_NAMED = "n"


def entry_layout() -> tuple:
    """How ``_native.entry_texts`` writes the manifest's entry of an ``IterationRecord``
    (``untyped_dict``'s dict, laid out) from its slots, no dict made: ``(keys, kinds,
    slots)``, a key and a kind (an ASCII letter of ``_record_items``', ``file`` ``_NAMED``:
    the name given) an item in order; ``slots``, the names of the slots read, in order (as
    ``line_layout``'s), then ``extra`` (its dict must be empty: the entry is else made as a
    dict)."""
    items = [(key, _NAMED if key == "file" else how)
             for key, how in _record_items(IterationRecord)]
    reads = {_AS_IS: None, _ROUNDED: None, _DURATION: ("end_ts", "start_ts"),
             _WALL: ("gpu_start_ts",), _NAMED: ()}
    slots = tuple(name for key, how in items for name in reads[how] or (
        () if how == _NAMED else (key,)))
    return (tuple(key for key, _ in items), "".join(how for _, how in items).encode("ascii"),
            slots + ("extra",))


#: ``line_layout`` of each class of record that ``boundaries`` writes (``serialize.record_lines``).
LINE_LAYOUTS = {Boundary: line_layout(Boundary, "boundary"),
                Revision: line_layout(Revision, "revision"),
                IterationRecord: line_layout(IterationRecord, "iteration")}


def slots_reduce(obj) -> tuple:
    """``__reduce__`` of an object with ``__slots__`` (and no ``__init__`` arguments): its
    class and its slots' values, rebuilt by ``restore_slots``; a few times faster to pickle
    and unpickle than the default for slots. One whose slots all hold what a new one's do
    (the very objects: ``None``, small numbers) is rebuilt by the class alone."""
    cls = type(obj)
    values, fresh = _slot_values(cls)
    values = values(obj)
    if all(map(is_, values, fresh)):
        return cls, ()
    return restore_slots, (cls, values)


@cache
def _slot_values(cls) -> tuple:
    """(a function giving the tuple of an object's slot values, those of a new one)."""
    get = attrgetter(*cls.__slots__)
    if len(cls.__slots__) == 1:
        get = lambda obj, _get=get: (_get(obj),)  # noqa: E731
    return get, get(cls())


def restore_slots(cls, values: tuple):
    """An object of ``cls`` with its slots set to ``values`` (``slots_reduce``)."""
    obj = cls.__new__(cls)
    for name, value in zip(cls.__slots__, values):
        setattr(obj, name, value)
    return obj
