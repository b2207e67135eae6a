"""Signals (issue 12): two signals 5 ms apart, a signal while a read is blocked on a pipe or a
FIFO with no writer, SIGTERM during a split. The run ends with its exit status, one valid
conserved manifest (or none) and no traceback."""
from __future__ import annotations

import array
import fcntl
import os
import shutil
import signal
import subprocess
import termios
import time
from pathlib import Path

import pytest

from conftest import (CLI, PROCESS_WAIT, check_pieces, no_staging_leftovers, start_split,
                      wait_for_staging)


def _every_thread_sleeps(pid: int) -> bool:
    """No thread of ``pid`` runs or waits for the CPU or a disk ("S" in /proc)."""
    states = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        except FileNotFoundError:  # a thread that just ended
            pass
    return bool(states) and all(state == "S" for state in states)


def _unread(pipe) -> int:
    """Bytes written into ``pipe`` that its reader has not read yet."""
    count = array.array("i", [0])
    fcntl.ioctl(pipe.fileno(), termios.FIONREAD, count)
    return count[0]


def _target(fd: Path) -> str | None:
    """What the open file ``fd`` (in /proc) is, None when it is closed meanwhile."""
    try:
        return os.readlink(fd)
    except OSError:
        return None


def _wait_until_open(proc, path: Path) -> None:
    """Handshake: ``proc`` holds ``path`` open (so it is past start-up, its handlers set)."""
    deadline = time.monotonic() + PROCESS_WAIT
    fds = Path(f"/proc/{proc.pid}/fd")
    while not any(_target(fd) == os.path.realpath(path) for fd in fds.iterdir()):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.005)


def wait_until_blocked(proc, writing=None) -> None:
    """Handshake instead of a sleep: returns once every thread of ``proc`` has slept for three
    looks in a row (blocked in a read, an open or a poll) and, when given, the pipe
    ``writing`` feeds it is drained; so the signal that follows finds it blocked, however
    slow the machine."""
    if not os.path.isdir(f"/proc/{proc.pid}/task"):
        time.sleep(1.0)  # no /proc: a generous guess
        return
    deadline = time.monotonic() + PROCESS_WAIT
    calm = 0
    while calm < 3:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the run never blocked"
        drained = writing is None or _unread(writing) == 0
        calm = calm + 1 if drained and _every_thread_sleeps(proc.pid) else 0
        time.sleep(0.01)


# -- defect 2: two signals 5 ms apart ---------------------------------------------------------------

@pytest.fixture(scope="module")
def seconds_after_staging(long_trace, tmp_path_factory) -> float:
    """How long a split of ``long_trace`` runs once it has taken its folder, on this machine
    (the signals below must land while it runs, whatever the machine's speed): the shorter of
    two runs, so that a run slowed by a busy machine does not send a signal after the end of a
    quicker one (the process then dies in its exit, handlers gone: -15, not 143)."""
    durations = []
    for _ in range(2):
        parent = tmp_path_factory.mktemp("timing")
        proc = start_split(long_trace, parent / "d")
        wait_for_staging(parent, "d", proc)
        started = time.monotonic()
        proc.communicate(timeout=PROCESS_WAIT)
        assert proc.returncode == 0
        durations.append(time.monotonic() - started)
    return min(durations)


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.parametrize("share", [0.1, 0.6])  # of the run's time after it took its folder
def test_two_signals_5_ms_apart_leave_one_valid_conserved_manifest_or_nothing(
        long_trace, seconds_after_staging, tmp_path, sig, status, share):
    out = tmp_path / "d"
    delay = share * seconds_after_staging
    while True:  # a busy machine may end a run sooner than timed: again, aimed earlier
        proc = start_split(long_trace, out)
        wait_for_staging(tmp_path, "d", proc)
        time.sleep(delay)
        if proc.poll() is None:
            break
        _, err = proc.communicate()
        assert proc.returncode == 0, err.decode()
        assert delay > 0, "the run ended before the signal came"
        delay = delay / 2 if delay > 0.05 else 0.0
        shutil.rmtree(out)
    proc.send_signal(sig)
    time.sleep(0.005)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=PROCESS_WAIT)
    assert "Traceback" not in err.decode()
    if share > 0.5 and proc.returncode == 0:
        # Aimed late, the signals came once the run had ended whole, while the process
        # exited (a quicker run than the timing's): they are ignored then, and the exit
        # status is the run's (test_a_run_that_ended_whole_is_not_killed_...). Never -15.
        assert check_pieces(out, long_trace.read_bytes())["complete"]
        return
    assert proc.returncode == status, err.decode()
    if out.exists():  # stopped while reading: a truthful manifest of what was read
        manifest = check_pieces(out, long_trace.read_bytes())
        if not manifest["complete"]:
            assert "interrupted" in manifest["stop_reason"]
    else:  # stopped while the pieces were assembled: nothing written, and it says so
        assert len(err.decode().strip().splitlines()) == 1, err.decode()
    no_staging_leftovers(tmp_path, "d")


