"""The decoder's native passes (``stream_split._native``, issue 24) give what their fallbacks
give: the framing what ``decode.Framing``'s numpy passes give on any bytes, valid JSON or not,
from any state, cut anywhere; a run of Python frames read natively the times msgspec reads,
and only where msgspec accepts it; each event's bytes the slices Python makes. CI builds them
(``.ci/run`` sets ``STREAM_SPLIT_REQUIRE_NATIVE``)."""
import gzip
import json
import os
import pickle
import re
import struct

import numpy as np
import pytest
import msgspec
from hypothesis import HealthCheck, event, example, given, settings, strategies as st

import stream_split
import stream_split.decode as decode_module
from conftest import decoder_passes, run_cli
from stream_split.cli import sample_trace_path
from stream_split.decode import Framing

NATIVE_BUILT = decode_module._built_native is not None
needs_native = pytest.mark.skipif(not NATIVE_BUILT, reason="stream_split._native is not built "
                                  "here (no C compiler at install): numpy and msgspec are used")
#: For what the decoder does when its native passes are in use: not where they are not built,
#: nor where ``STREAM_SPLIT_NO_NATIVE`` turns them off (the functions themselves are tested
#: against their fallbacks wherever they are built: ``needs_native``).
decoder_is_native = pytest.mark.skipif(decode_module._native is None,
                                       reason="the decoder's native passes are not in use")


def test_ci_builds_the_native_passes():
    if not os.environ.get("STREAM_SPLIT_REQUIRE_NATIVE"):
        pytest.skip("only where the native framing is required (.ci/run)")
    assert NATIVE_BUILT and decode_module.DECODER_PASSES == "native"


def both(buf, start, state):
    """(native, numpy) framings of ``buf[start:]`` from ``state``."""
    native = Framing(buf, start, state)
    with decoder_passes("numpy"):
        numpy = Framing(buf, start, state)
    return native, numpy


def assert_same(native, numpy):
    assert native.brackets.dtype == numpy.brackets.dtype == np.int64
    assert native.depth.dtype == numpy.depth.dtype == np.int32
    assert native.brackets.tolist() == numpy.brackets.tolist()
    assert native.depth.tolist() == numpy.depth.tolist()
    assert native.end_state == numpy.end_state


# Bytes that matter to framing, and filler: runs of backslashes, quotes, brackets, pipes (which
# the numpy passes find with the brackets and drop), across the 64-byte blocks the native scan
# reads at once.
_BYTES = st.lists(st.sampled_from([b"{", b"}", b"[", b"]", b'"', b"\\", b"|", b"a", b" ", b",",
                                   b":", b"\xc3\xa9", b"a" * 70, b"\\" * 63, b'"' * 3]),
                  max_size=60).map(b"".join)


@needs_native
@settings(max_examples=int(os.environ.get("FRAMING_EXAMPLES", 2000)), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(buf=_BYTES, start=st.integers(0, 4000), in_string=st.booleans(),
       depth=st.integers(-5, 5), escaped=st.booleans())
def test_native_framing_equals_numpy_on_any_bytes_from_any_state(buf, start, in_string, depth,
                                                                  escaped):
    assert_same(*both(buf, min(start, len(buf)), (in_string, depth, escaped)))


@needs_native
@settings(max_examples=int(os.environ.get("FRAMING_EXAMPLES", 2000)), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(buf=_BYTES, start=st.integers(0, 4000), in_string=st.booleans(),
       depth=st.integers(-5, 5), escaped=st.booleans())
def test_native_framing_with_or_without_the_carryless_prefix_xor_alike(buf, start, in_string,
                                                                       depth, escaped):
    """``frame`` takes the scan whose prefix XOR is one carry-less multiplication where the
    CPU has it (PCLMULQDQ), else the shifts: ``carryless=False`` asks for the shifts; both
    give the same brackets, depths and end state (where the CPU lacks it, both are the
    shifts)."""
    args = (buf, min(start, len(buf)), in_string, depth, escaped)
    frame = decode_module._built_native.frame
    assert frame(*args, False) == frame(*args) == frame(*args, True)


@needs_native
@pytest.mark.parametrize("piece", [1, 63, 64, 65, 4096, 1 << 20])
def test_native_framing_equals_numpy_across_the_pieces_of_a_real_trace(piece):
    with open(sample_trace_path(), "rb") as f:
        text = gzip.decompress(f.read())
    text = text.replace(b'"name": "', b'"name": "\\"{[\\\\', 200)  # escapes, as some traces have
    native_state = numpy_state = (False, 0, False)
    stop = len(text) if piece >= 64 else 300_000  # (a byte at a time: the first 300 kB)
    for at in range(0, min(stop, len(text)), piece):
        chunk = text[at:at + piece]
        native = Framing(chunk, 0, native_state)
        with decoder_passes("numpy"):
            numpy = Framing(chunk, 0, numpy_state)
        assert_same(native, numpy)
        native_state, numpy_state = native.end_state, numpy.end_state
    if stop >= len(text):
        assert native_state[:2] == (False, 0)  # the document framed to its end


def test_version_names_the_framing_in_use():
    assert run_cli("--version").stdout.decode().strip() == \
        f"stream-split {stream_split.__version__} (decoder: {decode_module.DECODER_PASSES})"
    no_native = run_cli("--version", env_update={decode_module.NO_NATIVE_ENV: "1"})
    assert no_native.stdout.decode().strip().endswith("(decoder: numpy)")


# -- a run of Python frames -------------------------------------------------------------------

def msgspec_times(text: bytes):
    """(ts, dur) of each frame as ``decode._PLAIN_FRAMES`` reads them (a null dur as 0.0), or
    None where msgspec refuses the run."""
    try:
        frames = decode_module._PLAIN_FRAMES.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return [f.ts for f in frames], [0.0 if f.dur is None else f.dur for f in frames]


def bits(values) -> list:
    """Each float's 64 bits (so that -0.0 and 0.0 differ)."""
    return [struct.pack("<d", v) for v in values]


_TEXT = st.text(alphabet=st.sampled_from(list('ab "\\/{}[],:é€😀\x00\x1f\x7f')), max_size=12)
# A number as text (many digits, a sign, an exponent), written into the JSON as it is.
_NUMBER_TEXT = st.from_regex(r"-?(0|[1-9][0-9]{0,21})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,3})?",
                             fullmatch=True).map(lambda text: "@@" + text + "@@")
_NUMBER = st.one_of(st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=False, allow_infinity=False),
                    _NUMBER_TEXT)
_SCALAR = st.one_of(st.none(), st.booleans(), _NUMBER, _TEXT)
_ARGS_VALUE = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(_TEXT, inner, max_size=3), max_leaves=8)


