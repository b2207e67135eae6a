"""``split --workers N`` (``stream_split/parallel.py``): one trace dealt to N processes gives
the pieces and the manifest of ``--workers 1``: the same events, in the same order, in every
piece (decompressed bytes compared), on every generated scenario and every shared trace.

The ranges are made small here (``RANGE_BYTES``) so that small traces are dealt in many, and
every file takes the parallel path (``PARALLEL_MIN_BYTES``); a spy on ``ParallelSplit.finish``
checks that it did (a run that fell back to one stream would compare equal too)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import stream_split
import stream_split.parallel as parallel
from stream_split.run import _parts
from stream_split.decode import Events, FrameRun
from stream_split.testing.generate import SCENARIOS, generate, render, write_trace

from conftest import large_ones_slow, needs_shared, shared_trace_paths


@pytest.fixture
def small_ranges(monkeypatch):
    """Ranges of 16 KiB, every file dealt; returns the list of runs that took the path."""
    monkeypatch.setattr(parallel, "RANGE_BYTES", 16 << 10)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    finished = []
    finish = parallel.ParallelSplit.finish

    def spy(self):
        finished.append(self.count)
        finish(self)
    monkeypatch.setattr(parallel.ParallelSplit, "finish", spy)
    return finished


def folder_contents(out: Path) -> dict:
    """{file: decompressed bytes} of a split's folder (pieces and manifest)."""
    contents = {}
    for path in sorted(out.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            contents[str(path.relative_to(out))] = (gzip.decompress(data)
                                                    if path.suffix == ".gz" else data)
    return contents


def manifest_without_input(contents: dict) -> dict:
    manifest = json.loads(contents.pop("manifest.json"))
    manifest.pop("input")
    return manifest


def assert_workers_agree(trace, tmp_path, finished, **options) -> None:
    one = stream_split.split(str(trace), tmp_path / "one", workers=1, **options)
    two = stream_split.split(str(trace), tmp_path / "two", workers=2, **options)
    # a trace cut short is split as one stream (its error and stop reason are that path's)
    assert finished == ([2] if one["complete"] else []), "the parallel path was not taken"
    first, second = folder_contents(tmp_path / "one"), folder_contents(tmp_path / "two")
    assert manifest_without_input(first) == manifest_without_input(second)
    assert first.keys() == second.keys()
    for name in first:
        assert first[name] == second[name], name
    assert one["counts"] == two["counts"]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_two_workers_write_what_one_writes_on_every_scenario(scenario, tmp_path, small_ranges):
    trace = tmp_path / f"{scenario}.json.gz"
    write_trace(generate(scenario, 3), str(trace))
    assert_workers_agree(trace, tmp_path, small_ranges)


@pytest.mark.parametrize("form", ["object", "array"])
def test_spilled_events_keep_their_order_across_workers(form, tmp_path, small_ranges):
    """With a small ``pending_limit`` the engine spills; the events it hands out later come in
    the same order however the input was dealt (``run._parts``)."""
    trace = tmp_path / "t.json"
    trace.write_text(render(generate("training", 5, steps=12), form))
    assert_workers_agree(trace, tmp_path, small_ranges, pending_limit=50)


def test_selected_plain_pieces_agree(tmp_path, small_ranges):
    trace = tmp_path / "t.json.gz"
    write_trace(generate("noisy_training", 2, steps=10), str(trace))
    assert_workers_agree(trace, tmp_path, small_ranges, iterations="2-5", compress=False)


def test_a_cut_inside_an_event_falls_back_to_one_stream(tmp_path, small_ranges):
    """Events whose ``args`` hold objects on lines of their own: some cuts (``},`` before a
    line break) fall inside an event; the range is not a run of whole events and the trace is
    split as one stream, with the same output."""
    events = []
    for k in range(3000):
        events.append('{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, '
                      f'"ts": {k * 10}, "dur": 5, "args": {{"list": [{{"a": {k}}},\n'
                      f'{{"b": {k}}}]}}}}')
    trace = tmp_path / "nested.json"
    trace.write_text('{"traceEvents": [\n' + ",\n".join(events) + "\n]}\n")
    one = stream_split.split(str(trace), tmp_path / "one", workers=1)
    two = stream_split.split(str(trace), tmp_path / "two", workers=2)
    assert small_ranges == [], "a cut inside an event was taken for an event boundary"
    assert folder_contents(tmp_path / "one").keys() == folder_contents(tmp_path / "two").keys()
    assert one["counts"] == two["counts"]


@needs_shared
@pytest.mark.parametrize("trace", large_ones_slow(shared_trace_paths()))
def test_two_workers_write_what_one_writes_on_every_shared_trace(trace, tmp_path, small_ranges):
    assert_workers_agree(trace, tmp_path, small_ranges)


def test_parts_end_every_so_many_events_whatever_the_batches():
    """The engine hands out its decisions where the parts end: at the same events however the
    input was cut into batches, a run of frames cut at a part's edge."""
    def batch(n, run=None):
        runs = [FrameRun(*run, events=[{"k": k} for k in range(run[1] - run[0])])] if run else []
        return Events([{"k": k} for k in range(n)], list(range(n)), runs)
    parts = list(_parts([batch(5), batch(7, (2, 7)), batch(1)], size=4))
    assert [len(p) for p in parts] == [4, 4, 4, 1]
    assert [(r.i, r.j) for r in parts[1].frame_runs] == [(3, 4)]
    assert [(r.i, r.j) for r in parts[2].frame_runs] == [(0, 4)]
    assert parts[3].frame_runs == []
    assert [raw for p in parts for raw in p.raws] == [*range(5), *range(7), 0]
