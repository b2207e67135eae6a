"""The hard loops of issue 21 recorded with torch's CPU profiler (tests/data/cpu, made by
scripts/record_cpu_loops.py): with the steps stripped each splits as its ProfilerStep#N, Python
frames included; with the steps kept, auto agrees with them; nothing is lost."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import (frames_away_from_their_step, profiler_step_names, recorded_cases,
                      split_keeps_every_event)
from stream_split.core import SplitOptions
from stream_split.testing.accuracy import owners, read_trace, score_stripped

RECORDED = Path(__file__).parents[1] / "data" / "cpu"
TRUTH = json.loads((RECORDED / "truth.json").read_text())
PROGRAMS = sorted(TRUTH["programs"])
#: The recordings made with ``with_stack=True``: Python frames open their steps.
WITH_STACK = ["train_with_stack"]

#: What the detector does not do yet on these recordings (issue 21), per check, as measured:
#: a strict xfail turns into a failure the day it passes, so these lists stay honest.
NOT_YET = {
    "stripped": {},
    "frames": {},
    "auto": {},
}


def _trace(name: str) -> Path:
    return RECORDED / f"{name}.json.gz"


@pytest.mark.parametrize("name", PROGRAMS)
def test_recorded_steps_match_the_truth_file(name):
    assert profiler_step_names(_trace(name)) == {f"ProfilerStep#{n}"
                                                  for n in TRUTH["programs"][name]}


@pytest.mark.parametrize("name", recorded_cases(PROGRAMS, NOT_YET["stripped"], _trace))
def test_recorded_cpu_loop_splits_as_its_steps_with_the_steps_stripped(name):
    events, header = read_trace(_trace(name))
    score = score_stripped(events, name, "ProfilerStep#N (stripped)", header)
    assert score.ok, score


@pytest.mark.parametrize("name", recorded_cases(WITH_STACK, NOT_YET["frames"], _trace))
def test_the_python_frames_of_a_recorded_step_land_in_its_piece_with_the_steps_stripped(name):
    # One to three wrappers and the RNG calls before the step's first op are the step's.
    events, header = read_trace(_trace(name))
    got, splitter = owners(events, SplitOptions(detector="structure"), header)
    assert len(splitter.iterations) == len(TRUTH["programs"][name])
    assert not frames_away_from_their_step(events, got)


@pytest.mark.parametrize("name", recorded_cases(PROGRAMS, NOT_YET["auto"], _trace))
def test_auto_splits_a_recording_with_its_steps_kept_as_the_steps_detector_does(name):
    events, header = read_trace(_trace(name))
    by_steps, steps = owners(events, SplitOptions(detector="steps"), header)
    by_auto, auto = owners(events, SplitOptions(detector="auto"), header)
    assert [it.start_ts for it in auto.iterations] == [it.start_ts for it in steps.iterations]
    assert by_auto == by_steps


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_event_of_a_recorded_cpu_loop_lands_in_exactly_one_piece(name, tmp_path):
    split_keeps_every_event(_trace(name), tmp_path, "--detector", "structure")
