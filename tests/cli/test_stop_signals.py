"""Issue 22 items 4-6, with real processes, signals, FIFOs and files: SIGHUP and SIGUSR1 stop
a split (and ``--follow``) as SIGTERM does, with a truthful manifest and no staging folder; a
stop of a multi-rank split reaches its rank workers, and a killed rank worker is one line;
``--idle-timeout`` holds on a silent pipe and on a FIFO that no writer opens, with ``--follow`` or
without (a plain pipe ends with the input incomplete and the reason); ``--follow`` on a
file replaced under its name stops with the input incomplete and the reason; a stop while
the pieces are assembled ends the run at once, nothing written."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (CLI, PROCESS_WAIT, check_pieces, no_staging_leftovers, one_error_line,
                      start_split, temp_prefix, wait_for_staging)
from stream_split.testing.attacks import many_iterations
from stream_split.testing.generate import generate, render


def _wait_for_pieces(out_parent: Path, name: str, proc) -> None:
    """Handshake: ``proc`` has taken its folder (past start-up, its handlers set)."""
    wait_for_staging(out_parent, name, proc)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGUSR1])
def test_sighup_and_sigusr1_stop_a_split_with_a_valid_manifest(long_trace, tmp_path, sig):
    proc = start_split(long_trace, tmp_path / "d")
    wait_for_staging(tmp_path, "d", proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=PROCESS_WAIT)
    assert proc.returncode == 128 + sig, err.decode()
    assert "Traceback" not in err.decode()
    manifest = check_pieces(tmp_path / "d", long_trace.read_bytes())
    assert not manifest["complete"] and "interrupted" in manifest["stop_reason"]
    no_staging_leftovers(tmp_path, "d")


def test_sigusr1_stops_a_follow_within_a_second(small_trace, tmp_path):
    growing = tmp_path / "growing.json"
    data = small_trace.read_bytes()
    growing.write_bytes(data[: len(data) // 2])  # a writer that stopped half way
    proc = start_split(growing, tmp_path / "d", "--follow", "--idle-timeout", "60")
    wait_for_staging(tmp_path, "d", proc)
    time.sleep(0.3)  # into the wait for more bytes
    proc.send_signal(signal.SIGUSR1)
    started = time.monotonic()
    _, err = proc.communicate(timeout=PROCESS_WAIT)
    assert time.monotonic() - started < 1.5
    assert proc.returncode == 128 + signal.SIGUSR1, err.decode()
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert manifest["complete"] is False
    no_staging_leftovers(tmp_path, "d")


# -- ranks --------------------------------------------------------------------------------------

@pytest.fixture
def two_ranks(long_trace, tmp_path):
    paths = []
    for rank in (0, 1):
        path = tmp_path / f"rank{rank}.json"
        shutil.copy(long_trace, path)
        paths.append(path)
    return paths


def _workers_of(pid: int) -> list[int]:
    """The children of ``pid`` (its rank workers), once there are two."""
    deadline = time.monotonic() + PROCESS_WAIT
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except FileNotFoundError:
            children = []
        if len(children) >= 2:
            return [int(c) for c in children]
        time.sleep(0.01)
    raise AssertionError("no rank workers")


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs /proc")
def test_sigterm_to_a_multi_rank_split_stops_its_rank_workers(two_ranks, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(CLI + ["split", *map(str, two_ranks), "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _workers_of(proc.pid)
    time.sleep(0.2)  # the workers are reading
    proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    _, err = proc.communicate(timeout=PROCESS_WAIT)
    assert time.monotonic() - started < 5, "the rank workers ran on"
    assert proc.returncode in (143, 2), err.decode()
    assert "Traceback" not in err.decode()
    # Stopped: a truthful output (some rank marked incomplete) or, when the signal came
    # before anything was written (a loaded machine may deliver it that early), nothing.
    if proc.returncode == 143 and out.exists():
        ranks = json.loads((out / "ranks.json").read_text())
        assert not all(rank["complete"] for rank in ranks["ranks"])
    no_staging_leftovers(tmp_path, "out")


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs /proc")
def test_a_killed_rank_worker_is_one_line(two_ranks, tmp_path):
    proc = subprocess.Popen(CLI + ["split", *map(str, two_ranks), "-o", str(tmp_path / "o")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.kill(_workers_of(proc.pid)[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=PROCESS_WAIT)
    assert proc.returncode == 2, err.decode()
    assert "died" in one_error_line(err)
    no_staging_leftovers(tmp_path, "o")


# -- --idle-timeout on pipes ---------------------------------------------------------------------

def test_idle_timeout_ends_a_follow_of_a_silent_pipe(small_trace, tmp_path):
    proc = subprocess.Popen(CLI + ["split", "-", "-o", str(tmp_path / "d"), "--follow",
                                   "--idle-timeout", "1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    data = small_trace.read_bytes()
    proc.stdin.write(data[: len(data) // 2])  # then silence: the writer hangs
    proc.stdin.flush()
    try:
        _, err = proc.communicate(timeout=PROCESS_WAIT)
    finally:
        proc.stdin.close()
    assert proc.returncode == 0, err.decode()
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert manifest["complete"] is False


def test_idle_timeout_ends_a_follow_of_a_fifo_without_writer(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    proc = start_split(fifo, tmp_path / "d", "--follow", "--idle-timeout", "1")
    _, err = proc.communicate(timeout=PROCESS_WAIT)
    assert time.monotonic() - started < 10
    assert proc.returncode == 2 and "empty input" in one_error_line(err)
    assert not (tmp_path / "d").exists()
    no_staging_leftovers(tmp_path, "d")


def _split_from_open_pipe(out: Path, head: bytes, *extra) -> tuple[int, bytes]:
    """``split -`` fed ``head`` through a pipe whose writer then stays silent, never closing
    it: (exit status, stderr)."""
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(CLI + ["split", "-", "-o", str(out), *extra], stdin=read_end,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(read_end)
        os.write(write_end, head)
        _, err = proc.communicate(timeout=PROCESS_WAIT)
    finally:
        os.close(write_end)
    return proc.returncode, err


def test_idle_timeout_ends_a_plain_pipe_that_falls_silent(small_trace, tmp_path):
    data = small_trace.read_bytes()
    rc, err = _split_from_open_pipe(tmp_path / "d", data[: len(data) // 2], "--idle-timeout", "1")
    assert rc == 0, err.decode()
    manifest = check_pieces(tmp_path / "d", None)
    assert manifest["complete"] is False
    assert manifest["stop_reason"] == "no new byte for 1 s (--idle-timeout)"


def test_idle_timeout_without_follow_ends_a_pipe_that_stays_silent(tmp_path):
    started = time.monotonic()
    rc, err = _split_from_open_pipe(tmp_path / "d", b"", "--idle-timeout", "1")
    assert time.monotonic() - started < 10
    assert rc == 2
    assert one_error_line(err) == \
        "stream-split: error: no new byte for 1 s (--idle-timeout): nothing came on <stdin>"
    assert not (tmp_path / "d").exists()
    no_staging_leftovers(tmp_path, "d")


def test_idle_timeout_without_follow_ends_a_fifo_without_writer(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    proc = start_split(fifo, tmp_path / "d", "--idle-timeout", "1")
    _, err = proc.communicate(timeout=PROCESS_WAIT)
    assert time.monotonic() - started < 10
    assert proc.returncode == 2
    assert "no new byte for 1 s (--idle-timeout): nothing came on" in one_error_line(err)
    assert not (tmp_path / "d").exists()
    no_staging_leftovers(tmp_path, "d")


# -- --follow on a replaced file -----------------------------------------------------------------

def _other_trace() -> bytes:
    return render(generate("training", 7, steps=8), "object").encode()


@pytest.mark.parametrize("how", ["renamed over", "rewritten in place"])
def test_follow_stops_on_a_replaced_file_with_the_input_incomplete(small_trace, tmp_path, how):
    path = tmp_path / "trace.json"
    data = small_trace.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    proc = start_split(path, tmp_path / "d", "--follow", "--idle-timeout", "30")
    wait_for_staging(tmp_path, "d", proc)
    time.sleep(0.3)  # the first half is read
    other = _other_trace()
    if how == "renamed over":
        (tmp_path / "new.json").write_bytes(other)
        os.replace(tmp_path / "new.json", path)
    else:
        path.write_bytes(other)  # truncated, then longer than before
    _, err = proc.communicate(timeout=PROCESS_WAIT)
    assert proc.returncode == 0, err.decode()
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    assert manifest["complete"] is False
    assert "followed file" in manifest["stop_reason"]
    assert "followed file" in err.decode() and "Traceback" not in err.decode()


# -- a stop while the pieces are assembled -------------------------------------------------------

def _wait_for_a_piece(parent: Path, name: str, proc) -> None:
    """Handshake: the run has assembled its first piece into its staging folder."""
    deadline = time.monotonic() + PROCESS_WAIT
    while True:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        staging = [parent / p for p in os.listdir(parent)
                   if p.startswith(temp_prefix(parent, name))]
        if staging and any(p.startswith("iteration_") for p in os.listdir(staging[0])):
            return
        time.sleep(0.002)


def test_sigterm_while_many_pieces_are_assembled_ends_at_once_with_nothing_written(tmp_path):
    # 20 k one-op steps: 20 k pieces, whose assembly takes seconds; a stop in the midst
    # of it ends the run within a second, no folder, no staging folder, one line
    trace = tmp_path / "steps.json"
    many_iterations(str(trace), 40_000)
    proc = start_split(trace, tmp_path / "d")
    _wait_for_a_piece(tmp_path, "d", proc)
    proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    _, err = proc.communicate(timeout=PROCESS_WAIT)
    assert time.monotonic() - started < 1.0
    assert proc.returncode == 128 + signal.SIGTERM, err.decode()
    assert err.decode().splitlines() == [
        "stream-split: interrupted while the pieces were written: nothing written"]
    assert not (tmp_path / "d").exists()
    no_staging_leftovers(tmp_path, "d")
