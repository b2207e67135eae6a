"""What a user sees of a split: outliers and steady state in the manifest, the table
(`split`, `summary`), the plot, progress on a terminal, and the options that could quietly
do nothing (each gives its message and exit status)."""
from __future__ import annotations

import gzip
import json
import os
import pty
import select
import subprocess
import sys

import pytest

from conftest import SHARED_TRACES, needs_shared, run_cli

S1 = SHARED_TRACES / "torch_cpu" / "s1_schedule_step.json.gz"


def step_trace(path, durations_us, steps_from=2, annotated=True):
    """A CPU trace shaped like torch_cpu/s1: one ``ProfilerStep#N`` per step on the main
    thread, each holding forward / backward / optimizer ops; a step ``eval`` pass inside the
    long ones. ``annotated=False`` names the steps ``train_step`` instead."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 1,
               "args": {"name": "python"}}]
    ts = 1000.0
    for k, dur in enumerate(durations_us):
        name = f"ProfilerStep#{steps_from + k}" if annotated else "train_step"
        events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1,
                       "tid": 1, "ts": ts, "dur": dur - 2})
        ops = ["aten::randn", "forward", "aten::mse_loss", "backward", "Optimizer.step"]
        if dur > 3000:
            ops.append("eval")
        share = (dur - 10) / len(ops)
        for j, op in enumerate(ops):
            events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1,
                           "ts": ts + 1 + j * share, "dur": share - 1})
        ts += dur
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events, "schemaVersion": 1}, f)
    return path


S1_LIKE = [998.4, 6140.0, 729.0, 632.9, 543.3, 6063.3]


@pytest.fixture
def s1_like(tmp_path):
    return step_trace(tmp_path / "s1_like.json.gz", S1_LIKE)


def outlier_steps(manifest):
    return [it["first_op"] for it in manifest["iterations"] if it["outlier"]]


def test_split_marks_the_slow_steps_as_outliers_and_records_the_steady_state(s1_like, tmp_path):
    out = tmp_path / "out"
    proc = run_cli("split", s1_like, "-o", out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert outlier_steps(manifest) == ["ProfilerStep#3", "ProfilerStep#7"]
    # the ratio, then what the piece holds more than the steady median's (stream-split why)
    assert manifest["iterations"][1]["outlier_reason"].startswith("7.1x median, +5.1 ms: eval x1")
    assert manifest["steady_state"] == {"first": 0, "last": 5}
    text = proc.stdout.decode()
    assert "outlier (7.1x median)" in text and "median 0.864 ms" in text
    assert "steady state: #0-#5" in text


@needs_shared
def test_s1_outliers_are_exactly_steps_3_and_7(tmp_path):
    run_cli("split", S1, "-o", tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert outlier_steps(manifest) == ["ProfilerStep#3", "ProfilerStep#7"]
    assert manifest["steady_state"]["last"] == 5
    table = run_cli("summary", tmp_path / "out").stdout.decode()
    assert "outliers: #1, #5" in table


def test_summary_of_a_folder_and_of_the_trace_give_the_same_rows(s1_like, tmp_path):
    run_cli("split", s1_like, "-o", tmp_path / "out", "-q")
    of_folder = json.loads(run_cli("summary", tmp_path / "out", "--json").stdout)
    of_trace = json.loads(run_cli("summary", s1_like, "--json").stdout)
    # what the pieces tell (the file, an outlier's ops) only a folder has
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("file", "reason")}
                          for r in rows]
    assert strip(of_folder["rows"]) == strip(of_trace["rows"])
    assert [r["step"] for r in of_folder["rows"]] == [2, 3, 4, 5, 6, 7]
    assert of_folder["footer"]["outliers"] == [1, 5]
    assert of_folder["footer"]["steady_state"] == {"first": 0, "last": 5}
    text = run_cli("summary", tmp_path / "out").stdout.decode()
    assert "CPU ms" in text and "wall ms" in text and "6.140" in text


def test_iterations_steady_writes_only_the_steady_state(tmp_path):
    trace = step_trace(tmp_path / "warm.json.gz", [9000, 3000] + [1000] * 6)
    run_cli("split", trace, "-o", tmp_path / "out", "--iterations", "steady")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["steady_state"] == {"first": 2, "last": 7}
    written = [it["index"] for it in manifest["iterations"] if it["file"]]
    assert written == list(range(2, 8))
    assert sorted(p.name for p in (tmp_path / "out").glob("iteration_*")) == [
        f"iteration_{i:05d}.json.gz" for i in range(2, 8)]


def _png_checks(path):
    from PIL import Image
    image = Image.open(path).convert("RGB")
    assert image.size == (1200, 500)  # a CPU-only trace: one panel, no empty GPU one
    colours = image.getcolors(maxcolors=1 << 20)
    assert len(colours) > 50  # not blank: lines, text, shading
    # The outlier rings are drawn in matplotlib's tab:red (214, 39, 40).
    assert any(abs(r - 214) < 8 and abs(g - 39) < 8 and abs(b - 40) < 8
               for _, (r, g, b) in colours)


def test_plot_writes_a_png_with_the_iterations_and_outliers(s1_like, tmp_path):
    run_cli("split", s1_like, "-o", tmp_path / "out", "-q", "--plot")
    _png_checks(tmp_path / "out" / "iterations.png")
    run_cli("plot", tmp_path / "out", "-o", tmp_path / "x.png")
    _png_checks(tmp_path / "x.png")
    run_cli("plot", tmp_path / "out", "-o", tmp_path / "x.html")
    page = (tmp_path / "x.html").read_text()
    # the interactive page (tests/output/test_plot_page.py opens it in a browser)
    assert page.startswith("<!DOCTYPE html>") and "Plotly.newPlot" in page


def _stderr_on_a_terminal(args):
    """Run the CLI with stderr on a pseudo-terminal, stdout on a pipe: (stdout, terminal)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "stream_split.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    out = proc.stdout.read()
    assert proc.wait(60) == 0
    os.close(master)
    return out, seen


