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


# ``json_lines``: ``_native.json_lines`` against the lines ``strict_event_json`` writes (its
# fallback), on every JSON value and the odd ones (numbers orjson writes with an exponent,
# not finite, beyond 64 bits; lone surrogates; controls; subclasses; tuples; deep nesting)

from hypothesis import given, settings, strategies as st  # noqa: E402

from stream_split.native import NATIVE  # noqa: E402
from stream_split.serialize import json_lines, strict_event_json  # noqa: E402

_native_only = pytest.mark.skipif(NATIVE is None, reason="the native part is not built")


def _fallback_lines(values: list) -> bytes:
    return b"".join(strict_event_json(value) + b"\n" for value in values)


_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-10 ** 15, 10 ** 15).map(lambda milli: milli / 1000),  # ``rounded_us``'s
    st.integers(-(2 ** 60), 2 ** 60).map(float),
    st.floats(min_value=1e-5, max_value=1e17).map(lambda x: round(x, 3)))
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2 ** 65), 2 ** 65), _FLOATS,
    st.text(), st.text(alphabet=st.characters(max_codepoint=0x9f)),
    st.sampled_from(["\ud800 lone", "a\\b\"c", "\x7f\u2028", "\U0001f600"]))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.tuples(inner, inner),
                            st.dictionaries(st.text(max_size=70), inner, max_size=6),
                            st.dictionaries(st.integers(0, 3), inner, min_size=1, max_size=2)),
    max_leaves=25)


@_native_only
@settings(max_examples=400, deadline=None)
@given(st.lists(_VALUES, max_size=6))
def test_native_json_lines_are_the_lines_of_strict_event_json(values):
    written = NATIVE.json_lines(values)
    if written is not None:
        assert written == _fallback_lines(values)
    assert json_lines(values) == _fallback_lines(values)


@_native_only
def test_native_json_lines_leave_to_orjson_what_it_may_write_otherwise():
    """None (the caller encodes them): an exponent, beyond 64 bits, a lone surrogate, a key
    not a str, a subclass, nesting beyond its depth; written: the rest of the same."""
    class Name(str):
        pass
    deep: list = []
    for _ in range(70):
        deep = [deep]
    for odd in (1e16, 1e-5, -2.5e-7, 2 ** 64, "\udc00", {1: 2}, Name("x"), deep):
        assert NATIVE.json_lines([{"a": 1}, odd]) is None
        assert json_lines([{"a": 1}, odd]) == _fallback_lines([{"a": 1}, odd])
    assert NATIVE.json_lines([float("nan"), -0.0, 0.001, -0.5, 1234.5, 9.007e15, (1, [])]) == \
        b"null\n-0.0\n0.001\n-0.5\n1234.5\n9007000000000000.0\n[1,[]]\n"


def test_the_records_sink_writes_each_record_as_its_strict_event_json_line():
    """``JsonlRecordSink.write_many``: the line ``strict_event_json`` writes of each
    record's ``to_dict(shared=True)`` (one-op iterations, GPU times rounded, a boundary)."""
    import io
    from stream_split.core.records import Boundary, IterationRecord
    from stream_split.write import JsonlRecordSink
    records = [Boundary(index=0, start_ts=0, pid=1, tid=1, first_op="step \u00e9"),
               IterationRecord(index=0, start_ts=0.5, end_ts=6.25, first_op="train_step",
                               gpu_busy_us=1.2345, gpu_active_us=3.0, gpu_start_ts=1.0,
                               gpu_end_ts=4.001, breakdown={"span_us": 2.5, "host": {}})]
    stream = io.BytesIO()
    JsonlRecordSink(stream).write_many(records)
    assert stream.getvalue() == _fallback_lines([r.to_dict(shared=True) for r in records])


# ``record_lines``: ``_native.record_lines`` (a record written from its slots, no dict made)
# against ``json_lines`` of each record's ``to_dict(shared=True)`` (its fallback)

