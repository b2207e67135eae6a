"""How pieces are named and chosen: by index or by ProfilerStep number, idle cycles apart,
--steps selecting by step number, and a selection that matches nothing as an error."""
import json

import pytest

from conftest import SHARED_TRACES, load_piece, needs_shared, run_cli
from stream_split.output import FOLDER_MARKER
from stream_split.testing.generate import generate, write_trace


@pytest.fixture(scope="module")
def training_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("t") / "training.json.gz"
    write_trace(generate("training", seed=3), str(path))  # ProfilerStep#0..#7
    return path


def _files(out):
    """The files of a split folder, its marker aside."""
    return sorted(p.name for p in out.iterdir() if p.name != FOLDER_MARKER)


def test_name_by_step_names_pieces_by_their_profiler_step(training_trace, tmp_path):
    run_cli("split", training_trace, "-o", tmp_path / "out", "--name-by", "step")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [it["step"] for it in manifest["iterations"]] == list(range(8))
    assert [it["file"] for it in manifest["iterations"]] == [
        f"step_{n:05d}.json.gz" for n in range(8)]
    piece = load_piece(tmp_path / "out" / "step_00005.json.gz")["traceEvents"]
    assert any(e.get("name") == "ProfilerStep#5" for e in piece)


def test_steps_selects_the_pieces_of_those_step_numbers(training_trace, tmp_path):
    run_cli("split", training_trace, "-o", tmp_path / "out", "--steps", "2-3,6",
            "--name-by", "step")
    assert _files(tmp_path / "out") == [
        "manifest.json", "outside.json.gz", "step_00002.json.gz", "step_00003.json.gz",
        "step_00006.json.gz"]


@pytest.mark.parametrize("option, value, says", [
    ("--steps", "20-30",
     b"--steps 20-30 matches none of the 8 iterations found (the trace has steps 0-7)"),
    ("--iterations", "10-12", b"--iterations 10-12 matches none of the 8 iterations found"),
])
def test_a_selection_that_matches_nothing_is_an_error(training_trace, tmp_path, option, value,
                                                      says):
    proc = run_cli("split", training_trace, "-o", tmp_path / "out", option, value, check=False)
    assert proc.returncode == 2 and says in proc.stderr
    assert not (tmp_path / "out").exists()


def test_steps_on_a_trace_without_profiler_steps_is_an_error(tmp_path):
    write_trace(generate("training", seed=3, annotate_steps=False), str(tmp_path / "t.json"))
    proc = run_cli("split", tmp_path / "t.json", "-o", tmp_path / "out", "--steps", "1",
                   check=False)
    assert proc.returncode == 2 and b"no ProfilerStep numbers" in proc.stderr


def test_idle_cycles_have_names_of_their_own(tmp_path):
    write_trace(generate("idle_steps", seed=2), str(tmp_path / "t.json.gz"))
    run_cli("split", tmp_path / "t.json.gz", "-o", tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    names = {it["kind"]: set() for it in manifest["iterations"]}
    for it in manifest["iterations"]:
        names[it["kind"]].add(it["file"].split("_")[0])
    assert names == {"iteration": {"iteration"}, "idle": {"idle"}}


@needs_shared
@pytest.mark.shared
def test_real_profiler_steps_name_the_pieces(tmp_path):
    run_cli("split", SHARED_TRACES / "torch_cpu" / "s1_schedule_step.json.gz", "-o", tmp_path,
            "--detector", "steps", "--name-by", "step")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [it["file"] for it in manifest["iterations"]] == [
        f"step_{n:05d}.json.gz" for n in range(2, 8)]


@pytest.mark.parametrize("trace", ["train_eval", "serving_graphs"])
def test_pieces_are_the_same_whatever_is_spilled_on_the_way(trace, tmp_path):
    """A tiny ``pending_limit`` sends most held events through the spill file (their original
    bytes and what the engine reads of them, ``engine._held_view``): every piece holds
    the same events, byte for byte (decided in another order), and every record is the same
    as when nothing is spilled."""
    import gzip
    import stream_split
    from conftest import REPO
    path = REPO / "tests" / "data" / "cuda" / f"{trace}.json.gz"
    out = {}
    for limit in (7, 1_000_000):
        manifest = stream_split.split(str(path), tmp_path / str(limit), pending_limit=limit)
        pieces = {p.name: sorted(line.rstrip(b",") for line in
                                 gzip.decompress(p.read_bytes()).splitlines())
                  for p in (tmp_path / str(limit)).glob("*.json.gz")}
        out[limit] = (manifest.iterations, pieces)
        assert manifest["counts"]["conserved"] is True
    assert out[7] == out[1_000_000]
