"""Shared fixtures: the project's generated traces, and the real traces in ../shared (if any)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run ("repeatable"), so a run here and a CI
# run check the same cases and CI never fails on a draw nobody saw before. To look for new
# failures, run with HYPOTHESIS_PROFILE=explore (random draws, more of them); a case it finds
# becomes an @example of its test.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("STREAM_SPLIT_SHARED", REPO.parent / "shared"))
SHARED_TRACES = SHARED / "traces"


def shared_trace_paths():
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(str(p) for p in SHARED_TRACES.rglob("*.json.gz"))


needs_shared = pytest.mark.skipif(not SHARED_TRACES.is_dir(),
                                  reason="../shared/traces is absent (a user's clone has none)")


def run_cli(*args, input_bytes=None, check=True, timeout=120):
    """Run the real `stream-split` entry point in a subprocess."""
    proc = subprocess.run([sys.executable, "-m", "stream_split.cli", *map(str, args)],
                          input=input_bytes, capture_output=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"stream-split {args} failed ({proc.returncode}): "
                             f"{proc.stderr.decode(errors='replace')}")
    return proc


def load_piece(path):
    import gzip
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        return json.load(f)


def owners_of(events, splitter_options=None, feed_order=None):
    """Run events through the core; return owners parallel to ``events`` (None = metadata)."""
    from stream_split.core import Splitter, SplitOptions, METADATA
    splitter = Splitter(splitter_options or SplitOptions())
    index = {id(e): i for i, e in enumerate(events)}
    for e in (feed_order or events):
        splitter.feed(e)
    splitter.close()
    got = [0] * len(events)
    seen = 0
    for owner, e in splitter.pop_assigned():
        got[index[id(e)]] = None if owner == METADATA else owner
        seen += 1
    assert seen == len(events), "every event is assigned exactly once"
    return got, splitter


def assert_split_exactly(trace, options=None):
    """``trace`` (a ``GeneratedTrace``) split as its truth says: the same iterations (start and
    kind) and every event in its true piece. Returns the Splitter (its evidence, records).
    ``options`` default to the structure detector with annotations as evidence."""
    from stream_split.core import SplitOptions
    got, splitter = owners_of(trace.events, options or SplitOptions(detector="auto"))
    assert [(it.start_ts, it.kind) for it in splitter.iterations] == \
        [(it["start_ts"], it["kind"]) for it in trace.truth.iterations], splitter.evidence
    wrong = [(e.get("cat"), e.get("name"), o, t)
             for e, o, t in zip(trace.events, got, trace.truth.owners) if o != t]
    assert not wrong, f"{len(wrong)} events in the wrong piece, e.g. {wrong[:3]}"
    return splitter


def write_truncated_trace(path, seed=3) -> None:
    """A killed writer's trace: gzip stream and JSON both cut off two thirds of the way in."""
    import gzip
    from stream_split.testing import generate as g
    whole = gzip.compress(g.render(g.generate("training", seed=seed), "object", True).encode())
    Path(path).write_bytes(whole[: len(whole) * 2 // 3])


def write_corrupt_gzip_trace(path, seed=4) -> None:
    """A whole trace whose gzip trailer is damaged: the CRC-32 no longer matches the data."""
    import gzip
    from stream_split.testing import generate as g
    data = bytearray(gzip.compress(
        g.render(g.generate("training", seed=seed), "object", True).encode()))
    data[-8] ^= 0xFF
    Path(path).write_bytes(bytes(data))


def frames_away_from_their_step(events, found):
    """The phase at the outermost frame of the step, checked against ``ProfilerStep#N``: for
    each step, the outermost Python frame that begins inside the step and holds its first
    cpu_op (``training_step``); every Python frame inside that one (it included) must be in
    the piece of that op. ``found``: owners parallel to ``events``. Returns the frames that
    are not, as (name, ts, owner, owner of the step's first op)."""
    steps = sorted((e["ts"], e["ts"] + e["dur"], e["tid"]) for e in events
                   if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                   and str(e.get("name", "")).startswith("ProfilerStep#"))
    ops = sorted((e["ts"], e.get("dur") or 0, e["tid"], o) for e, o in zip(events, found)
                 if e.get("cat") == "cpu_op")
    frames = [(e, o) for e, o in zip(events, found) if e.get("cat") == "python_function"]
    away = []
    for lo, hi, tid in steps:
        first = next((op for op in ops if op[2] == tid and lo <= op[0] < hi), None)
        if first is None:
            continue
        ts, dur, _, owner = first
        openers = [e for e, _ in frames if e["tid"] == tid and lo <= e["ts"] <= ts
                   and e["ts"] + e["dur"] >= ts + dur]
        if not openers:
            continue
        top = min(openers, key=lambda e: e["ts"])
        a, b = top["ts"], top["ts"] + top["dur"]
        away += [(e["name"], e["ts"], o, owner) for e, o in frames
                 if e["tid"] == tid and a <= e["ts"] and e["ts"] + e["dur"] <= b and o != owner]
    return away
