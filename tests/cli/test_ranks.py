"""Several ranks of one job: `split` on two or more traces writes a folder per rank and
`ranks.json` (iteration k across the ranks, the slowest rank, the spread, stragglers);
`summary` prints it; the pieces carry the rank where HTA looks for it."""
import gzip
import importlib.util
import json
import shutil
import subprocess
import sys

import pytest

from conftest import run_cli
from stream_split.ranks import align_ranks, rank_from_name
from stream_split.testing.generate import generate, write_trace

SLOW_RANK, SLOW_STEP = 1, 5


def _write_ranks(folder, ranks=3, names="trace_r{}.json.gz", **params):
    folder.mkdir(exist_ok=True)
    paths = []
    for r in range(ranks):
        extra = {"slow_step": SLOW_STEP, "slow_us": 3000.0} if r == SLOW_RANK else {}
        gen = generate("training", seed=20 + r, rank=r, world_size=ranks,
                       **{**params, **extra})
        path = folder / names.format(r)
        write_trace(gen, str(path))
        paths.append(path)
    return paths


def test_split_of_several_ranks_aligns_iterations_and_names_the_straggler(tmp_path):
    _write_ranks(tmp_path / "job")
    out = tmp_path / "out"
    proc = run_cli("split", tmp_path / "job", "-o", out)
    assert b"3 ranks" in proc.stdout
    data = json.loads((out / "ranks.json").read_text())
    assert [r["rank"] for r in data["ranks"]] == [0, 1, 2]
    assert {r["rank_from"] for r in data["ranks"]} == {"distributedInfo"}
    for r in range(3):
        manifest = json.loads((out / f"rank_{r}" / "manifest.json").read_text())
        assert len(manifest["iterations"]) == 8
    assert data["aligned_by"] == "step" and data["counts_agree"]
    assert [row["step"] for row in data["iterations"]] == list(range(8))
    flagged = [(row["step"], row["straggler"]) for row in data["iterations"]
               if row["straggler"] is not None]
    assert flagged == [(SLOW_STEP, SLOW_RANK)] and data["stragglers"] == 1
    slow = data["iterations"][SLOW_STEP]
    assert slow["slowest_rank"] == SLOW_RANK
    assert slow["spread_us"] > 2500 and slow["spread_ratio"] > 2
    durations = slow["duration_us"]
    assert slow["spread_us"] == pytest.approx(max(durations.values()) - min(durations.values()),
                                              abs=0.01)


def test_piece_options_apply_to_every_rank(tmp_path):
    paths = _write_ranks(tmp_path / "job", ranks=2)
    run_cli("split", *paths, "-o", tmp_path / "out", "--steps", "4-5", "--name-by", "step")
    for r in (0, 1):
        assert sorted(p.name for p in (tmp_path / "out" / f"rank_{r}").iterdir()) == [
            "manifest.json", "outside.json.gz", "step_00004.json.gz", "step_00005.json.gz"]
    data = json.loads((tmp_path / "out" / "ranks.json").read_text())
    assert len(data["iterations"]) == 8  # every iteration is counted and aligned
    # A selection that matches nothing is an error, as for one trace: no output folder.
    proc = run_cli("split", *paths, "-o", tmp_path / "none", "--steps", "20", check=False)
    assert proc.returncode == 2 and b"--steps 20 matches none" in proc.stderr
    assert not (tmp_path / "none").exists()


def test_summary_prints_the_straggler_table(tmp_path):
    paths = _write_ranks(tmp_path / "job", ranks=2)
    run_cli("split", *paths, "-o", tmp_path / "out")
    text = run_cli("summary", tmp_path / "out").stdout.decode()
    assert "2 ranks, aligned by step" in text
    lines = [line for line in text.splitlines() if "straggler" in line and "│" in line]
    assert len(lines) == 1 and f"│ {SLOW_STEP} " in lines[0]
    as_json = json.loads(run_cli("summary", tmp_path / "out", "--json").stdout)
    assert as_json["iterations"][SLOW_STEP]["straggler"] == SLOW_RANK


def test_without_distributed_info_the_rank_comes_from_the_file_name_and_steps_from_order(
        tmp_path):
    _write_ranks(tmp_path / "job", ranks=2, names="host-rank{}.json.gz", distributed=False,
                 annotate_steps=False)
    run_cli("split", tmp_path / "job", "-o", tmp_path / "out")
    data = json.loads((tmp_path / "out" / "ranks.json").read_text())
    assert [(r["rank"], r["rank_from"]) for r in data["ranks"]] == [
        (0, "file name"), (1, "file name")]
    assert data["aligned_by"] == "index" and data["counts_agree"]
    assert data["iterations"][SLOW_STEP]["straggler"] == SLOW_RANK


def test_two_traces_of_one_rank_are_an_error(tmp_path):
    gen = generate("training", seed=1)
    for name in ("a.json.gz", "b.json.gz"):
        write_trace(gen, str(tmp_path / name))
    proc = run_cli("split", tmp_path / "a.json.gz", tmp_path / "b.json.gz", "-o",
                   tmp_path / "out", check=False)
    assert proc.returncode == 2 and b"both rank 0" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_alignment_by_position_says_when_the_counts_disagree():
    def its(durations):
        return [{"index": i, "kind": "iteration", "step": None, "duration_us": d}
                for i, d in enumerate(durations)]
    data = align_ranks({0: its([100, 100, 100]), 1: its([100, 130])})
    assert data["aligned_by"] == "index" and not data["counts_agree"]
    assert data["counts"] == {"0": 3, "1": 2}
    assert [row["missing_ranks"] for row in data["iterations"]] == [[], [], [1]]
    assert data["iterations"][1]["straggler"] == 1  # 130 >= 1.2 x 100
    assert data["iterations"][2]["straggler"] is None  # one rank: nobody to compare with


def test_rank_numbers_in_file_names():
    assert rank_from_name("/x/rank3.json.gz") == 3
    assert rank_from_name("profile_trace_rank_12.pt.trace.json") == 12
    assert rank_from_name("worker-0.json") is None


def test_pieces_carry_the_rank_where_kineto_puts_it(tmp_path):
    paths = _write_ranks(tmp_path / "job", ranks=2)
    run_cli("split", paths[1], "-o", tmp_path / "out")
    with gzip.open(tmp_path / "out" / "iteration_00000.json.gz", "rt") as f:
        head = [next(f) for _ in range(8)]
    assert head[0] == "{\n" and any(
        line.startswith('  "distributedInfo": {"backend": "nccl", "rank": 1,') for line in head)


@pytest.mark.skipif(importlib.util.find_spec("hta") is None,
                    reason="needs holistictraceanalysis (the [hta] extra, part of [test])")
def test_hta_sees_both_ranks_in_a_folder_of_pieces(tmp_path):
    paths = _write_ranks(tmp_path / "job", ranks=2)
    run_cli("split", *paths, "-o", tmp_path / "out")
    folder = tmp_path / "for_hta"
    folder.mkdir()
    for r in (0, 1):
        shutil.copy(tmp_path / "out" / f"rank_{r}" / "iteration_00002.json.gz",
                    folder / f"rank{r}_iteration_00002.json.gz")
    # HTA in its own process: it configures logging globally when imported.
    script = ("import sys\nfrom hta.trace_analysis import TraceAnalysis\n"
              "t = TraceAnalysis(trace_dir=sys.argv[1]).t\n"
              "print({r: len(t.get_trace(r)) for r in sorted(t.traces)})\n")
    proc = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = eval(proc.stdout.strip().splitlines()[-1])
    assert sorted(events) == [0, 1] and all(n > 100 for n in events.values())
