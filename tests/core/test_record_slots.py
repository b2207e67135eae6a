"""Records made and paged in native code (``_native.slot_rows`` and ``with_slots``, where it is
built) are those of their Python fallbacks (``records._record_values``, ``_records_of`` and
``made_of``'s ``cls(*row)``): the same values, of the same types, in the same fields."""
import pytest
from hypothesis import given, settings, strategies as st

from stream_split.core import records
from stream_split.core.records import Boundary, IterationRecord, KIND_ITERATION, made_of

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
    assert (IterationRecord.pack_page is records._native_record_values) is native


@needs_native
@settings(max_examples=60, deadline=None)
@given(_rows)
def test_a_page_is_packed_and_unpacked_natively_as_in_python(rows):
    made = records._records_of(rows)
    unpacked = records._native_records_of(rows)
    assert _same(unpacked, made)
    assert records._native_record_values(made) == records._record_values(made) == rows
    values = records._native_record_values(unpacked)
    assert all(map(lambda a, b: all(map(lambda x, y: x is y, a, b)), values, rows))  # as kept


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
