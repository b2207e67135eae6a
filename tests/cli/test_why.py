"""`stream-split why` and `diff`: what makes one iteration differ from another, named by its
ops, from the pieces of a split folder; and the manifest's outlier_reason that says it."""
from __future__ import annotations

import json

import pytest

from conftest import REPO, SHARED_TRACES, needs_shared, run_cli
from stream_split.analysis import baseline_index, reason_phrase
from stream_split.testing.generate import generate, write_trace

S1 = SHARED_TRACES / "torch_cpu" / "s1_schedule_step.json.gz"
TRAIN_EVAL = REPO / "tests" / "data" / "cuda" / "train_eval.json.gz"


def split_and_ask(trace, out, *args) -> dict:
    run_cli("split", trace, "-o", out, "-q")
    return json.loads(run_cli(*args, "--json").stdout)


@pytest.fixture(scope="module")
def slow_batch(tmp_path_factory):
    """A generated training loop whose step 5 waits 8 ms longer for its batch."""
    root = tmp_path_factory.mktemp("slow")
    trace = root / "training.json.gz"
    write_trace(generate("training", seed=20, slow_step=5, slow_us=8000.0), str(trace))
    run_cli("split", trace, "-o", root / "out", "-q")
    return root / "out"


def test_why_names_the_slow_data_fetch_of_a_generated_step(slow_batch):
    result = json.loads(run_cli("why", slow_batch, 5, "--json").stdout)
    assert result["baseline_is"] == "steady median" and result["baseline"] != 5
    assert result["reason"].startswith("+9.")
    assert "enumerate(DataLoader)" in result["reason"]
    wall = result["categories"][0]
    assert wall["name"] == "wall_us" and wall["delta_us"] > 8000


def test_the_manifest_outlier_reason_says_the_same_phrase(slow_batch):
    manifest = json.loads((slow_batch / "manifest.json").read_text())
    reason = manifest["iterations"][5]["outlier_reason"]
    ratio, phrase = reason.split(", ", 1)
    assert ratio.endswith("x median")
    assert phrase == json.loads(run_cli("why", slow_batch, 5, "--json").stdout)["reason"]
    text = run_cli("summary", slow_batch).stdout.decode()
    assert f"#5: {reason}" in text and "outlier (" in text


def test_diff_against_a_given_iteration_and_its_text(slow_batch):
    result = json.loads(run_cli("diff", slow_batch, 5, 2, "--json").stdout)
    assert result["baseline"] == 2 and result["baseline_is"] == "given"
    text = run_cli("diff", slow_batch, 2, 5).stdout.decode()
    assert text.startswith("#2 against #5, it: -9.") and "CPU window" in text


def test_why_of_an_iteration_not_in_the_folder_is_one_error_line(slow_batch):
    proc = run_cli("why", slow_batch, 99, check=False)
    assert proc.returncode == 2
    assert proc.stderr.decode().strip() == (
        "stream-split: error: no iteration 99: the folder holds #0-#7")


@needs_shared
def test_why_names_the_extra_ops_of_the_s1_outliers(tmp_path):
    run_cli("split", S1, "-o", tmp_path / "out", "-q")
    for index in (1, 5):
        result = json.loads(run_cli("why", tmp_path / "out", index, "--json").stdout)
        assert "eval x1" in result["reason"]
        assert {r["name"] for r in result["ops_only_here"]} == {"eval"}


@pytest.mark.skipif(not TRAIN_EVAL.is_file(), reason="needs tests/data/cuda")
def test_why_names_the_eval_and_checkpoint_work_of_the_recorded_train_eval(tmp_path):
    truth = json.loads((TRAIN_EVAL.parent / "truth.json").read_text())["programs"]["train_eval"]
    run_cli("split", TRAIN_EVAL, "-o", tmp_path / "out", "-q")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    for entry in manifest["iterations"]:
        if entry["index"] < manifest["steady_state"]["first"]:
            continue  # warm-up: slow for its own reasons (cuDNN's first call)
        work = truth[str(entry["step"])]
        reason = json.loads(run_cli("why", tmp_path / "out", entry["index"], "--json")
                            .stdout)["reason"]
        assert ("aten::linear +36" in reason) == work["eval"], (entry["index"], reason)
        assert ("aten::to +27" in reason) == work["checkpoint"], (entry["index"], reason)


def test_the_baseline_is_the_median_of_the_iteration_s_own_phase():
    def entry(i, phase, wall):
        return {"index": i, "kind": "iteration", "phase": phase, "wall_us": wall}
    manifest = {"iterations": [entry(0, "prefill", 9000), entry(1, "decode", 100),
                               entry(2, "decode", 120), entry(3, "decode", 400),
                               entry(4, "prefill", 8000), entry(5, "prefill", 8500)],
                "steady_state": {"first": 0, "last": 5, "groups": {
                    "prefill": {"first": 0, "last": 5, "warmup": 0},
                    "decode": {"first": 1, "last": 3, "warmup": 0}}}}
    assert baseline_index(manifest, 3) == 2
    assert baseline_index(manifest, 0) == 5


def test_the_phrase_names_the_outermost_new_work_by_its_total_time():
    ops = {"ProfilerStep#N": [1, 900.0, 9000.0, {"": 1}],
           "eval": [1, 10.0, 5000.0, {"ProfilerStep#N": 1}],
           "aten::linear": [12, 3000.0, 4990.0, {"eval": 9, "ProfilerStep#N": 3}]}
    base = {"ProfilerStep#N": [1, 800.0, 3500.0, {"": 1}],
            "aten::linear": [3, 1000.0, 1600.0, {"ProfilerStep#N": 3}]}
    # aten::linear's 9 more calls are inside eval: not named again; 0.1 ms is under 5 %
    assert reason_phrase(5500.0, ops, base) == "+5.5 ms: eval x1"
    ops["ProfilerStep#N"][1] = 1900.0
    assert reason_phrase(6500.0, ops, base) == "+6.5 ms: eval x1, time outside ops +1.1 ms"
    assert reason_phrase(None, ops, base) == "no time to compare"
