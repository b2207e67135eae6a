"""Choosing the iterations written: ``--phase`` (a server's phase), ``--steady N`` (N
representative steady iterations, as TraceLens's ``--num-steps``), the numbers of
``--iterations`` that no iteration has (said, not dropped silently), and ``--name-by step``
names that sort as the steps do."""
from __future__ import annotations

import json
from types import SimpleNamespace

from conftest import run_cli
from stream_split.selection import IterationChoice, parse_selection, representative
from test_results import step_trace

#: Ten steps: a warm-up, then steady steps of 1000 +- a few µs, one slow one (an outlier).
STEPS = [5000.0, 1000.0, 1010.0, 990.0, 1200.0, 1002.0, 4000.0, 998.0, 1050.0, 1001.0]


def test_iterations_that_do_not_exist_are_named_in_a_warning(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", STEPS)
    proc = run_cli("split", trace, "--iterations", "0,3,20", "-o", tmp_path / "out")
    assert ("warning: --iterations 0,3,20: no iteration 20 (the trace has iterations 0-9)"
            in proc.stderr.decode())
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["selection"]["iterations_written"] == 2


def test_a_selection_inside_the_trace_warns_nothing(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", STEPS)
    proc = run_cli("split", trace, "--iterations", "2-5,8-", "-o", tmp_path / "out")
    assert b"warning" not in proc.stderr


def test_steady_n_writes_the_n_steady_iterations_nearest_the_median(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", STEPS)
    run_cli("split", trace, "--steady", "3", "-o", tmp_path / "out", "-q")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    written = {int(p.name[10:15]) for p in (tmp_path / "out").glob("iteration_*")}
    walls = {it["index"]: it["wall_us"] for it in manifest["iterations"]}
    median = sorted(walls.values())[4:6]
    median = sum(median) / 2  # of the ten (the loop's median, as the table's footer)
    assert len(written) == 3 and not written & {0, 4, 6}  # warm-up, slow, outlier: never
    others = set(walls) - written - {0, 4, 6}
    assert max(abs(walls[i] - median) for i in written) <= min(
        abs(walls[i] - median) for i in others)
    assert manifest["selection"]["steady"] == 3


def test_representative_keeps_to_the_phase_median_and_to_the_indices_given():
    records = [SimpleNamespace(index=i, kind="iteration", phase=p, wall_us=w, duration_us=w)
               for i, (p, w) in enumerate([("prefill", 5000.0), ("decode", 500.0),
                                           ("decode", 510.0), ("prefill", 5100.0),
                                           ("decode", 700.0), ("decode", 505.0),
                                           ("prefill", 4900.0), ("decode", 498.0)])]
    # decode median 505: #5 (0), then #1 and #2 (5 each: the earlier)
    assert representative(records, [1, 2, 4, 5, 7], 2) == [1, 5]
    assert representative(records, [0, 3, 6], 1) == [0]  # prefill median 5000


def test_phase_selects_a_server_s_steps_and_a_trace_without_phases_says_so(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", STEPS)
    proc = run_cli("split", trace, "--phase", "decode", "-o", tmp_path / "out", check=False)
    assert proc.returncode == 2 and not (tmp_path / "out").exists()
    assert "--phase decode matches none of the 10 iterations found (the trace has no " \
           "serving phases)" in proc.stderr.decode()
    records = [SimpleNamespace(index=i, kind="iteration", phase=p, step=None)
               for i, p in enumerate(["prefill", "decode", "decode", "mixed"])]
    assert IterationChoice(phase="decode").chosen(records) == [1, 2]
    choice = IterationChoice(parse_selection("2-"), "2-", phase="decode")
    assert choice.chosen(records) == [2]


def test_name_by_step_names_sort_as_the_steps_do(tmp_path):
    trace = step_trace(tmp_path / "t.json.gz", STEPS, steps_from=2)
    run_cli("split", trace, "--name-by", "step", "-o", tmp_path / "out", "-q")
    names = sorted(p.name for p in (tmp_path / "out").glob("step_*"))
    assert names == [f"step_{n:05d}.json.gz" for n in range(2, 12)]  # step_00010 after 9