from stream_split.core.records import (LINE_LAYOUTS, Boundary, IterationRecord,  # noqa: E402
                                       Revision, line_layout)
from stream_split.serialize import record_lines  # noqa: E402

_TIMES = st.one_of(st.integers(-(2 ** 40), 2 ** 40), _FLOATS)
_NUMBERS = st.one_of(st.integers(0, 10 ** 6), _FLOATS)
_TEXTS = st.one_of(st.text(max_size=12), st.sampled_from(["", "train_step", "a\\b\"c", "\x7f"]))
_RECORDS = st.builds(
    IterationRecord, index=st.integers(0, 10 ** 6), kind=_TEXTS, start_ts=_TIMES,
    end_ts=_TIMES, first_op=_TEXTS, events=st.integers(0, 99), gpu_busy_us=_NUMBERS,
    gpu_active_us=_NUMBERS, complete=st.booleans(), file=_TEXTS,
    outlier_reason=st.one_of(st.none(), _TEXTS), step=st.one_of(st.none(), st.integers()),
    phase=st.one_of(st.none(), _TEXTS),
    breakdown=st.one_of(st.none(), st.dictionaries(st.text(max_size=8), _VALUES, max_size=4)),
    extra=st.one_of(st.just({}), st.dictionaries(
        st.sampled_from(["rank", "index", "type", "wall_us", "x"]), _SCALARS, max_size=2)))


def _with_gpu_span(record: IterationRecord, span) -> IterationRecord:
    """``record`` with its GPU work's start and end ``span`` (None: none)."""
    record.gpu_start_ts, record.gpu_end_ts = span or (None, None)
    return record


_RECORDS = st.builds(_with_gpu_span, _RECORDS, st.one_of(st.none(), st.tuples(_TIMES, _TIMES)))
_BOUNDARIES = st.builds(Boundary, index=st.integers(0, 99), start_ts=_TIMES,
                        pid=st.one_of(st.integers(), _TEXTS), tid=st.integers(),
                        first_op=_TEXTS)


def _dict_lines(records: list) -> bytes:
    return _fallback_lines([record.to_dict(shared=True) for record in records])


@_native_only
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_RECORDS, _BOUNDARIES), max_size=6))
def test_native_record_lines_are_the_lines_of_the_records_dicts(records):
    """Byte for byte, where it writes them (a float orjson writes with an exponent, a lone
    surrogate: None, as ``json_lines``); ``record_lines`` always."""
    written = NATIVE.record_lines(records, LINE_LAYOUTS)
    if written is not None:
        assert written == _dict_lines(records)
    assert record_lines(records) == _dict_lines(records)
    assert record_lines(tuple(records)) == _dict_lines(records)


@_native_only
def test_native_record_lines_write_other_records_and_odd_slots_from_their_dicts():
    """A record of a class without a layout (a subclass), one with a slot not set, one whose
    ``extra`` is not empty (its keys spread, one of them over ``index``), a revision: each as
    its dict writes it; a layout that is not one: an error."""
    class Later(IterationRecord):
        __slots__ = ()
    unset = IterationRecord(3)
    del unset.kind
    records = [Later(1, gpu_start_ts=2.0, gpu_end_ts=9.5, end_ts=7.25),
               IterationRecord(2, extra={"index": "x", "rank": 3}),
               Revision(4, "move", 1.5, 1, 2, "op", "why"),
               IterationRecord(5, start_ts=0.1, end_ts=0.4, gpu_busy_us=1.00049)]
    assert NATIVE.record_lines(records, LINE_LAYOUTS) == _dict_lines(records)
    with pytest.raises(AttributeError):
        NATIVE.record_lines([unset], LINE_LAYOUTS)
    layout = line_layout(IterationRecord, "iteration")
    for bad in ((layout[0], b"w" * len(layout[0]), *layout[2:]), layout[:4], ("a",)):
        with pytest.raises((TypeError, ValueError)):
            NATIVE.record_lines([IterationRecord(0)], {IterationRecord: bad})
