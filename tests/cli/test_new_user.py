"""The rough edges a new user hit (issue 23, item 7): what `explain` says under `auto`, a
`--level 1` that finds no level below, the table's first line, `plot -o` into a new folder,
the progress line on an 80-column terminal, and the Beam entry point's help, exit status and
console script."""
from __future__ import annotations

import io
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from rich.console import Console

from conftest import run_cli
from stream_split.progress import LINE_WIDTH, display, rate_text, short_name
from test_results import step_trace

REPO = Path(__file__).resolve().parents[2]
TRAIN_EVAL = REPO / "tests" / "data" / "cuda" / "train_eval.json.gz"
STEPS = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0]


def test_explain_under_auto_says_which_evidence_it_chose(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", STEPS)
    first = run_cli("explain", trace).stdout.decode().splitlines()[0]
    assert first == "detector: auto (chose the ProfilerStep#N annotations; decided online)"
    plain = step_trace(tmp_path / "p.json.gz", STEPS, annotated=False)
    assert run_cli("explain", plain).stdout.decode().startswith(
        "detector: auto (chose the call structure;")
    assert run_cli("explain", plain, "--detector", "structure").stdout.decode().startswith(
        "detector: structure (decided")


def test_level_one_without_a_level_below_says_what_it_found_not_a_one_op_unit(tmp_path):
    proc = run_cli("split", TRAIN_EVAL, "--detector", "structure", "--level", "1",
                   "-o", tmp_path / "out")
    warning = proc.stderr.decode()
    assert "--level 1 is not available (no unit below the chosen one that its first op " \
           "cuts" in warning and "aten::view, which occurs 16 times" in warning
    assert "9 iterations" in proc.stdout.decode()  # the steps, not 240 aten::view
    text = run_cli("explain", TRAIN_EVAL, "--detector", "structure", "--level",
                   "1").stdout.decode()
    assert "begins level below" not in text and "level: 1 asked, 0 used" in text


def test_the_table_begins_with_the_input_path_unpadded(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", STEPS)
    first = run_cli("summary", trace).stdout.decode().splitlines()[0]
    assert first == str(trace)


def test_plot_makes_the_folder_of_its_picture(tmp_path):
    pytest.importorskip("matplotlib")
    trace = step_trace(tmp_path / "t.json.gz", STEPS)
    run_cli("split", trace, "-o", tmp_path / "out", "-q")
    run_cli("plot", tmp_path / "out", "-o", tmp_path / "plots" / "deep" / "x.png")
    assert (tmp_path / "plots" / "deep" / "x.png").stat().st_size > 0
    bad = run_cli("plot", tmp_path / "out", "-o", tmp_path / "other" / "x.txt", check=False)
    assert bad.returncode == 2 and not (tmp_path / "other").exists()


def test_the_progress_line_fits_80_columns_at_its_widest():
    out = io.StringIO()
    console = Console(file=out, width=LINE_WIDTH, force_terminal=True, color_system=None)
    progress = display(console)
    task = progress.add_task(short_name("a_long_trace_name_of_a_rank.pt.trace.json.gz"),
                             total=123_456_789_012, rate=rate_text(123_456_789.0),
                             found=123_456)
    progress.update(task, completed=99_456_789_012)
    console.print(progress.make_tasks_table(progress.tasks))
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= LINE_WIDTH, lines
    assert "events/s" in lines[0] and "123456 iterations" in lines[0]
    assert rate_text(950) == "950" and rate_text(12_300) == "12.3k"


def test_the_archive_job_s_help_has_no_beam_warning_and_it_is_a_console_script():
    pytest.importorskip("apache_beam")
    done = subprocess.run([sys.executable, "-m", "pipelines.split_archive", "--help"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("usage:") and "--fail-on-dead-letters" in done.stdout
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["stream-split-archive"] == "pipelines.split_archive:main"


@pytest.mark.beam
def test_the_archive_job_fails_on_dead_letters_only_when_asked(tmp_path):
    pytest.importorskip("apache_beam")
    archive = tmp_path / "archive"
    archive.mkdir()
    step_trace(archive / "good.json.gz", STEPS)
    (archive / "bad.json.gz").write_bytes(bytes(range(256)) * 4)
    for extra, status in (([], 0), (["--fail-on-dead-letters"], 1)):
        out = tmp_path / f"out{status}"
        done = subprocess.run(
            [sys.executable, "-m", "pipelines.split_archive", "--input",
             str(archive / "*.json.gz"), "--output", str(out), *extra],
            cwd=REPO, capture_output=True, text=True, timeout=300)
        assert done.returncode == status, done.stderr[-2000:]
        assert done.stdout.splitlines()[-1].startswith("2 traces, 6 iterations, 1 failed")
        assert "apitools" not in done.stderr
