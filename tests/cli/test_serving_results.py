"""Results of a serving loop are per phase: a prefill step is compared with prefill steps, a
decode step with decode steps (median, outliers, warm-up); the table and the plot show each
step's phase. And the selections work together: ``--iterations steady`` with ``--steps`` and
``--name-by step``."""
import json
from pathlib import Path

import pytest

import stream_split
import stream_split.stats
from conftest import run_cli
from stream_split.output import FOLDER_MARKER
from stream_split.stats import analyze
from stream_split.summary import build_table
from stream_split.testing.generate import generate, write_trace

#: A server whose steps with prompts wait 2 ms for their sample (a decode step takes ~0.2 ms)
#: and whose first two decode steps spend 1.5 ms more (graph capture).
SERVER = {"steps": 40, "prefill_wait_us": 2000, "warmup_decodes": 2, "warmup_us": 1500}


def _server(tmp_path, seed):
    gen = generate("serving_phases", seed=seed, **SERVER)
    path = tmp_path / f"server-{seed}.json.gz"
    write_trace(gen, str(path))
    return gen, path


@pytest.mark.parametrize("seed", [0, 3])
def test_a_serving_loop_has_outliers_and_a_steady_state_per_phase(tmp_path, seed):
    gen, path = _server(tmp_path, seed)
    records = list(stream_split.iterations(str(path)))
    assert [r.phase for r in records] == [it["phase"] for it in gen.truth.iterations]
    decodes = [r.index for r in records if r.phase == "decode"]
    prompts = [r.index for r in records if r.phase in ("prefill", "mixed")]
    # Compared with every step at once, the steps with prompts stand out from the decodes...
    flat = analyze([r.duration_us for r in records], [r.kind for r in records])
    assert any(flat.outlier[i] for i in prompts)
    # ...per phase, none does; the two slow first decode steps are the decode warm-up.
    assert not any(r.outlier for r in records if r.phase in ("prefill", "mixed"))
    assert not any(r.outlier for r in records if r.kind == "idle")
    assert [r.index for r in records if r.outlier and r.index in decodes[:2]] == decodes[:2]
    manifest = stream_split.split(path, tmp_path / "out")
    groups = manifest.steady_state["groups"]
    assert groups["decode"] == {"first": decodes[2], "last": decodes[-1], "warmup": 2}
    first_prefill = next(r.index for r in records if r.phase == "prefill")
    assert groups["prefill"]["first"] == first_prefill and groups["prefill"]["warmup"] == 0
    assert "idle" not in groups


def test_the_table_of_a_serving_loop_has_a_phase_column(tmp_path):
    gen, path = _server(tmp_path, 0)
    run_cli("split", path, "-o", tmp_path / "out", "-q")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    table = build_table(manifest)
    assert [row["phase"] for row in table["rows"]] == [it["phase"] for it in gen.truth.iterations]
    decodes = [row["index"] for row in table["rows"] if row["phase"] == "decode"]
    # A row's warm-up is its phase's: the first prefill (slow next to decodes) is not one.
    assert [row["index"] for row in table["rows"] if "warm-up" in row["flags"]] == decodes[:2]
    assert set(table["footer"]["phases"]) == {"prefill", "decode", "mixed"}
    text = run_cli("summary", tmp_path / "out").stdout.decode()
    header = next(line for line in text.splitlines() if "CPU ms" in line)
    assert "phase" in header
    assert "decode: " in text and "prefill: " in text


def test_a_table_without_phases_has_no_phase_column(tmp_path):
    write_trace(generate("training", seed=3), str(tmp_path / "t.json.gz"))
    text = run_cli("summary", tmp_path / "t.json.gz").stdout.decode()
    header = next(line for line in text.splitlines() if "CPU ms" in line)
    assert "phase" not in header and "kind" in header


def test_the_plot_of_a_serving_loop_has_a_legend_entry_per_phase(tmp_path):
    pytest.importorskip("matplotlib")
    from stream_split.plot import figure
    gen, path = _server(tmp_path, 0)
    manifest = stream_split.split(path, tmp_path / "out")
    labels = figure(manifest).axes[0].get_legend_handles_labels()[1]
    counts = {p: sum(it["phase"] == p for it in gen.truth.iterations)
              for p in ("prefill", "decode", "mixed")}
    for phase, n in counts.items():
        assert f"{phase} ({n})" in labels


def test_iterations_steady_works_with_steps_and_name_by_step(tmp_path):
    # Step 0 waits 5 ms for its batch: the warm-up, outside the steady state.
    write_trace(generate("training", seed=3, slow_step=0, slow_us=5000),
                str(tmp_path / "t.json.gz"))
    run_cli("split", tmp_path / "t.json.gz", "-o", tmp_path / "out", "-q",
            "--iterations", "steady", "--steps", "0-3", "--name-by", "step")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["steady_state"]["first"] == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        FOLDER_MARKER, "manifest.json", "outside.json.gz", "step_00001.json.gz", "step_00002.json.gz",
        "step_00003.json.gz"]
    # The library call takes the same options.
    manifest = stream_split.split(tmp_path / "t.json.gz", tmp_path / "lib",
                                  iterations="steady", steps="0-3", name_by="step")
    assert [it["file"] for it in manifest.iterations if it["file"]] == [
        "step_00001.json.gz", "step_00002.json.gz", "step_00003.json.gz"]
    proc = run_cli("split", tmp_path / "t.json.gz", "-o", tmp_path / "none", "-q",
                   "--iterations", "steady", "--steps", "0", check=False)
    assert proc.returncode == 2 and b"--steps 0 matches none" in proc.stderr
    assert not (tmp_path / "none").exists()


RECORDED = Path(__file__).parents[1] / "data" / "cuda"


@pytest.mark.parametrize("name", ["serving_graphs", "serving_graphs_annotated"])
def test_recorded_gpu_servers_have_outliers_only_within_their_phase(name):
    """The toy servers recorded on an H200: prompt steps take 3-15x a decode step and idle
    polls 5x; compared with every step at once they would all be outliers."""
    records = list(stream_split.iterations(str(RECORDED / f"{name}.json.gz")))
    flat = analyze([r.duration_us for r in records], [r.kind for r in records])
    assert sum(flat.outlier[r.index] for r in records if r.phase != "decode") >= 8
    assert not any(r.outlier for r in records if r.phase in ("idle", "mixed"))
    for r in records:
        if r.outlier:  # the reason is the ratio to its own phase's median
            own = sorted(o.duration_us for o in records if o.phase == r.phase)
            median = (own[(len(own) - 1) // 2] + own[len(own) // 2]) / 2
            assert r.outlier_reason == f"{r.duration_us / median:.1f}x median"
    steady = stream_split.stats.analyze_records(records).steady_state
    assert steady["groups"]["decode"]["warmup"] == 1  # the first decode step is slow
    assert "idle" not in steady["groups"]
