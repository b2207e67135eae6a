"""``CodedList``: the per-iteration answers of the core's last pass, a byte each."""
import sys

import pytest

from stream_split.core.coded import CodedList


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
