"""Acceptance on the real traces in ../shared (skipped when absent)."""
import json
from pathlib import Path

import pytest

from conftest import SHARED_TRACES, load_piece, needs_shared, run_cli, shared_trace_paths

pytestmark = [needs_shared, pytest.mark.shared]


@pytest.mark.parametrize("trace", shared_trace_paths(), ids=lambda p: Path(p).name)
def test_every_event_in_exactly_one_piece(trace, tmp_path):
    run_cli("split", trace, "-o", tmp_path, "--detector", "steps")
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
