"""The read stage: shapes, compression, header keys, truncation, odd-but-legal content."""
import gzip
import io
import json

import pytest

from stream_split.read import TraceInputError, TraceReader

EVENTS = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2},
          {"ph": "i", "name": "b", "pid": "Spans", "tid": "", "ts": 7}]


def read_all(data: bytes):
    reader = TraceReader(io.BytesIO(data))
    return list(reader), reader


def test_object_form_keeps_header_keys_before_and_after_the_events():
    doc = b'{"schemaVersion": 1, "deviceProperties": [{"id": 0}], "traceEvents": ' + \
        json.dumps(EVENTS).encode() + b', "traceName": "t", "baseTimeNanoseconds": 17}'
    events, reader = read_all(doc)
    assert events == EVENTS
    assert reader.form == "object" and reader.complete
    assert reader.header_before == {"schemaVersion": 1, "deviceProperties": [{"id": 0}]}
    assert reader.header_after == {"traceName": "t", "baseTimeNanoseconds": 17}


def test_array_form_with_and_without_closing_bracket():
    events, reader = read_all(json.dumps(EVENTS).encode())
    assert events == EVENTS and reader.form == "array" and reader.complete
    events, reader = read_all(json.dumps(EVENTS).encode()[:-1] + b",\n")
    assert events == EVENTS and not reader.complete


def test_json_lines_one_event_per_line():
    data = b"".join(json.dumps(e).encode() + b"\n" for e in EVENTS)
    events, reader = read_all(data)
    assert events == EVENTS and reader.form == "jsonl" and reader.complete


def test_gzip_is_detected_from_the_bytes_not_the_name():
    events, reader = read_all(gzip.compress(json.dumps({"traceEvents": EVENTS}).encode()))
    assert events == EVENTS and reader.complete


def test_zstd_input():
    zstandard = pytest.importorskip("zstandard")
    data = zstandard.ZstdCompressor().compress(json.dumps({"traceEvents": EVENTS}).encode())
    events, reader = read_all(data)
    assert events == EVENTS


def test_truncated_object_yields_every_complete_event_and_says_incomplete():
    doc = json.dumps({"traceEvents": EVENTS * 3}).encode()
    cut = doc[: doc.rfind(b'"name"')]  # half an event at the end
    events, reader = read_all(cut)
    assert events == (EVENTS * 3)[:-1]
    assert not reader.complete and "ended before" in reader.stop_reason


def test_gzip_cut_mid_stream_is_truncation_not_corruption():
    body = json.dumps({"traceEvents": EVENTS * 2000}).encode()
    compressed = gzip.compress(body)
    events, reader = read_all(compressed[: len(compressed) // 2])
    assert 0 < len(events) < 4000 and not reader.complete


def test_integers_beyond_64_bits_and_control_characters_pass_through_unchanged():
    big = 2 ** 70 + 3
    doc = ('{"traceEvents": [{"ph": "X", "ts": 5, "name": "ctl\\u0001\\n\\t", "pid": "Spans",'
           f' "tid": "", "args": {{"x": {big}, "y": [-{big}, 1]}}}}], "z": {big}}}').encode()
    events, reader = read_all(doc)
    assert events[0]["args"] == {"x": big, "y": [-big, 1]}
    assert events[0]["name"] == "ctl\x01\n\t"
    assert reader.header_after == {"z": big}


def test_integer_ts_stays_an_integer():
    events, _ = read_all(b'[{"ph":"X","ts":12,"dur":3}]')
    assert type(events[0]["ts"]) is int


@pytest.mark.parametrize("data, message", [
    (b"", "empty input"),
    (b"   \n", "empty input"),
    (b"hello", "not JSON"),
    (b'{"a": 1}', "not a trace"),
    (b"[1, 2]", "not a trace"),
    (b'{"traceEvents": [{"ph": "X"}, }', "not valid JSON"),
    (b"\x1f\x8b\x08\x00garbage-garbage-garbage", "corrupt gzip"),
])
def test_bad_input_is_one_clear_error(data, message):
    with pytest.raises(TraceInputError) as info:
        read_all(data)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(TraceInputError, match="no such file"):
        TraceReader(str(tmp_path / "nope.json"))
