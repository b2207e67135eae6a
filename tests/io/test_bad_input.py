"""Hostile and odd input (issue 12): fields of the wrong type are counted invalid and kept,
legal oddities (string flow ids, lone surrogates, a byte order mark) are carried through,
too deep nesting, a cut header and a non-array ``traceEvents`` are one clear error, error
positions are accurate, and the library leaves no file open on a broken input."""
from __future__ import annotations

import gzip
import json
import os

import pytest

from conftest import check_pieces, one_error_line, run_cli, run_in_process
from stream_split.testing.generate import generate, render
from stream_split.trace_format import profiler_step_number


# -- defect 7: fields of the wrong type, legal oddities, deep nesting ----------------------------

_BASE_EVENT = {"ph": "X", "cat": "cpu_op", "name": "op", "ts": 10, "dur": 5, "pid": 1, "tid": 1}


@pytest.mark.parametrize("field, value", [
    ("args", "text"), ("args", [1]), ("cat", ["cpu_op"]), ("dur", "5"), ("dur", [5]),
    ("name", 5), ("name", {"a": 1}), ("pid", [1]), ("tid", {"a": 1}),
    ("args", {"correlation": "7"}), ("args", {"correlation": [7]}),
    ("args", {"correlation": {"a": 7}}), ("args", {"External id": "7"}),
    ("args", {"External id": [7]}), ("args", {"External id": {"a": 7}}),
])
def test_a_field_of_the_wrong_type_is_counted_invalid_and_kept(tmp_path, capfd, field, value):
    # One event of each route through the engine (structure, GPU work, GPU annotation, other).
    cats = ["cpu_op", "kernel", "gpu_user_annotation", "cuda_runtime"]
    events = [dict(_BASE_EVENT, ts=float(i)) for i in range(3)]
    events += [{**_BASE_EVENT, "cat": cat, field: value} for cat in cats]
    data = json.dumps({"traceEvents": events}).encode()
    trace = tmp_path / "t.json"
    trace.write_bytes(data)
    status, err = run_in_process(["split", trace, "-o", tmp_path / "d"], capfd)
    assert status == 0 and err == "", err
    manifest = check_pieces(tmp_path / "d", data)
    assert manifest["counts"]["invalid"] == len(cats) and manifest["complete"] is True
    example = manifest["counts"]["invalid_examples"][0]
    named = next(iter(value)) if field == "args" and isinstance(value, dict) else field
    assert example["event_index"] == 3 and f'"{named}"' in example["problem"]
    for command in ("boundaries", "tag", "explain"):
        assert run_in_process([command, trace], capfd) == (0, "")


def test_a_string_flow_id_is_legal_and_carried_through(tmp_path):
    events = [dict(_BASE_EVENT), {"ph": "s", "cat": "ac2g", "id": "x7", "ts": 11, "pid": 1,
                                  "tid": 1, "name": "ac2g"}]
    data = json.dumps({"traceEvents": events}).encode()
    (tmp_path / "t.json").write_bytes(data)
    run_cli("split", tmp_path / "t.json", "-o", tmp_path / "d")
    manifest = check_pieces(tmp_path / "d", data)
    assert manifest["counts"]["invalid"] == 0


def test_lone_surrogates_are_kept_as_their_escapes(tmp_path):
    text = ('{"traceEvents":[{"ph":"X","cat":"cpu_op","ts":1,"dur":1,"pid":1,"tid":1,'
            '"name":"a\\udc00 b\\ud800 c\\ud83d\\ude00 d\\\\udc00","args":{"k\\udc01":"\\udc02"}}]}')
    trace = tmp_path / "t.json"
    trace.write_text(text)
    run_cli("split", trace, "-o", tmp_path / "d", "--plain-json")
    manifest = check_pieces(tmp_path / "d", text.encode())
    piece = (tmp_path / "d" / manifest["iterations"][0]["file"]).read_text()
    # The event's original bytes, escapes as written (the pair too).
    assert '"name":"a\\udc00 b\\ud800 c\\ud83d\\ude00 d\\\\udc00"' in piece
    assert '"k\\udc01":"\\udc02"' in piece
    tagged = run_cli("tag", trace).stdout
    assert b"a\\udc00 b\\ud800" in tagged
    for command in ("boundaries", "explain"):
        assert run_cli(command, trace).returncode == 0
    assert run_cli("boundaries", trace, "--format", "protobuf").returncode == 0


