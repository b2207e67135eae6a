"""Kineto's sectioned files (the loop thread's CPU ops first, Python frames and the GPU block
after): the boundaries come out when the loop thread's CPU section ends, not at close, where
the header says that no evidence the decision uses follows; a trace that must wait says why."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import SHARED_TRACES, large_ones_slow, needs_shared
from stream_split.core import Splitter, SplitOptions
from stream_split.core.detect import TraceFacts
from stream_split.read import TraceReader
from stream_split.testing.generate import SCENARIOS, generate
from stream_split.trace_format import GPU_WORK_CATS, LAUNCH_FLOW_CAT, STRUCTURE_CATS

RECORDED = Path(__file__).parents[1] / "data" / "cuda"
#: What Kineto writes after the CPU ops of a CPU-only trace's threads goes too: GPU work,
#: its launches (runtime calls carry a correlation id) and flows.
_GPU_SIDE = set(GPU_WORK_CATS) | {LAUNCH_FLOW_CAT, "cuda_runtime", "cuda_driver",
                                  "gpu_user_annotation"}


def _cpu_only(trace):
    """A generated Kineto-layout trace as the profiler writes it without a GPU: no GPU
    block, ``deviceProperties: []``."""
    events = [e for e in trace.events if e.get("cat") not in _GPU_SIDE]
    return events, dict(trace.header_before, deviceProperties=[])


def _split(events, header, detector="structure"):
    """Feed ``events`` after ``header``: each boundary record with the index of the event
    after which it came out (None: at close), and the closed splitter."""
    splitter = Splitter(SplitOptions(detector=detector, keep_events=False))
    splitter.note_header(header)
    out = []
    for i, event in enumerate(events):
        splitter.feed(event)
        out += [i for r in splitter.pop_records() if r.to_dict()["type"] == "boundary"]
    splitter.close()
    out += [None for r in splitter.pop_records() if r.to_dict()["type"] == "boundary"]
    return out, splitter


def _starts(splitter):
    return [(it.start_ts, it.kind, it.events) for it in splitter.iterations]


def _loop_section_end(events, thread) -> int:
    """The index of the loop thread's last structural op."""
    return max(i for i, e in enumerate(events)
               if e.get("cat") in STRUCTURE_CATS and (e["pid"], e["tid"]) == tuple(thread))


def test_the_header_says_which_evidence_follows_the_cpu_ops():
    assert TraceFacts.from_header({"deviceProperties": []}) == TraceFacts(gpu=False, frames=False)
    assert TraceFacts.from_header({"deviceProperties": [], "with_stack": 1}).frames is True
    assert TraceFacts.from_header({"deviceProperties": [{"id": 0}], "with_modules": True}) == \
        TraceFacts(gpu=True, frames=True)
    # No header (JSON Lines, the array form) or no torch header: nothing is promised.
    assert TraceFacts.from_header({}) == TraceFacts.from_header({"traceName": "x"}) == TraceFacts()


@pytest.mark.parametrize("seed", range(3))
def test_without_gpu_work_or_frames_the_loop_is_decided_when_its_threads_section_ends(seed):
    # Two steps (too few to confirm online) with an autograd thread: the loop thread's
    # section ends at the autograd thread's first op, and nothing after it can change the
    # answer when the header says no GPU and no Python frames.
    trace = generate("two_steps", seed=seed)
    events, header = _cpu_only(trace)
    early, splitter = _split(events, header)
    end = _loop_section_end(events, trace.truth.loop_thread)
    assert early and all(i is not None and i == end + 1 for i in early)
    assert splitter.evidence["decided"] == "at the end of the loop thread's CPU section"
    # The same decision as at close (without the header's promise nothing is decided early).
    late, at_close = _split(events, {})
    assert late == [None] * len(early) and _starts(at_close) == _starts(splitter)
    assert [it.start_ts for it in splitter.iterations] == [
        it["start_ts"] for it in trace.truth.iterations]


def test_python_frames_announced_by_the_header_hold_the_decision_to_close():
    trace = generate("two_steps", seed=0)
    events, header = _cpu_only(trace)
    out, splitter = _split(events, dict(header, with_stack=1))
    assert out and set(out) == {None}
    assert "Python frames" in splitter.evidence["waited"]


def test_a_time_ordered_stream_is_never_taken_for_a_section_end():
    # Live writers write in time order: no event comes from before the loop thread's latest
    # ops, so a promise of no GPU work decides nothing early, and the split is the file's.
    kineto = generate("two_steps", seed=1)
    timed = generate("two_steps", seed=1, layout="time")
    events, header = _cpu_only(timed)
    out, splitter = _split(events, header)
    assert set(out) == {None} and splitter.evidence["decided"] == "at close"
    assert _starts(splitter) == _starts(_split(*_cpu_only(kineto))[1])


