"""stream_split.write.tag_lines: the ``tag`` stream's lines of decided (owner, event) pairs,
one line per event, joined a run of one owner at a time."""
import json

from hypothesis import given, settings, strategies as st

from stream_split.core.records import METADATA, OUTSIDE
from stream_split.write import _tag_head, event_json, tag_lines

EVENTS = st.one_of(
    st.integers(0, 10 ** 6).map(lambda ts: b'{"ph":"X","ts":%d}' % ts),
    st.integers(0, 10 ** 6).map(lambda ts: {"ph": "X", "ts": ts}),  # bytes that had to change
    st.sampled_from([b'{"ph":"X",\n"ts":1}', b'{"ph":"X",\r\n"ts":2}', b'{"ph":\r"i"}']),
)
PAIRS = st.lists(st.tuples(st.sampled_from([OUTSIDE, METADATA, 0, 1, 2, 41]), EVENTS),
                 max_size=40)


def one_line_each(pairs) -> bytes:
    """Each event's line on its own: its head, its bytes without line breaks, its end."""
    out = b""
    for owner, event in pairs:
        body = event if isinstance(event, bytes) else event_json(event)
        out += _tag_head(owner) + body.translate(None, b"\r\n") + b"}\n"
    return out


@settings(max_examples=300, deadline=None)
@given(PAIRS)
def test_runs_of_one_owner_give_each_events_own_line(pairs):
    assert tag_lines(pairs) == one_line_each(pairs)


def test_a_line_names_the_iteration_and_piece_and_holds_the_event():
    lines = tag_lines([(3, b'{"ph":"X","ts":5}'), (3, b'{"ph":"X","ts":6}'),
                       (OUTSIDE, b'{"ph":"i","ts":7}')]).splitlines()
    first, second, third = map(json.loads, lines)
    assert first == {"iteration": 3, "piece": "iteration_00003", "event": {"ph": "X", "ts": 5}}
    assert second["event"]["ts"] == 6 and second["iteration"] == 3
    assert third["iteration"] is None and third["event"]["ph"] == "i"
    assert tag_lines([]) == b""