@pytest.mark.parametrize("where", ["args", "header"])
@pytest.mark.parametrize("command", ["split", "boundaries", "tag", "explain"])
def test_deep_nesting_is_one_clear_error(tmp_path, where, command):
    deep = "[" * 10_000 + "]" * 10_000
    good = json.dumps(dict(_BASE_EVENT))
    if where == "args":
        text = '{"traceEvents":[' + good + ',{"ph":"X","ts":1,"args":{"x":' + deep + "}}]}"
    else:
        text = '{"h":' + deep + ',"traceEvents":[' + good + "]}"
    trace = tmp_path / "t.json"
    trace.write_text(text)
    args = [command, trace] + (["-o", tmp_path / "d"] if command == "split" else [])
    done = run_cli(*args, check=False)
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert "nested deeper than 200 levels (near byte" in line
    if command == "split" and where == "header":  # before the first event: nothing written
        assert not (tmp_path / "d").exists()
    elif command == "split":
        manifest = check_pieces(tmp_path / "d", None)
        assert manifest["complete"] is False and "nested deeper" in manifest["stop_reason"]
        assert manifest["counts"]["events_in"] == 1


# -- defect 9: the smaller ones ---------------------------------------------------------------------

def test_an_input_cut_inside_the_header_splits_what_is_complete(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text('{"schemaVersion": 1, "deviceProperties": [{"name": "MI300')
    done = run_cli("split", trace, "-o", tmp_path / "d")
    assert b"incomplete" in done.stderr
    manifest = check_pieces(tmp_path / "d", None)
    assert manifest["complete"] is False and manifest["counts"]["events_in"] == 0


@pytest.mark.parametrize("value", ["null", "{}", "3", '"x"'])
def test_trace_events_that_are_not_an_array_are_an_error(tmp_path, value):
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": ' + value + "}")
    done = run_cli("boundaries", trace, check=False)
    assert done.returncode == 2 and "not an array" in one_error_line(done.stderr)


def test_a_utf8_byte_order_mark_is_accepted(small_trace, tmp_path):
    data = b"\xef\xbb\xbf" + small_trace.read_bytes()
    (tmp_path / "t.json").write_bytes(data)
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(data))
    for name in ("t.json", "t.json.gz"):
        run_cli("split", tmp_path / name, "-o", tmp_path / name.replace(".", "_"))
        assert check_pieces(tmp_path / name.replace(".", "_"), data)["complete"] is True


def test_explain_escapes_control_characters(tmp_path):
    name = "step\x1b[2J\x07"
    events = [dict(_BASE_EVENT, name=name, ts=float(10 * i), dur=5.0) for i in range(6)]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    out = run_cli("explain", tmp_path / "t.json").stdout.decode()
    assert "\x1b" not in out and "\x07" not in out
    assert "chosen unit: step\\x1b[NJ\\x07" in out  # shown, escaped (digits folded)


@pytest.mark.parametrize("offset", [100, 70_000, 300_001])
def test_near_byte_is_accurate(small_trace, tmp_path, offset):
    data = small_trace.read_bytes()
    at = data.index(b'{"ph"', offset)
    (tmp_path / "t.json").write_bytes(data[:at] + b"{ph:" + data[at + 4:])
    done = run_cli("boundaries", tmp_path / "t.json", check=False)
    line = one_error_line(done.stderr)
    near = int(line.rsplit("near byte ", 1)[1].rstrip(")"))
    assert at <= near <= at + 4


# -- the library API leaves nothing open ------------------------------------------------------------

def test_the_library_leaves_no_file_open(small_trace, tmp_path):
    import gc
    import warnings
    import stream_split
    from stream_split import SplitOptions
    broken = tmp_path / "broken.json"
    data = small_trace.read_bytes()
    at = data.index(b'{"ph"', 100_000)
    broken.write_bytes(data[:at] + b"{ph:" + data[at + 4:])
    before = set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        # pending_limit 10: the spill file is used too
        assert list(stream_split.iterations(str(small_trace), SplitOptions(pending_limit=10)))
        with pytest.raises(Exception, match="not valid JSON"):
            list(stream_split.iterations(str(broken)))
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    if before:
        assert set(os.listdir("/proc/self/fd")) <= before


@pytest.mark.parametrize("digits", ["7" * 5000, "9" * 31, "9" * 20, str(2**63)])
@pytest.mark.parametrize("command", [["boundaries"], ["boundaries", "--format", "protobuf"],
                                     ["tag"], ["explain"], ["summary"]])
def test_a_step_number_beyond_int64_is_only_a_name(tmp_path, digits, command):
    """Python's limit on digits and protobuf's int64 ``step``: such a step has no number."""
    text = render(generate("training", 1, steps=4), "object")
    path = tmp_path / "t.json"
    path.write_text(text.replace('"ProfilerStep#2"', f'"ProfilerStep#{digits}"'))
    done = run_cli(*command, path, "--detector", "steps", check=False)
    assert done.returncode == 0, done.stderr.decode()[-300:]
    if command == ["boundaries"]:
        steps = [json.loads(line).get("step") for line in done.stdout.splitlines()]
        assert None in steps and 3 in steps and digits not in map(str, steps)


def test_the_largest_int64_is_still_a_step_number():
    assert profiler_step_number(f"ProfilerStep#{2**63 - 1}") == 2**63 - 1
    assert profiler_step_number(f"ProfilerStep#{2**63}") is None
    assert profiler_step_number("ProfilerStep#\u0663") is None  # a digit, but not ASCII