# -- defect 8: a blocked read wakes up on the first signal -----------------------------------------

@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("follow", [[], ["--follow"]], ids=["read", "follow"])
def test_sigterm_stops_a_split_of_a_fifo_with_no_writer(tmp_path, follow):
    """Stopped before its input's first byte, a split writes nothing (no folder, no lock)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = start_split(fifo, tmp_path / "d", *follow)
    _wait_until_open(proc, fifo)
    wait_until_blocked(proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 143, err.decode()
    assert "nothing written" in err.decode() and "Traceback" not in err.decode()
    assert sorted(os.listdir(tmp_path)) == ["fifo"]
    no_staging_leftovers(tmp_path, "d")


@pytest.mark.parametrize("command", ["boundaries", "tag", "explain"])
def test_one_sigint_stops_a_read_of_a_silent_pipe(small_trace, command):
    proc = subprocess.Popen(CLI + [command, "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = small_trace.read_bytes()[:50_000]
    proc.stdin.write(head)  # some events, then silence (the writer hangs)
    proc.stdin.flush()
    wait_until_blocked(proc, writing=proc.stdin)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=10)
    finally:
        proc.stdin.close()
    assert proc.returncode == 130, err.decode()
    assert "Traceback" not in err.decode()


def test_an_interrupted_split_exits_143_after_sigterm(long_trace, tmp_path):
    proc = start_split(long_trace, tmp_path / "d")
    wait_for_staging(tmp_path, "d", proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=PROCESS_WAIT)
    assert proc.returncode == 143, err.decode()
    check_pieces(tmp_path / "d", long_trace.read_bytes())


_STOPPED_THEN_SIGNALLED = """
import os, signal, sys
from stream_split import cli
run_command = cli._main
def stopped_at_once(argv, stop):
    os.kill(os.getpid(), signal.SIGINT)  # the first signal: the stop is requested
    return run_command(argv, stop)
cli._main = stopped_at_once
status = cli.main(sys.argv[1:])
print(all(signal.getsignal(s) == signal.SIG_IGN for s in
          (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)))
sys.exit(status)
"""


_SIGNALLED_WHILE_EXITING = """
import os, subprocess, sys, time
from stream_split import cli
run_command = cli.main
def then_signalled(argv=None):
    status = run_command(argv)  # the run has ended whole: from now on SIGTERM every ms
    # (a zombie can be signalled until it is reaped: the sender stops after 2 s)
    subprocess.Popen(["sh", "-c", f"for i in $(seq 2000); do kill -TERM {os.getpid()} "
                                  "|| break; sleep 0.001; done"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.05)
    return status
cli.main = then_signalled
cli.script()
"""


def test_a_run_that_ended_whole_is_not_killed_by_a_signal_while_it_exits(tmp_path):
    """SIGTERM after the command has decided its status (0: the run ended whole), while the
    process shuts down and Python has put the default handlers back: it exits with that
    status, not killed by the signal (-15), which a supervisor reads as a failed run."""
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1, '
                     '"pid": 1, "tid": 1, "cat": "cpu_op"}]}')
    for _ in range(3):
        done = subprocess.run(
            [CLI[0], "-c", _SIGNALLED_WHILE_EXITING, "split", str(tmp_path / "t.json"),
             "-o", str(tmp_path / "d"), "--quiet", "--overwrite"],
            capture_output=True, timeout=PROCESS_WAIT)
        assert done.returncode == 0, done.stderr.decode()
        assert done.stderr.decode() == ""
        check_pieces(tmp_path / "d", trace.read_bytes())


def test_a_stopped_run_ignores_signals_once_its_exit_status_is_decided(tmp_path):
    """Python puts back the default handlers while it shuts down: a second signal in that
    moment killed the process by the signal (status -2) instead of its exit status 130."""
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1, '
                     '"pid": 1, "tid": 1, "cat": "cpu_op"}]}')
    done = subprocess.run(
        [CLI[0], "-c", _STOPPED_THEN_SIGNALLED, "boundaries", str(trace), "--quiet"],
        capture_output=True, timeout=PROCESS_WAIT)
    assert done.stdout.decode().splitlines()[-1] == "True", done.stderr.decode()
    assert done.returncode == 128 + signal.SIGINT
