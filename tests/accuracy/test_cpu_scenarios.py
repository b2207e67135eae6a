"""The generated families of issue 21's hard CPU loops (dynamic shapes, an unannotated server
with idle polls): each seed splits as its ground truth, and a noisy variant with its steps
stripped keeps the count of turns."""
from __future__ import annotations

import pytest

from stream_split.testing.accuracy import score_generated
from stream_split.testing.generate import generate

CPU_LOOPS = ["dynamic_shapes_cpu", "serving_cpu"]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("scenario", CPU_LOOPS)
def test_a_generated_cpu_loop_splits_as_its_ground_truth(scenario, seed):
    (score,) = score_generated([scenario], [seed])
    assert score.ok, score


def test_every_turn_of_the_cpu_server_is_an_iteration_idle_polls_too():
    truth = generate("serving_cpu", seed=0).truth
    assert len(truth.iterations) == 24
    assert {it["kind"] for it in truth.iterations} == {"iteration"}


@pytest.mark.parametrize("scenario", CPU_LOOPS)
def test_with_step_annotations_a_cpu_loop_keeps_its_turns(scenario):
    # The noisy variants (stream_split.testing.noise) need ProfilerStep#N as their truth.
    plain = generate(scenario, seed=1).truth.iterations
    annotated = generate(scenario, seed=1, annotate_steps=True)
    steps = [e for e in annotated.events if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert len(steps) == len(plain) == len(annotated.truth.iterations)