_PLAIN_TEXT = st.text(alphabet=st.sampled_from(list("ab ()/:._#0é")), max_size=12)
_PLAIN_NUMBER = st.one_of(
    st.from_regex(r"-?(0|[1-9][0-9]{0,18})(\.[0-9]{1,24})?", fullmatch=True)
    .map(lambda text: "@@" + text + "@@"), st.integers(0, 10 ** 20), st.floats(0, 1e13))
# A frame as Kineto writes it (its numbers of any length), which the native reader reads
# unless a number is beyond what it reads exactly ...
_PLAIN_FRAME = st.fixed_dictionaries(
    {"ph": st.just("X"), "cat": st.just("python_function"), "name": st.none() | _PLAIN_TEXT,
     "pid": st.integers(0, 999) | _PLAIN_TEXT, "tid": st.integers(0, 999), "ts": _PLAIN_NUMBER},
    optional={"dur": st.none() | _PLAIN_NUMBER,
              "args": st.none() | st.fixed_dictionaries(
                  {"Python parent id": st.none() | st.integers(0, 99),
                   "Python id": st.integers(0, 99)}, optional={"Ev Idx": _ARGS_VALUE})})
# ... and one that is not (a field of another value or type, another key, a nasty string).
_ODD_FRAME = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "B"]), "cat": st.sampled_from(["python_function", "cpu_op"]),
     "name": st.none() | _TEXT, "pid": _SCALAR, "tid": _SCALAR, "ts": _NUMBER | _SCALAR},
    optional={"dur": st.none() | _SCALAR, "extra": _SCALAR,
              "args": st.none() | st.dictionaries(st.sampled_from(["correlation", "External id",
                                                                   "x"]) | _TEXT,
                                                  _ARGS_VALUE, max_size=4)})
_FRAMES = st.tuples(st.lists(_PLAIN_FRAME, min_size=1, max_size=4), st.none() | _ODD_FRAME,
                    st.integers(0, 4)).map(
    lambda t: t[0] if t[1] is None else t[0][:t[2]] + [t[1]] + t[0][t[2]:])


def _kineto_frame(i: int) -> dict:
    return {"ph": "X", "cat": "python_function", "name": f"train.py({i}): step", "pid": 542,
            "tid": 542, "ts": 3743411222578.748 + i, "dur": 86900.793,
            "args": {"Python parent id": None if i == 0 else i, "Python id": i + 1,
                     "Ev Idx": 8028 + i}}


