"""Acceptance on the real traces in ../shared (skipped when absent)."""
import json
from pathlib import Path

import pytest

from conftest import (SHARED_TRACES, large_ones_slow, load_piece, needs_shared, run_cli,
                      shared_trace_paths)

pytestmark = [needs_shared, pytest.mark.shared]


@pytest.mark.parametrize("trace", large_ones_slow(shared_trace_paths()),
                         ids=lambda p: Path(p).name)
def test_every_event_in_exactly_one_piece(trace, tmp_path):
    run_cli("split", trace, "-o", tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    counts = manifest["counts"]
    assert counts["conserved"]
    total, metadata = 0, None
    for entry in manifest["iterations"] + [manifest["outside"]]:
        events = load_piece(tmp_path / entry["file"])["traceEvents"]
        meta = [e for e in events if e.get("ph") == "M"]
        metadata = meta if metadata is None else metadata
        assert meta == metadata and len(meta) == counts["metadata_events"]
        total += len(events) - len(meta)
    assert total == counts["non_metadata_in"] == counts["events_out"]
    if "s7_truncated" in trace:
        assert manifest["complete"] is False


@pytest.mark.parametrize("name, steps", [
    ("tracelens/mi300/resnet_act_checkpoint.json.gz", 3),
    ("torch_cpu/s1_schedule_step.json.gz", 6),
])
def test_profiler_steps_split_with_kernels_in_their_launching_step(name, steps, tmp_path):
    run_cli("split", SHARED_TRACES / name, "-o", tmp_path, "--detector", "steps")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert len(manifest["iterations"]) == steps
    launch_owner, late_kernels = {}, 0
    pieces = {}
    for entry in manifest["iterations"]:
        events = load_piece(tmp_path / entry["file"])["traceEvents"]
        pieces[entry["index"]] = events
        for e in events:
            if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {}):
                launch_owner[e["args"]["correlation"]] = entry["index"]
    starts = [it["start_ts"] for it in manifest["iterations"]]
    for index, events in pieces.items():
        for e in events:
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
                assert launch_owner[e["args"]["correlation"]] == index
                if index + 1 < len(starts) and e["ts"] > starts[index + 1]:
                    late_kernels += 1
    if "resnet" in name:
        assert late_kernels > 0  # kernels running after the next step's CPU ops began


def _owners_by_identity(events, order):
    from stream_split.core import METADATA, SplitOptions, Splitter
    splitter = Splitter(SplitOptions())
    for e in order:
        splitter.feed(e)
    splitter.close()
    return {id(e): o for o, e in splitter.pop_assigned() if o != METADATA}, splitter


def _sorted_like_kineto(events):
    """The same events with the out-of-order parts put in order: the GPU activity block sorted
    by time, and a CPU event that breaks its (pid, tid, cat) stream's order moved back to
    where that stream's order puts it."""
    cpu_cats = ("cpu_op", "user_annotation", "python_function")
    last_ts: dict = {}
    ordered, late = [], []
    for e in events:
        key = (e.get("pid"), e.get("tid"), e.get("cat"))
        if e.get("cat") in cpu_cats:
            if e["ts"] < last_ts.get(key, float("-inf")):
                late.append(e)
                continue
            last_ts[key] = e["ts"]
        ordered.append(e)
    for e in late:
        key = (e.get("pid"), e.get("tid"), e.get("cat"))
        at = max(i for i, o in enumerate(ordered)
                 if (o.get("pid"), o.get("tid"), o.get("cat")) == key and o["ts"] <= e["ts"])
        ordered.insert(at + 1, e)
    gpu = [i for i, e in enumerate(ordered) if e.get("cat") not in cpu_cats
           and e.get("ph") != "M" and e.get("cat") != "gpu_user_annotation" and "ts" in e
           and i > len(ordered) // 3 and e.get("cat") not in ("cpu_instant_event", "Trace")]
    block = sorted((ordered[i] for i in gpu), key=lambda e: e["ts"])
    for i, e in zip(gpu, block):
        ordered[i] = e
    return ordered


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz",  # GPU newest-first
    "tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz",  # annotation appended last
])
def test_out_of_order_traces_split_as_after_sorting(name):
    from stream_split.read import TraceReader
    events = list(TraceReader(str(SHARED_TRACES / name)))
    ordered = _sorted_like_kineto(events)
    assert ordered != events  # the trace really is out of order
    as_read, split_read = _owners_by_identity(events, events)
    as_sorted, split_sorted = _owners_by_identity(events, ordered)
    assert len(split_read.iterations) == len(split_sorted.iterations) >= 4
    assert as_read == as_sorted


def test_the_frames_of_each_step_land_in_its_piece_with_the_steps_stripped():
    # s4 (with_stack): each step's train_step frame opens it before its first aten op.
    from conftest import frames_away_from_their_step
    from stream_split.core import SplitOptions
    from stream_split.testing.accuracy import owners, read_events
    events = read_events(SHARED_TRACES / "torch_cpu/s4_stack_shapes.json.gz")
    got, splitter = owners(events, SplitOptions(detector="structure"))
    assert len(splitter.iterations) == 4
    assert not frames_away_from_their_step(events, got)
