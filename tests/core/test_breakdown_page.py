"""A page of breakdowns packed in one call (``_native.page48_breakdown_page``, where built)
is the page that ``breakdown._breakdown_page``'s Python makes: the same columns and states,
value for value and type for type (a 1-tuple where every breakdown holds the very same object,
None for a column of empty dicts, flat columns where every union holds lists), whatever the
layers, threads, intervals and shared objects; a page it does not take (layers not a list) is
packed by the Python."""
from array import array

import pytest
from hypothesis import given, settings, strategies as st

from stream_split.core import breakdown
from stream_split.core.breakdown import IntervalUnion, IterationBreakdown, union_with

needs_native = pytest.mark.skipif(breakdown._native is None,
                                  reason="stream_split._native is not built")

_times = st.one_of(st.integers(-5, 10**6), st.floats(allow_nan=False),
                   st.sampled_from([0.0, -0.0, 1.5]))
_intervals = st.lists(st.tuples(_times, _times), max_size=4)
#: A union: its intervals, whether they are arrays (``IntervalUnion.compact``), its frozen
#: length and whether it is frozen.
_unions = st.tuples(_intervals, st.booleans(), st.sampled_from([0.0, 2.5, -0.0]),
                    st.booleans())
_breakdowns = st.tuples(
    st.lists(_unions, max_size=4),  # layers
    st.dictionaries(st.tuples(st.integers(0, 3), st.integers(0, 3)), _unions, max_size=3),
    st.booleans(),  # kernels
    st.integers(0, 3),  # delays
    st.booleans())  # stream work


def _union(state, shared: list):
    intervals, arrays, frozen_us, frozen = state
    starts, ends = [a for a, _ in intervals], [b for _, b in intervals]
    if not intervals and shared:  # the very same empty lists as another union's
        starts, ends = shared
    elif arrays:
        starts, ends = array("d", starts), array("d", ends)
    shared[:] = [starts, ends]
    return union_with(starts, ends, frozen_us, frozen)


def _made(shape, shared: list) -> IterationBreakdown:
    layers, threads, kernels, delays, stream_work = shape
    made = IterationBreakdown()
    made.layers = [_union(state, shared) for state in layers]
    made.cpu_ops = {thread: _union(state, shared) for thread, state in threads.items()}
    if kernels:
        made.kernels["gemm"] = [1, 2.5]
    made.delays = delays
    if stream_work:
        made.stream_work[(1, 7)] = (1.0, 2.0)
    return made


def _both(breakdowns: list) -> tuple:
    native = breakdown._breakdown_page(breakdowns)
    native_module, breakdown._native = breakdown._native, None  # the fallback's turn
    try:
        fallback = breakdown._breakdown_page(breakdowns)
    finally:
        breakdown._native = native_module
    return native, fallback


@needs_native
@settings(max_examples=150, deadline=None)
@given(st.lists(_breakdowns, min_size=1, max_size=12))
def test_a_page_of_breakdowns_is_packed_natively_as_in_python(shapes):
    shared: list = []
    native, fallback = _both([_made(shape, shared) for shape in shapes])
    assert repr(native) == repr(fallback)


@needs_native
def test_a_page_of_one_op_breakdowns_is_packed_as_flat_columns_alike():
    """A loop of one-op iterations: one thread each (its key the very same tuple), one
    interval, every dict slot empty: flat states, the dicts None, the zeros 1-tuples."""
    thread = (1, 1)
    page = [IterationBreakdown() for _ in range(5)]
    for k, made in enumerate(page):
        made.cpu_ops[thread] = union_with([k * 6.0], [k * 6.0 + 5], 0.0, False)
    native, fallback = _both(page)
    assert repr(native) == repr(fallback)
    columns, states = native
    assert columns[1] is None and columns[3] == (0.0,)
    assert states[:3] == ([1] * 5, [k * 6.0 for k in range(5)], [k * 6.0 + 5 for k in range(5)])


@needs_native
def test_a_page_the_native_packer_does_not_take_is_packed_by_the_python():
    """Layers held as a tuple (not the engine's own: a caller's): None from the C, and the
    page packed the general way all the same."""
    made = IterationBreakdown()
    made.layers = (IntervalUnion(),)
    assert breakdown._native.page48_breakdown_page(
        [made], IterationBreakdown.__slots__, IntervalUnion.__slots__, breakdown._LAYERS_AT,
        breakdown._THREADS_AT, breakdown._MOSTLY_EMPTY_SLOTS) is None
    native, fallback = _both([made])
    assert repr(native) == repr(fallback)
