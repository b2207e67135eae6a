"""The decoder's cheaper paths against the ones they replaced: the ASCII test of a buffer read by
numpy (``decode._ascii``) against ``bytes.isascii``, whose answer spares the UTF-8 check of each
stretch; and gzip inflated by ISA-L's bz2-like decompressor (``igzip_lib``) against the
zlib-like one it replaced (``isal_zlib.decompressobj``): the same bytes, pieces and errors;
and a run of Python frames read in bulk whatever the order of their keys (the struct's is
Kineto's, for speed)."""
import gzip
import json
import pickle
import random

import msgspec
import numpy as np
import pytest
from isal import isal_zlib

from stream_split.decode import (PLAIN_PIECE, Decompressor, TraceDecoder, _ascii,
                                 _frame_columns, _PlainFrame)
from stream_split.core.validate import SlimEvent
from stream_split.errors import TraceInputError
from stream_split.testing.builder import TraceBuilder, TraceOptions


@pytest.mark.parametrize("seed", range(5))
def test_ascii_of_a_slice_is_bytes_isascii(seed):
    rng = random.Random(seed)
    buf = bytes(rng.choice(b'{}[]", abc\n\x7f') for _ in range(3000))
    buf = bytearray(buf)
    for at in rng.sample(range(len(buf)), 4):  # a few bytes beyond ASCII, edges included
        buf[at] = rng.choice((0x80, 0xC3, 0xFF))
    buf = bytes(buf)
    for _ in range(300):
        start = rng.randrange(len(buf) + 1)
        end = rng.randrange(start, len(buf) + 1)
        assert _ascii(buf, start, end) == buf[start:end].isascii()
    assert _ascii(buf, 10, 10) and _ascii(b"", 0, 0)


def _trace(names: list) -> bytes:
    frames = [{"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1,
               "ts": float(k), "dur": 0.5} for k, name in enumerate(names)]
    ops = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 2, "ts": float(k),
            "dur": 0.25, "args": {"External id": k}} for k, name in enumerate(names)]
    return json.dumps({"traceEvents": frames + ops}, ensure_ascii=False, indent=1).encode()


def _slim(data: bytes) -> list:
    decoder = TraceDecoder()
    decoder.slim = True
    batch = decoder.receive_data(data)
    batch.extend(decoder.receive_data(b""))
    events = list(batch.events)
    for run in batch.frame_runs:
        events[run.i:run.j] = run.events()
    return events


@pytest.mark.parametrize("names", [["plain"] * 12, ["é€😀"] * 12, ["plain"] * 11 + ["é"]])
def test_slim_events_of_ascii_and_utf8_text_are_the_full_ones(names):
    data = _trace(names)
    full = TraceDecoder()
    batch = full.receive_data(data)
    batch.extend(full.receive_data(b""))
    slim = _slim(data)
    assert [e.get("name") for e in slim] == [e.get("name") for e in batch.events] == names * 2


def test_invalid_utf8_in_a_slim_batch_is_parsed_in_full():
    data = _trace(["plain"] * 12).replace(b'"plain"', b'"pl\xffin"', 1)
    events = _slim(data)
    assert events[0]["name"] == "pl\ufffdin" and len(events) == 24


def _old_inflate(data: bytes, chunk: int) -> list:
    """The pieces the replaced path made: ``isal_zlib.decompressobj`` asked for
    ``PLAIN_PIECE`` at most per call, its unconsumed tail given again (one member)."""
    dec, pieces = isal_zlib.decompressobj(wbits=31), []
    for at in range(0, len(data), chunk):
        part = data[at:at + chunk]
        while True:
            out = dec.decompress(part, PLAIN_PIECE)
            if out:
                pieces.append(out)
            part = dec.unconsumed_tail
            if dec.eof or not (part or len(out) == PLAIN_PIECE):
                break
    return pieces


def _new_inflate(data: bytes, chunk: int) -> tuple:
    decompressor = Decompressor()
    pieces = [p for at in range(0, len(data), chunk)
              for p in decompressor.pieces(data[at:at + chunk])]
    decompressor.finish()
    return pieces, decompressor


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 20])
def test_gzip_members_inflate_to_the_same_bytes_as_before(chunk):
    rng = random.Random(chunk)
    plain = [bytes(rng.choice(b"abc{}\n ") for _ in range(50_000)), b" " * (3 * PLAIN_PIECE),
             b"x"]
    members = [gzip.compress(p, mtime=0) for p in plain]
    if chunk == 1:  # byte by byte: one member is enough
        members, plain = members[:1], plain[:1]
    pieces, decompressor = _new_inflate(b"".join(members), chunk)
    assert b"".join(pieces) == b"".join(plain)
    assert max(map(len, pieces)) <= PLAIN_PIECE
    assert decompressor.members == len(members) and not decompressor.truncated
    assert b"".join(_old_inflate(members[0], chunk)) == plain[0]


def test_a_bomb_member_comes_out_in_pieces_of_plain_piece():
    member = gzip.compress(b" " * (5 * PLAIN_PIECE + 3), mtime=0)
    pieces, _ = _new_inflate(member, 1 << 20)
    assert [len(p) for p in pieces] == [len(p) for p in _old_inflate(member, 1 << 20)]