@needs_native
@settings(max_examples=int(os.environ.get("FRAMING_EXAMPLES", 2000)), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(frames=_FRAMES, indent=st.sampled_from([None, 1]),
       ascii_only=st.booleans(), cut=st.integers(0, 400),
       drop=st.sampled_from([0] * 6 + [1, 2, 3]))
@example(frames=[_kineto_frame(0), _kineto_frame(1)], indent=None, ascii_only=True, cut=0,
         drop=0)
def test_native_frame_times_read_what_msgspec_reads_and_nothing_it_refuses(frames, indent,
                                                                           ascii_only, cut,
                                                                           drop):
    text = re.sub(r'"@@([^@]*)@@"', r"\1", json.dumps(frames, indent=indent,
                                                     ensure_ascii=ascii_only))
    text = text.encode("utf-8", "surrogatepass")
    if drop and cut < len(text):  # a byte or a few gone: mostly not JSON any more
        text = text[:cut] + text[cut + drop:]
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return  # (the caller reads only UTF-8 here: ``_ascii`` or ``_utf8`` first)
    native = decode_module._built_native.frame_times(text)
    expected = msgspec_times(text)
    event(f"native {'read' if native is not None else 'refused'}, msgspec "
          f"{'read' if expected is not None else 'refused'}")
    if native is not None:
        assert expected is not None, text
        ts, dur = np.frombuffer(native[0]).tolist(), np.frombuffer(native[1]).tolist()
        assert bits(ts) == bits(expected[0]) and bits(dur) == bits(expected[1])


def run_text(frames: list, indent, ascii_only: bool) -> bytes | None:
    """The frames as a run's bytes (``json.dumps``' array without its brackets, the numbers
    given as text written as they are), or None where they are not UTF-8 (a lone surrogate:
    the caller reads only UTF-8 here, ``_ascii`` or ``_utf8`` first)."""
    text = re.sub(r'"@@([^@]*)@@"', r"\1", json.dumps(frames, indent=indent,
                                                     ensure_ascii=ascii_only))
    inner = text.encode("utf-8", "surrogatepass").strip()[1:-1]
    try:
        inner.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return inner


@needs_native
@settings(max_examples=int(os.environ.get("FRAMING_EXAMPLES", 2000)) // 4, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(frames=_FRAMES, indent=st.sampled_from([None, 1]), ascii_only=st.booleans(),
       prefix=st.sampled_from([b"diffusers/", b"a.", b"b.", b"(", b"\xc3", b"a.py(1"]))
@example(frames=[_kineto_frame(0), _kineto_frame(1)], indent=None, ascii_only=True,
         prefix=b"train")
def test_native_frame_items_read_a_run_in_place_as_frame_times_reads_it(frames, indent,
                                                                       ascii_only, prefix):
    """``frame_items`` reads the frames of ``buf[start:end]`` (no brackets, bytes around
    them) as ``frame_times`` reads them made an array, and says whether the array's text
    holds ``'"' + prefix`` (what ``FrameRun._holds`` would look for)."""
    inner = run_text(frames, indent, ascii_only)
    if inner is None:
        return
    array = b"[" + inner + b"]"
    native = decode_module._built_native
    got = native.frame_items(b"{}, " + inner + b" ]", 4, 4 + len(inner), prefix)
    whole = native.frame_times(array)
    assert (got is None) == (whole is None)
    if got is not None:
        assert got[:2] == whole and got[2] == (b'"' + prefix in array)


@needs_native
def test_native_frame_items_refuse_a_prefix_it_cannot_answer_for():
    native = decode_module._built_native
    text = json.dumps(_kineto_frame(0)).encode()
    for prefix in (b"", b",", b" x", b"python", b"ts"):
        with pytest.raises(ValueError):
            native.frame_items(text, 0, len(text), prefix)
    with pytest.raises(ValueError):
        native.frame_items(text, 0, len(text) + 1, b"a")


# A frame's pid or tid: an int, a number with a fraction (its text), a string, null, and
# rarely a negative zero (which msgspec makes otherwise than ``frame_fields`` would).
_THREAD_VALUE = st.one_of(
    st.integers(-5, 5), st.integers(-10 ** 18, 10 ** 18), _PLAIN_TEXT, st.none(),
    st.from_regex(r"-?(0|[1-9][0-9]{0,8})\.[0-9]{1,20}", fullmatch=True).map(
        lambda text: "@@" + text + "@@"),
    st.sampled_from(["@@-0@@", "@@-0.0@@", "-0"]))


def msgspec_fields(text: bytes):
    """Each frame's (pid, tid) and name ("" for null) as ``decode._PLAIN_FRAMES`` makes them,
    each value with its type (a float by its bits), or None where msgspec refuses the run."""
    try:
        frames = decode_module._PLAIN_FRAMES.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return [(_typed(f.pid), _typed(f.tid)) for f in frames], [f.name or "" for f in frames]


def _typed(value):
    return (type(value).__name__, struct.pack("<d", value) if isinstance(value, float) else value)


@needs_native
@settings(max_examples=int(os.environ.get("FRAMING_EXAMPLES", 2000)) // 2, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(frames=st.lists(st.integers(0, 9).map(_kineto_frame), min_size=1, max_size=5)
       | st.lists(_PLAIN_FRAME, min_size=1, max_size=4) | _FRAMES,
       indent=st.sampled_from([None, 1]), ascii_only=st.booleans(),
       threads=st.lists(st.tuples(_THREAD_VALUE, _THREAD_VALUE), max_size=5),
       names=st.lists(st.none() | _PLAIN_TEXT | st.sampled_from(["é€😀", "a" * 40, ""]),
                      max_size=5))
@example(frames=[_kineto_frame(0), _kineto_frame(1)], indent=None, ascii_only=True, threads=[],
         names=[])
def test_native_frame_fields_make_the_threads_and_names_msgspec_makes(frames, indent,
                                                                    ascii_only, threads, names):
    """``frame_fields`` reads the frames that ``frame_items`` reads, and makes each one's
    (pid, tid) and name as msgspec does: the same values of the same types (an int, a float
    to the bit, a str, None; a null name as ""). It may refuse a run ``frame_items`` reads
    only where a value is one it does not make (a negative zero), never one msgspec refuses.
    Threads drawn of every kind (one frame's like the one before's, or not) and names that
    repeat exercise its reuse of the thread before and of names made lately."""
    frames = [dict(frame) for frame in frames]
    for frame, (pid, tid) in zip(frames, threads):
        frame["pid"], frame["tid"] = pid, tid
    for frame, name in zip(frames, names):
        frame["name"] = name
    inner = run_text(frames + frames[::-1], indent, ascii_only)
    if inner is None:
        return
    native = decode_module._built_native
    got = native.frame_fields(b"{}, " + inner + b" ]", 4, 4 + len(inner))
    expected = msgspec_fields(b"[" + inner + b"]")
    read = native.frame_items(inner, 0, len(inner), b"diffusers/") is not None
    event(f"frame_fields {'read' if got is not None else 'refused'}, frame_items "
          f"{'read' if read else 'refused'}")
    if got is None:
        assert not read or b"-0" in inner
        return
    assert read and expected is not None
    assert ([(_typed(p), _typed(t)) for p, t in got[0]], got[1]) == expected


@needs_native
def test_native_frame_fields_refuse_what_they_cannot_make_as_msgspec_does():
    """A negative zero pid (msgspec makes the int 0 of ``-0``, and ``-0.0``), a name that is
    not UTF-8 (the caller checks it first) and bytes beyond the frames are refused, and bounds
    outside the buffer are an error."""
    native = decode_module._built_native
    for frame in (dict(_kineto_frame(0), pid="@@-0@@"), dict(_kineto_frame(0), tid="@@-0.0@@")):
        text = re.sub(r'"@@([^@]*)@@"', r"\1", json.dumps(frame)).encode()
        assert native.frame_items(text, 0, len(text), b"diffusers/") is not None
        assert native.frame_fields(text, 0, len(text)) is None
    text = json.dumps(_kineto_frame(0)).encode().replace(b"train", b"tr\xe9in")
    assert native.frame_fields(text, 0, len(text)) is None
    text = json.dumps(_kineto_frame(0)).encode()
    assert native.frame_fields(text + b" x", 0, len(text) + 2) is None
    assert native.frame_fields(text, 0, len(text)) == ([(542, 542)], ["train.py(0): step"])
    with pytest.raises(ValueError):
        native.frame_fields(text, 0, len(text) + 1)


@needs_native
def test_native_frame_times_read_kineto_frames():
    frames = [_kineto_frame(i) for i in range(20)]
    for indent in (None, 2):
        text = json.dumps(frames, indent=indent).encode()
        native = decode_module._built_native.frame_times(text)
        assert native is not None
        assert bits(np.frombuffer(native[0]).tolist()) == bits(msgspec_times(text)[0])


@needs_native
def test_native_numbers_of_every_length_read_as_msgspec_reads_them():
    """Digits are read eight at a time and the run's end in one step (``digits_from``,
    ``digit_run_end``) where eight bytes are left, else a byte at a time: every length of an
    integer part and a fraction, each way, gives msgspec's number (an int kept exact, a float
    correctly rounded, a skipped id checked alike)."""
    native = decode_module._built_native
    texts = [whole + fraction for n in range(1, 20) for k in (0, 1, 3, 7, 8, 9, 16, 17, 24)
             for whole in ("7" * n, "1" + "0" * (n - 1), "9" * n)
             for fraction in ([""] if k == 0 else ["." + "5" * k, "." + "0" * (k - 1) + "3"])]
    for text in texts:
        for tail in ("}", "}" + " " * 9):  # the number's end within eight bytes of the end, or not
            frame = ('[{"ph": "X", "cat": "python_function", "name": "f", "pid": %s, "tid": 1, '
                     '"ts": %s, "dur": %s, "args": {"Ev Idx": %s}%s]' % (
                         text.split(".")[0], text, text, text, tail[1:])).encode()
            got = native.frame_times(frame)
            want = msgspec_times(frame)
            assert (got is None) == (want is None), text
            if got is not None:
                assert bits(np.frombuffer(got[0]).tolist() + np.frombuffer(got[1]).tolist()) \
                    == bits(want[0] + want[1]), text
            event_text = ('{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, '
                          '"ts": %s, "args": {"External id": %s, "Ev Idx": %s%s' % (
                              text, text.split(".")[0], text, tail)).encode()
            inner = event_text + b"}"
            events = native.kineto_events(inner, 0, len(inner), decode_module.SlimEvent,
                                          msgspec.Raw)
            expected = msgspec_slim(b"[" + inner + b"]")
            if events is not None:
                assert expected is not None, text
                assert [[_shape(getattr(e, f)) for f in e.__struct_fields__]
                        for e in events] == expected, text
            elif len(text.split(".")[0]) <= 18 and len(text) <= 40:
                raise AssertionError(f"not read natively: {text}")


@needs_native
def test_native_frames_spelled_otherwise_than_kineto_read_alike():
    """A frame spelled as Kineto writes it is read at once (``kineto_frame``), one spelled
    otherwise a token at a time: the same numbers, and what the one refuses the other does."""
    read = decode_module._built_native.frame_times
    frames = [_kineto_frame(i) for i in range(3)]
    frames[1]["dur"], frames[2]["args"] = None, None
    kineto = json.dumps(frames).encode()
    assert read(kineto) is not None
    for other in (kineto.replace(b'": ', b'":  '), kineto.replace(b", ", b",\n"),
                  json.dumps(frames, separators=(",", ":")).encode()):
        assert read(other) == read(kineto)
    linked = [dict(frames[0], args={"Python id": 1, "correlation": 7})]
    assert read(json.dumps(linked).encode()) is None
    assert msgspec_times(json.dumps(linked).encode()) is None


@decoder_is_native
def test_a_run_read_natively_makes_its_frames_when_asked(tmp_path):
    """The engine asks a run read in bulk for each frame's thread and name (``FrameRun``):
    made from the run's bytes, as msgspec would have made them at once."""
    frames = [_kineto_frame(i) for i in range(12)]
    data = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1,
                                        "tid": 1, "ts": 1, "dur": 1}] + frames}).encode()
    decoder = decode_module.TraceDecoder()
    decoder.slim = True
    batch = decoder.receive_data(data)
    batch.extend(decoder.receive_data(b""))
    (run,) = batch.frame_runs
    assert run.starts is not None and run._frames is None  # read natively: no struct yet
    threads, names = run.threads_and_names()
    assert threads == [(542, 542)] * 12 and names == [f["name"] for f in frames]
    sent = pickle.loads(pickle.dumps(run))  # to another process: its bytes go along
    assert sent.threads_and_names() == (threads, names)