def test_progress_shows_on_a_terminal_and_never_on_stdout(s1_like, tmp_path):
    out, terminal = _stderr_on_a_terminal(["split", s1_like, "-o", tmp_path / "a"])
    assert b"events/s" in terminal and b"iterations" in terminal
    assert b"events/s" not in out


def test_progress_is_silent_in_a_pipe_and_with_quiet(s1_like, tmp_path):
    proc = run_cli("split", s1_like, "-o", tmp_path / "a")
    assert b"events/s" not in proc.stderr + proc.stdout
    _, terminal = _stderr_on_a_terminal(["split", s1_like, "-o", tmp_path / "b", "--quiet"])
    assert b"events/s" not in terminal


# -- options that could quietly do nothing ----------------------------------------------------

def test_detector_steps_without_profiler_steps_is_an_error(tmp_path):
    trace = step_trace(tmp_path / "plain.json.gz", [1000] * 6, annotated=False)
    proc = run_cli("split", trace, "--detector", "steps", "-o", tmp_path / "out", check=False)
    assert proc.returncode == 2
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and "--detector auto" in lines[0]
    assert not (tmp_path / "out").exists()  # no output written for a run that did nothing


def test_unavailable_level_warns_and_the_manifest_says_which_was_used(s1_like, tmp_path):
    proc = run_cli("split", s1_like, "--level", "1", "-o", tmp_path / "out", "-q")
    assert "warning: --level 1 is not available" in proc.stderr.decode()
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["level"] == {"requested": 1, "used": 0}


def test_iterations_matching_nothing_is_an_error(s1_like, tmp_path):
    proc = run_cli("split", s1_like, "--iterations", "10-12", "-o", tmp_path / "out",
                   check=False)
    assert proc.returncode == 2
    assert proc.stderr.decode().strip() == (
        "stream-split: error: --iterations 10-12 matches none of the 6 iterations found")
    assert not (tmp_path / "out").exists()


def test_split_without_a_trace_is_an_error_and_the_sample_is_asked_for(tmp_path):
    proc = run_cli("split", "-o", tmp_path / "out", check=False)
    assert proc.returncode == 2 and "--sample" in proc.stderr.decode()
    assert not (tmp_path / "out").exists()


def test_explain_names_a_one_op_unit_and_says_what_confidence_means(s1_like):
    text = run_cli("explain", s1_like, "--detector", "steps").stdout.decode()
    assert "chosen unit: ProfilerStep#N" in text and "P + r + o" not in text
    assert "found: 6 iterations" in text
    assert "How sure the detector is" in text


def test_explain_counts_in_plain_words():
    from stream_split.explain import plural
    assert plural(1, "iteration") == "1 iteration" and plural(3, "idle cycle") == "3 idle cycles"


def test_boundaries_records_carry_the_outlier_verdict(s1_like):
    lines = run_cli("boundaries", s1_like).stdout.decode().splitlines()
    records = [json.loads(line) for line in lines]
    iterations = [r for r in records if r["type"] == "iteration"]
    assert [r["outlier"] for r in iterations] == [False, True, False, False, False, True]
    assert iterations[5]["outlier_reason"] == "7.0x median"


def test_summary_of_a_folder_without_a_manifest_is_an_error(tmp_path):
    proc = run_cli("summary", tmp_path, check=False)
    assert proc.returncode == 2
    assert "no stream-split manifest" in proc.stderr.decode()
