"""Issue 12: nothing lost, nothing faked. One test per numbered defect of the issue, crash and
signal cases with real processes, and a fuzzer that mutates traces.

Every check of pieces here is independent of the splitter: ``_check_pieces`` parses the input
and the pieces with the standard library and compares the events as multisets.
"""
from __future__ import annotations

import collections
import gzip
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import SHARED_TRACES, needs_shared, run_cli
from stream_split.output import FOLDER_MARKER, TEMP_PREFIX, lock_path, target_key
from stream_split.testing.generate import generate, render

CLI = [sys.executable, "-m", "stream_split.cli"]
WAIT = 60
#: The fuzzer's budget: fixed for CI (about 10 s); raise it for a longer hunt.
FUZZ_SCALE = float(os.environ.get("STREAM_SPLIT_FUZZ_SCALE", "1"))


# -- independent checks ---------------------------------------------------------------------------

def _events_of(data: bytes) -> list:
    """The events of a whole trace (object, array or JSON Lines), parsed by the standard
    library."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    text = data.decode("utf-8", "replace").lstrip("\ufeff")
    try:
        value = json.loads(text)
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return value["traceEvents"] if isinstance(value, dict) else value


def _key(event) -> str:
    return json.dumps(event, sort_keys=True)


def _check_pieces(out_dir: Path, input_bytes: bytes | None) -> dict:
    """The manifest of ``out_dir``, after checking it against its pieces and (when given) the
    input: every non-metadata event exactly once, every piece holding all the metadata, no file
    the manifest does not name (besides the folder's marker, which lists them all)."""
    manifest = json.loads((out_dir / "manifest.json").read_text())
    counts = manifest["counts"]
    named = {it["file"] for it in manifest["iterations"] if it["file"]}
    if manifest["outside"]["file"]:
        named.add(manifest["outside"]["file"])
    assert set(os.listdir(out_dir)) == named | {"manifest.json", FOLDER_MARKER}, \
        "no stale or stray files"
    marker = json.loads((out_dir / FOLDER_MARKER).read_text())
    assert marker["files"] == sorted(named | {"manifest.json"})
    seen = collections.Counter()
    metadata = None
    by_file = {it["file"]: it["events"] for it in manifest["iterations"] if it["file"]}
    by_file[manifest["outside"]["file"]] = manifest["outside"]["events"]
    for name in named:
        events = _events_of((out_dir / name).read_bytes())
        meta = [_key(e) for e in events if e.get("ph") == "M"]
        body = [_key(e) for e in events if e.get("ph") != "M"]
        assert metadata is None or meta == metadata, "every piece holds the same metadata"
        metadata = meta
        assert len(body) == by_file[name], f"{name}: manifest count"
        seen.update(body)
    assert counts["conserved"] is True
    assert sum(seen.values()) == counts["events_out"] == counts["non_metadata_in"]
    if input_bytes is not None:
        expected = collections.Counter(_key(e) for e in _events_of(input_bytes)
                                       if e.get("ph") != "M")
        if manifest["complete"]:
            assert seen == expected, "every input event exactly once"
        else:  # a stop: what is there came from the input, each at most as often
            assert not seen - expected, "no event that is not in the input, none duplicated"
    return manifest


def _temp_prefix(parent: Path, name: str) -> str:
    """The names of the staging folders (and replaced results) of a split into parent/name."""
    return TEMP_PREFIX + target_key(str(parent / name)) + "-"


def _no_leftovers(parent: Path, name: str) -> None:
    left = [p for p in os.listdir(parent) if p.startswith(_temp_prefix(parent, name))]
    assert left == [], f"staging leftovers: {left}"
    assert not os.path.lexists(lock_path(str(parent / name))), "the lock file is left"


def _one_error_line(stderr: bytes) -> str:
    text = stderr.decode("utf-8", "replace")
    assert "Traceback" not in text, text
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stream-split: error: "), text
    return lines[0]


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory):
    """A generated trace (9.5 MB) that a split takes 0.3-1 s on, depending on the machine; the
    kill and signal tests time it before they choose their moments."""
    path = tmp_path_factory.mktemp("long") / "long.json"
    path.write_bytes(render(generate("training", 0, steps=120), "object").encode())
    return path


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("small") / "small.json"
    path.write_bytes(render(generate("training", 1, steps=6), "object").encode())
    return path


