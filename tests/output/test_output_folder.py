"""The output folder under real runs (issue 12): a rerun after kill -9, two runs into one
folder, a rerun that fails on a full disk, stale pieces, planted links, unusable folders.
Real ``stream-split`` processes; every check of pieces is independent of the splitter
(``check_pieces``)."""
from __future__ import annotations

import collections
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

from conftest import (PROCESS_WAIT, check_pieces, no_staging_leftovers, one_error_line, run_cli,
                      start_split, temp_prefix)
from stream_split.native import NO_NATIVE_ENV
from stream_split.output import FOLDER_MARKER, lock_path
from stream_split.testing.generate import generate, render


# -- defect 1: a rerun after a crash ----------------------------------------------------------------

def _full_run_seconds(trace, tmp_path) -> float:
    started = time.monotonic()
    done = run_cli("split", trace, "-o", tmp_path / "timing", timeout=PROCESS_WAIT)
    assert done.returncode == 0
    return time.monotonic() - started


@pytest.mark.slow
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
        proc = start_split(long_trace, out, *(["--overwrite"] if replacing else []))
        time.sleep(seconds * (point + 0.5) / 10)
        proc.kill()
        proc.wait()
        proc.stdout.close(), proc.stderr.close()
        # After the crash: the old complete result, the new complete one, or nothing.
        if out.exists():
            manifest = json.loads((out / "manifest.json").read_text())
            source = data if manifest["input"] == str(long_trace) else old
            assert manifest["complete"] is True
            check_pieces(out, source)
            outcomes["new" if source is data else "old"] += 1
        else:
            outcomes["nothing"] += 1
        rerun = run_cli("split", long_trace, "-o", out, "--overwrite", timeout=PROCESS_WAIT)
        assert rerun.returncode == 0, rerun.stderr
        manifest = check_pieces(out, data)
        assert manifest["complete"] is True
        no_staging_leftovers(tmp_path, out.name)
    print(f"kill -9 at 10 points: after the kill the folder held {dict(outcomes)}")
    assert sum(outcomes.values()) == 10


