"""Issue 22, the write side: an output folder is ours alone. ``--overwrite`` replaces only
what the tool wrote (its marker lists it), never a user's file or the input; what appears
while a run goes on survives its commit; a folder named like a staging folder is the user's
unless it carries our marker; the lock is gone at the end; a 255-byte folder name works; an
input that is missing or no trace leaves nothing at all.

Real files in ``tmp_path``, the real command line in a subprocess (``python -m
stream_split.cli`` with this checkout first on ``PYTHONPATH``), the lock in a runtime folder
of the test's own (``XDG_RUNTIME_DIR``), so that "no lock left" can be looked at.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stream_split import split
from stream_split.output import FOLDER_MARKER, MARKER_BEING_WRITTEN, TEMP_PREFIX, target_key
from stream_split.read import TraceInputError
from stream_split.testing.generate import generate, render, write_trace

REPO = Path(__file__).resolve().parents[2]
WAIT = 60


@pytest.fixture
def runtime(tmp_path, monkeypatch) -> Path:
    """The runtime folder the runs lock in (empty when no lock is left)."""
    folder = tmp_path / "runtime"
    folder.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    return folder


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}


def _cli(*args, cwd=None, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stream_split.cli", *map(str, args)],
                          capture_output=True, cwd=cwd, env=_env(), timeout=WAIT, input=stdin)


def _started(*args) -> subprocess.Popen:
    """A run reading its trace from stdin (the test decides when the input ends)."""
    return subprocess.Popen([sys.executable, "-m", "stream_split.cli", *map(str, args)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env())


def _one_error_line(done) -> str:
    err = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stream-split: error: "), err
    return lines[0]


def _tree(folder: Path) -> dict:
    """Every file under ``folder`` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _trace(path: Path, seed: int = 1, steps: int = 4) -> Path:
    path.write_text(render(generate("training", seed, steps=steps), "object"))
    return path


def _own_files(out: Path) -> list[str]:
    return json.loads((out / FOLDER_MARKER).read_text())["files"]


def _wait_for_staging(out: Path, proc) -> None:
    """Handshake: the run made its staging folder (it has read its trace's first event)."""
    prefix = TEMP_PREFIX + target_key(str(out))
    deadline = time.monotonic() + WAIT
    while not any(p.startswith(prefix) for p in os.listdir(out.parent)):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.005)


# -- --overwrite replaces what the tool wrote, and nothing else ---------------------------------

@pytest.mark.parametrize("where", ["a folder", "the current folder (-o .)"])
def test_overwrite_refuses_a_folder_holding_files_it_did_not_write(tmp_path, runtime, where):
    trace = _trace(tmp_path / "t.json")
    work = tmp_path / "work"
    (work / "keep").mkdir(parents=True)
    (work / "a.txt").write_text("mine")
    (work / "keep" / "precious.txt").write_text("mine too")
    before = _tree(work)
    if where == "a folder":
        done = _cli("split", trace, "-o", work, "--overwrite")
    else:
        done = _cli("split", trace, "-o", ".", "--overwrite", cwd=work)
    assert done.returncode == 2
    line = _one_error_line(done)
    assert "a.txt" in line and "keep/" in line and "did not write" in line
    assert done.stdout == b""
    assert _tree(work) == before and sorted(os.listdir(work)) == ["a.txt", "keep"]
    assert os.listdir(runtime) == []


def test_overwrite_refuses_our_own_earlier_output_once_a_file_was_added(tmp_path, runtime):
    trace = _trace(tmp_path / "t.json")
    out = tmp_path / "out"
    assert _cli("split", trace, "-o", out).returncode == 0
    (out / "notes.txt").write_text("my notes on this run")
    before = _tree(out)
    done = _cli("split", trace, "-o", out, "--overwrite")
    assert done.returncode == 2 and "notes.txt" in _one_error_line(done)
    assert _tree(out) == before