def test_a_truncated_member_is_truncated():
    member = gzip.compress(b"abc" * 10_000, mtime=0)
    pieces, decompressor = _new_inflate(member[:-5], 1000)
    assert decompressor.truncated and b"abc" * 1000 in b"".join(pieces)


@pytest.mark.parametrize("damage", ["garbage", "checksum", "lookback"])
def test_a_corrupt_member_says_what_the_old_path_said(damage):
    good = gzip.compress(b'{"traceEvents": []}' * 1000, mtime=0)
    data = {"garbage": b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage!garbage!",
            "checksum": good[:-8] + b"\0\0\0\0" + good[-4:],
            "lookback": good[:50] + b"\xff\xff\xff" + good[53:]}[damage]
    with pytest.raises(isal_zlib.error) as old:
        _old_inflate(data, 1 << 20)
    with pytest.raises(TraceInputError) as new:
        _new_inflate(data, 1 << 20)
    assert str(new.value) == f"corrupt gzip stream: {old.value}"


def _frame_run_of(names: list):
    """The one run of Python frames (read in bulk) that a slim decode of frames named
    ``names`` gives."""
    events = [{"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 2,
               "ts": 10.0 + k, "dur": 0.5, "args": {"Python id": k}}
              for k, name in enumerate(names)]
    text = b'{"traceEvents": [\n' + b",\n".join(
        b"  " + json.dumps(e).encode() for e in events) + b"\n]}"
    decoder = TraceDecoder()
    decoder.slim = True
    batch = decoder.receive_data(text)
    batch.extend(decoder.receive_data(b""))
    (run,) = batch.frame_runs
    assert run.starts is not None
    return run


@pytest.mark.parametrize("names", [["a.py(1): f"] * 12,
                                   ["a.py(1): f"] * 6 + ["diffusers/unet.py(3): g"] * 6,
                                   ["diffusers/unet.py(3): g"] + ["a.py(1): f"] * 11])
def test_a_pickled_frame_run_answers_as_the_run(names):
    """``split --workers`` pickles its frame runs (``FrameRun.__reduce__``: with their
    bytes, no frame made): read back, the run, its halves and its shifted copies answer
    ``names_begin_with`` and ``threads_and_names`` as the run does, and its events are the
    run's; its times are of numpy's own float64 type (which numpy's fast paths compare by
    identity: ``decode._own_dtype``), not the equal one a pickle makes."""
    import stream_split.decode as decode_module
    run = _frame_run_of(names)
    run.names_begin_with("diffusers/")
    sent = pickle.loads(pickle.dumps(run))
    assert run._frames is None or decode_module._native is None  # (none made to be sent)
    for prefix in ("diffusers/", "a.py"):  # asked before sending, and not
        assert sent.names_begin_with(prefix) == run.names_begin_with(prefix)
        for a, b in zip(run.cut(5), sent.cut(5)):
            assert b.names_begin_with(prefix) == a.names_begin_with(prefix)
            assert b.shifted(3).names_begin_with(prefix) == a.names_begin_with(prefix)
    assert sent.threads_and_names() == run.threads_and_names()
    assert sent.shifted(7).threads_and_names([1, 4]) == run.threads_and_names([1, 4])
    assert (sent.starts == run.starts).all() and (sent.ends == run.ends).all()
    assert sent.starts.dtype is sent.ends.dtype is np.dtype(np.float64)
    assert sent.events() == run.events()


@pytest.mark.parametrize("names", [["a.py(1): f"] * 12,
                                   ["a.py(1): f"] * 6 + ["diffusers/unet.py(3): g"] * 6,
                                   ["x.py(2): h"] * 11 + ["diffusers/unet.py(3): g"]])
def test_a_frame_run_read_in_place_tells_whether_a_name_is_diffusion_code(names):
    """A run the native reader read in place (``decode._frame_items``) answers the engine's
    question (``names_begin_with(DIFFUSION_CODE)``) without its bytes made an array; asked
    anything else, or for its events, it makes them then."""
    import stream_split.decode as decode_module
    run = _frame_run_of(names)
    in_place = decode_module._native is not None
    assert (run._text.__class__ is decode_module._RunText) == in_place
    assert run.names_begin_with("diffusers/") == any(n.startswith("diffusers/") for n in names)
    assert (run._text.__class__ is decode_module._RunText) == in_place  # not made
    for prefix in ("a.py", "x.py(2)", "b"):
        assert run.names_begin_with(prefix) == any(n.startswith(prefix) for n in names)
    assert [e["name"] for e in run.events()] == names
    assert run.threads_and_names()[1] == names