#: ``stream-split`` that kill -9s itself right after its N-th (``argv[1]``) file-system call on
#: a name of the tool's own (``.stream-split...``: a marker, a staging folder, a replaced
#: result): every step of the output folder's transaction, however it is made.
_KILLED_AFTER_STEP = """
import os, signal, sys
from stream_split import cli
left = int(sys.argv[1])
def killing(call):
    def after(*args, **kwargs):
        global left
        result = call(*args, **kwargs)
        if any(os.path.basename(os.fspath(a)).startswith(".stream-split")
               for a in args[:2] if isinstance(a, (str, os.PathLike))):
            left -= 1
            if left < 0:
                os.kill(os.getpid(), signal.SIGKILL)
        return result
    return after
for name in ("open", "mkdir", "rename", "replace", "unlink", "rmdir"):
    setattr(os, name, killing(getattr(os, name)))
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("replacing", [False, True], ids=["new", "replacing"])
def test_kill_9_after_each_step_of_the_folder_then_a_rerun_leaves_no_leftovers(small_trace,
                                                                               tmp_path,
                                                                               replacing):
    # The kill -9 at ten moments above meets a step of the marker only by chance (a window
    # of well under a millisecond): here a run dies after each step in turn.
    data = small_trace.read_bytes()
    out = tmp_path / "d"
    for step in range(100):
        if replacing and not out.exists():
            assert run_cli("split", small_trace, "-o", out).returncode == 0
        killed = subprocess.run([sys.executable, "-c", _KILLED_AFTER_STEP, str(step), "split",
                                 str(small_trace), "-o", str(out), "-q",
                                 *(["--overwrite"] if replacing else [])],
                                capture_output=True, timeout=PROCESS_WAIT)
        if killed.returncode == 0:  # past its last step
            break
        assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
        if out.exists():  # the earlier result or the new one, whole
            assert check_pieces(out, data)["complete"] is True
        rerun = run_cli("split", small_trace, "-o", out, "--overwrite", timeout=PROCESS_WAIT)
        assert rerun.returncode == 0, rerun.stderr
        check_pieces(out, data)
        no_staging_leftovers(tmp_path, out.name)
        if not replacing:
            shutil.rmtree(out)
    assert step > 3, "fewer steps seen than a run into a folder takes: the kill missed them"


# -- defect 3: two concurrent runs into one folder ------------------------------------------------

def test_two_concurrent_splits_into_one_folder_one_wins_the_other_fails_cleanly(long_trace,
                                                                               tmp_path):
    out = tmp_path / "d"
    first, second = start_split(long_trace, out), start_split(long_trace, out)
    results = [(p.wait(PROCESS_WAIT), p.communicate()[1]) for p in (first, second)]
    assert sorted(status for status, _ in results) == [0, 2]
    loser = next(err for status, err in results if status == 2)
    line = one_error_line(loser)
    assert "another stream-split is writing" in line or "not empty" in line
    manifest = check_pieces(out, long_trace.read_bytes())
    assert manifest["complete"] is True
    no_staging_leftovers(tmp_path, "d")


# -- defect 4: a failed rerun mixes two runs ------------------------------------------------------

def _limit_file_size():
    # A "full disk" any user can make: writes beyond 64 KiB fail with EFBIG.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


def test_a_rerun_that_fails_on_a_full_disk_leaves_the_old_result_whole(small_trace, long_trace,
                                                                       tmp_path):
    out = tmp_path / "d"
    assert run_cli("split", small_trace, "-o", out).returncode == 0
    proc = start_split(long_trace, out, "--overwrite", "--plain-json", preexec_fn=_limit_file_size)
    _, err = proc.communicate(timeout=PROCESS_WAIT)
    assert proc.returncode == 2
    assert "File too large" in one_error_line(err)
    manifest = check_pieces(out, small_trace.read_bytes())
    assert manifest["input"] == str(small_trace)
    no_staging_leftovers(tmp_path, "d")


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
    assert done.returncode == 2 and "--overwrite" in one_error_line(done.stderr)
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
    (tmp_path / (temp_prefix(tmp_path, "d") + "planted1")).symlink_to(victims)
    done = run_cli("split", small_trace, "-o", out, "--overwrite", check=False)
    assert done.returncode == 2
    assert "iteration_00001.json.gz" in one_error_line(done.stderr)
    assert victim.read_bytes() == b"precious" and (victims / "v").read_bytes() == b"precious"
    assert all((out / name).is_symlink() for name in planted)


def test_a_planted_lock_link_is_refused(small_trace, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # the runs' and lock_path's
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    Path(lock_path(str(tmp_path / "d"))).symlink_to(victim)
    done = run_cli("split", small_trace, "-o", tmp_path / "d", check=False)
    assert done.returncode == 2 and "lock" in one_error_line(done.stderr)
    assert victim.read_bytes() == b"precious"


@pytest.mark.parametrize("output", ["file", "/dev/null", "/dev/full", "file/under", "", "/"])
def test_a_bad_output_folder_is_one_line(small_trace, tmp_path, output):
    (tmp_path / "file").write_text("x")
    target = output if output.startswith("/") or not output else str(tmp_path / output)
    done = run_cli("split", small_trace, "-o", target, check=False)
    assert done.returncode == 2
    one_error_line(done.stderr)
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
        one_error_line(done.stderr)
    finally:
        os.chmod(tmp_path / "ro", 0o755)


# -- the marker: what the tool wrote, as json.dump(indent=0) writes it ------------------------------

def test_a_marker_lists_every_file_under_the_folder_as_json_dump_would(tmp_path, monkeypatch):
    # names quoted as they are (``_marker_items``) and names the encoder escapes, in one batch
    # or several (``MARKER_BATCH``); a subfolder looked into, a link to a folder listed as a
    # file (not followed); the marker itself and the one being written left out
    from stream_split import output
    folder = tmp_path / "out"
    (folder / "sub").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    names = ["iteration_00001.json.gz", 'quo"te', "back\\slash", "caf\u00e9", "tab\there",
             "del\x7f", os.fsdecode(b"bytes\xff"), "manifest.json"]
    for name in names + [output.FOLDER_MARKER, output.MARKER_BEING_WRITTEN]:
        (folder / name).write_bytes(b"")
    (folder / "sub" / "inner.json").write_bytes(b"")
    (folder / "link").symlink_to(tmp_path / "elsewhere")
    for batch in (output.MARKER_BATCH, 3):
        monkeypatch.setattr(output, "MARKER_BATCH", batch)
        listed = [path for paths in output._files_under(str(folder)) for path in paths]
        assert sorted(listed) == sorted(names + ["sub/inner.json", "link"])
        (folder / output.MARKER_BEING_WRITTEN).unlink(missing_ok=True)
        output._write_marker(str(folder), output._files_under(str(folder)))
        text = (folder / FOLDER_MARKER).read_text(encoding="utf-8")
        assert text == json.dumps({"format": output.MARKER_FORMAT,
                                   "version": output.MARKER_VERSION, "files": listed},
                                  indent=0) + "\n"


def _a_folder_of_every_kind(tmp_path) -> Path:
    """Files (a name of bytes not UTF-8 among them), the markers, subfolders two deep, a link
    to a folder and one to nothing."""
    from stream_split import output
    folder = tmp_path / "out"
    (folder / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    for k in range(11):
        (folder / f"iteration_{k:05d}.json.gz").write_bytes(b"")
    for name in ("caf\u00e9", os.fsdecode(b"bytes\xff"), output.FOLDER_MARKER,
                 output.MARKER_BEING_WRITTEN, "sub/x.json", "sub/deeper/y.json"):
        (folder / name).write_bytes(b"")
    (folder / "link").symlink_to(tmp_path / "elsewhere")
    (folder / "broken").symlink_to(tmp_path / "nowhere")
    return folder


@pytest.mark.parametrize("batch", [4096, 3, 1])
def test_the_native_listing_gives_the_batches_of_the_scandir_one(tmp_path, monkeypatch, batch):
    """``_native.page48_dir_batch`` (``output._listed``, where built) and ``os.scandir``'s
    entries (the fallback) make the very same batches of paths, in the same order, a
    subfolder's where it is, links not followed, the markers left out at the top only."""
    from stream_split import output
    if output._native is None:
        pytest.skip("stream_split._native is not built")
    folder = str(_a_folder_of_every_kind(tmp_path))
    monkeypatch.setattr(output, "MARKER_BATCH", batch)
    native = list(output._files_under(folder))
    monkeypatch.setattr(output, "_native", None)
    assert native == list(output._files_under(folder))
    assert sorted(path for paths in native for path in paths) == sorted(
        ["link", "broken", "sub/x.json", "sub/deeper/y.json", "caf\u00e9",
         os.fsdecode(b"bytes\xff")] + [f"iteration_{k:05d}.json.gz" for k in range(11)])