@pytest.mark.parametrize("how", ["a file of its own", "one of our pieces", "a hard link"])
def test_overwrite_refuses_the_folder_holding_the_input(tmp_path, runtime, how):
    out = tmp_path / "out"
    if how == "a file of its own":  # the user's folder: the trace and notes
        out.mkdir()
        trace = _trace(out / "trace.json")
        (out / "notes.txt").write_text("mine")
    else:  # our earlier output: the input is a piece it holds (listed by its marker)
        assert _cli("split", _trace(tmp_path / "t.json"), "-o", out).returncode == 0
        trace = out / "iteration_00001.json.gz"
        if how == "a hard link":
            os.link(trace, tmp_path / "elsewhere.json.gz")
            trace = tmp_path / "elsewhere.json.gz"
    before = _tree(out)
    done = _cli("split", trace, "-o", out, "--overwrite")
    assert done.returncode == 2
    line = _one_error_line(done)
    assert "holds the input" in line and str(trace) in line
    assert _tree(out) == before


def test_overwrite_replaces_our_own_earlier_output(tmp_path, runtime):
    big, small = _trace(tmp_path / "big.json", 1, steps=6), _trace(tmp_path / "s.json", 2, 3)
    out = tmp_path / "out"
    assert _cli("split", big, "-o", out).returncode == 0
    assert len(_own_files(out)) == 6 + 2  # pieces, outside, manifest
    done = _cli("split", small, "-o", out, "--overwrite")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["input"] == str(small)
    files = sorted(it["file"] for it in manifest["iterations"]) + ["manifest.json",
                                                                   "outside.json.gz"]
    assert sorted(_own_files(out)) == sorted(files)  # as the file system lists them
    assert sorted(os.listdir(out)) == sorted(files + [FOLDER_MARKER])  # no stale piece
    assert sorted(os.listdir(tmp_path)) == ["big.json", "out", "runtime", "s.json"]
    assert os.listdir(runtime) == []


def test_overwrite_replaces_our_own_earlier_split_of_several_ranks(tmp_path, runtime):
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for r in range(2):
        write_trace(generate("training", seed=20 + r, rank=r, world_size=2),
                    str(ranks / f"rank{r}.json.gz"))
    out = tmp_path / "out"
    assert _cli("split", ranks, "-o", out).returncode == 0
    assert "rank_1/manifest.json" in _own_files(out)
    done = _cli("split", ranks, "-o", out, "--overwrite", "--iterations", "0")
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(out / "rank_0")) == [
        "iteration_00000.json.gz", "manifest.json", "outside.json.gz"]
    assert set(_tree(out)) == set(_own_files(out)) | {FOLDER_MARKER}


# -- what appears during a run survives its commit ------------------------------------------------

