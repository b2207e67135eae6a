"""Records made and paged in native code (``_native.slot_rows``, ``with_slots``,
``one_with_slots`` and ``slot_maker``, where it is built) are those of their Python fallbacks
(``records._record_values``, ``_records_of``, ``made_of``'s ``cls(*row)`` and ``made_one``'s
``cls(*values)``): the same values, of the same types, in the same fields."""
import pytest
from hypothesis import given, settings, strategies as st

from stream_split.core import breakdown, records
from stream_split.core.breakdown import IntervalUnion, _union_state, union_with
from stream_split.core.detect.base import FoundBoundary, found_boundary
from stream_split.core.records import (
    Boundary, IterationRecord, KIND_ITERATION, Revision, made_fresh, made_of, made_one)

_native = records._native
needs_native = pytest.mark.skipif(_native is None, reason="stream_split._native is not built")
_FIELDS = records._RECORD_FIELDS

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                     st.text(max_size=8))
_rows = st.lists(st.tuples(*[_scalars] * (len(_FIELDS) - 2), st.dictionaries(
    st.text(max_size=4), _scalars, max_size=3), st.dictionaries(st.text(max_size=4), _scalars,
                                                              max_size=3)), max_size=70)


def _same(a: list, b: list) -> bool:
    """Records alike field for field, value and type."""
    return len(a) == len(b) and all(
        type(x) is type(y) and all(type(getattr(x, f)) is type(getattr(y, f)) and
                                   getattr(x, f) == getattr(y, f) for f in _FIELDS)
        for x, y in zip(a, b))


def test_the_records_use_the_native_parts_where_they_are_built():
    native = _native is not None
    assert (IterationRecord.unpack_page is records._native_records_of) is native
    assert (IterationRecord.pack_page is records._native_record_columns) is native


@needs_native
@settings(max_examples=60, deadline=None)
@given(_rows)
def test_a_page_is_packed_and_unpacked_natively_as_in_python(rows):
    made = records._records_of(rows)
    unpacked = records._native_records_of(rows)
    assert _same(unpacked, made)
    assert records._record_values(made) == rows
    # as columns (the very same object in every record: one value), and back
    packed = records._native_record_columns(unpacked)
    again = records._native_records_of(packed)
    assert _same(again, made)
    values = records._record_values(again)
    extra = records._EXTRA_AT
    # as kept, but an ``extra`` that every one of them has empty: a new empty dict each
    all_empty = rows and not any(row[extra] for row in rows) and not all(
        row[extra] is rows[0][extra] for row in rows)
    kept = [at for at in range(len(_FIELDS)) if not (all_empty and at == extra)]
    assert all(all(a[at] is b[at] for at in kept) for a, b in zip(values, rows))
    if all_empty:
        assert len({id(value[extra]) for value in values}) == len(values)
    if rows:
        count, columns = packed
        assert count == len(rows) and len(columns) == len(_FIELDS)
        for at, column in enumerate(columns):
            same = all(row[at] is rows[0][at] for row in rows)
            if all_empty and at == extra:
                assert column is None
                continue
            assert column == ((rows[0][at],) if same else [row[at] for row in rows])


@needs_native
def test_a_page_of_default_records_is_mostly_single_values():
    """A page of records that hold the same defaults keeps one value of each such field."""
    page = [IterationRecord(i, start_ts=6 * i, end_ts=6 * i + 6, first_op="op")
            for i in range(64)]
    count, columns = records._native_record_columns(page)
    varied = [name for name, column in zip(_FIELDS, columns) if column.__class__ is list]
    assert count == 64 and varied == ["index", "start_ts", "end_ts"]
    assert columns[records._EXTRA_AT] is None  # every one empty: none pickled
    unpacked = records._native_records_of((count, columns))
    assert _same(unpacked, page)
    assert len({id(record.extra) for record in unpacked}) == 64  # a dict of its own each


@needs_native
def test_new_records_are_made_natively_as_their_constructor_makes_them():
    made = made_of(IterationRecord)([records._RECORD_VALUES(IterationRecord(7, KIND_ITERATION,
                                                                             1.5, 0.0, "op"))])
    assert _same(made, [IterationRecord(7, KIND_ITERATION, 1.5, 0.0, "op")])
    boundary = made_of(Boundary)([(1, 2, "p", 3, "op")])[0]
    assert boundary == Boundary(1, 2, "p", 3, "op") and hash(boundary) == hash(
        Boundary(1, 2, "p", 3, "op"))
    with pytest.raises(AttributeError):
        boundary.index = 2  # frozen still