@decoder_is_native
def test_a_run_read_natively_decodes_only_the_frames_asked_for():
    """A few frames of a run read in bulk, or those of a part of it (``FrameRun.cut``), are
    decoded apart from the others (``FrameRun._apart``): their threads and names are those
    of the run decoded whole, read in place or made an array, and the run keeps no frame of
    its own (asked for all, or for more than ``_PICKED_SHARE``, it reads every frame's thread
    and name natively, ``_native.frame_fields``, and keeps them for its parts)."""
    frames = [_kineto_frame(i) for i in range(12)]
    frames[3]["args"]["Ev Idx"] = {"nested": [1, {"deep": "{[}]"}]}  # brackets in strings
    frames[5]["pid"], frames[6]["name"] = "host", None
    data = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1,
                                        "tid": 1, "ts": 1, "dur": 1}] + frames}).encode()

    def run_read(made: bool):
        decoder = decode_module.TraceDecoder()
        decoder.slim = True
        batch = decoder.receive_data(data)
        batch.extend(decoder.receive_data(b""))
        (run,) = batch.frame_runs
        if made:
            run._bytes()  # (the array made: as asked for before)
        return run

    threads, names = run_read(False).threads_and_names()
    for made in (False, True):
        for picked in ([], [3], [0, 5, 6, 11], list(range(6)), list(range(7)), list(range(12))):
            run = run_read(made)
            assert run.threads_and_names(picked) == ([threads[k] for k in picked],
                                                     [names[k] for k in picked])
            # (beyond that share, each frame's thread and name are read natively, all of
            # the run's at once, and kept: still no struct)
            assert run._frames is None
            assert (run._fields is None) == (len(picked) <= 12 * decode_module._PICKED_SHARE)
        run = run_read(made)
        first, rest = run.cut(5)
        middle, last = rest.cut(4)
        assert middle.shifted(3).threads_and_names([0, 2]) == ([threads[5], threads[7]],
                                                                [names[5], names[7]])
        assert middle.threads_and_names() == (threads[5:9], names[5:9])
        assert run._frames is None and rest._frames is None
        assert last.threads_and_names() == (threads[9:], names[9:])
        assert first.threads_and_names() == (threads[:5], names[:5])
        assert run._frames is None


