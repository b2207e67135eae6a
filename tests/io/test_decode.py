"""The decoder (numpy framing + orjson) against ijson, the reference: equal events and header
keys on every shared trace and on a generated corpus; the read defects it fixed; original bytes
into pieces; nothing left open."""
import gzip
import io
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import decoder_passes, large_ones_slow

from stream_split.cli import sample_trace_path
from stream_split.core.serving import input_dims
from stream_split.core.validate import unusable_field
from stream_split.decode import TraceDecoder, _bracket_offsets, contains
from stream_split.read import TraceReader
from stream_split.testing.reference import reference_events
from stream_split.trace_format import DIMS_ARG, ENGINE_ARGS, ENGINE_FIELDS

SHARED_TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"


def decode(data: bytes, cuts=(), slim: bool = False, lazy_dims: bool = False):
    """All events of ``data`` fed in pieces cut at ``cuts``; (events, raws, decoder). With
    ``slim``, the events of frame runs read in bulk are (ts, end) pairs from their columns;
    ``lazy_dims``, as ``run.drive`` reads (the other events may be read natively then:
    ``_native.kineto_events``)."""
    decoder = TraceDecoder()
    decoder.slim = slim
    decoder.lazy_dims = lazy_dims
    events, raws = [], []
    pos = 0

    def take(batch):
        got = list(batch.events)
        for run in batch.frame_runs:
            if run.starts is not None:
                got[run.i:run.j] = list(zip(run.starts.tolist(), run.ends.tolist()))
        events.extend(got)
        raws.extend(batch.raws)
    def feed(chunk):  # a chunk that expands a lot comes out in several batches
        take(decoder.receive_data(chunk))
        while decoder.backlog:
            take(decoder.receive_more())
    for cut in sorted({c for c in cuts if 0 < c < len(data)}) + [len(data)]:
        if cut > pos:
            feed(data[pos:cut])
            pos = cut
    feed(b"")
    return events, raws, decoder


def engine_view(event):
    """What the engine reads of an event (a slim batch holds at least that), or of a Python
    frame read in bulk: its (ts, end)."""
    if isinstance(event, tuple):
        return event
    # each field as the engine reads it (``get``: a dict's, or a slim struct's, absent or
    # null alike), ``args`` with the keys it reads (``Input Dims`` parsed where left raw)
    view = {key: event.get(key) for key in ENGINE_FIELDS}
    args = view["args"] = event.get("args")
    if isinstance(args, dict):
        view["args"] = {key: input_dims(args) if key == DIMS_ARG else args[key]
                        for key in ENGINE_ARGS if key in args}
    return view


def assert_slim_matches(slim_events: list, expected: list) -> None:
    """A slim decode holds what the engine reads of each reference event; a frame read in
    bulk has the reference's times (``ts``, and ``ts + dur`` as ``feed`` computes it)."""
    assert len(slim_events) == len(expected)
    for got, want in zip(slim_events, expected):
        if isinstance(got, tuple):
            ts, dur = want["ts"], want.get("dur")
            assert got == (float(ts), float(ts + dur) if dur else float(ts))
        else:
            assert engine_view(got) == engine_view(want)


RECORDED_TRACES = Path(__file__).resolve().parents[1] / "data" / "cuda"


def _traces(folder: Path):
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and p.name.endswith((".json", ".json.gz", ".zst"))
                  and p.name != "truth.json")  # the answers, not a trace


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/traces is absent")
@pytest.mark.parametrize("path",
                         large_ones_slow(_traces(SHARED_TRACES) + _traces(RECORDED_TRACES)),
                         ids=lambda p: p.name)