@needs_native
def test_native_pages_refuse_what_they_cannot_read():
    record = IterationRecord(0)
    with pytest.raises(TypeError):
        _native.slot_rows([record, Boundary(0, 0.0, 1, 1, "")], _FIELDS)  # of two classes
    with pytest.raises(ValueError):
        _native.slot_rows([record], ("index", "no_such_field"))
    with pytest.raises(ValueError):
        _native.with_slots(IterationRecord, _FIELDS, [(1, 2)])  # a value short
    with pytest.raises(TypeError):
        _native.with_slots(int, (), [()])  # not a class of Python
    empty = IterationRecord.__new__(IterationRecord)
    with pytest.raises(AttributeError):
        _native.slot_rows([empty], _FIELDS)  # a slot never set
    with pytest.raises(AttributeError):
        _native.slot_columns([record, empty], _FIELDS)
    with pytest.raises(TypeError):
        _native.slot_columns([record, Boundary(0, 0.0, 1, 1, "")], _FIELDS)
    with pytest.raises(ValueError):
        _native.slot_columns([], _FIELDS)  # no object
    columns = _native.slot_columns([record, IterationRecord(1)], _FIELDS)
    with pytest.raises(ValueError):
        _native.with_slot_columns(IterationRecord, _FIELDS, columns, 3)  # a column short
    with pytest.raises(ValueError):
        _native.with_slot_columns(IterationRecord, _FIELDS, columns[1:], 2)  # a field short


@given(st.integers(), _scalars, _scalars, _scalars, st.text(max_size=8))
@settings(max_examples=60, deadline=None)
def test_one_record_is_made_as_its_constructor_makes_it(index, start, pid, tid, first_op):
    made = made_one(Boundary)(index, start, pid, tid, first_op)
    assert _same_fields(made, Boundary(index, start, pid, tid, first_op))
    assert hash(made) == hash(Boundary(index, start, pid, tid, first_op))
    with pytest.raises(AttributeError):
        made.index = 2  # frozen still
    found = found_boundary(start, (pid, tid), first_op, True, "why", None)
    assert _same_fields(found, FoundBoundary(start, (pid, tid), first_op, True, "why", None))


def test_a_fresh_record_holds_the_defaults_of_the_fields_not_given():
    fresh = made_fresh(IterationRecord, ("index", "start_ts", "first_op"))
    made, other = fresh(3, 2.5, "op"), fresh(4, 1, "")
    assert _same_fields(made, IterationRecord(3, KIND_ITERATION, 2.5, 0.0, "op"))
    assert _same_fields(other, IterationRecord(4, start_ts=1, first_op=""))
    assert made.extra == {} and made.extra is not other.extra  # a default_factory's, anew
    with pytest.raises(ValueError):
        made_fresh(IterationRecord, ("index", "no_such_field"))


def test_a_union_of_one_interval_is_the_one_add_makes():
    union = IntervalUnion()
    union.add(1.5, 2.0)
    assert _union_state(union_with([1.5], [2.0], 0.0, False)) == _union_state(union)


def test_the_scalar_records_dicts_hold_their_fields_in_order():
    assert Boundary(1, 2.0, "p", 3, "op").to_dict() == {
        "type": "boundary", "index": 1, "start_ts": 2.0, "pid": "p", "tid": 3, "first_op": "op"}
    revision = Revision(2, "move", 3.0, 1, 1, "op", "why")
    assert list(revision.to_dict(shared=True).items()) == [
        ("type", "revision"), ("index", 2), ("action", "move"), ("start_ts", 3.0), ("pid", 1),
        ("tid", 1), ("first_op", "op"), ("reason", "why")]


def test_an_iteration_record_dict_shares_its_parts_only_where_asked():
    record = IterationRecord(1, breakdown={"host": {"cpu_op_us": 1.0}}, extra={"x": [1]})
    copied, shared = record.to_dict(), record.to_dict(shared=True)
    assert copied == shared and list(copied)[-1] == "x"
    assert shared["breakdown"] is record.breakdown and shared["x"] is record.extra["x"]
    assert copied["breakdown"] is not record.breakdown and copied["x"] is not record.extra["x"]


@needs_native
def test_one_record_refuses_what_it_cannot_make():
    names = records._fields_of(Boundary)[0]
    with pytest.raises(ValueError):
        _native.one_with_slots(Boundary, names, 1, 2)  # values short
    with pytest.raises(TypeError):
        _native.one_with_slots(int, ())  # not a class of Python
    with pytest.raises(TypeError):
        _native.one_with_slots(Boundary)  # no names


