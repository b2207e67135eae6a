"""A page's fields read a column at a time (``core.finish.record_columns``: one call of
``_native.slot_columns`` where built) are those ``attrgetter`` reads a record at a time."""
from operator import attrgetter

from hypothesis import given, settings, strategies as st

from stream_split.core import finish
from stream_split.core.records import IterationRecord

_NAMES = ("index", "start_ts", "gpu_events", "extra", "phase")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(), st.one_of(st.integers(), st.floats()),
                          st.sampled_from([0, 1, 3])), max_size=70))
def test_record_columns_are_each_fields_values_in_order(rows):
    records = [IterationRecord(index, start_ts=start, gpu_events=gpu)
               for index, start, gpu in rows]
    columns = finish.record_columns(records, _NAMES)
    assert len(columns) == len(_NAMES)
    for name, column in zip(_NAMES, columns):
        assert column.__class__ is list  # (never a single value for them all)
        assert all(a is b for a, b in zip(column, map(attrgetter(name), records)))
        assert len(column) == len(records)


def test_record_columns_of_records_of_another_class_are_read_by_name():
    class Other:
        index, start_ts, gpu_events, extra, phase = 1, 2.0, 0, {}, None
    records = [IterationRecord(0), Other()]
    assert finish.record_columns(records, _NAMES) == [[0, 1], [0.0, 2.0], [0, 0], [{}, {}],
                                                      [None, None]]
