"""An op pushed in C (the native readers' ``ThreadStacks.push``: ``pushed`` and ``pops`` in
``_native.c``, which compare an open op's end with the new op's times as doubles where all
are floats, and call Python's comparisons otherwise) leaves its thread's stack as the Python
``ThreadStacks.push`` does: the same open ops after each op, for times at, just below and
just above an open op's end plus the tolerance, of ints, floats and both, and a tolerance of
either kind (the case where no float is made for the end plus the tolerance, and the cases
where Python's comparisons are called); and for threads whose keys are equal without being
the same object (``equal`` in C compares ints, floats and tuples of them itself, and asks
Python for the rest: a float equal to an int, a string, an int past a long long); and each
comparison the feed lane and the pushes make without a call (``_native.compared``) answers as
Python's operator does, for floats (NaN, infinities, -0.0), ints past a long long, bools,
strings, and tuples of them."""
import math
import operator

import pytest
from hypothesis import given, settings, strategies as st

from stream_split.core.detect.structure import StructureDetector, learning_op_read
from stream_split.core.stack import ThreadStacks
from stream_split.native import NATIVE

#: The readers compared with ``ThreadStacks.push``: the Python fallback, and the native one
#: where it is built.
_READERS = [learning_op_read] + ([NATIVE.learning_op_read] if NATIVE is not None else [])
_THREAD = (1, 1)
#: How an op's end lies from its parent's end, in tolerances (``stack_tolerance_us``): inside,
#: at the bound, just past it, past it; and the op's offset from the parent's start.
_OVERHANG = (-2, -1, 0, 0.5, 1, 1.25, 2)


def _open(stacks: ThreadStacks) -> tuple:
    """The open ops of the thread read last: (ends, names), or the first op as it is kept."""
    state = stacks._threads.get(_THREAD)
    return state if state is None or state.__class__ is tuple else (
        list(state.ends), list(state.names), state.last_start)


def _time(value: float, kind: str):
    """``value`` as ``kind`` makes it: an int where it is whole (``int``), a float, or either
    by its parity (``mixed``)."""
    if kind == "int" and value == int(value):
        return int(value)
    if kind == "mixed" and value == int(value) and int(value) % 2:
        return int(value)
    return float(value)


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(_OVERHANG),
                              st.integers(0, 2)), min_size=1, max_size=40),
       kind=st.sampled_from(["float", "int", "mixed"]), tolerance=st.sampled_from([1, 1.0, 0.5]))
def test_an_op_pushed_by_each_reader_leaves_the_stack_as_push_does(ops, kind, tolerance):
    """(Each op: how deep in the open ops it starts (0: after them all), its end against that
    op's end plus the tolerance, and its start's offset.)"""
    for reader in _READERS:
        detector = StructureDetector()
        mode_reader, state = detector.fast_read
        read, python = ThreadStacks(tolerance), ThreadStacks(tolerance)
        clock, ends = 0.0, []
        for depth, overhang, offset in ops:
            parent = ends[-1 - min(depth, len(ends) - 1)] if ends and depth else None
            start = clock + offset
            end = (parent + overhang * tolerance) if parent is not None else start + 10
            end = max(end, start)
            start, end = _time(start, kind), _time(end, kind)
            python.push(_THREAD, "op", start, end)
            reader(read, state, _THREAD, "op", start, end)
            assert _open(read) == _open(python), reader
            opened = _open(python)  # (a thread's first op is kept as (start, end, name))
            ends = opened[0] if isinstance(opened[0], list) else [opened[1]]
            clock = float(start)


@pytest.mark.skipif(NATIVE is None, reason="stream_split._native is not built")
def test_a_nan_end_pops_nothing_as_python_compares_it():
    """A NaN compares false both ways in C as in Python: the open op stays open."""
    for reader in (NATIVE.learning_op_read, learning_op_read):
        detector = StructureDetector()
        read, python = ThreadStacks(1.0), ThreadStacks(1.0)
        for start, end in ((0.0, float("nan")), (1.0, 2.0), (3.0, 4.0), (5.0, 1e9)):
            python.push(_THREAD, "op", start, end)
            reader(read, detector.fast_read[1], _THREAD, "op", start, end)
            assert repr(_open(read)) == repr(_open(python))


#: Thread keys, each made anew at each op (equal, never the same object): some equal to each
#: other ((1, 1) and (1.0, 1)), an int past a long long, a string, a tuple in a key.
_KEYS = ((1, 1), (1.0, 1), (1, 2), (2 ** 70, 5), (2 ** 70 + 1, 5), ("worker", 3), (7, (1, 2)))


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, len(_KEYS) - 1), st.integers(0, 3),
                              st.integers(1, 30)), min_size=1, max_size=60))
def test_threads_of_equal_keys_are_one_thread_to_each_reader(ops):
    """(Each op: its thread's key, its start's step and its duration.)"""
    for reader in _READERS:
        detector = StructureDetector()
        read, python = ThreadStacks(1.0), ThreadStacks(1.0)
        clock = 1000.0
        for pick, step, took in ops:
            clock += step
            key = tuple(list(_KEYS[pick]))  # (a new tuple of the same items)
            python.push(key, "op", clock, clock + took)
            answer = reader(read, detector.fast_read[1], tuple(list(key)), "op", clock,
                            clock + took)
            assert answer == ()
            assert {k: _state(v) for k, v in read._threads.items()} == \
                {k: _state(v) for k, v in python._threads.items()}, reader


def _state(kept) -> tuple:
    """A thread's stack as kept: its first op's tuple, or its open ops, start and section."""
    return kept if kept.__class__ is tuple else (kept.ends, kept.names, kept.last_start,
                                                 kept.section)


_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(),
                    st.integers(-2 ** 70, 2 ** 70), st.sampled_from([0.0, -0.0, 1, 1.0, True,
                                                                     math.nan, "a", None]))
_KEY_VALUES = st.one_of(_VALUES, st.tuples(_VALUES, _VALUES), st.tuples(_VALUES))
#: ``_native.compared``'s ops: the six comparisons, then a thread key's ``==`` and ``!=``.
_OPS = (operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge,
        operator.eq, operator.ne)


@pytest.mark.skipif(NATIVE is None, reason="stream_split._native is not built")
@settings(max_examples=400, deadline=None)
@given(a=_KEY_VALUES, b=_KEY_VALUES, op=st.integers(0, 7), same=st.booleans())
def test_a_comparison_without_a_call_answers_as_python(a, b, op, same):
    """(``same``: ``b`` is ``a``, the object itself: ``==`` of a NaN to itself is True.)"""
    b = a if same else b
    try:
        expected = bool(_OPS[op](a, b)) if not same or op not in (2, 3, 6, 7) else \
            op in (2, 6)
    except TypeError:  # (no order between them: the call raises it too)
        with pytest.raises(TypeError):
            NATIVE.compared(a, b, op)
        return
    assert NATIVE.compared(a, b, op) is expected