def _same_fields(a, b) -> bool:
    """Two records alike field for field, value and type."""
    names = a.__slots__
    return type(a) is type(b) and all(
        type(getattr(a, f)) is type(getattr(b, f)) and getattr(a, f) == getattr(b, f)
        for f in names)


@needs_native
@given(st.integers(), _scalars, st.text(max_size=8))
@settings(max_examples=60, deadline=None)
def test_a_fresh_record_made_natively_is_the_one_its_fallback_makes(index, start, first_op):
    given_names = ("index", "start_ts", "first_op")
    native = made_fresh(IterationRecord, given_names)(index, start, first_op)
    records._native = None
    try:
        fallback = made_fresh(IterationRecord, given_names)(index, start, first_op)
    finally:
        records._native = _native
    assert _same_fields(native, fallback) and native.extra is not fallback.extra


@needs_native
def test_fresh_slots_take_defaults_factories_and_the_values_given_at_their_indices():
    made = records.fresh_with_slots(IntervalUnion, IntervalUnion.__slots__,
                                    (None, None, 1.5, True), (list, lambda: [7], None, None),
                                    (3, 2))
    one, two = made(False, 0.25), made(True, 0.5)
    assert _union_state(one) == ([], [7], 0.25, False) and two.starts is not one.starts
    with pytest.raises(ValueError):  # an index past the slots
        records.fresh_with_slots(IntervalUnion, IntervalUnion.__slots__, (None,) * 4,
                                 (None,) * 4, (4,))(1)
    with pytest.raises(ValueError):  # a value short
        made(False)
    with pytest.raises(ValueError):  # a default short
        _native.fresh_with_slots(IntervalUnion, IntervalUnion.__slots__, (None,) * 3,
                                 (None,) * 4, ())
    with pytest.raises(ZeroDivisionError):  # a factory's error, no object
        records.fresh_with_slots(IntervalUnion, IntervalUnion.__slots__, (None,) * 4,
                                 (None, lambda: 1 / 0, None, None), ())()


def test_a_new_breakdown_is_the_one_its_constructor_makes():
    made, other = breakdown.new_breakdown(), breakdown.new_breakdown()
    assert breakdown._BREAKDOWN_STATE(made) == breakdown._BREAKDOWN_STATE(
        breakdown.IterationBreakdown())
    assert all(a is not b for a, b in zip(breakdown._BREAKDOWN_STATE(made),
                                          breakdown._BREAKDOWN_STATE(other))
               if a.__class__ in (list, dict))  # each container anew


@needs_native
@given(st.lists(_scalars, min_size=4, max_size=4))
@settings(max_examples=40, deadline=None)
def test_a_slot_maker_makes_what_one_with_slots_and_fresh_with_slots_make(values):
    """``_native.slot_maker`` (``made_one``, ``fresh_with_slots``, ``union_with``): the
    object ``one_with_slots`` (every slot given) and ``fresh_with_slots`` (defaults) make."""
    names = IntervalUnion.__slots__
    every = _native.slot_maker(IntervalUnion, names, None, None, None)
    assert _same_fields(every(*values), _native.one_with_slots(IntervalUnion, names, *values))
    spec = (IntervalUnion, names, (None, None, 1.5, True), (list, None, None, None), (1, 3))
    fresh = _native.slot_maker(*spec)
    assert _same_fields(fresh(values[0], values[1]),
                        _native.fresh_with_slots(*spec, values[0], values[1]))
    assert made_one(Boundary).__class__.__name__ == "SlotMaker"


@needs_native
def test_a_slot_maker_refuses_what_it_cannot_make():
    names = IntervalUnion.__slots__
    every = _native.slot_maker(IntervalUnion, names, None, None, None)
    with pytest.raises(ValueError):
        every(1, 2, 3)  # a value short
    with pytest.raises(TypeError):
        every(1, 2, 3, starts=4)  # by keyword
    with pytest.raises(ValueError):  # no such slot
        _native.slot_maker(IntervalUnion, ("nope",), None, None, None)
    with pytest.raises(ValueError):  # an index past the slots
        _native.slot_maker(IntervalUnion, names, (None,) * 4, (None,) * 4, (4,))
    with pytest.raises(ValueError):  # a default short
        _native.slot_maker(IntervalUnion, names, (None,) * 3, (None,) * 4, ())
    with pytest.raises(TypeError):  # not a class of Python
        _native.slot_maker(int, (), None, None, None)