@pytest.mark.parametrize("earlier_output", [False, True], ids=["new folder", "overwrite"])
def test_a_file_appearing_in_the_output_during_the_run_survives_the_commit(
        tmp_path, runtime, earlier_output):
    data = render(generate("training", 1, steps=6), "object").encode()
    out = tmp_path / "out"
    if earlier_output:
        assert _cli("split", "-", "-o", out, stdin=data).returncode == 0
    proc = _started("split", "-", "-o", out, *(["--overwrite"] if earlier_output else []))
    proc.stdin.write(data[:len(data) // 2])
    proc.stdin.flush()
    _wait_for_staging(out, proc)
    out.mkdir(exist_ok=True)
    (out / "appeared.txt").write_text("written while the split ran")
    before = _tree(out)
    proc.stdin.write(data[len(data) // 2:])
    proc.stdin.close()
    proc.wait(WAIT)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.read(),
                                       proc.stderr.read())
    assert done.returncode == 2
    line = _one_error_line(done)
    assert "nothing written" in line and "appeared.txt" in line
    assert _tree(out) == before  # the user's file, and the earlier output, as they were
    assert sorted(os.listdir(tmp_path)) == ["out", "runtime"]  # no staging folder left
    assert os.listdir(runtime) == []


def test_a_run_into_a_subfolder_of_a_running_target_is_refused(tmp_path, runtime):
    data = render(generate("training", 1, steps=6), "object").encode()
    out = tmp_path / "out"
    first = _started("split", "-", "-o", out)
    first.stdin.write(data[:len(data) // 2])
    first.stdin.flush()
    _wait_for_staging(out, first)
    second = _cli("split", _trace(tmp_path / "t.json"), "-o", out / "sub")
    first.stdin.write(data[len(data) // 2:])
    first.stdin.close()
    assert first.wait(WAIT) == 0, first.stderr.read()
    assert second.returncode == 2
    assert "another stream-split is writing to" in _one_error_line(second)
    assert not (out / "sub").exists() and (out / "manifest.json").exists()
    first.stdout.close(), first.stderr.close()


def test_a_folder_named_like_a_staging_folder_is_left_alone(tmp_path, runtime):
    trace = _trace(tmp_path / "t.json")
    out = tmp_path / "out"
    # The old naming, and ours for this very target: without our marker, the user's.
    for name in (".out.staging-abcdefgh", TEMP_PREFIX + target_key(str(out)) + "-abcdefgh"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "mine.txt").write_text("mine")
    assert _cli("split", trace, "-o", out).returncode == 0
    assert _cli("split", trace, "-o", out, "--overwrite").returncode == 0
    for name in (".out.staging-abcdefgh", TEMP_PREFIX + target_key(str(out)) + "-abcdefgh"):
        assert (tmp_path / name / "mine.txt").read_text() == "mine"


def test_leftovers_of_a_crashed_run_go_but_a_users_file_in_them_stays(tmp_path, runtime):
    trace = _trace(tmp_path / "t.json")
    out = tmp_path / "out"
    prefix = TEMP_PREFIX + target_key(str(out))
    # A crash between the two renames of a replacement: the earlier output, renamed away;
    # a file of the user's has come into it since.
    assert _cli("split", trace, "-o", out).returncode == 0
    parked = tmp_path / (prefix + "-parked01")
    out.rename(parked)
    (parked / "mine.txt").write_text("mine")
    # A crash during a run: its staging folder (marked, no list yet), a piece half written.
    staging = tmp_path / (prefix + "-staging1")
    staging.mkdir()
    (staging / FOLDER_MARKER).write_text('{"format": "stream-split/folder", "files": null}')
    (staging / "iteration_00000.json.gz").write_bytes(b"\x1f\x8b")
    assert _cli("split", trace, "-o", out).returncode == 0
    assert not staging.exists()
    assert sorted(os.listdir(parked)) == ["mine.txt"]


def test_a_staging_folder_killed_as_its_marker_was_begun_goes_but_a_users_file_stays(tmp_path,
                                                                                     runtime):
    trace = _trace(tmp_path / "t.json")
    out = tmp_path / "out"
    prefix = TEMP_PREFIX + target_key(str(out))
    marker = b'{\n"format": "stream-split/folder",\n"version": 1,\n"files": null\n}\n'
    # A run killed after making its staging folder, as it wrote the marker (not yet in place).
    begun = {"begun000": b"", "begun001": marker[:30], "begun002": marker}
    # The same name, but not (only) the start of a staging marker: the user's.
    users = {"users000": b"mine", "users001": marker[:-1] + b"\nmine",
             "users002": marker.replace(b"null", b'["x"]')}
    for suffix, text in {**begun, **users}.items():
        (tmp_path / f"{prefix}-{suffix}").mkdir()
        (tmp_path / f"{prefix}-{suffix}" / MARKER_BEING_WRITTEN).write_bytes(text)
    beside = tmp_path / f"{prefix}-users003"  # the start of one, beside a file of the user's
    beside.mkdir()
    (beside / MARKER_BEING_WRITTEN).write_bytes(b"")
    (beside / "mine.txt").write_text("mine")
    assert _cli("split", trace, "-o", out).returncode == 0
    for suffix in begun:
        assert not (tmp_path / f"{prefix}-{suffix}").exists()
    for suffix, text in users.items():
        assert (tmp_path / f"{prefix}-{suffix}" / MARKER_BEING_WRITTEN).read_bytes() == text
    assert sorted(os.listdir(beside)) == sorted([MARKER_BEING_WRITTEN, "mine.txt"])


def test_a_folder_name_of_255_bytes_works(tmp_path, runtime):
    trace = _trace(tmp_path / "t.json")
    out = tmp_path / ("n" * 255)
    done = _cli("split", trace, "-o", out)
    assert done.returncode == 0, done.stderr
    assert (out / "manifest.json").exists()
    assert _cli("split", trace, "-o", out, "--overwrite").returncode == 0
    assert sorted(os.listdir(tmp_path)) == sorted(["t.json", "runtime", out.name])
    assert os.listdir(runtime) == []


# -- the lock: in the runtime folder while the run goes on, gone at its end --------------------

@pytest.mark.parametrize("runtime_from", ["XDG_RUNTIME_DIR", "TMPDIR"])
def test_no_lock_file_is_left_anywhere_after_success_or_failure(tmp_path, monkeypatch,
                                                                runtime_from):
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir()
    if runtime_from == "TMPDIR":  # no runtime folder: the temporary one
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv(runtime_from, str(lock_dir))
    work = tmp_path / "work"
    work.mkdir()
    trace = _trace(work / "t.json")
    data = trace.read_bytes()
    running = _started("split", "-", "-o", work / "out")
    running.stdin.write(data[:len(data) // 2])
    running.stdin.flush()
    _wait_for_staging(work / "out", running)
    assert len(os.listdir(lock_dir)) == 1  # held while it runs
    running.stdin.write(data[len(data) // 2:])
    running.stdin.close()
    assert running.wait(WAIT) == 0
    running.stdout.close(), running.stderr.close()
    assert _cli("split", trace, "-o", work / "out").returncode == 2  # not empty
    assert _cli("split", work / "missing.json", "-o", work / "m").returncode == 2
    assert os.listdir(lock_dir) == []
    assert sorted(os.listdir(work)) == ["out", "t.json"]


# -- a failed start leaves nothing ---------------------------------------------------------------

def _not_traces(tmp_path: Path) -> dict:
    (tmp_path / "object.json").write_text('{"hello": "world"}')
    # A header longer than one read (512 KiB) and no traceEvents: known only at its end.
    (tmp_path / "long.json.gz").write_bytes(gzip.compress(
        b'{"notes": "' + b"x" * (3 << 20) + b'", "more": 1}'))
    (tmp_path / "text.json").write_text("hello\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "readme.txt").write_text("no trace here")
    (tmp_path / "one").mkdir()
    _trace(tmp_path / "one" / "t.json")
    (tmp_path / "jsons").mkdir()  # named like ranks, none a trace
    for r in range(2):
        (tmp_path / "jsons" / f"rank{r}.json").write_text('{"settings": {"lr": 0.1}}')
    return {"a missing input": "missing.json.gz", "a JSON object without traceEvents":
            "object.json", "a long header without traceEvents": "long.json.gz",
            "not JSON": "text.json", "a folder that is not a trace": "folder",
            "a folder of one trace": "one", "a folder of JSON files, no trace": "jsons"}


@pytest.mark.parametrize("case", ["a missing input", "a JSON object without traceEvents",
                                  "a long header without traceEvents", "not JSON",
                                  "a folder that is not a trace", "a folder of one trace",
                                  "a folder of JSON files, no trace"])
@pytest.mark.parametrize("output", ["m1", "new/m1"])
def test_a_failed_start_leaves_no_folder_no_lock_and_prints_no_table(tmp_path, runtime, case,
                                                                     output):
    work = tmp_path / "work"
    work.mkdir()
    inputs = _not_traces(work)
    before = sorted(os.listdir(work))
    done = _cli("split", inputs[case], "-o", output, cwd=work)
    assert done.returncode == 2
    _one_error_line(done)
    assert done.stdout == b""  # no table, no "-> m1/manifest.json"
    assert sorted(os.listdir(work)) == before
    assert os.listdir(runtime) == []


def test_the_library_raises_for_a_missing_input_and_leaves_no_folder(tmp_path, runtime):
    with pytest.raises(TraceInputError, match="no such file"):
        split(tmp_path / "missing.json", tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["runtime"]
    assert os.listdir(runtime) == []