def _recorded(name):
    with TraceReader(str(RECORDED / f"{name}.json.gz")) as reader:
        header = reader.header_before
        events = list(reader)
    return events, header


@pytest.mark.parametrize("name", large_ones_slow(["dynamic_shapes", "rollout", "train_wrapped"],
                                                  lambda name: RECORDED / f"{name}.json.gz"))
def test_recorded_loops_with_the_steps_stripped_come_out_before_any_gpu_work(name):
    # At the latest when the GPU block's first launch or kernel is read (a few runtime calls
    # into the block), before any GPU work is owned.
    events, header = _recorded(name)
    gpu_block = next(i for i, e in enumerate(events) if e.get("cat") in GPU_WORK_CATS)
    out, splitter = _split(events, header)
    steps = sum(1 for e in events if e.get("cat") == "user_annotation"
                and e["name"].startswith("ProfilerStep#"))
    assert len(out) == steps and all(i is not None and i <= gpu_block for i in out)


def test_a_recorded_loop_whose_steps_each_turn_the_loop_once_is_decided_before_close():
    # Eval passes every 3rd step and a checkpoint every 4th make the steps unlike by cost;
    # each still holds the input fetch, zero_grad and the optimizer's step once (the loop's
    # spine, over more than three steps): all nine are out before the input ends, without
    # waiting for the kernels.
    events, header = _recorded("train_eval")
    out, splitter = _split(events, header)
    assert len(out) == 9 and None not in out
    assert "waited" not in splitter.evidence


@needs_shared
def test_a_cpu_trace_of_two_threads_is_split_when_the_loop_threads_section_ends():
    with TraceReader(str(SHARED_TRACES / "torch_cpu" / "s5b_two_threads_all.json.gz")) as r:
        header, events = r.header_before, list(r)
    out, splitter = _split(events, header)
    end = _loop_section_end(events, splitter.evidence["loop_thread"])
    assert len(out) == 6 and all(i == end + 1 for i in out)


#: Generated loops whose unit needs the GPU work that follows the CPU section (Kineto's
#: layout, the header says a GPU is there): they wait for close, and say why.
NEEDS_GPU_WORK = {
    "deep_roots": "a step inside its containers is told from a layer by its input copy",
    "warmup_root": "as deep_roots: the warm-up step outside says the unit is no layer, but "
                   "the online belief asks for each instance's input copy",
    "two_steps": "two instances are a loop only when they hold nearly all of the GPU work",
    "single_forward": "one forward: whether its layers are the unit depends on the kernels",
    "gpu_only": "no CPU ops: no loop thread, no section",
    "serving_cpu": "a server's turns hold no loop marker, and the header announces a GPU: "
                   "its kernels may yet tell a busy turn from an idle poll",
}
#: ... of which these never see their section end before close: no GPU work nor Python frame
#: follows their CPU ops to end it.
SECTION_NEVER_ENDS = {"gpu_only", "serving_cpu"}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_generated_kineto_files_come_out_by_the_loop_threads_section_end_or_say_why(name):
    trace = generate(name, seed=0)
    out, splitter = _split(trace.events, trace.header_before)
    if name in NEEDS_GPU_WORK:
        assert set(out) <= {None}
        assert name in SECTION_NEVER_ENDS or "GPU work follows" in splitter.evidence["waited"]
        return
    ends = _loop_section_end(trace.events, trace.truth.loop_thread)
    if trace.header_before["with_stack"]:  # the frames that open each step come after it
        ends = next(i for i, e in enumerate(trace.events) if e.get("cat") in GPU_WORK_CATS)
    assert out and all(i is not None and i <= ends + 1 for i in out)
    assert len(splitter.iterations) == len(trace.truth.iterations)


def test_the_cli_hands_the_header_to_the_core_and_explain_says_when_it_decided(tmp_path):
    # A real file through the real entry point: the header written before the events is
    # what lets the decision be made at the section's end; without it (JSON Lines) the same
    # split waits for close.
    import dataclasses

    from conftest import run_cli
    from stream_split.testing.generate import write_trace
    trace = generate("two_steps", seed=2)
    events, header = _cpu_only(trace)
    cpu_only = dataclasses.replace(trace, events=events, header_before=header)
    write_trace(cpu_only, str(tmp_path / "t.json.gz"))
    write_trace(cpu_only, str(tmp_path / "t.jsonl"), form="jsonl")
    early = run_cli("explain", tmp_path / "t.json.gz", "--detector", "structure").stdout.decode()
    late = run_cli("explain", tmp_path / "t.jsonl", "--detector", "structure").stdout.decode()
    assert "(decided at the end of the loop thread's CPU section)" in early
    assert "(decided at close)" in late
    records = [run_cli("boundaries", tmp_path / name, "--detector", "structure").stdout
               for name in ("t.json.gz", "t.jsonl")]
    assert records[0] == records[1]
