"""``CodedList``: the per-iteration answers of the core's last pass, a byte each;
``CodedColumn``: a matcher's per-instance columns, growing."""
import sys

import pytest

from stream_split.core.coded import CodedColumn, CodedList


def test_a_coded_list_reads_like_the_list_of_its_items():
    kinds = CodedList(("iteration", "idle"), 5)
    kinds[3] = "idle"
    kinds[4] = "prefill"  # a value not named at first is added
    assert kinds == ["iteration", "iteration", "iteration", "idle", "prefill"]
    assert kinds[-2] == "idle" and kinds[1:4] == ["iteration", "iteration", "idle"]
    assert list(zip(kinds, range(2))) == [("iteration", 0), ("iteration", 1)]
    assert kinds != ["iteration"] * 5 and len(kinds) == 5


def test_a_million_items_take_about_a_megabyte_not_a_list_of_pointers():
    coded = CodedList(((None, None),), 1_000_000)
    held = sys.getsizeof(coded._codes)
    assert held < 1.1e6 < sys.getsizeof([None] * 1_000_000) / 7


def test_more_than_256_distinct_values_is_an_error():
    coded = CodedList(range(256), 2)
    with pytest.raises(ValueError, match="256"):
        coded[0] = "one more"


def test_a_coded_column_holds_what_a_list_would_and_widens_its_codes():
    column, plain = CodedColumn(), []
    for value in [0, 1, 1.0, True, 0.0, -0.0, (3, 4)] + list(range(2, 70_000)):
        column.append(value)
        plain.append(value)
    column.insert(1, 0.5)
    plain.insert(1, 0.5)
    column[-1] = (3, 4)
    plain[-1] = (3, 4)
    assert column.pop() == plain.pop() == (3, 4)
    got = list(column)
    assert got == plain and len(column) == len(plain) and column[5] == plain[5]
    assert [x.__class__ for x in got[:8]] == [x.__class__ for x in plain[:8]]
    assert str(got[6]) == "-0.0" and str(got[5]) == "0.0"  # zeros of either sign kept
    assert column._codes.itemsize == 4  # 70 k distinct values: past two bytes


def test_a_column_of_one_value_takes_a_byte_an_item():
    column = CodedColumn()
    for _ in range(100_000):
        column.append(0)
    assert column._codes.itemsize == 1 and len(column._values) == 1


def test_a_value_appended_many_times_at_once_reads_as_appended_one_by_one():
    once, many = CodedColumn(), CodedColumn()
    for value, count in [(0.5, 3), (0.5, 2), ("x", 1), (0.5, 0), (-0.0, 2)] + [
            (k, 1) for k in range(300)] + [(7, 4)]:
        for _ in range(count):
            once.append(value)
        many.append_many(value, count)
    assert list(many) == list(once) and len(many) == len(once)
    assert all(type(a) is type(b) for a, b in zip(many, once))