def test_the_native_listing_lists_alike_in_a_fresh_process(tmp_path):
    """Its first call in a process that has called nothing else native (no name or state
    set up by another entry point), against the fallback's, in another fresh process."""
    folder = str(_a_folder_of_every_kind(tmp_path))
    code = ("import sys; from stream_split import output; "
            "print(repr(list(output._files_under(sys.argv[1]))))")
    listed = [subprocess.run([sys.executable, "-c", code, folder], env={
        **os.environ, **env}, capture_output=True, text=True, check=True).stdout
        for env in ({}, {NO_NATIVE_ENV: "1"})]
    assert listed[0] == listed[1] and "sub/deeper/y.json" in listed[0]


def test_a_folder_the_native_listing_cannot_open_is_the_error_of_scandir(tmp_path):
    from stream_split import output
    if output._native is None:
        pytest.skip("stream_split._native is not built")
    missing = str(tmp_path / "gone")
    with pytest.raises(FileNotFoundError) as native:
        output._native.page48_dir_open(missing)
    with pytest.raises(FileNotFoundError) as fallback:
        os.scandir(missing)
    assert str(native.value) == str(fallback.value) and native.value.filename == missing


def test_a_native_listing_batch_too_big_for_memory_is_a_memory_error(tmp_path):
    """A batch whose letters cannot be allocated raises ``MemoryError`` (not a
    ``SystemError`` of a NULL returned with no error set)."""
    from stream_split import output
    if output._native is None:
        pytest.skip("stream_split._native is not built")
    (tmp_path / "a.json").write_text("{}")
    opened = output._native.page48_dir_open(str(tmp_path))
    with pytest.raises(MemoryError):
        output._native.page48_dir_batch(opened, 1 << 62)
    assert output._native.page48_dir_batch(opened, 8) == (["a.json"], None)
