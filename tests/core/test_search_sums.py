"""The unit search's hottest sums in native code (``_native.weighted_jaccard``,
``_native.instance_bag``, ``_native.likeness``, where it is built) against their Python
fallbacks (``search._similarity_summed``, ``search._bag_read``, ``search._likeness_summed``):
the same values, bit for bit (the same sums in the same order, so that no likeness near a
rule's threshold falls on the other side), the same bag in the same order, and None (the
caller's cue to sum in Python) where the values are of another type than the native code
reads."""
import struct

import pytest
from hypothesis import example, given, settings, strategies as st

from stream_split.core.detect import search, skeleton
from stream_split.core.detect.skeleton import PyNode

_native = skeleton._native
needs_native = pytest.mark.skipif(_native is None, reason="stream_split._native is not built")

# Weights whose sums depend on their order (tiny beside large), over symbols from a small
# range (sets of colliding keys) to a large one (sets resized as they fill).
_WEIGHTS = st.floats(min_value=0.0, max_value=1e6, allow_nan=False) | \
    st.sampled_from([1e-17, 0.1, 0.2, 0.3, 1 / 3, 1e16])
_COMPOSITIONS = st.integers(min_value=0, max_value=3).flatmap(
    lambda k: st.dictionaries(st.integers(min_value=-5, max_value=(10, 100, 10 ** 4, 10 ** 9)[k]),
                              _WEIGHTS, max_size=60))


def test_the_search_sums_in_native_code_where_it_is_built():
    assert search._native_similarity is (None if _native is None
                                         else _native.weighted_jaccard)
    assert search._native_likeness is (None if _native is None else _native.likeness)
    assert search._native_bag is (None if _native is None else _native.instance_bag)


@needs_native
@settings(max_examples=3000, deadline=None)
@given(_COMPOSITIONS, _COMPOSITIONS)
def test_similarity_is_the_same_native_or_not(a, b):
    native = _native.weighted_jaccard(a, b)
    assert native == search._similarity_summed(a, b) == search.similarity(a, b)
    assert native == _native.weighted_jaccard(dict(a), dict(b))  # (no dict changed)


@needs_native
@pytest.mark.parametrize("a, b", [({1: 1}, {1: 0.5}), ({1: 0.5}, {2: 2}), ([], {}),
                                  ({1: 0.5}, {1: True})])
def test_similarity_of_weights_not_floats_is_left_to_python(a, b):
    assert _native.weighted_jaccard(a, b) is None


def test_similarity_of_weights_not_floats_is_summed_in_python():
    assert search.similarity({1: 1, 2: 3}, {1: 2, 3: 1.0}) == 1 / 6
    assert search.similarity({}, {}) == 1.0


_OPS = st.lists(st.tuples(st.integers(min_value=0, max_value=12),
                          st.floats(min_value=0.0, max_value=1e9, allow_nan=False),
                          st.floats(min_value=0.0, max_value=1e4, allow_nan=False)
                          | st.sampled_from([0.1, 1e-9, 0.0]),
                          st.integers(min_value=0, max_value=2 ** 40)), max_size=80)


def _row(ops: list, make) -> list:
    row = []
    for sym, start, length, kernels in ops:
        node = make(sym, start, start + length, 0)
        node.gpu = kernels
        row.append(node)
    return row


@needs_native
@settings(max_examples=1500, deadline=None)
@given(_OPS, st.data())
def test_a_bag_is_the_same_native_or_not(ops, data):
    row = _row(ops, _native.Node)
    a = data.draw(st.integers(min_value=0, max_value=len(row)))
    b = data.draw(st.integers(min_value=a, max_value=len(row)))
    native, python = _native.instance_bag(row, a, b), search._bag_read(row, a, b)
    assert native == python == search._bag(row, a, b)
    assert list(native[0].items()) == list(python[0].items())  # first come, first
    assert [type(x) for x in native[1:]] == [type(x) for x in python[1:]] == [float, float, int]
    assert all([type(x) for x in cell] == [float, float, int] for cell in native[0].values())


@needs_native
@pytest.mark.parametrize("case", ["python node", "int start", "float kernels", "huge kernels",
                                  "past the end", "backwards", "a tuple"])
