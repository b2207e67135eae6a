"""A page of the manifest's entries made in native code (``manifest_entries._entry_dicts``:
``_native.slot_dicts`` and ``rounded``, where it is built) is what its Python fallback
(``records.untyped_dict`` a record at a time) makes: the same keys in the same order, the
same values of the same types (rounded alike: whole, zero and non-finite floats, ints)."""
import math

import pytest
from hypothesis import given, settings, strategies as st

from stream_split import manifest_entries
from stream_split.core.records import IterationRecord, untyped_dict

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
