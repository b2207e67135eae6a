"""The final dicts of a page of CPU-only breakdowns as a file holds it, made in native code
(``breakdown._native_cpu_dicts``: ``_native.column_dicts`` and ``rounded``, where it is
built), are those of the Python fallback and of ``IterationBreakdown.to_dict``: the same keys
in the same order, values of the same types, no list shared between two of them."""
import pytest
from hypothesis import given, settings, strategies as st

from stream_split.core import breakdown
from stream_split.core.breakdown import IterationBreakdown

needs_native = pytest.mark.skipif(breakdown._native is None,
                                   reason="stream_split._native is not built")

_times = st.one_of(st.integers(0, 10**9), st.floats(0, 1e9), st.sampled_from(
    [0.0, 1.0005, 2.0, 1e-7, 3.3333333]))


def _typed(value):
    if isinstance(value, dict):
        return [(key, _typed(item)) for key, item in value.items()]
    if isinstance(value, list):
        return ["list", *map(_typed, value)]
    return type(value), repr(value)


@needs_native
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_times, _times, st.sampled_from([0.0, 1.23456, 2.0])),
                min_size=1, max_size=64))
def test_a_page_of_cpu_breakdowns_is_made_final_natively_as_in_python(ops):
    breakdowns = []
    for start, length, comm_us in ops:
        made = IterationBreakdown()
        made.add_op((1, 1), start, start + length)
        made.comm_kernel_us = comm_us
        breakdowns.append(made)
    spans = [None] * len(breakdowns)
    native = breakdown.final_dicts((IterationBreakdown, breakdown._breakdown_page(breakdowns)),
                                   spans)
    native_module, breakdown._native = breakdown._native, None  # the fallback's turn
    try:
        fallback = breakdown.final_dicts(
            (IterationBreakdown, breakdown._breakdown_page(breakdowns)), spans)
    finally:
        breakdown._native = native_module
    expected = [made.to_dict(None) for made in breakdowns]
    assert list(map(_typed, native)) == list(map(_typed, fallback)) == list(
        map(_typed, expected))
    assert len({id(made["top_kernels"]) for made in native}) == len(native)
