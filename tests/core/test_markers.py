"""The loop-marker test of op names (``search.marker_match``): what the pattern says, for every
name, though most names are told without its search."""
import re
import re._parser

from hypothesis import given, settings, strategies as st

from stream_split.core.detect.search import loop_marker, marker_match
from stream_split.trace_format import LOOP_MARKER_PATTERN, LOOP_MARKER_SHORTEST

_PATTERN = re.compile(LOOP_MARKER_PATTERN)

#: Pieces of the pattern's words (whole alternatives, their parts, what sits around them) and
#: letters that match others only case-insensitively (``ſ`` is an ``s``, ``K`` a ``k``).
_PIECES = ["enumerate(DataLoader)", "DataLoaderIter.__next__", "DataLoader", "Iter", "__next__",
           "get_next_batch", "next_batch", "fetch_batch", "load_batch", "get_batch", "batch",
           "get_request", "recv_new_requests", "poll_requests", "fetch_new_request",
           "get", "recv", "poll", "fetch", "_", "new_", "request", "requests", "reque", "t",
           "Optimizer.", "Optimizer", ".", "step#", "zero_grad#", "step", "#", "aten::", "op",
           "ſ", "K", "İ", "ı", "é", "3", " ", "\n"]
_CASES = [str, str.upper, str.lower, str.swapcase, str.title, str.capitalize]
_PIECE = st.builds(lambda piece, case: case(piece), st.sampled_from(_PIECES),
                   st.sampled_from(_CASES))
_NAMES = st.one_of(st.lists(_PIECE, max_size=6).map("".join), st.text(max_size=40),
                   st.text(alphabet="abcdefghijklmnopqrstuvwxyz_.#()0123456789", max_size=30))


@settings(max_examples=3000, deadline=None)
@given(_NAMES)
def test_a_name_is_a_marker_exactly_where_the_pattern_matches_it(name):
    assert marker_match(name) is (_PATTERN.search(name) is not None)
    assert loop_marker(name) is marker_match(name)


def test_markers_of_every_kind_are_found():
    for name in ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                 "Optimizer.step#AdamW.step", "Optimizer.zero_grad#SGD.zero_grad", "GET_BATCH",
                 "model.Fetch_Batch", "poll_new_requests", "get_requeſt", "get_batch"]:
        assert marker_match(name), name
    for name in ["aten::native_batch_norm", "op_abcde_N", "get_batc", "optimizer.step#",
                 "x Optimizer.step#", "dataloader", "ProfilerStep#3"]:
        assert not marker_match(name), name


def test_the_shortest_marker_is_as_long_as_the_pattern_says():
    assert LOOP_MARKER_SHORTEST == re._parser.parse(LOOP_MARKER_PATTERN).getwidth()[0]
