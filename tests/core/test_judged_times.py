"""What ``stats.RecordColumns.add_page`` judges of a page of records taken a column at a time
(``stats._judged_times``: their CPU windows rounded by ``_native.rounded`` where none has GPU
work) is each one's ``wall_us``, value and type."""
from hypothesis import given, settings, strategies as st

from stream_split import stats
from stream_split.core.records import IterationRecord

_times = st.one_of(st.integers(-10**18, 10**18), st.floats(-1e18, 1e18), st.sampled_from(
    [0.0, 1.0005, 2.0, 6.000001, 0.0005]))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_times, _times), min_size=1, max_size=64), st.booleans())
def test_the_judged_times_of_a_page_are_its_records_wall_spans(windows, gpu):
    records = [IterationRecord(index, start_ts=start, end_ts=end)
               for index, (start, end) in enumerate(windows)]
    if gpu:
        records[-1].gpu_start_ts, records[-1].gpu_end_ts = 1.5, 2.5
    judged = list(stats._judged_times(records))
    assert [(type(time), repr(time)) for time in judged] == [
        (type(record.wall_us), repr(record.wall_us)) for record in records]
