"""stream_split.serialize: one event back to JSON bytes, content as it came in (big integers,
lone surrogates, non-ASCII text), the same bytes every time."""
import json

import orjson
import pytest

from stream_split.serialize import event_json, finite, spaced_json, walked_finite

EVENT = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10.5, "dur": 3, "pid": 1,
         "tid": "stream 7", "args": {"Input Dims": [[2, 3], [3, 4]], "correlation": 9}}


def test_an_ordinary_event_is_compact_json_in_its_key_order():
    assert event_json(EVENT) == orjson.dumps(EVENT)
    assert event_json(EVENT).startswith(b'{"ph":"X","cat":"cpu_op","name":"aten::mm"')
    assert b" " not in event_json({"a": [1, 2], "b": {"c": 1}})


def test_the_same_event_gives_the_same_bytes_every_time():
    twin = json.loads(json.dumps(EVENT))
    assert event_json(EVENT) == event_json(EVENT) == event_json(twin)


@pytest.mark.parametrize("event", [
    EVENT,
    {"name": "\u00e9t\u00e9 \u65e5\u672c \U0001f600", "ts": 1},
    {"ts": 2 ** 64 + 1, "id": -(2 ** 70)},
    {"name": "a\udc00 b\ud800", "args": {"k\udc01": "\udc02"}},
    {"name": "a\udc00", "big": 2 ** 80, "nested": [{"x": "\ud83d"}]},
    {"empty": {}, "list": [], "none": None, "flag": True, "float": 1e300},
])
def test_every_value_round_trips_through_the_standard_library(event):
    assert json.loads(event_json(event)) == event


def test_integers_beyond_64_bits_are_written_whole():
    assert event_json({"id": 2 ** 64 + 1}) == b'{"id":18446744073709551617}'
    assert event_json({"id": -(2 ** 63) - 1}) == b'{"id":-9223372036854775809}'


def test_a_lone_surrogate_goes_out_as_its_json_escape():
    out = event_json({"name": "a\udc00b", "k\ud800": 1})
    assert out == b'{"name":"a\\udc00b","k\\ud800":1}'
    out.decode("utf-8")  # valid UTF-8: no surrogate bytes written


def test_a_surrogate_pair_is_one_character_in_utf8_not_escapes():
    out = event_json({"name": "\U0001f600", "big": 2 ** 64})  # the slow path, too
    assert out == '{"name":"\U0001f600","big":18446744073709551616}'.encode()


def test_non_ascii_text_stays_utf8_on_the_slow_path():
    out = event_json({"name": "\u00e9\u65e5", "odd": "\udc00"})
    assert out == '{"name":"\u00e9\u65e5","odd":"\\udc00"}'.encode()


def test_spaced_json_spaces_like_kineto_s_header():
    assert spaced_json({"a": [1, 2], "b": {"c": "d"}}) == b'{"a": [1, 2], "b": {"c": "d"}}'


def test_spaced_json_keeps_content_as_it_came_in():
    value = {"device": "\u00e9\U0001f600", "odd": "\udc00", "big": 2 ** 70}
    out = spaced_json(value)
    assert out == '{"device": "\u00e9\U0001f600", "odd": "\\udc00", "big": 1180591620717411303424}'.encode()
    assert json.loads(out) == value


class _Opaque:
    """An object of the caller's that the encoder refuses (as the manifest's iterations)."""


def test_walked_finite_is_finite_without_the_encoder_s_check():
    opaque = _Opaque()
    inf, nan = float("inf"), float("nan")
    for value in ([0.5, 1, True, 2.0 ** 1023, 2.0 ** 1023], [1.0, inf, 2], (nan, 1.0), [-inf],
                  [10 ** 400, 1.0], [1.0, "a"], [], {"sims": [1.0] * 1000, "it": opaque},
                  {"levels": [{"similarity": [0.9, nan]}], "x": [1.0, [inf]]}):
        walked = walked_finite(value)
        assert json.dumps(walked, default=repr, allow_nan=False) == \
            json.dumps(finite(value), default=repr, allow_nan=False)
        if json.dumps(value, default=repr) == json.dumps(walked, default=repr):
            assert walked is value  # nothing to change: the very same, no copy
    assert walked_finite({"it": opaque, "s": [1.0, inf]}) == {"it": opaque, "s": [1.0, None]}
