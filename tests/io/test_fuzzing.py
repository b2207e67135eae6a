"""A fuzzer (issue 12) that mutates generated and real traces (truncation, bit flips, fields of
another type, deep nesting, odd unicode, odd header keys, gzip on top) and runs every command
on them in this process: exit 0 with a valid conserved manifest, or exit 2 with one line and a
manifest that says where it stopped; never a traceback."""
from __future__ import annotations

import collections
import gzip
import json
import os
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import (SHARED_TRACES, check_pieces, events_of, needs_shared, one_error_line,
                      run_in_process)
from stream_split.testing.generate import generate, render

#: The fuzzer's budget: fixed for CI (about 10 s); raise it for a longer hunt.
FUZZ_SCALE = float(os.environ.get("STREAM_SPLIT_FUZZ_SCALE", "1"))


# -- the fuzzer -------------------------------------------------------------------------------------


_ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2 ** 63, max_value=2 ** 80),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(),
                                                          max_size=2))
_FIELDS = ["ph", "cat", "name", "ts", "dur", "pid", "tid", "id", "args", "args.correlation",
           "args.External id"]


@st.composite
def _mutations(draw, data: bytes, events: list):
    """A mutated trace: truncation, bit flips, a field of another type, deep nesting or odd
    unicode in a name (as a JSON escape, surrogates included), maybe gzip on top."""
    kind = draw(st.sampled_from(["truncate", "flip", "type", "nest", "unicode", "header"]))
    if kind == "truncate":
        out = data[:draw(st.integers(0, len(data)))]
    elif kind == "flip":
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(out) - 1))
            out[i] ^= 1 << draw(st.integers(0, 7))
        out = bytes(out)
    else:
        events = [dict(e) for e in events]
        i = draw(st.integers(0, len(events) - 1))
        event = events[i]
        if kind == "type":
            field = draw(st.sampled_from(_FIELDS))
            value = draw(_ODD_VALUES)
            if field.startswith("args."):
                args = event.get("args") if isinstance(event.get("args"), dict) else {}
                event["args"] = dict(args, **{field[5:]: value})
            else:
                event[field] = value
        elif kind == "nest":
            depth = draw(st.integers(1, 400))
            event["args"] = {"x": json.loads("[" * depth + "]" * depth) if depth < 900 else []}
        elif kind == "unicode":
            event["name"] = draw(st.text(st.characters(exclude_categories=()), max_size=6))
        form = "object" if kind == "header" else draw(st.sampled_from(["object", "array",
                                                                        "jsonl"]))
        if form == "object":
            header = {}
            if kind == "header":  # an odd key before or after the events
                depth = draw(st.integers(0, 300))
                value = draw(st.one_of(_ODD_VALUES, st.just("[" * depth + "]" * depth)))
                header[draw(st.text(st.characters(exclude_categories=()), max_size=4))] = value
            body = json.dumps(events)
            if kind == "header" and isinstance(value, str) and value.startswith("["):
                key = json.dumps(next(iter(header)))
                parts = ['"traceEvents":' + body, key + ":" + value]
                out = ("{" + ",".join(parts if draw(st.booleans()) else parts[::-1])
                       + "}").encode()
            else:
                after = draw(st.booleans())
                doc = {"traceEvents": events, **header} if after else {**header,
                                                                        "traceEvents": events}
                out = json.dumps(doc).encode()
        elif form == "array":
            out = json.dumps(events).encode()
        else:
            out = "\n".join(json.dumps(e) for e in events).encode() + b"\n"
    if draw(st.booleans()) and kind != "flip":
        out = gzip.compress(out, compresslevel=1)
        if draw(st.booleans()):
            out = out[:draw(st.integers(0, len(out)))]
    return kind, out


def _assert_clean_outcome(status, err, out_dir: Path, data: bytes) -> None:
    """Exit 0 with a valid, conserved manifest, or exit 2 with one line and a manifest that
    says where it stopped (or none, when nothing could be opened as a trace)."""
    assert "Traceback" not in err, err
    assert status in (0, 2), (status, err)
    if status == 2:
        line = one_error_line(err.encode())
        if (out_dir / "manifest.json").exists():
            manifest = check_pieces(out_dir, None)
            assert manifest["complete"] is False
            assert manifest["stop_reason"] and manifest["stop_reason"] in line
        return
    try:
        events_known = events_of(data) is not None
    except (ValueError, EOFError, OSError, TypeError, KeyError, RecursionError):
        events_known = False
    manifest = check_pieces(out_dir, data if events_known else None)
    if events_known:
        assert manifest["complete"] is True


def _fuzz(base: bytes, tmp_path: Path, capfd, examples: int):
    events = json.loads(base)["traceEvents"]
    runs = collections.Counter()

    @settings(max_examples=int(examples * FUZZ_SCALE), deadline=None, derandomize=FUZZ_SCALE == 1, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=_mutations(base, events), command=st.sampled_from(
        ["split", "split", "split", "boundaries", "tag", "explain"]))
    def check(case, command):
        kind, data = case
        runs[kind] += 1
        trace = tmp_path / "fuzz.json"
        trace.write_bytes(data)
        out = tmp_path / "out"
        shutil.rmtree(out, ignore_errors=True)  # a failed start leaves the last example's
        args = [command, trace, "--pending-limit", "50"]
        if command == "split":
            args += ["-o", out, "--overwrite"]
        status, err = run_in_process(args, capfd)
        runs[status] += 1
        if command == "split":
            _assert_clean_outcome(status, err, out, data)
        else:
            assert "Traceback" not in err and status in (0, 2), err
            if status == 2:
                one_error_line(err.encode())

    check()
    return runs


def test_fuzzer_mutating_a_generated_trace_finds_nothing(tmp_path, capfd):
    base = render(generate("training", 3, steps=3, layers=2), "object").encode()
    runs = _fuzz(base, tmp_path, capfd, examples=150)
    assert {"truncate", "flip", "type", "nest", "unicode", "header", 0, 2} <= set(runs), runs


@needs_shared
def test_fuzzer_mutating_a_real_trace_finds_nothing(tmp_path, capfd):
    real = events_of((SHARED_TRACES / "torch_cpu" / "s1_schedule_step.json.gz").read_bytes())
    base = json.dumps({"traceEvents": real[:1500]}).encode()
    _fuzz(base, tmp_path, capfd, examples=40)