def test_decoder_equals_ijson_on_every_shared_trace(path):
    data = path.read_bytes()
    expected, header, form, complete = reference_events(data)
    with TraceReader(str(path)) as reader:
        events = list(reader)
    assert reader.complete is complete and reader.form == form
    assert events == expected
    if complete:
        assert {**reader.header_before, **reader.header_after} == header
    # The engine's own read (slim batches, Python frames in bulk): the same fields and bytes.
    slim, slim_raws, _ = decode(data, [1 << 16, 1 << 20], slim=True, lazy_dims=True)
    assert_slim_matches(slim, expected)
    assert slim_raws == decode(data, [1 << 16, 1 << 20])[1]


# -- a corpus of nasty events, compared with ijson's pure-Python backend (exact big integers) ---

_NASTY_TEXT = st.text(alphabet=st.sampled_from(
    list('{}[]"\\,: \n\t/abé€😀\x00\x1f') + ["\ud800", "\udc00"]), max_size=20)
_BIG = st.integers(min_value=-2 ** 90, max_value=2 ** 90)
_VALUES = st.recursive(
    st.none() | st.booleans() | _BIG | st.floats(allow_nan=False, allow_infinity=False)
    | _NASTY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_NASTY_TEXT, inner, max_size=4),
    max_leaves=12)
# A Python frame as Kineto writes it (its first keys in Kineto's order), with nasty names, big
# integers and odd args: a run of them may be read in bulk by a slim decode.
_FRAME = st.builds(
    lambda name, ts, dur, pid, args: {"ph": "X", "cat": "python_function", "name": name,
                                      "pid": pid, "tid": pid, "ts": ts, "dur": dur, "args": args},
    _NASTY_TEXT, st.floats(0, 1e12) | _BIG, st.none() | st.floats(0, 1e3) | _BIG,
    _BIG | _NASTY_TEXT,
    st.none() | st.dictionaries(st.sampled_from(["Python id", "correlation", "External id",
                                                 "x"]), _VALUES, max_size=3))
_EVENT = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "i", "M", "f"]), "ts": _BIG | st.floats(0, 1e12)},
    optional={"name": _NASTY_TEXT, "args": st.dictionaries(_NASTY_TEXT, _VALUES, max_size=5),
              "cat": _NASTY_TEXT, "id": _BIG})


def _render(events, form, indent, ascii_only, header):
    dump = lambda v: json.dumps(v, indent=indent, ensure_ascii=ascii_only)  # noqa: E731
    if form == "jsonl":
        return "".join(json.dumps(e, ensure_ascii=ascii_only) + "\n" for e in events).encode(
            "utf-8", "surrogatepass")
    if form == "array":
        return dump(events).encode("utf-8", "surrogatepass")
    doc = {**header, "traceEvents": events, "tail": header}
    return dump(doc).encode("utf-8", "surrogatepass")


