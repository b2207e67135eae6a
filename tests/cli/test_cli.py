"""The command line: the output contract of split / boundaries / tag, and bad input."""
import json

import pytest

from conftest import load_piece, run_cli
from stream_split.testing.generate import generate, write_trace


@pytest.fixture(scope="module")
def training_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("t") / "training.json.gz"
    trace = generate("training", seed=4, steps=6)
    write_trace(trace, str(path))
    return path, trace


def split(trace_path, out, *extra):
    run_cli("split", trace_path, "-o", out, "--detector", "steps", *extra)
    return json.loads((out / "manifest.json").read_text())


def test_split_writes_pieces_that_conserve_every_event(training_trace, tmp_path):
    path, trace = training_trace
    manifest = split(path, tmp_path)
    counts = manifest["counts"]
    assert manifest["complete"] is True and counts["conserved"] is True
    assert len(manifest["iterations"]) == 6
    metadata = [e for e in trace.events if e.get("ph") == "M"]
    total = 0
    for entry in manifest["iterations"] + [manifest["outside"]]:
        piece = load_piece(tmp_path / entry["file"])
        events = piece["traceEvents"]
        assert [e for e in events if e.get("ph") == "M"] == metadata
        body = [e for e in events if e.get("ph") != "M"]
        assert len(body) == entry["events"]
        total += len(body)
        assert piece["traceName"] == trace.header_after["traceName"]  # a key written after
        assert piece["schemaVersion"] == trace.header_before["schemaVersion"]
    assert total == counts["non_metadata_in"] == len(trace.events) - len(metadata)


def test_split_pieces_hold_exactly_the_events_the_truth_assigns(training_trace, tmp_path):
    path, trace = training_trace
    manifest = split(path, tmp_path)
    for entry in manifest["iterations"]:
        piece = load_piece(tmp_path / entry["file"])["traceEvents"]
        expected = [e for e, o in zip(trace.events, trace.truth.owners) if o == entry["index"]]
        key = lambda e: json.dumps(e, sort_keys=True)
        assert sorted(map(key, (e for e in piece if e.get("ph") != "M"))) == \
            sorted(map(key, expected))


def test_split_selected_iterations_as_plain_json(training_trace, tmp_path):
    path, _ = training_trace
    manifest = split(path, tmp_path, "--iterations", "1,3-4", "--plain-json")
    written = sorted(p.name for p in tmp_path.glob("iteration_*"))
    assert written == ["iteration_00001.json", "iteration_00003.json", "iteration_00004.json"]
    assert manifest["iterations"][0]["file"] is None
    assert manifest["counts"]["conserved"]


def test_boundaries_jsonl_records(training_trace):
    path, _ = training_trace
    out = run_cli("boundaries", path, "--detector", "steps").stdout.decode().splitlines()
    records = [json.loads(line) for line in out]
    boundaries = [r for r in records if r["type"] == "boundary"]
    iterations = [r for r in records if r["type"] == "iteration"]
    assert [b["index"] for b in boundaries] == list(range(6))
    assert [r["index"] for r in iterations] == list(range(6))
    assert all(r["kernels"] > 0 and r["gpu_busy_us"] > 0 for r in iterations)


def test_tag_writes_every_event_once_with_its_iteration(training_trace):
    path, trace = training_trace
    lines = run_cli("tag", path, "--detector", "steps").stdout.decode().splitlines()
    assert len(lines) == len(trace.events)
    tagged = [json.loads(line) for line in lines]
    by_piece = {}
    for t in tagged:
        by_piece[t["piece"]] = by_piece.get(t["piece"], 0) + 1
    assert by_piece["metadata"] == sum(1 for e in trace.events if e.get("ph") == "M")
    assert sum(v for k, v in by_piece.items() if k.startswith("iteration_")) == \
        sum(1 for o in trace.truth.owners if o is not None and o >= 0)


def test_main_job_runs_on_the_embedded_sample(tmp_path):
    proc = run_cli("split", "--sample", "-o", tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert len(manifest["iterations"]) == 8 and manifest["counts"]["conserved"]
    assert b"8 iterations" in proc.stdout


@pytest.mark.parametrize("content, message", [
    (b"", "empty input"),
    (b"this is not json", "not JSON"),
    (b'{"hello": "world"}', "not a trace"),
    (b'\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage!garbage!', "corrupt gzip"),
    (b'{"traceEvents": [{"name": "x", "ts": 1}]}', 'no "ph"'),
    (b'{"traceEvents": [{"name": "x", "ph": "X"}]}', 'no "ts"'),
])
@pytest.mark.parametrize("command", ["split", "boundaries", "tag"])
def test_bad_input_one_line_error_and_nonzero_exit(tmp_path, content, message, command):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    args = [command, bad] + (["-o", tmp_path / "out"] if command == "split" else [])
    proc = run_cli(*args, check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and message in err


def test_missing_file(tmp_path):
    proc = run_cli("boundaries", tmp_path / "absent.json.gz", check=False)
    assert proc.returncode == 2 and "no such file" in proc.stderr.decode()
    assert "Traceback" not in proc.stderr.decode()


def test_error_mid_trace_keeps_what_was_read(tmp_path, training_trace):
    _, trace = training_trace
    events = list(trace.events)
    events.insert(len(events) // 2, {"name": "broken", "ts": 1.0})  # no "ph"
    bad = tmp_path / "midway.json"
    bad.write_text(json.dumps({"traceEvents": events}))
    proc = run_cli("split", bad, "-o", tmp_path / "out", "--detector", "steps", check=False)
    assert proc.returncode == 2
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["complete"] is False and 'no "ph"' in manifest["stop_reason"]
    assert manifest["counts"]["conserved"]
    assert manifest["counts"]["events_out"] > 0
    for entry in manifest["iterations"]:
        load_piece(tmp_path / "out" / entry["file"])


def test_truncated_gzip_splits_what_is_complete(tmp_path, training_trace):
    path, _ = training_trace
    data = path.read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    proc = run_cli("split", cut, "-o", tmp_path / "out", "--detector", "steps")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["complete"] is False and manifest["counts"]["conserved"]
    assert "warning" in proc.stderr.decode()
    for entry in manifest["iterations"] + [manifest["outside"]]:
        load_piece(tmp_path / "out" / entry["file"])


def test_odd_but_legal_content_passes_through_unchanged(tmp_path):
    big = 2 ** 64 + 12345
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": "Spans",
         "tid": "", "ts": 10, "dur": 50},
        {"ph": "X", "cat": "mystery_cat", "name": "ctl\u0001\u001f name", "pid": "Spans",
         "tid": "", "ts": 20, "dur": 1, "args": {"huge": big, "neg": -big}},
    ]
    src = tmp_path / "odd.json"
    src.write_text(json.dumps({"traceEvents": events}))
    split(src, tmp_path / "out")
    piece = load_piece(tmp_path / "out" / "iteration_00000.json.gz")["traceEvents"]
    assert piece == events
    assert type(piece[0]["ts"]) is int