# -- the other events of a trace (ops, runtime calls, kernels, flows) --------------------------

_SLIM_EVENTS = decode_module._SLIM_DECODERS[True][0]  # the checked decoder, ``Input Dims`` raw


def _shape(value):
    """A field's value with its type (a float by its bits; ``Input Dims`` by its text)."""
    if isinstance(value, msgspec.Raw):
        return "raw", bytes(value)
    if isinstance(value, dict):
        return "dict", [(key, _shape(item)) for key, item in value.items()]
    if isinstance(value, float):
        return "float", struct.pack("<d", value)
    return type(value).__name__, value


def msgspec_slim(text: bytes):
    """Each event's fields as the checked slim decoder makes them, or None where it refuses."""
    try:
        events = _SLIM_EVENTS.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return [[_shape(getattr(e, f)) for f in e.__struct_fields__] for e in events]


_ID = st.integers(-10 ** 18 + 1, 10 ** 18 - 1)
_KINETO_ARGS = st.fixed_dictionaries({}, optional={
    "External id": st.none() | _ID, "Record function id": _ARGS_VALUE,
    "Concrete Inputs": _ARGS_VALUE, "Input type": st.lists(_PLAIN_TEXT, max_size=3),
    "Input Dims": _ARGS_VALUE, "correlation": st.none() | _ID, "kind": _PLAIN_TEXT})
# An op, a runtime call or a kernel, and a flow, as Kineto writes them (their keys in any
# order), which the native reader reads unless a number is beyond what it reads exactly ...
_KINETO_EVENT = st.one_of(
    st.fixed_dictionaries(
        {"ph": st.sampled_from(["X", "i"]), "cat": st.sampled_from(["cpu_op", "kernel"]),
         "name": st.none() | _PLAIN_TEXT, "pid": st.integers(0, 999) | _PLAIN_TEXT,
         "tid": st.integers(0, 999) | _PLAIN_NUMBER, "ts": _PLAIN_NUMBER},
        optional={"dur": st.none() | _PLAIN_NUMBER, "args": st.none() | _KINETO_ARGS}),
    st.fixed_dictionaries(
        {"ph": st.sampled_from(["s", "f"]), "id": _ID | _PLAIN_TEXT, "pid": st.integers(0, 999),
         "tid": st.integers(0, 999), "ts": _PLAIN_NUMBER, "cat": st.just("ac2g"),
         "name": st.just("ac2g")}, optional={"bp": st.just("e")}))
# ... and one that is not (a field of another type, another key, a nasty string).
_ODD_EVENT = st.fixed_dictionaries(
    {"ph": _SCALAR, "cat": st.sampled_from(["cpu_op", "ac2g"]) | _SCALAR,
     "name": st.none() | _TEXT, "pid": _SCALAR, "tid": _SCALAR, "ts": _NUMBER | _SCALAR},
    optional={"dur": st.none() | _SCALAR, "id": _ARGS_VALUE, "extra": _ARGS_VALUE,
              "args": _SCALAR | st.dictionaries(st.sampled_from(["correlation", "External id",
                                                                "Input Dims"]) | _TEXT,
                                                _ARGS_VALUE, max_size=4)})
_EVENTS = st.tuples(
    st.lists(st.one_of(_KINETO_EVENT, _ODD_EVENT).flatmap(
        lambda event: st.permutations(list(event.items())).map(dict)), min_size=1, max_size=5),
    st.lists(st.booleans(), min_size=5, max_size=5)).map(
    # (mostly events as Kineto writes them: an odd one where its flag is set, or kept)
    lambda t: [e for e, odd in zip(t[0], t[1]) if odd or e.keys() >= {"ph", "pid", "ts"}] or
    t[0][:1])


