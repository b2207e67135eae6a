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
NOT_YET: dict = {}


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


@pytest.mark.parametrize("order", ["kineto", "time"])
def test_the_frames_of_a_wrapped_step_land_in_its_piece(order):
    # One to three Python wrappers (training_step > optimise > forward_backward) open each
    # step before its first aten op. In time order each frame comes before the ops it opens,
    # and the boundary is at the outermost of them. As Kineto wrote it, every frame comes
    # after every op (the header, read as the CLI reads it, promises them): the boundaries
    # are out at each step's first op as the ops come, and each frame that comes later is
    # owned by the step it opens (``core.owners.StepOpeners``). Both are decided online,
    # and each iteration begins at its outermost frame.
    from stream_split.core import SplitOptions
    from stream_split.testing.accuracy import owners, read_trace
    from conftest import frames_away_from_their_step
    events, header = read_trace(_trace("train_wrapped"))
    if order == "time":
        events = _in_time_order(events)
    got, splitter = owners(events, SplitOptions(detector="structure"), header)
    assert len(splitter.iterations) == len(TRUTH["programs"]["train_wrapped"])
    assert not frames_away_from_their_step(events, got)
    assert splitter.evidence["decided"].startswith("online")
    openers = [e for e in events if e.get("name", "").endswith(": training_step")]
    assert [it.start_ts for it in splitter.iterations] == sorted(e["ts"] for e in openers)


SERVERS = ["serving_graphs", "serving_graphs_annotated"]


@pytest.mark.parametrize("name", SERVERS)
def test_an_idle_poll_of_the_recorded_server_records_no_event(name):
    # An idle turn only sleeps (scripts/record_cuda_traces.py: ``time.sleep`` inside no op):
    # nothing but its own ProfilerStep#N span lies in it, on any thread or stream, so with
    # the steps stripped no split can make it a piece, and the score does not expect one.
    from stream_split.testing.accuracy import read_events
    events = read_events(_trace(name))
    idle = [int(n) for n, facts in TRUTH["programs"][name].items() if facts["phase"] == "idle"]
    assert idle
    spans = {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"]) for e in events
             if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"}
    for n in idle:
        lo, hi = spans[n]
        inside = [e.get("name") for e in events if e.get("ph") == "X" and lo <= e["ts"] < hi
                  and not str(e.get("name", "")).startswith("ProfilerStep#")]
        assert inside == [], (n, inside[:5])


@pytest.mark.parametrize("name", SERVERS)
def test_each_turn_of_the_recorded_server_gets_its_recorded_phase(name):
    # Steps stripped, auto: every turn that did something is an iteration, in the phase the
    # recording noted (prefill, decode, mixed).
    from stream_split.core import SplitOptions
    from stream_split.testing.accuracy import owners, read_events
    events = [e for e in read_events(_trace(name))
              if not str(e.get("name", "")).startswith("ProfilerStep#")]
    _, splitter = owners(events, SplitOptions())
    want = [facts["phase"] for n, facts in sorted(TRUTH["programs"][name].items(),
                                                   key=lambda kv: int(kv[0]))
            if facts["phase"] != "idle"]
    assert [it.phase for it in splitter.iterations] == want