def test_a_plain_frame_is_read_in_the_order_kineto_writes_its_keys():
    """``decode._PlainFrame`` lists its fields in the order of a Kineto frame's keys (msgspec
    looks each key up first after the one before: a speed matter only): a run whose frames
    bring their keys in another order, or lack some, reads the same times and frames."""
    kineto = TraceBuilder(random.Random(0), TraceOptions())
    kineto.thread("main", main=True)
    with kineto.frame("a.py(1): f"):
        pass
    assert _PlainFrame.__struct_fields__ == tuple(kineto.recs[-1].ev)
    rng = random.Random(0)
    frames = [{"ph": "X", "cat": "python_function", "name": f"a.py({k}): f", "pid": 1,
               "tid": rng.choice([1, "t", 2.5, None]), "ts": 10.0 + k,
               "dur": rng.choice([0.5, None]), "args": {"Python id": k}} for k in range(12)]
    shuffled = [dict(rng.sample(list(frame.items()), len(frame))) for frame in frames]
    for run in (frames, shuffled):
        del run[3]["args"], run[4]["name"]
    in_order, any_order = (_frame_columns(json.dumps(run).encode()) for run in (frames, shuffled))
    assert (in_order[0] == any_order[0]).all() and (in_order[1] == any_order[1]).all()
    assert in_order[2] == any_order[2] and in_order[2][4].name is None


def test_a_slim_event_lists_its_fields_in_the_order_kineto_writes_an_ops_keys():
    """``validate.SlimEvent`` lists the fields it shares with a Kineto op, a runtime call and
    a kernel in the order of their keys (as ``_PlainFrame``: a speed matter only); a batch
    whose events bring their keys in another order decodes to the same structs."""
    kineto = TraceBuilder(random.Random(0), TraceOptions())
    kineto.thread("main", main=True)
    with kineto.op("aten::add"):
        kineto.launch("k")
    written = [rec.ev for rec in kineto.recs if rec.ev.get("cat") != "ac2g"]
    fields = SlimEvent.__struct_fields__
    assert {"cpu_op", "cuda_runtime"} <= {event["cat"] for event in written}
    for event in written:
        assert [key for key in fields if key in event] == [key for key in event if key in fields]
    rng = random.Random(1)
    shuffled = [dict(rng.sample(list(event.items()), len(event))) for event in written]
    decoder = msgspec.json.Decoder(list[SlimEvent])
    assert decoder.decode(json.dumps(written)) == decoder.decode(json.dumps(shuffled))


def _decoded_in_pieces(data: bytes, piece: int, straddle_min: int, monkeypatch) -> tuple:
    """Every event a slim decoder hands out (as dicts), their bytes and frame runs' places,
    given ``data`` ``piece`` bytes at a time, and the error it ends with (None: none)."""
    import stream_split.decode as decode_module
    monkeypatch.setattr(decode_module, "_STRADDLE_MIN", straddle_min)
    decoder = TraceDecoder()
    decoder.slim = True
    events, raws, runs, checked, error = [], [], [], [], None
    try:
        for at in [*range(0, len(data), piece), len(data)]:
            batch = decoder.receive_data(data[at:at + piece])
            while True:
                runs.extend((len(events) + r.i, len(events) + r.j) for r in batch.frame_runs)
                for k, event in enumerate(batch.events):
                    if event is None:
                        (run,) = [r for r in batch.frame_runs if r.i <= k < r.j]
                        event = run.events()[k - run.i]
                    events.append(event if event.__class__ is dict else
                                  {f: getattr(event, f) for f in event.__struct_fields__})
                raws.extend(batch.raws)
                checked.append(batch.checked)
                if not decoder.backlog:
                    break
                batch = decoder.receive_more()
    except TraceInputError as e:
        error = str(e)
    return events, raws, runs, checked, error


@pytest.mark.parametrize("damage", [None, b"x", b",,", b"{]"])
def test_an_event_across_two_large_pieces_is_read_apart_as_it_was_read_joined(damage,
                                                                               monkeypatch):
    """A large piece of plain bytes is not copied after the open event the piece before
    left (``TraceDecoder._straddled``): that event is read apart and handed out with the
    events after it, in the same batch; the events, their bytes, the runs of frames, and
    where broken bytes stop the decoder are the same as with the pieces joined."""
    rng = random.Random(1)
    events = []
    for k in range(3000):
        if rng.random() < 0.6:
            events.append({"ph": "X", "cat": "python_function", "name": f"a.py({k % 7}): f",
                           "pid": 1, "tid": 1, "ts": 10.0 + k, "dur": 0.5,
                           "args": {"Python id": k}})
        else:
            events.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{k % 5}", "pid": 1,
                           "tid": 1, "ts": 10.0 + k, "dur": 0.25,
                           "args": {"External id": k, "Input Dims": [[k, 2]]}})
    parts = [json.dumps(e).encode() for e in events]
    if damage is not None:  # before an event of the third large piece
        parts[2000] = damage + parts[2000]
    data = b'{"traceEvents": [\n' + b",\n".join(parts) + b'\n], "x": 1}'
    for piece in (65_536 + 17, 100_003):
        joined = _decoded_in_pieces(data, piece, 1 << 40, monkeypatch)
        apart = _decoded_in_pieces(data, piece, 1 << 10, monkeypatch)
        assert apart == joined
        assert (joined[4] is None) == (damage is None)
