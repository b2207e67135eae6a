"""Separators between events in slim batches: msgspec vouches for those inside a stretch it
decodes, the decoder checks those between stretches (``TraceDecoder._emit_slim``); a wrong
one is the same error, after the same events, as in a full decode."""
from __future__ import annotations

import json

import pytest

from stream_split.decode import MIN_FRAME_RUN, TraceDecoder
from stream_split.errors import TraceInputError


def _op(k: int) -> str:
    return json.dumps({"ph": "X", "cat": "cpu_op", "name": f"op{k}", "pid": 1, "tid": 1,
                       "ts": 10.0 * k, "dur": 1.0, "args": {"External id": k}})


def _frame(k: int) -> str:
    return json.dumps({"ph": "X", "cat": "python_function", "name": f"f{k}", "pid": 1,
                       "tid": 1, "ts": 10.0 * k + 1, "dur": 2.0,
                       "args": {"Python id": k}})


def _events() -> list:
    """Ops, a run of frames read in bulk, ops, a second run: stretches of both kinds."""
    events, k = [], 0
    for group, make in ((3, _op), (MIN_FRAME_RUN + 2, _frame), (4, _op),
                        (MIN_FRAME_RUN, _frame), (2, _op)):
        for _ in range(group):
            events.append(make(k))
            k += 1
    return events


def _document(separators: list) -> bytes:
    events = _events()
    body = "".join(event + sep for event, sep in zip(events, separators + [""]))
    return ('{"traceEvents": [\n  ' + body + '\n]}').encode()


def _outcome(data: bytes, slim: bool, cuts: tuple) -> tuple:
    """(events decoded before an error, the error's text or None)."""
    decoder = TraceDecoder()
    decoder.slim = slim
    count, pos, error = 0, 0, None
    try:
        for cut in [*cuts, len(data), None]:
            chunk = data[pos:cut] if cut is not None else b""
            count += len(decoder.receive_data(chunk))
            while decoder.backlog:
                count += len(decoder.receive_more())
            pos = cut if cut is not None else pos
    except TraceInputError as e:
        error = str(e)
    return count, error


@pytest.mark.parametrize("bad", ["\n  ", ",,\n  ", ", x ", ",\n  ]", " ,, "])
@pytest.mark.parametrize("where", [0, 2, 3, 6, 14, 15, 18, 25])
@pytest.mark.parametrize("cuts", [(), (40, 900), (1500,)])
def test_a_bad_separator_is_the_same_error_slim_or_not(bad, where, cuts):
    separators = [",\n  "] * (len(_events()) - 1)
    separators[where] = bad
    data = _document(separators)
    full = _outcome(data, slim=False, cuts=cuts)
    assert full[1] is not None
    assert _outcome(data, slim=True, cuts=cuts) == full


def test_good_separators_of_any_shape_decode_alike():
    n = len(_events()) - 1
    shapes = [",", ", ", " ,\t", "\n,\n", ",\r\n    "]
    data = _document([shapes[k % len(shapes)] for k in range(n)])
    assert _outcome(data, slim=True, cuts=(333,)) == _outcome(data, slim=False, cuts=(333,)) \
        == (n + 1, None)
    decoder = TraceDecoder()
    decoder.slim = True
    batch = decoder.receive_data(data)
    assert [run.starts is not None for run in batch.frame_runs] == [True, True]  # in bulk
