"""A page of the manifest's entries made in native code (``manifest_entries._entry_dicts``:
``_native.slot_dicts`` and ``rounded``, where it is built) is what its Python fallback
(``records.untyped_dict`` a record at a time) makes: the same keys in the same order, the
same values of the same types (rounded alike: whole, zero and non-finite floats, ints).
``slot_dicts`` and ``column_dicts`` store a value that every dict of a call shares (the very
same object in each record's slot, or all through a column) once, in the copy of the template
each dict is copied from: the dicts are still what a store a key at a time makes, key for key,
in order (a key the template lacks after the others), each its own dict."""
import math

import pytest
from hypothesis import given, settings, strategies as st

from stream_split import manifest_entries
from stream_split.core.records import _ROUNDED_FIELDS, IterationRecord, untyped_dict

_native = manifest_entries._native
needs_native = pytest.mark.skipif(_native is None, reason="stream_split._native is not built")

_numbers = st.one_of(st.integers(-10**20, 10**20), st.floats(), st.sampled_from(
    [0.0, -0.0, 1.0005, 2.0, 1e17, 0.0005, -7.12345, math.inf]))


def _record(index, start, end, busy, active, gpu):
    record = IterationRecord(index, start_ts=start, end_ts=end, gpu_busy_us=busy,
                             gpu_active_us=active, first_op="op")
    if gpu is not None:
        record.gpu_start_ts, record.gpu_end_ts = gpu
    record.breakdown = {"span_us": 0.0} if index % 2 else None
    return record


_pages = st.lists(st.tuples(_numbers, _numbers, _numbers, _numbers,
                            st.none() | st.tuples(_numbers, _numbers)), max_size=70)


def _typed(value):
    """A value with its type, NaN equal to itself (``repr``), nested values alike."""
    if isinstance(value, dict):
        return [(key, _typed(item)) for key, item in value.items()]
    return type(value), repr(value)


@needs_native
@settings(max_examples=80, deadline=None)
@given(_pages)
def test_a_page_of_entries_is_made_natively_as_in_python(rows):
    records = [_record(index, *row) for index, row in enumerate(rows)]
    names = [None if index % 3 else f"{index}.json" for index in range(len(records))]
    made = manifest_entries._entry_dicts(records, names)
    assert list(map(_typed, made)) == list(map(_typed, map(untyped_dict, records, names)))


@needs_native
def test_rounded_rounds_as_round_does():
    values = [0, 0.0, -0.0, 3, 2.5, 1.23456, 1e300, math.inf, -math.inf, 10**40, True]
    assert list(map(_typed, _native.rounded(values, False))) == [
        _typed(round(value, 3)) for value in values]
    assert list(map(_typed, _native.rounded(values, True))) == [
        _typed(round(value, 3) if value else value) for value in values]
    nan = _native.rounded([math.nan], False)[0]
    assert math.isnan(nan)


def test_records_of_another_class_are_made_by_the_fallback():
    class Other(IterationRecord):
        __slots__ = ()
    records = [_record(0, 1.0, 2.5, 0.0, 0.0, None), Other(1, start_ts=2.5, end_ts=3.0)]
    records[1].breakdown = None
    made = manifest_entries._entry_dicts(records, ["a", None])
    assert made == list(map(untyped_dict, records, ["a", None]))


#: The slots read (as the manifest's entries read them) and the keys in the template.
_NAMES = ("index", "kind", "first_op", "step", "breakdown")
_TEMPLATE = dict.fromkeys(("index", "kind", "start_ts", "first_op", "step", "gpu_busy_us",
                           "gpu_active_us", "breakdown", "file"))
_SHARED_STEP = 7
_values = st.sampled_from([0.0, 2.0, 1.23456, 5, None])


def _by_keys(record, names: tuple, rounded: tuple, columns: tuple, k: int) -> dict:
    """What ``slot_dicts`` makes of ``record`` (the ``k``-th), a key at a time."""
    d = dict(_TEMPLATE)
    for name in names:
        d[name] = getattr(record, name)
    for name in rounded:
        value = getattr(record, name)
        d[name] = round(value, 3) if value else value
    for key, values in columns:
        d[key] = values[k]
    return d


@needs_native
@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), _values, _values), min_size=1,
                max_size=70),
       st.booleans())
def test_shared_and_own_values_make_the_dicts_of_a_store_a_key_at_a_time(rows, extra_key):
    shared_breakdown = {"span_us": 0.0}
    records = []
    for index, (own_step, own_breakdown, busy, active) in enumerate(rows):
        record = IterationRecord(index, first_op="op", step=index if own_step else _SHARED_STEP,
                                 gpu_busy_us=busy or 0.0, gpu_active_us=active or 0.0)
        record.breakdown = {"span_us": float(index)} if own_breakdown else shared_breakdown
        records.append(record)
    files = ["same.json"] * len(records)
    columns = (("file", files), ("start_ts", [float(k) for k in range(len(records))]))
    if extra_key:  # a key the template lacks: after the others, in the columns' order
        columns += (("later", [None] * len(records)),)
    made = _native.slot_dicts(records, _TEMPLATE, _NAMES, _ROUNDED_FIELDS, columns)
    expected = [_by_keys(record, _NAMES, _ROUNDED_FIELDS, columns, k)
                for k, record in enumerate(records)]
    assert list(map(_typed, made)) == list(map(_typed, expected))
    assert len(set(map(id, made))) == len(made)  # each its own dict


@needs_native
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _values), min_size=1, max_size=70), st.booleans())
def test_column_dicts_share_a_column_of_one_object_as_a_store_a_key_at_a_time(rows, extra):
    template = dict.fromkeys(("a", "b", "c"))
    one = object()
    columns = (("a", [one if same else object() for same, _ in rows]),
               ("b", [value for _, value in rows]), ("c", [one] * len(rows)))
    if extra:
        columns += (("z", [one] * len(rows)),)
    made = _native.column_dicts(template, columns)
    expected = []
    for k in range(len(rows)):
        d = dict(template)
        for key, values in columns:
            d[key] = values[k]
        expected.append(d)
    assert [list(d.items()) for d in made] == [list(d.items()) for d in expected]
    assert all(a[key] is b[key] for a, b in zip(made, expected) for key in a)
    assert len(set(map(id, made))) == len(made)


@needs_native
def test_an_unset_slot_or_another_class_is_refused_before_any_dict_is_made():
    class Other(IterationRecord):
        __slots__ = ()
    with pytest.raises(TypeError):
        _native.slot_dicts([IterationRecord(0), Other(1)], _TEMPLATE, _NAMES, (), ())
    unset = IterationRecord.__new__(IterationRecord)
    with pytest.raises(AttributeError):
        _native.slot_dicts([IterationRecord(0), unset], _TEMPLATE, ("index",), (), ())