def _split(trace, out, *extra, **kwargs):
    return subprocess.Popen(CLI + ["split", str(trace), "-o", str(out), *map(str, extra)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def _wait_for_staging(parent: Path, name: str, proc) -> None:
    """Handshake: the run has taken its folder (so it is past start-up)."""
    deadline = time.monotonic() + WAIT
    while not any(p.startswith(_temp_prefix(parent, name)) for p in os.listdir(parent)):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.005)


# -- defect 1: a rerun after a crash ----------------------------------------------------------------

def _full_run_seconds(trace, tmp_path) -> float:
    started = time.monotonic()
    done = run_cli("split", trace, "-o", tmp_path / "timing", timeout=WAIT)
    assert done.returncode == 0
    return time.monotonic() - started


def test_kill_9_at_ten_points_then_a_rerun_finds_every_event_exactly_once(long_trace, tmp_path):
    data = long_trace.read_bytes()
    old_trace = tmp_path / "old.json"
    old_trace.write_bytes(render(generate("training", 2, steps=5), "object").encode())
    old = old_trace.read_bytes()
    seconds = _full_run_seconds(long_trace, tmp_path)
    outcomes = collections.Counter()
    for point in range(10):
        out = tmp_path / f"d{point}"
        replacing = point % 2 == 1  # odd points: kill a run that replaces an old result
        if replacing:
            assert run_cli("split", old_trace, "-o", out).returncode == 0
        proc = _split(long_trace, out, *(["--overwrite"] if replacing else []))
        time.sleep(seconds * (point + 0.5) / 10)
        proc.kill()
        proc.wait()
        proc.stdout.close(), proc.stderr.close()
        # After the crash: the old complete result, the new complete one, or nothing.
        if out.exists():
            manifest = json.loads((out / "manifest.json").read_text())
            source = data if manifest["input"] == str(long_trace) else old
            assert manifest["complete"] is True
            _check_pieces(out, source)
            outcomes["new" if source is data else "old"] += 1
        else:
            outcomes["nothing"] += 1
        rerun = run_cli("split", long_trace, "-o", out, "--overwrite", timeout=WAIT)
        assert rerun.returncode == 0, rerun.stderr
        manifest = _check_pieces(out, data)
        assert manifest["complete"] is True
        _no_leftovers(tmp_path, out.name)
    print(f"kill -9 at 10 points: after the kill the folder held {dict(outcomes)}")
    assert sum(outcomes.values()) == 10


# -- defect 2: two signals 5 ms apart ---------------------------------------------------------------

@pytest.fixture(scope="module")
def seconds_after_staging(long_trace, tmp_path_factory) -> float:
    """How long a split of ``long_trace`` runs once it has taken its folder, on this machine
    (the signals below must land while it runs, whatever the machine's speed)."""
    parent = tmp_path_factory.mktemp("timing")
    proc = _split(long_trace, parent / "d")
    _wait_for_staging(parent, "d", proc)
    started = time.monotonic()
    proc.communicate(timeout=WAIT)
    assert proc.returncode == 0
    return time.monotonic() - started


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.parametrize("share", [0.1, 0.6])  # of the run's time after it took its folder
def test_two_signals_5_ms_apart_leave_one_valid_conserved_manifest(
        long_trace, seconds_after_staging, tmp_path, sig, status, share):
    out = tmp_path / "d"
    proc = _split(long_trace, out)
    _wait_for_staging(tmp_path, "d", proc)
    time.sleep(share * seconds_after_staging)
    assert proc.poll() is None, "the run ended before the signal came"
    proc.send_signal(sig)
    time.sleep(0.005)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == status, err.decode()
    assert "Traceback" not in err.decode()
    manifest = _check_pieces(out, long_trace.read_bytes())
    if not manifest["complete"]:
        assert "interrupted" in manifest["stop_reason"]
    _no_leftovers(tmp_path, "d")


# -- defect 3: two concurrent runs into one folder ------------------------------------------------

def test_two_concurrent_splits_into_one_folder_one_wins_the_other_fails_cleanly(long_trace,
                                                                               tmp_path):
    out = tmp_path / "d"
    first, second = _split(long_trace, out), _split(long_trace, out)
    results = [(p.wait(WAIT), p.communicate()[1]) for p in (first, second)]
    assert sorted(status for status, _ in results) == [0, 2]
    loser = next(err for status, err in results if status == 2)
    line = _one_error_line(loser)
    assert "another stream-split is writing" in line or "not empty" in line
    manifest = _check_pieces(out, long_trace.read_bytes())
    assert manifest["complete"] is True
    _no_leftovers(tmp_path, "d")


# -- defect 4: a failed rerun mixes two runs ------------------------------------------------------

def _limit_file_size():
    # A "full disk" any user can make: writes beyond 64 KiB fail with EFBIG.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


def test_a_rerun_that_fails_on_a_full_disk_leaves_the_old_result_whole(small_trace, long_trace,
                                                                       tmp_path):
    out = tmp_path / "d"
    assert run_cli("split", small_trace, "-o", out).returncode == 0
    proc = _split(long_trace, out, "--overwrite", "--plain-json", preexec_fn=_limit_file_size)
    _, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 2
    assert "File too large" in _one_error_line(err)
    manifest = _check_pieces(out, small_trace.read_bytes())
    assert manifest["input"] == str(small_trace)
    _no_leftovers(tmp_path, "d")


def test_overwrite_removes_the_stale_pieces_of_a_larger_split(small_trace, tmp_path):
    out = tmp_path / "d"
    assert run_cli("split", small_trace, "-o", out).returncode == 0
    assert run_cli("split", small_trace, "-o", out, "--overwrite", "--iterations", "0").returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    files = {it["file"] for it in manifest["iterations"] if it["file"]} | {
        manifest["outside"]["file"], "manifest.json"}
    assert set(os.listdir(out)) == files | {FOLDER_MARKER}
    assert "iteration_00001.json.gz" not in files


def test_a_non_empty_folder_is_refused_without_overwrite(small_trace, tmp_path):
    out = tmp_path / "d"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    done = run_cli("split", small_trace, "-o", out, check=False)
    assert done.returncode == 2 and "--overwrite" in _one_error_line(done.stderr)
    assert os.listdir(out) == ["keep.txt"]


# -- defect 5: planted links are never followed --------------------------------------------------

def test_links_planted_in_the_output_folder_are_never_followed(small_trace, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    victims = tmp_path / "victims"
    victims.mkdir()
    (victims / "v").write_bytes(b"precious")
    out = tmp_path / "d"
    run_cli("split", small_trace, "-o", out)
    (out / "iteration_00001.json.gz").unlink()  # one of ours, now a link: not ours any more
    planted = (".spool/0.part", "iteration_00001.json.gz.tmp", "iteration_00001.json.gz",
               "manifest.json.tmp")
    (out / ".spool").mkdir()
    for name in planted:
        (out / name).symlink_to(victim)
    # Named like a staging folder of this target, a link: left alone.
    (tmp_path / (_temp_prefix(tmp_path, "d") + "planted1")).symlink_to(victims)
    done = run_cli("split", small_trace, "-o", out, "--overwrite", check=False)
    assert done.returncode == 2
    assert "iteration_00001.json.gz" in _one_error_line(done.stderr)
    assert victim.read_bytes() == b"precious" and (victims / "v").read_bytes() == b"precious"
    assert all((out / name).is_symlink() for name in planted)


def test_a_planted_lock_link_is_refused(small_trace, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # the runs' and lock_path's
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    Path(lock_path(str(tmp_path / "d"))).symlink_to(victim)
    done = run_cli("split", small_trace, "-o", tmp_path / "d", check=False)
    assert done.returncode == 2 and "lock" in _one_error_line(done.stderr)
    assert victim.read_bytes() == b"precious"


# -- defect 7: one line and exit 2, never a traceback ---------------------------------------------

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
    status, err = _run_in_process(["split", trace, "-o", tmp_path / "d"], capfd)
    assert status == 0 and err == "", err
    manifest = _check_pieces(tmp_path / "d", data)
    assert manifest["counts"]["invalid"] == len(cats) and manifest["complete"] is True
    example = manifest["counts"]["invalid_examples"][0]
    named = next(iter(value)) if field == "args" and isinstance(value, dict) else field
    assert example["event_index"] == 3 and f'"{named}"' in example["problem"]
    for command in ("boundaries", "tag", "explain"):
        assert _run_in_process([command, trace], capfd) == (0, "")


def test_a_string_flow_id_is_legal_and_carried_through(tmp_path):
    events = [dict(_BASE_EVENT), {"ph": "s", "cat": "ac2g", "id": "x7", "ts": 11, "pid": 1,
                                  "tid": 1, "name": "ac2g"}]
    data = json.dumps({"traceEvents": events}).encode()
    (tmp_path / "t.json").write_bytes(data)
    run_cli("split", tmp_path / "t.json", "-o", tmp_path / "d")
    manifest = _check_pieces(tmp_path / "d", data)
    assert manifest["counts"]["invalid"] == 0


def test_lone_surrogates_are_kept_as_their_escapes(tmp_path):
    text = ('{"traceEvents":[{"ph":"X","cat":"cpu_op","ts":1,"dur":1,"pid":1,"tid":1,'
            '"name":"a\\udc00 b\\ud800 c\\ud83d\\ude00 d\\\\udc00","args":{"k\\udc01":"\\udc02"}}]}')
    trace = tmp_path / "t.json"
    trace.write_text(text)
    run_cli("split", trace, "-o", tmp_path / "d", "--plain-json")
    manifest = _check_pieces(tmp_path / "d", text.encode())
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
    line = _one_error_line(done.stderr)
    assert "nested deeper than 200 levels (near byte" in line
    if command == "split" and where == "header":  # before the first event: nothing written
        assert not (tmp_path / "d").exists()
    elif command == "split":
        manifest = _check_pieces(tmp_path / "d", None)
        assert manifest["complete"] is False and "nested deeper" in manifest["stop_reason"]
        assert manifest["counts"]["events_in"] == 1


def _input_paths(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    return {"under a file": tmp_path / "file" / "t.json", "a folder": tmp_path,
            "too long": tmp_path / ("a" * 5000), "a link loop": tmp_path / "loop1",
            "missing": tmp_path / "missing.json", "an I/O error": "/proc/self/mem"}


@pytest.mark.parametrize("case", ["under a file", "a folder", "too long", "a link loop",
                                  "missing", "an I/O error"])
def test_a_bad_input_path_is_one_line(tmp_path, case):
    path = _input_paths(tmp_path)[case]
    for command in ("boundaries", "split"):
        args = [command, path] + (["-o", tmp_path / "out"] if command == "split" else [])
        done = run_cli(*args, check=False)
        assert done.returncode == 2
        _one_error_line(done.stderr)


@pytest.mark.parametrize("output", ["file", "/dev/null", "/dev/full", "file/under", "", "/"])
def test_a_bad_output_folder_is_one_line(small_trace, tmp_path, output):
    (tmp_path / "file").write_text("x")
    target = output if output.startswith("/") or not output else str(tmp_path / output)
    done = run_cli("split", small_trace, "-o", target, check=False)
    assert done.returncode == 2
    _one_error_line(done.stderr)
    assert (tmp_path / "file").read_text() == "x"


def test_a_read_only_output_folder_is_one_line(small_trace, tmp_path):
    parent = tmp_path / "ro"
    parent.mkdir()
    os.chmod(parent, 0o555)
    try:
        if os.access(parent, os.W_OK):  # root ignores the mode: a read-only mount instead
            parent = Path("/proc/self")
        done = run_cli("split", small_trace, "-o", parent / "d", check=False)
        assert done.returncode == 2
        _one_error_line(done.stderr)
    finally:
        os.chmod(tmp_path / "ro", 0o755)


@pytest.mark.parametrize("option", [["--compresslevel", "99"], ["--compresslevel", "x"],
                                    ["--iterations", "abc"], ["--iterations", "1-x"],
                                    ["--pending-limit", "0"], ["--level", "-1"],
                                    ["--idle-timeout", "nan"]])
def test_a_bad_option_value_is_one_line(small_trace, tmp_path, option):
    done = run_cli("split", small_trace, "-o", tmp_path / "d", *option, check=False)
    assert done.returncode == 2
    assert option[0] in _one_error_line(done.stderr)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("command", ["boundaries", "tag", "explain"])
def test_stdout_on_a_full_device_is_one_line(small_trace, command):
    with open("/dev/full", "wb") as full:
        done = subprocess.run(CLI + [command, str(small_trace)], stdout=full,
                              stderr=subprocess.PIPE, timeout=WAIT)
    assert done.returncode == 2
    assert "No space left" in _one_error_line(done.stderr)


# -- defect 8: a blocked read wakes up on the first signal -----------------------------------------

def _wait_until_open(proc, path: Path) -> None:
    """Handshake: ``proc`` holds ``path`` open (so it is past start-up, its handlers set)."""
    deadline = time.monotonic() + WAIT
    fds = Path(f"/proc/{proc.pid}/fd")
    while not any(os.path.realpath(fd) == os.path.realpath(path) for fd in fds.iterdir()
                  if os.path.islink(fd)):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.005)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("follow", [[], ["--follow"]], ids=["read", "follow"])
def test_sigterm_stops_a_split_of_a_fifo_with_no_writer(tmp_path, follow):
    """Stopped before its input's first byte, a split writes nothing (no folder, no lock)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = _split(fifo, tmp_path / "d", *follow)
    _wait_until_open(proc, fifo)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 143, err.decode()
    assert "nothing written" in err.decode() and "Traceback" not in err.decode()
    assert sorted(os.listdir(tmp_path)) == ["fifo"]
    _no_leftovers(tmp_path, "d")


@pytest.mark.parametrize("command", ["boundaries", "tag", "explain"])
def test_one_sigint_stops_a_read_of_a_silent_pipe(small_trace, command):
    proc = subprocess.Popen(CLI + [command, "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = small_trace.read_bytes()[:50_000]
    proc.stdin.write(head)  # some events, then silence (the writer hangs)
    proc.stdin.flush()
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=10)
    finally:
        proc.stdin.close()
    assert proc.returncode == 130, err.decode()
    assert "Traceback" not in err.decode()


# -- defect 9: the smaller ones ---------------------------------------------------------------------

def test_an_input_cut_inside_the_header_splits_what_is_complete(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text('{"schemaVersion": 1, "deviceProperties": [{"name": "MI300')
    done = run_cli("split", trace, "-o", tmp_path / "d")
    assert b"incomplete" in done.stderr
    manifest = _check_pieces(tmp_path / "d", None)
    assert manifest["complete"] is False and manifest["counts"]["events_in"] == 0


@pytest.mark.parametrize("value", ["null", "{}", "3", '"x"'])
def test_trace_events_that_are_not_an_array_are_an_error(tmp_path, value):
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": ' + value + "}")
    done = run_cli("boundaries", trace, check=False)
    assert done.returncode == 2 and "not an array" in _one_error_line(done.stderr)


def test_a_utf8_byte_order_mark_is_accepted(small_trace, tmp_path):
    data = b"\xef\xbb\xbf" + small_trace.read_bytes()
    (tmp_path / "t.json").write_bytes(data)
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(data))
    for name in ("t.json", "t.json.gz"):
        run_cli("split", tmp_path / name, "-o", tmp_path / name.replace(".", "_"))
        assert _check_pieces(tmp_path / name.replace(".", "_"), data)["complete"] is True


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
    line = _one_error_line(done.stderr)
    near = int(line.rsplit("near byte ", 1)[1].rstrip(")"))
    assert at <= near <= at + 4


def test_an_interrupted_split_exits_143_after_sigterm(long_trace, tmp_path):
    proc = _split(long_trace, tmp_path / "d")
    _wait_for_staging(tmp_path, "d", proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 143, err.decode()
    _check_pieces(tmp_path / "d", long_trace.read_bytes())


# -- the fuzzer -------------------------------------------------------------------------------------

def _run_in_process(argv, capfd) -> tuple[int, str]:
    """``stream-split`` in this process (hundreds of cases in seconds); the handlers it
    installs for SIGINT/SIGTERM are put back afterwards."""
    from stream_split.cli import main
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            status = main([str(a) for a in argv])
        except SystemExit as e:
            status = e.code
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
    return status, capfd.readouterr().err


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
        line = _one_error_line(err.encode())
        if (out_dir / "manifest.json").exists():
            manifest = _check_pieces(out_dir, None)
            assert manifest["complete"] is False
            assert manifest["stop_reason"] and manifest["stop_reason"] in line
        return
    try:
        events_known = _events_of(data) is not None
    except (ValueError, EOFError, OSError, TypeError, KeyError, RecursionError):
        events_known = False
    manifest = _check_pieces(out_dir, data if events_known else None)
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
        status, err = _run_in_process(args, capfd)
        runs[status] += 1
        if command == "split":
            _assert_clean_outcome(status, err, out, data)
        else:
            assert "Traceback" not in err and status in (0, 2), err
            if status == 2:
                _one_error_line(err.encode())

    check()
    return runs


def test_fuzzer_mutating_a_generated_trace_finds_nothing(tmp_path, capfd):
    base = render(generate("training", 3, steps=3, layers=2), "object").encode()
    runs = _fuzz(base, tmp_path, capfd, examples=150)
    assert {"truncate", "flip", "type", "nest", "unicode", "header", 0, 2} <= set(runs), runs


@needs_shared
def test_fuzzer_mutating_a_real_trace_finds_nothing(tmp_path, capfd):
    real = _events_of((SHARED_TRACES / "torch_cpu" / "s1_schedule_step.json.gz").read_bytes())
    base = json.dumps({"traceEvents": real[:1500]}).encode()
    _fuzz(base, tmp_path, capfd, examples=40)


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