def test_a_bag_of_ops_the_native_code_does_not_read_is_left_to_python(case):
    row = _row([(1, 0.0, 1.0, 2), (2, 1.0, 2.0, 0), (1, 3.0, 0.5, 1)], _native.Node)
    a, b = 0, 3
    if case == "python node":
        row[1] = _row([(2, 1.0, 2.0, 0)], PyNode)[0]
    elif case == "int start":
        row[2].start = 3
    elif case == "float kernels":
        row[0].gpu = 2.0
    elif case == "huge kernels":
        row[0].gpu = 2 ** 70
    elif case == "past the end":
        b = 4
    elif case == "backwards":
        a, b = 2, 1
    else:
        row = tuple(row)
    assert _native.instance_bag(row, a, b) is None
    assert search._bag(row, a, b) == search._bag_read(row, a, b)


# An instance's totals and a reference's: times and kernels from none to huge (sizes far
# apart: the size factor's both sides, and 0), op counts as ints.
_TOTALS = st.tuples(st.floats(min_value=0.0, max_value=1e12, allow_nan=False)
                    | st.sampled_from([0.0, 1e-9, 0.1, 3.0]),
                    st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
                    | st.sampled_from([0.0, 1.0, 7.0]),
                    st.integers(min_value=0, max_value=10 ** 6))


def bits(value: float) -> bytes:
    return struct.pack("<d", value)


@needs_native
@settings(max_examples=3000, deadline=None)
@given(_COMPOSITIONS, _COMPOSITIONS, _TOTALS, _TOTALS, st.booleans(),
       st.sampled_from([1.3, 1.0, 2.0, 1e-3]))
@example({}, {}, (0.0, 0.0, 231049), (0.0, 0.0, 292527), False, 1e-3)  # pow(x, 2) != x * x
def test_likeness_is_the_same_native_or_not(w, ref_w, totals, ref_totals, weigh, slack):
    """``_native.likeness`` answers ``search._likeness_summed`` (the size ratio of the parts
    the reference has, the size factor, the lesser of it and the similarity) to the bit,
    whatever the sizes, for the rules that weigh work and those that count ops."""
    rules = search.Rules(weigh=weigh, length_slack=slack)
    reference = (ref_w, *ref_totals)
    parts = search._size_parts(reference, rules)
    native = _native.likeness(w, totals, reference, parts, slack)
    python = search._likeness_summed(w, totals, reference, rules, parts)
    assert native is not None and bits(native) == bits(python)
    assert bits(search._likeness_of(w, totals, reference, rules, parts)) == bits(python)


@needs_native
def test_likeness_squares_the_size_factor_as_python_does():
    """The size factor is squared as Python's ``** 2`` squares it (libm's ``pow``), which is
    not always ``x * x`` (a compiler makes ``pow(x, 2.0)`` that): over many sizes of an
    instance against its reference, with a slack that leaves the factor below 1, the native
    likeness is Python's to the bit, and some of them are cases where the two squares
    differ."""
    rules = search.Rules(weigh=False, length_slack=1e-3)
    reference = ({}, 0.0, 0.0, 292527)
    parts = search._size_parts(reference, rules)
    squares_differ = 0
    for count in range(200_000, 400_000, 97):
        totals = (0.0, 0.0, count)
        python = search._likeness_summed({}, totals, reference, rules, parts)
        assert bits(_native.likeness({}, totals, reference, parts, 1e-3)) == bits(python)
        ratio = count / 292527
        x = min(1.0, 1e-3 / max(ratio, 1 / ratio))
        squares_differ += x * x != x ** 2
    assert squares_differ  # (the cases the test is for are among them)


@needs_native
@pytest.mark.parametrize("case", ["int weight", "key not int", "huge count", "short totals",
                                  "parts a tuple", "int slack"])
def test_likeness_of_values_the_native_code_does_not_read_is_left_to_python(case):
    rules = search.Rules()
    w, totals, reference = {1: 0.5, 2: 0.5}, (2.0, 1.0, 3), ({1: 0.25, 2: 0.75}, 4.0, 2.0, 6)
    parts, slack = search._size_parts(reference, rules), rules.length_slack
    if case == "int weight":
        w = {1: 1, 2: 0.5}
    elif case == "key not int":
        w = {"a": 0.5}
    elif case == "huge count":
        totals = (2.0, 1.0, 2 ** 60)
    elif case == "short totals":
        totals = (2.0, 1.0)
    elif case == "parts a tuple":
        parts = tuple(parts)
    else:
        slack = 1
    assert _native.likeness(w, totals, reference, parts, slack) is None
    if case in ("int weight", "key not int", "huge count"):
        assert search._likeness_of(w, totals, reference, rules, list(parts)) == \
            search._likeness_summed(w, totals, reference, rules, list(parts))