@settings(max_examples=int(os.environ.get("DECODE_EXAMPLES", 150)), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(events=st.lists(_EVENT, min_size=1, max_size=6), form=st.sampled_from(["object", "array", "jsonl"]),
       indent=st.sampled_from([None, 0, 2]), ascii_only=st.booleans(),
       header=st.dictionaries(_NASTY_TEXT, _VALUES, max_size=3),
       cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
       gz=st.booleans(), long_event=st.booleans(), frames=st.lists(_FRAME, max_size=12),
       slim=st.booleans(), lazy_dims=st.booleans(), passes=st.sampled_from(["native", "numpy"]))
def test_decoder_equals_ijson_on_a_nasty_corpus(events, form, indent, ascii_only, header, cuts,
                                                gz, long_event, frames, slim, lazy_dims, passes):
    if long_event:  # one event longer than any chunk, strings full of brackets
        events = events + [{"ph": "X", "ts": 1, "args": {"s": '{"]\\' * 30_000}}]
    events = events[:1] + frames + events[1:]  # Python frames as Kineto writes them
    if form == "jsonl" and not ascii_only:
        ascii_only = True  # a raw U+2028 is fine, but keep JSON Lines to one line per event
    if ascii_only is False and any("\ud800" in json.dumps(e) for e in events):
        pass
    data = _render(events, form, indent, ascii_only, header)
    if not ascii_only:
        # A lone surrogate cannot be UTF-8: json.dumps with ensure_ascii=False would write
        # invalid bytes; those inputs are the U+FFFD case, compared separately.
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            data = _render(events, form, indent, True, header)
    if gz:
        data = gzip.compress(data, compresslevel=1)
    expected, expected_header, _, complete = reference_events(data, backend="python")
    assert complete
    # ijson's pure-Python backend gives Decimal for floats unless use_float: it was asked to.
    with decoder_passes(passes):
        got, raws, decoder = decode(data, cuts + [len(data) // 2, 1, 65536], slim=slim,
                                    lazy_dims=lazy_dims)
    if slim:
        assert_slim_matches(got, expected)
        got = expected  # the original bytes of each event, below
    else:
        assert got == expected
    assert decoder.complete
    if form == "object":
        assert {**decoder.header_before, **decoder.header_after} == expected_header
    for event, raw in zip(got, raws):
        assert raw is not None and json.loads(raw) == json.loads(json.dumps(event))


@pytest.mark.parametrize("passes", ["native", "numpy"])
@pytest.mark.parametrize("step", [1, 2, 3, 7, 4096])
def test_every_chunk_edge_gives_the_same_events(step, passes):
    events = [{"ph": "X", "ts": i, "name": 'a{"}]\\' * i, "args": {"n": 2 ** 70 + i}}
              for i in range(5)]
    data = json.dumps({"traceEvents": events, "after": [1, "]"]}, indent=1).encode()
    with decoder_passes(passes):
        got, _, decoder = decode(data, range(0, len(data), step))
    assert got == events and decoder.header_after == {"after": [1, "]"]}


# -- the read defects of the old reader (issue 10) ------------------------------------------------

def test_a_19_digit_number_inside_a_string_is_valid_json():
    doc = b'{"traceEvents": [{"ph": "X", "ts": 1, "name": "id 12345678901234567890123"}]}'
    got, raws, decoder = decode(doc)
    assert got == [{"ph": "X", "ts": 1, "name": "id 12345678901234567890123"}]
    assert decoder.complete and raws[0] == doc[17:-2]


@pytest.mark.parametrize("shift", range(-3, 4))
def test_a_big_integer_on_a_read_boundary_stays_exact(shift):
    big = 2 ** 80 + 7
    pad = "x" * (65536 - 60 + shift)
    doc = ('{"traceEvents": [{"ph": "i", "ts": 1, "name": "' + pad + '", "args": {"v": '
           + str(big) + '}}]}').encode()
    at = doc.index(str(big).encode())
    for cuts in ([at], [at + 1], [at + 5], range(0, len(doc), 65536)):
        got, _, _ = decode(doc, cuts)
        assert got[0]["args"]["v"] == big
    with TraceReader(io.BytesIO(doc), chunk_size=at) as reader:
        assert list(reader)[0]["args"]["v"] == big


@pytest.mark.parametrize("before_boundary", [1, 30, 60, 100, 150])
def test_trailing_header_keys_survive_a_bracket_just_before_a_read_boundary(before_boundary):
    tail = b', "traceName": "t.json", "displayTimeUnit": "ms", "baseTimeNanoseconds": 17}'
    events = [{"ph": "i", "ts": i, "name": "x" * 100} for i in range(700)]
    body = b'{"traceEvents": ' + json.dumps(events).encode()
    pad = (65536 - before_boundary - len(body)) % 65536
    events[0]["name"] += "y" * pad
    body = b'{"traceEvents": ' + json.dumps(events).encode()
    doc = body + tail
    assert (65536 - len(body)) % 65536 == before_boundary
    with TraceReader(io.BytesIO(gzip.compress(doc)), chunk_size=65536) as reader:
        assert len(list(reader)) == 700
    assert reader.complete
    assert reader.header_after == {"traceName": "t.json", "displayTimeUnit": "ms",
                                   "baseTimeNanoseconds": 17}
    got, _, decoder = decode(doc, range(0, len(doc), 65536))
    assert decoder.header_after == reader.header_after and len(got) == 700


def test_a_header_over_16_mib_before_the_events_is_kept():
    header = {"deviceProperties": [{"name": "d" * 1000, "id": i} for i in range(17_500)]}
    doc = (json.dumps(header)[:-1] + ', "traceEvents": [{"ph": "i", "ts": 1}]}').encode()
    assert len(doc) > 16 * 1024 * 1024
    with TraceReader(io.BytesIO(doc)) as reader:
        assert list(reader) == [{"ph": "i", "ts": 1}]
    assert reader.complete and reader.header_before == header


# -- original bytes out ---------------------------------------------------------------------------

def test_pieces_hold_each_events_original_bytes(tmp_path):
    from stream_split.testing.generate import generate
    trace = generate("training", 1, steps=3)
    # Kineto's layout: each event over several lines, keys in its order, spaces after colons.
    text = ('{\n  "schemaVersion": 1,\n  "traceEvents": [\n'
            + ",\n".join("  " + json.dumps(e, indent=2).replace("\n", "\n  ")
                         for e in trace.events)
            + '\n  ],\n  "traceName": "t"\n}\n').encode()
    (tmp_path / "t.json").write_bytes(text)
    _, raws, _ = decode(text)
    originals = sorted(r for r in raws if b'"ph": "M"' not in r)
    subprocess.run([sys.executable, "-m", "stream_split.cli", "split", str(tmp_path / "t.json"),
                    "-o", str(tmp_path / "out"), "--plain-json"], check=True,
                   capture_output=True)
    written = []
    for piece in sorted((tmp_path / "out").glob("*.json")):
        if piece.name == "manifest.json":
            continue
        _, piece_raws, decoder = decode(piece.read_bytes())
        assert decoder.header_before == {"schemaVersion": 1}
        written += [r for r in piece_raws if b'"ph": "M"' not in r]
    assert sorted(written) == originals


def test_tag_writes_original_bytes_on_one_line(tmp_path):
    event = b'{"ph": "X",\n "ts": 5, "name": "a\\nb", "args": {"big": 123456789012345678901234}}'
    (tmp_path / "t.json").write_bytes(b'{"traceEvents": [' + event + b']}')
    done = subprocess.run([sys.executable, "-m", "stream_split.cli", "tag",
                           str(tmp_path / "t.json")], check=True, capture_output=True)
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(b'"event":' + event.replace(b"\n", b"") + b"}")
    assert json.loads(lines[0])["event"]["args"]["big"] == 123456789012345678901234


# -- nothing left open ----------------------------------------------------------------------------

def test_the_library_api_leaves_nothing_open_under_dev_mode(tmp_path):
    from stream_split.testing.generate import generate, render
    small_trace = tmp_path / "small.json.gz"
    small_trace.write_bytes(gzip.compress(
        render(generate("training", 1, steps=6), "object").encode()))
    code = ("import stream_split\n"
            "from stream_split import SplitOptions\n"
            f"list(stream_split.iterations({str(small_trace)!r}, SplitOptions(pending_limit=10)))\n"
            f"it = stream_split.iterations({str(small_trace)!r})\n"
            "next(it)\n"
            "it.close()\n"
            "import gc; gc.collect()\n")
    done = subprocess.run([sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c",
                           code], capture_output=True)
    assert done.returncode == 0 and b"ResourceWarning" not in done.stderr, done.stderr


def _imported_by(module: str) -> set:
    """The package's modules ``module`` imports, directly or not (the package's own
    ``__init__``, which imports the library, aside)."""
    import ast
    import stream_split
    root = Path(stream_split.__file__).parent
    seen, todo = set(), [module]
    while todo:
        path = root.joinpath(*todo.pop().split(".")[1:]).with_suffix(".py")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "stream_split."):
                names = [f"{node.module}.{a.name}" for a in node.names]
                found = [n for n in names if root.joinpath(*n.split(".")[1:]).with_suffix(
                    ".py").is_file()] or [node.module]
                for name in found:
                    if name not in seen and root.joinpath(
                            *name.split(".")[1:]).with_suffix(".py").is_file():
                        seen.add(name)
                        todo.append(name)
    return seen


def test_the_reader_imports_no_follow_code_and_counts_input_bytes(tmp_path):
    assert "stream_split.follow" not in _imported_by("stream_split.read")
    data = gzip.compress(json.dumps({"traceEvents": [{"ph": "i", "ts": i} for i in range(9000)]})
                         .encode())
    (tmp_path / "t.json.gz").write_bytes(data)
    with TraceReader(str(tmp_path / "t.json.gz")) as reader:
        seen = []
        for batch in reader.batches():
            seen.append(reader.input_bytes)
    assert seen == sorted(seen) and reader.input_bytes == len(data)
    assert reader.compression == "gzip" and reader.complete


@pytest.mark.parametrize("name", ['plain', '{"]\\', 'é€😀', 'tab\there', '\ud800 lone', 'x' * 70_000])
def test_a_run_of_python_frames_with_any_name_is_read_in_bulk_or_in_full_alike(name):
    frames = [{"ph": "X", "cat": "python_function", "name": f"{name} {k}", "pid": 1, "tid": 2,
               "ts": 1000.5 + k, "dur": [0.25, None, 0, 3][k % 4],
               "args": {"Python id": k, "Python parent id": None}} for k in range(12)]
    data = json.dumps({"traceEvents": [{"ph": "M", "ts": 0}] + frames}).encode()
    expected = reference_events(data, backend="python")[0]
    for cuts in ([], [len(data) // 3, len(data) // 2], list(range(0, len(data), 4096))):
        got, raws, _ = decode(data, cuts, slim=True)
        assert_slim_matches(got, expected)
        assert [json.loads(raw) for raw in raws] == expected
    bulk = sum(isinstance(event, tuple) for event in decode(data, slim=True)[0])
    # A lone surrogate is not JSON that msgspec takes: that run is read in full, as ever.
    assert bulk == (0 if "\ud800" in name else 12)


@pytest.mark.parametrize("name", ["plain", 'é€😀 {"]\\', "x" * 5_000])
def test_a_frame_run_read_in_bulk_travels_as_a_pickle_with_the_same_frames(name):
    """``split --workers``: a worker pickles its ranges' frame runs (their frames as
    MessagePack, read back only when asked for); what the engine reads of them is unchanged,
    for the run and for the halves it is cut into, before or after the pickle."""
    frames = [{"ph": "X", "cat": "python_function", "name": f"{name} {k}", "pid": 1,
               "tid": k % 3, "ts": 1000.5 + k, "dur": [0.25, None, 0, 3][k % 4],
               "args": {"Python id": k}} for k in range(40)]
    decoder = TraceDecoder()
    decoder.slim = True
    batch = decoder.receive_data(json.dumps({"traceEvents": frames}, ensure_ascii=False).encode())
    batch.extend(decoder.receive_data(b""))
    (run,) = batch.frame_runs
    assert run.starts is not None  # read in bulk
    back = pickle.loads(pickle.dumps(run))
    assert (back.i, back.j) == (run.i, run.j)
    assert back.starts.tolist() == run.starts.tolist() and back.ends.tolist() == run.ends.tolist()
    assert back.threads_and_names() == run.threads_and_names()
    assert back.threads_and_names()[1][7] == f"{name} 7"
    assert back.threads_and_names([7, 2]) == ([(1, 1), (1, 2)], [f"{name} 7", f"{name} 2"])
    assert back.names_begin_with(name[:3]) and not back.names_begin_with("diffusers")
    for whole in (run, back, pickle.loads(pickle.dumps(run))):
        first, second = whole.cut(15)
        second = pickle.loads(pickle.dumps(second))
        threads, names = run.threads_and_names()
        assert first.threads_and_names() == (threads[:15], names[:15])
        assert second.threads_and_names() == (threads[15:], names[15:])
        assert second.names_begin_with(name[:3])


@given(st.binary(max_size=300), st.binary(max_size=12), st.integers(0, 300))
@settings(max_examples=300)
def test_contains_answers_as_python_does(text, needle, at):
    """``contains`` (the C library's ``memmem``) finds a needle where ``in`` does, and only
    there: planted anywhere, absent, empty, longer than the text, with zero bytes."""
    for haystack in (text, text[:at] + needle + text[at:]):
        assert contains(haystack, needle) == (needle in haystack)


# -- checked slim batches: the decoder types what the engine reads ---------------------------

_ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.text(max_size=3), st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-2 ** 70, 2 ** 70), st.sampled_from([2 ** 63 - 1, 2 ** 63, -2 ** 63, 1 - 2 ** 63]),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.sampled_from(["a", "b"]), st.integers(),
                                                         max_size=2))


