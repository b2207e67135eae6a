"""Real GPU loops recorded with the PyTorch profiler (tests/data/cuda, made by
scripts/record_cuda_traces.py on an H200): each is split as its ProfilerStep#N with the steps
stripped, and nothing is lost."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import (large_ones_slow, profiler_step_names, recorded_cases,
                      split_keeps_every_event)

RECORDED = Path(__file__).parents[1] / "data" / "cuda"
TRUTH = json.loads((RECORDED / "truth.json").read_text())

#: Loops the detector does not yet split as their steps (issue 8): a strict xfail turns into a
#: failure the day they pass, so this list stays honest.
NOT_YET = {
    "serving_graphs": "decode (graph replay), prefill and mixed steps differ too much for one unit",
    "serving_graphs_annotated": "as serving_graphs; the step annotations differ by phase",
}


def _trace(name: str) -> Path:
    return RECORDED / f"{name}.json.gz"


@pytest.mark.parametrize("name", sorted(TRUTH["programs"]))
def test_recorded_steps_match_the_truth_file(name):
    assert profiler_step_names(_trace(name)) == {f"ProfilerStep#{n}"
                                                  for n in TRUTH["programs"][name]}


@pytest.mark.parametrize("name", recorded_cases(sorted(TRUTH["programs"]), NOT_YET, _trace))
def test_recorded_gpu_loop_splits_as_its_steps_with_the_steps_stripped(name):
    from stream_split.testing.accuracy import read_events, score_stripped
    score = score_stripped(read_events(_trace(name)), name, "ProfilerStep#N (stripped)")
    assert score.ok, score


@pytest.mark.parametrize("name", large_ones_slow(sorted(TRUTH["programs"]), _trace))
def test_every_event_of_a_recorded_gpu_loop_lands_in_exactly_one_piece(name, tmp_path):
    split_keeps_every_event(_trace(name), tmp_path, "--detector", "structure")


def _in_time_order(events: list) -> list:
    """The events as a file in time order writes them (each frame before the ops it holds)."""
    return sorted(events, key=lambda e: (e.get("ph") != "M", e.get("ts", 0), -(e.get("dur") or 0)))


@pytest.mark.parametrize("order", [
    pytest.param("kineto", marks=pytest.mark.xfail(strict=True, reason=(
        "decided online, and Kineto writes the Python frames after every op: the boundaries "
        "are out before the frames come, and a boundary never moves earlier"))),
    "time"])
def test_the_frames_of_a_wrapped_step_land_in_its_piece(order):
    # One to three Python wrappers (training_step > optimise > forward_backward) open each
    # step before its first aten op: the boundary is at the outermost of them.
    from stream_split.core import SplitOptions
    from stream_split.testing.accuracy import owners, read_events
    from conftest import frames_away_from_their_step
    events = read_events(_trace("train_wrapped"))
    if order == "time":
        events = _in_time_order(events)
    got, splitter = owners(events, SplitOptions(detector="structure"))
    assert len(splitter.iterations) == len(TRUTH["programs"]["train_wrapped"])
    assert not frames_away_from_their_step(events, got)
