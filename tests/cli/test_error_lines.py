"""What the user sees when a command cannot run (issue 12): one line starting
``stream-split: error:`` and exit status 2, never a traceback: a bad input path, a bad option
value, stdout on a full device, a stdout or stdin closed from the start (issue 22)."""
from __future__ import annotations

import shlex
import subprocess

import pytest

from conftest import CLI, PROCESS_WAIT, one_error_line, run_cli


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
        one_error_line(done.stderr)


@pytest.mark.parametrize("option", [["--compresslevel", "99"], ["--compresslevel", "x"],
                                    ["--iterations", "abc"], ["--iterations", "1-x"],
                                    ["--pending-limit", "0"], ["--level", "-1"],
                                    ["--idle-timeout", "nan"], ["--iterations", "-5"],
                                    ["--iterations", "3--1"], ["--steps", "-5"]])
def test_a_bad_option_value_is_one_line(small_trace, tmp_path, option):
    done = run_cli("split", small_trace, "-o", tmp_path / "d", *option, check=False)
    assert done.returncode == 2
    assert option[0] in one_error_line(done.stderr)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("command", ["boundaries", "tag", "explain"])
def test_stdout_on_a_full_device_is_one_line(small_trace, command):
    with open("/dev/full", "wb") as full:
        done = subprocess.run(CLI + [command, str(small_trace)], stdout=full,
                              stderr=subprocess.PIPE, timeout=PROCESS_WAIT)
    assert done.returncode == 2
    assert "No space left" in one_error_line(done.stderr)


def _bash(command: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True,
                          timeout=PROCESS_WAIT)


def _shell_cli() -> str:
    return " ".join(shlex.quote(str(part)) for part in CLI)


@pytest.mark.parametrize("command", ["split", "boundaries", "tag", "explain", "summary"])
def test_a_closed_stdout_is_one_line_and_writes_nothing(small_trace, tmp_path, command):
    out = " -o out" if command == "split" else ""
    done = _bash(f"{_shell_cli()} {command} {shlex.quote(str(small_trace))}{out} >&-", tmp_path)
    assert done.returncode == 2
    assert "stdout is closed" in one_error_line(done.stderr)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["split", "boundaries", "summary"])
@pytest.mark.parametrize("follow", [[], ["--follow"]])
def test_reading_a_closed_stdin_is_one_line(tmp_path, command, follow):
    out = ["-o", "out"] if command == "split" else []
    done = _bash(" ".join([_shell_cli(), command, "-", *follow, *out, "<&-"]), tmp_path)
    assert done.returncode == 2
    assert "stdin is closed" in one_error_line(done.stderr)
    assert not (tmp_path / "out").exists()