@given(st.fixed_dictionaries({}, optional={
    **{key: _ODD_VALUES for key in ("cat", "name", "dur", "pid", "tid", "id")},
    "args": st.one_of(_ODD_VALUES, st.fixed_dictionaries({}, optional={
        "correlation": _ODD_VALUES, "External id": _ODD_VALUES, "Input Dims": _ODD_VALUES}))}),
       st.one_of(st.just("X"), _ODD_VALUES), _ODD_VALUES)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_a_checked_batch_holds_only_events_the_engine_accepts(fields, ph, ts):
    """A slim batch is ``checked`` (the engine skips its own type checks) only when every
    field the engine reads has a type it accepts (``validate.unusable_field``): whatever the
    types of ``ph``, ``ts``, ``dur``, ``pid``, ``args`` and its ids, a batch with an event the
    engine would refuse is not checked, and its events are as the unchecked decode gives them."""
    event = {**fields, "ph": ph, "ts": ts, "pid": fields.get("pid", 1)}
    text = json.dumps({"traceEvents": [event, {"ph": "X", "ts": 1.5, "name": "op"}]}).encode()
    decoder = TraceDecoder()
    decoder.slim = True
    batches = [decoder.receive_data(text), decoder.receive_data(b"")]
    got = [e for batch in batches for e in batch.events]
    parsed = json.loads(text)["traceEvents"][0]
    if any(batch.checked and batch.events for batch in batches):
        assert unusable_field(parsed) is None
    # each field as the engine reads it, of a dict or a slim struct
    assert {k: got[0].get(k) for k in ENGINE_FIELDS} == {k: parsed.get(k) for k in ENGINE_FIELDS}


def test_the_slim_batches_of_a_sample_trace_are_checked():
    """The fast path is taken: every slim batch of the packaged sample trace is checked."""
    decoder = TraceDecoder()
    decoder.slim = True
    data = gzip.decompress(Path(sample_trace_path()).read_bytes())
    batches = [decoder.receive_data(data), decoder.receive_data(b"")]
    assert sum(len(b) for b in batches) > 1000
    assert all(batch.checked for batch in batches if batch.events)


@given(st.binary(max_size=200) | st.lists(st.sampled_from(b'{}[]|\\"a '), max_size=200).map(bytes),
       st.integers(0, 16))
@settings(max_examples=300)
def test_bracket_offsets_are_those_of_a_plain_flatnonzero(text, spare):
    """Brackets, pipes and backslashes, in order, found in a scratch array that may be a
    slice of a longer one (as a decoder's is), whatever the bytes and their number."""
    a = np.frombuffer(text, np.uint8)
    scratch = np.full(a.size + spare, 0x7B, np.uint8)
    expected = np.flatnonzero(np.isin(a, np.frombuffer(b"{}[]|\\", np.uint8)))
    assert _bracket_offsets(a, scratch[:a.size]).tolist() == expected.tolist()
