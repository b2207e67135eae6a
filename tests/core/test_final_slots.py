"""The records of a page made final in native code (``core.finish._set_final``:
``_native.set_slots``, where it is built) hold what its Python fallback sets: each field's
value of its column, the very object, and the other fields as they were."""
import pytest

from stream_split.core import finish
from stream_split.core.records import IterationRecord

needs_native = pytest.mark.skipif(finish._native is None,
                                  reason="stream_split._native is not built")


def _page(n: int) -> list:
    return [IterationRecord(index, start_ts=float(index), end_ts=index + 0.5, first_op="op",
                            events=index) for index in range(n)]


def _columns(n: int) -> tuple:
    return ([index + 0.75 for index in range(n)], ["iteration", "idle"] * (n // 2),
            [False] * n, [None, "decode"] * (n // 2), [None, "shapes"] * (n // 2),
            [{"span_us": float(index)} for index in range(n)])


@needs_native
@pytest.mark.parametrize("n", [0, 2, 64])
def test_a_page_is_made_final_natively_as_in_python(n):
    native, fallback, columns = _page(n), _page(n), _columns(n)
    finish._set_final(native, columns)
    finish._set_final_fallback(fallback, finish._FINAL_FIELDS, columns)
    assert native == fallback
    for record, *values in zip(native, *columns):
        assert [getattr(record, name) for name in finish._FINAL_FIELDS] == values
        assert record.breakdown is values[-1]


def test_records_of_another_class_are_set_by_the_fallback():
    class Other(IterationRecord):
        __slots__ = ()
    records = _page(1) + [Other(1)]
    finish._set_final(records, _columns(2))
    assert [record.kind for record in records] == ["iteration", "idle"]
    assert records[1].end_ts == 1.75