@needs_native
@settings(max_examples=int(os.environ.get("FRAMING_EXAMPLES", 2000)), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(events=_EVENTS, indent=st.sampled_from([None, None, 1]), ascii_only=st.booleans(),
       compact=st.booleans(), cut=st.integers(0, 400), drop=st.sampled_from([0] * 6 + [1, 2, 3]))
@example(events=[{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 542, "tid": 639,
                  "ts": 3743411230047.485, "dur": 67.32,
                  "args": {"External id": 1025, "Input Dims": [[10, 1000], []], "Ev Idx": 0}},
                 {"ph": "s", "id": 5179, "pid": 542, "tid": 542, "ts": 3743411223546.042,
                  "cat": "ac2g", "name": "ac2g"}],
         indent=None, ascii_only=True, compact=False, cut=0, drop=0)
def test_native_kineto_events_read_what_msgspec_reads_and_nothing_it_refuses(
        events, indent, ascii_only, compact, cut, drop):
    """``kineto_events`` reads the events of ``buf[start:end]`` into the structs the checked
    slim decoder makes of them made an array (each field of the same type and value, ``args``
    with the same keys in the same order, ``Input Dims`` the same text), or says None; never
    an event that decoder refuses."""
    separators = (",", ":") if compact else None
    text = re.sub(r'"@@([^@]*)@@"', r"\1", json.dumps(events, indent=indent,
                                                     ensure_ascii=ascii_only,
                                                     separators=separators))
    text = text.encode("utf-8", "surrogatepass")
    if drop and cut < len(text):  # a byte or a few gone: mostly not JSON any more
        text = text[:cut] + text[cut + drop:]
    inner = text.strip()[1:-1]
    try:
        inner.decode("utf-8")
    except UnicodeDecodeError:
        return  # (the caller reads only UTF-8 here: ``_ascii`` first)
    got = decode_module._built_native.kineto_events(b"{}, " + inner + b" ]", 4, 4 + len(inner),
                                                    decode_module.SlimEvent, msgspec.Raw)
    expected = msgspec_slim(b"[" + inner + b"]")
    event(f"native {'read' if got is not None else 'refused'}, msgspec "
          f"{'read' if expected is not None else 'refused'}")
    if got is not None:
        assert expected is not None, inner
        assert [[_shape(getattr(e, f)) for f in e.__struct_fields__] for e in got] == expected


@needs_native
def test_native_kineto_events_leave_to_msgspec_what_they_do_not_read():
    """A key twice, an escape, an exponent or a float External id: None (msgspec reads the
    stretch); the same events written otherwise (whitespace, compact) are read."""
    read = decode_module._built_native.kineto_events
    op = ('{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 1.5, '
          '"dur": 2, "args": {"External id": 7, "Input Dims": [[1, 2]]}}')
    compact = json.dumps(json.loads(op), separators=(",", ":"))
    for text in (op, op + ",\n" + op, op.replace('", "', '",  "'), compact,
                 op.replace(": ", " :\t")):
        events = read(text.encode(), 0, len(text), decode_module.SlimEvent, msgspec.Raw)
        assert [[_shape(getattr(e, f)) for f in e.__struct_fields__] for e in events] == \
            msgspec_slim(b"[" + text.encode() + b"]")
    for odd in (op.replace('"tid": 2', '"tid": 2, "pid": 3'), op.replace("aten", "a\\u0074en"),
                op.replace('"ts": 1.5', '"ts": 1.5e0'), op.replace('"External id": 7', '"External id": 7.0'),
                op.replace('"Input Dims": [[1, 2]]', '"Input Dims": [[1, 2]], "Input Dims": 1'),
                op[:-1], op + ","):
        assert read(odd.encode(), 0, len(odd), decode_module.SlimEvent, msgspec.Raw) is None, odd
    with pytest.raises(ValueError):
        read(op.encode(), 0, len(op) + 1, decode_module.SlimEvent, msgspec.Raw)



@needs_native
def test_native_kineto_events_foresee_keys_yet_read_any_order_as_msgspec():
    """Each key is first compared with the ones met after the key before it (``Foresight``):
    a stretch of ops, flows and events of other orders read alike, whatever came before (the
    keys an event foresees by those before it, a key twice where it is foreseen, a foreseen
    key written otherwise, the same pids and tids event after event and others between)."""
    read = decode_module._built_native.kineto_events
    op = ('{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 542, "tid": 639, '
          '"ts": 1.5, "dur": 2, "args": {"External id": 7, "Input Dims": [[1, 2]]}}')
    flow = ('{"ph": "f", "id": 5179, "pid": 542, "tid": 542, "ts": 3743411223546.042, '
            '"cat": "ac2g", "name": "ac2g", "bp": "e"}')
    other = '{"name": "n", "ph": "i", "s": "t", "ts": 2, "pid": 7, "tid": 640, "args": null}'
    spaced = op.replace('"pid": ', '"pid" : ').replace('"ts": ', '"ts":\t')
    compact = json.dumps(json.loads(op), separators=(",", ":"))
    kinds = [op, flow, other, spaced, compact]
    for order in ([0, 0, 1, 0, 1, 1, 2, 0, 3, 0, 4, 1, 0], [1, 1, 0, 2, 2, 1, 3, 4, 0],
                  [2, 0, 1, 2, 4, 4, 3, 0]):
        text = ",\n  ".join(kinds[k] for k in order).encode()
        events = read(text, 0, len(text), decode_module.SlimEvent, msgspec.Raw)
        assert [[_shape(getattr(e, f)) for f in e.__struct_fields__] for e in events] == \
            msgspec_slim(b"[" + text + b"]")
    for twice in (op.replace('"dur": 2', '"dur": 2, "cat": "x"'),  # foreseen after ts
                  flow.replace('"bp": "e"', '"bp": "e", "ts": 3'),
                  op.replace('"tid": 639', '"tid": 639, "tid": 639')):
        text = (op + ", " + flow + ", " + twice).encode()  # (msgspec keeps the last: left to it)
        assert read(text, 0, len(text), decode_module.SlimEvent, msgspec.Raw) is None, twice
    escaped = (op + ", " + op.replace('"cat"', '"c\\u0061t"')).encode()  # not the word foreseen
    assert read(escaped, 0, len(escaped), decode_module.SlimEvent, msgspec.Raw) is None



@needs_native
@settings(max_examples=int(os.environ.get("FRAMING_EXAMPLES", 2000)), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(events=_EVENTS, nones=st.lists(st.integers(0, 5), max_size=3))
@example(events=[{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 542, "tid": 639,
                  "ts": 3743411230047.485, "dur": 67.32,
                  "args": {"External id": 1025, "Input Dims": [[10, 1000], []], "Ev Idx": 0}},
                 {"ph": "s", "id": 5179, "pid": 542, "tid": 542, "ts": 3743411223546.042,
                  "cat": "ac2g", "name": "ac2g"}], nones=[1])
def test_native_event_rows_read_what_msgspec_reads_of_a_workers_events(events, nones):
    """A worker of ``split --workers`` writes a checked range's events (``validate.SlimEvent``,
    None in a frame run's place) as arrays of their fields (``parallel.EventRow``); the
    engine's process reads them back by ``event_rows`` as the structs the slim decoder made
    (each field of the same type and value, ``args`` with the same keys in the same order,
    ``Input Dims`` the same text), or it says None, and msgspec reads them (``EventRow``)."""
    from msgspec.structs import astuple
    from stream_split import parallel
    text = re.sub(r'"@@([^@]*)@@"', r"\1", json.dumps(events)).encode("utf-8", "surrogatepass")
    try:
        slim = _SLIM_EVENTS.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return  # (not a checked range)
    rows = [astuple(e) for e in slim]
    for at in nones:
        rows.insert(min(at, len(rows)), None)
    written = msgspec.json.encode(rows)
    got = decode_module._built_native.event_rows(written, decode_module.SlimEvent, msgspec.Raw)
    expected = parallel._EVENTS[True].decode(written)
    event(f"native {'read' if got is not None else 'refused'}")
    if got is not None:
        assert [e if e is None else e.__class__ for e in got] == \
            [e if e is None else decode_module.SlimEvent for e in expected]
        assert [e and [_shape(getattr(e, f)) for f in e.__struct_fields__] for e in got] == \
            [e and [_shape(getattr(e, f)) for f in e.__struct_fields__] for e in expected]
    if all(e.get("ph") == "X" and e.get("cat") == "cpu_op" and isinstance(e.get("ts"), float)
           and e.get("args") is None for e in events) and "\\" not in written.decode() \
            and not re.search(rb"[0-9][eE]", written):
        assert got is not None, written  # (plain ops, no exponent: read here)


@needs_native
def test_native_event_rows_leave_to_msgspec_what_they_do_not_read():
    """Rows cut short, a row of another length, an exponent, an escape, or text after the
    array: None (msgspec reads the range, or refuses it)."""
    read = decode_module._built_native.event_rows
    row = b'["X","cpu_op","aten::mm",1,2,1.5,2,null,{"External id":7,"Input Dims":[[1,2]]}]'
    assert [e and e.name for e in read(b"[" + row + b",null," + row + b"]",
                                       decode_module.SlimEvent, msgspec.Raw)] == \
        ["aten::mm", None, "aten::mm"]
    assert read(b"[]", decode_module.SlimEvent, msgspec.Raw) == []
    for odd in (b"[" + row, row, b"[" + row.replace(b",null,", b",") + b"]",
                b"[" + row.replace(b"1.5", b"1.5e0") + b"]",
                b"[" + row.replace(b"aten", b"a\\u0074en") + b"]", b"[" + row + b"] x",
                b"[" + row.replace(b'"X"', b"null") + b"]"):
        assert read(odd, decode_module.SlimEvent, msgspec.Raw) is None, odd


@needs_native
def test_native_kineto_events_make_each_name_once():
    """A name, category or phase met again is the str made the first time (``cached_str``):
    the one-byte phases of ops and flows each kept apart, a kernel's name of 2 k bytes too."""
    read = decode_module._built_native.kineto_events
    kernel = "void ck::kernel_gemm<" + "ck::Sequence<1, 2, 3>, " * 85 + ">"
    events = []
    for k, ph in enumerate("XfXsfXiX"):
        name = kernel if k % 2 else "aten::view"
        events.append(json.dumps({"ph": ph, "cat": "kernel" if k % 2 else "cpu_op",
                                  "name": name, "pid": 1, "tid": 2, "ts": k}))
    text = ", ".join(events).encode()
    got = read(text, 0, len(text), decode_module.SlimEvent, msgspec.Raw)
    for field in ("ph", "cat", "name"):
        made = {}
        for e in got:
            value = getattr(e, field)
            assert made.setdefault(value, value) is value, (field, value[:20])
    assert 1900 < len(kernel) <= 2048 and got[1].name == kernel


# -- each event's bytes -----------------------------------------------------------------------

@needs_native
def test_native_slices_are_the_events_bytes():
    buf = b'[{"a": 1}, {"b": [2]},\n {}]'
    starts, ends = np.array([1, 11, 24], np.int64), np.array([9, 21, 26], np.int64)
    assert decode_module._built_native.slices(buf, starts, ends) == [b'{"a": 1}', b'{"b": [2]}', b"{}"]
    assert decode_module._built_native.slices(buf, starts[1:], ends[1:]) == [b'{"b": [2]}', b"{}"]
    with pytest.raises(ValueError):
        decode_module._built_native.slices(buf, starts, ends + 100)


#: Events as writers space them: a Python frame one event a line (as ``FRAME_PREFIX``), as
#: libkineto writes it (keys over lines), as torch 2.13 does (a key a line), with no space
#: at all, with tabs and CRLF; and what is no frame: an op spaced alike, a frame whose
#: strings hold the spaces (``"X "``), a frame no longer than the prefix.
_SPACED_EVENTS = {
    "frame": decode_module.FRAME_PREFIX + b'"name": "f"}',
    "libkineto": b'{\n    "ph": "X", "cat": "python_function", "name": "f", "pid": 1, '
                 b'"tid": 1,\n    "ts": 2.5, "dur": 1.0,\n    "args": {\n      "Python id": 1'
                 b'\n    }\n  }',
    "torch": b'{\n    "ph": "X",\n    "cat": "python_function",\n    "name": "f",\n    '
             b'"pid": 1,\n    "tid": 1,\n    "ts": 2.5,\n    "dur": 1.0\n  }',
    "compact": b'{"ph":"X","cat":"python_function","name":"f"}',
    "tabs": b'{\r\n\t"ph"\t:\t"X"\t,\r\n\t"cat" :"python_function" ,"name": "f"}',
    "op": b'{"ph": "X", "cat": "cpu_op", "name": "o"}',
    "spaced op": b'{\n    "ph": "X", "cat": "cpu_op", "name": "o"\n  }',
    "spaced strings": b'{"ph": "X ", "cat": "python_function", "name": "f"}',
    "short": decode_module.FRAME_PREFIX[:-3] + b"}",
    "bare": b'{\n  "ph": "X", "cat": "python_function",',
}


def _events_text(kinds: list) -> tuple:
    """(buf, starts, ends) of the events ``kinds`` (``_SPACED_EVENTS``) in a JSON array."""
    buf, starts, ends = b"[", [], []
    for kind in kinds:
        starts.append(len(buf))
        buf += _SPACED_EVENTS[kind]
        ends.append(len(buf))
        buf += b",\n  "
    return buf, np.array(starts, np.int64), np.array(ends, np.int64)


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(kinds=st.lists(st.sampled_from(["frame", "frame", "frame", "op", "short", "libkineto",
                                       "torch", "compact", "tabs", "spaced op",
                                       "spaced strings", "bare"]), max_size=40))
def test_native_frame_runs_are_where_numpy_finds_them(kinds):
    """``decode._frame_runs``: runs of ``MIN_FRAME_RUN`` or more events that begin as Kineto
    writes a Python frame, however spaced; the same natively (``prefixed_runs``) as with
    numpy and the pattern."""
    buf, starts, ends = _events_text(kinds)
    native = decode_module._frame_runs(buf, starts, ends)
    with decoder_passes("numpy"):
        assert native == decode_module._frame_runs(buf, starts, ends)


@pytest.mark.parametrize("passes", ["native", "numpy"])
@pytest.mark.parametrize("kind", ["frame", "libkineto", "torch", "compact", "tabs"])
def test_frames_however_their_writer_spaced_them_make_runs(kind, passes):
    if passes == "native" and decode_module._built_native is None:
        pytest.skip("the native passes are not built")
    n = decode_module.MIN_FRAME_RUN
    kinds = ["op"] + [kind] * n + ["spaced op"] + [kind] * (n - 1) + ["op"]
    with decoder_passes(passes):
        assert decode_module._frame_runs(*_events_text(kinds)) == [(1, 1 + n)]


@pytest.mark.parametrize("passes", ["native", "numpy"])
@pytest.mark.parametrize("kind", ["op", "spaced op", "spaced strings", "short", "bare"])
def test_events_that_are_no_frame_however_spaced_make_no_run(kind, passes):
    if passes == "native" and decode_module._built_native is None:
        pytest.skip("the native passes are not built")
    kinds = [kind] * (2 * decode_module.MIN_FRAME_RUN)
    with decoder_passes(passes):
        assert decode_module._frame_runs(*_events_text(kinds)) == []


# ---- laid_out: the manifest's entries as json.dumps(indent=1) writes them ----

_JSON_LEAVES = (st.none() | st.booleans() | st.integers() | st.integers(-2 ** 70, 2 ** 70)
                | st.floats() | st.sampled_from([0.0, -0.0, 5.0, 1e15, 2.0 ** 53, 1e16, 1e-05,
                                                 0.0001, 1 / 3])
                | st.text() | st.sampled_from(["iteration", "a\"b\\c", "\x7f\x00\u2028",
                                              "\ud800", "\U0001f600", "aten::mm"]))
_ODD = st.tuples(st.integers()) | st.builds(type("F", (float,), {}), st.floats(0, 1)) \
    | st.builds(type("S", (str,), {}), st.text(max_size=3)) | st.just({1: "int key"})
_JSON_VALUES = st.recursive(_JSON_LEAVES | _ODD, lambda inner: st.lists(inner, max_size=4)
                            | st.dictionaries(st.text(max_size=6), inner, max_size=5),
                            max_leaves=24)


def _is_plain(value) -> bool:
    """Whether ``laid_out`` writes ``value``: the exact types, finite floats."""
    kind = value.__class__
    if kind is float:
        return value - value == 0.0
    if kind is dict:
        return all(k.__class__ is str and _is_plain(v) for k, v in value.items())
    if kind is list:
        return all(map(_is_plain, value))
    return kind in (str, int, bool, type(None))


@needs_native
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(_JSON_VALUES, max_size=4), level=st.integers(0, 3))
@example(items=[{"index": 5, "host": {"cpu_op_us": 5.0, "launches": []}, "x": None}], level=2)
@example(items=[{"k": {"k": {"k": 1}, "k" * 60: [{"k" * 60: 2}]}}, {"k": 3, "é": 4}], level=3)
def test_laid_out_is_the_text_of_json_dumps_or_none(items, level):
    """``_native.laid_out`` (``manifest_entries._chunk_text``'s first try): each item after a
    line break at ``level``, joined by commas, byte for byte ``json.dumps(indent=1)``'s text
    of it at that level (escapes, every float's repr, huge integers); None exactly where an
    item holds a value of another type (a tuple, a subclass, a key not a string) or a float
    that is not finite (the encoder decides those)."""
    text = stream_split._native.laid_out(items, 1, level)
    as_bytes = stream_split._native.laid_out(items, 1, level, True)  # (``dump_manifest``'s)
    assert as_bytes == (None if text is None else text.encode("ascii"))
    if not all(map(_is_plain, items)):
        assert text is None
        return
    pad = "\n" + " " * level
    assert text == ",".join(pad + json.dumps(item, indent=1).replace("\n", pad)
                            for item in items)


def test_the_manifest_text_is_the_same_with_or_without_the_native_layout():
    """``dump_manifest`` of entries the native layout takes, with it and with the fallback
    (msgspec's text laid out by ``msgspec.json.format``): the same text."""
    import io
    from stream_split.manifest_entries import dump_manifest
    entries = [{"index": i, "first_op": "aten::mm", "start_ts": i * 6, "gpu_start_ts": None,
                "ratio": i / 7, "complete": True,
                "breakdown": {"top_kernels": [{"name": "k", "us": 2.5}] if i % 2 else [],
                              "host": {"cpu_op_us": 5.0}}} for i in range(300)]
    texts = []
    for passes in ("native", "numpy"):
        with decoder_passes(passes):
            out = io.BytesIO()
            dump_manifest({"iterations": entries, "outside": {}}, out)
            texts.append(out.getvalue().decode())
    assert texts[0] == texts[1] == json.dumps({"iterations": entries, "outside": {}}, indent=1)


@pytest.mark.parametrize("odd", [None, float("nan"), (1, 2), {1: "int key"}])
def test_the_manifest_head_is_the_same_with_or_without_the_native_layout(odd):
    """``dump_manifest``'s head (``_head_text``: by ``_native.laid_out`` where built) with
    evidence of a number per iteration, and a value it does not write (a number not finite,
    written as null; a tuple; a key not a string: the encoder's text), with the native
    layout and without: ``strict_json``'s text of the same manifest."""
    import io
    from stream_split.manifest_entries import dump_manifest
    from stream_split.serialize import strict_json
    manifest = {"format": "f", "detection": {"similarity": [1.0, 0.5, 1 / 3, 1e-05] * 50,
                                             "odd": odd, "why": "a \"loop\" \u2028 é"},
                "iterations": [{"index": 0}], "outside": {"file": None, "events": 0}}
    texts = []
    for passes in ("native", "numpy"):
        with decoder_passes(passes):
            out = io.BytesIO()
            dump_manifest(manifest, out)
            texts.append(out.getvalue().decode())
    assert texts[0] == texts[1] == strict_json(manifest, indent=1)
