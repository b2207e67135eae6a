"""`auto` trusts regular step annotations (issue 21): where a trace keeps two or more
``ProfilerStep#N`` spans numbered in a row, it splits exactly as ``--detector steps`` does,
whatever their nesting (a wrapper around them, a span that crosses them, the file writing
them after their children), on every generated scenario with steps, the recordings under
tests/data and the shared traces with steps."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import SHARED_TRACES, large_ones_slow, needs_shared
from stream_split.core import SplitOptions
from stream_split.testing.accuracy import owners, read_trace
from stream_split.testing.generate import SCENARIOS, generate

RECORDINGS = sorted((Path(__file__).parents[1] / "data").rglob("*.json.gz"))
#: The shared traces that keep two or more ProfilerStep#N spans.
SHARED_WITH_STEPS = ["torch_cpu/s1_schedule_step.json.gz",
                     "torch_cpu/s3_repeat_cycle1.pt.trace.json.gz",
                     "torch_cpu/s3_repeat_cycle2.pt.trace.json.gz",
                     "torch_cpu/s4_stack_shapes.json.gz",
                     "torch_cpu/s8_python_export.json.gz",
                     "tracelens/mi300/resnet_act_checkpoint.json.gz"]
LOOP_OPS = ("cpu_op", "user_annotation")


def _steps(events: list) -> list:
    return sorted((e for e in events if e.get("ph") == "X" and e.get("cat") in LOOP_OPS
                   and str(e.get("name", "")).startswith("ProfilerStep#")),
                  key=lambda e: e["ts"])


def assert_auto_is_steps(events: list, header: dict | None = None) -> None:
    auto, by_auto = owners(events, SplitOptions(detector="auto"), header)
    steps, by_steps = owners(events, SplitOptions(detector="steps"), header)
    assert len(by_auto.iterations) == len(by_steps.iterations) >= 2, by_auto.evidence
    differ = [(e.get("cat"), e.get("name")) for e, a, s in zip(events, auto, steps) if a != s]
    assert not differ, f"{len(differ)} events placed apart, e.g. {differ[:3]}"


def in_end_order(events: list) -> list:
    """The CPU ops of each thread written in end order (children before their parent), as
    the profiler of torch 1.8 / 1.9 wrote them; the rest after, as it was."""
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in LOOP_OPS]
    chosen = {id(e) for e in ops}
    ops.sort(key=lambda e: (e["tid"], e["ts"] + e["dur"], -e["ts"]))
    return ops + [e for e in events if id(e) not in chosen]


def crossed(events: list) -> list:
    """A span that opens in the middle of each step and closes in the middle of the next
    (a prefetch annotated with record_function), on the steps' thread, in start order."""
    steps = _steps(events)
    extra = [{"ph": "X", "cat": "user_annotation", "name": "prefetch", "pid": a["pid"],
              "tid": a["tid"], "ts": a["ts"] + 0.6 * a["dur"],
              "dur": b["ts"] + 0.3 * b["dur"] - (a["ts"] + 0.6 * a["dur"]), "args": {}}
             for a, b in zip(steps, steps[1:])]
    return sorted(events + extra, key=lambda e: (e.get("ph") != "M", e.get("ts", 0),
                                                 -(e.get("dur") or 0)))


GENERATED_WITH_STEPS = [(name, seed) for name in SCENARIOS for seed in range(3)
                        if len(_steps(generate(name, seed=seed).events)) >= 2]


def test_some_generated_scenarios_keep_their_steps():
    assert {name for name, _ in GENERATED_WITH_STEPS} >= {"training", "sample"}


@pytest.mark.parametrize("name, seed", GENERATED_WITH_STEPS)
@pytest.mark.parametrize("change", [None, in_end_order, crossed],
                         ids=["as written", "end order", "crossed"])
def test_auto_splits_a_generated_trace_with_steps_as_its_steps(name, seed, change):
    trace = generate(name, seed=seed)
    events = change(trace.events) if change else trace.events
    assert_auto_is_steps(events, trace.header_before)


def test_steps_in_a_wrapper_are_trusted_and_explained():
    trace = generate("training", seed=0, outer_wrapper=True)
    _, splitter = owners(trace.events, SplitOptions(detector="auto"), trace.header_before)
    assert "whatever their nesting" in splitter.evidence["why"]
    assert_auto_is_steps(trace.events, trace.header_before)


def test_steps_not_numbered_in_a_row_leave_the_decision_to_the_structure():
    trace = generate("training", seed=0)
    events = [dict(e, name=f"ProfilerStep#{2 * int(e['name'][13:])}")
              if str(e.get("name", "")).startswith("ProfilerStep#") else e
              for e in trace.events]
    _, splitter = owners(events, SplitOptions(detector="auto"), trace.header_before)
    assert "not numbered in a row" in splitter.evidence["steps_not_trusted"]
    assert len(splitter.iterations) == 8


@pytest.mark.parametrize("path", large_ones_slow(
    [p for p in RECORDINGS if len(_steps(read_trace(p)[0])) >= 2]),
    ids=lambda p: f"{p.parent.name}/{p.name}")
def test_auto_splits_a_recording_with_steps_as_its_steps(path):
    assert_auto_is_steps(*read_trace(path))


@needs_shared
@pytest.mark.shared
@pytest.mark.parametrize("name", SHARED_WITH_STEPS)
def test_auto_splits_a_shared_trace_with_steps_as_its_steps(name):
    assert_auto_is_steps(*read_trace(SHARED_TRACES / name))
