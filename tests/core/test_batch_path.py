"""Runs of Python frames decided a run at once (``Splitter.feed_batch``) give exactly what
feeding every event one by one gives: the same (owner, event bytes) pairs in the same order,
the same records and counts, held, spilled or decided at once; also when the batches are the
decoder's slim ones (only the fields the engine reads, frame runs read in bulk), as ``drive``
reads them; and ``Windows.owners`` is ``Windows.owner`` for every op. Real decoder, real
engine, real files."""
from __future__ import annotations

import functools
import gzip
import json
import random

import pytest
from hypothesis import given, settings, strategies as st

from conftest import REPO, SHARED_TRACES, needs_shared
from stream_split.core import SplitOptions, Splitter
from stream_split.core.owners import Windows
from stream_split.decode import FRAME_PREFIX, TraceDecoder
from stream_split.testing.generate import generate
from stream_split.trace_format import ENGINE_ARGS, ENGINE_FIELDS, LAUNCH_NAMES


def decoded_batches(text: bytes, chunk: int, slim: bool = False) -> list:
    """The decoder's batches of ``text`` read ``chunk`` bytes at a time (``slim``: for the
    engine alone, as ``drive`` reads them)."""
    decoder = TraceDecoder()
    decoder.slim = slim
    batches = [decoder.receive_data(text[i:i + chunk]) for i in range(0, len(text), chunk)]
    batches.append(decoder.receive_data(b""))
    return [b for b in batches if b.events]


def run_both_ways(batches: list, options: SplitOptions, slim: list | None = None):
    """What a splitter decides when every event of ``batches`` is fed one by one, and when
    the batches (or the same input's ``slim`` batches) are fed with their frame runs and
    whether they are checked (``drive``'s call), deciding after every batch as ``drive``."""
    results = []
    for batched in (False, True):
        if batched and slim is not None:
            batches = slim
        splitter = Splitter(options)
        pairs, records = [], []

        def collect():
            while True:
                decided = splitter.decided()
                pairs.extend(decided.pairs)
                records.extend(r.to_dict() for r in decided.records)
                if not decided.more:
                    return
        for batch in batches:
            raws = batch.raws if options.keep_events else None
            if batched:
                splitter.feed_batch(batch.events, raws, batch.frame_runs, batch.checked)
            else:
                for k, event in enumerate(batch.events):
                    splitter.feed(event, raws[k] if raws is not None else None)
            collect()
        splitter.end_of_input()
        collect()
        results.append({"pairs": pairs, "records": records, "events_in": splitter.events_in,
                        "outside": splitter.outside_events, "invalid": splitter.invalid_events,
                        "evidence": splitter.evidence, "at_once": splitter.frames_at_once,
                        "iterations": repr([r.to_dict() for r in splitter.iterations])})
        splitter.release()
    return results[0], results[1]


def frame(rng: random.Random, lo: float, hi: float, edges: list) -> dict:
    """A Python frame as Kineto writes it, often at awkward times: on a window edge, ending
    on one, zero or negative or no duration; now and then one the batch must refuse."""
    ts = rng.choice([rng.uniform(lo, hi), rng.choice(edges or [lo])])
    if rng.random() < 0.01:
        ts = round(ts)  # an integer time: the run goes one by one
    dur = rng.choice([rng.uniform(0, (hi - lo) / 20), 0.0, -1.5, None,
                      (rng.choice(edges or [hi]) - ts)])
    event = {"ph": "X", "cat": "python_function",
             "name": rng.choice(["nn.Module: Linear_0", "train.py(12): step", ""] * 20
                                + ["cudaLaunchKernel"]),
             "pid": 1, "tid": rng.choice([1, 2, "worker"]), "ts": ts}
    if dur is not None:
        event["dur"] = dur
    event["args"] = rng.choice([{"Python parent id": None, "Python id": 3, "Ev Idx": 7}, {}])
    if rng.random() < 0.01:
        event["args"]["correlation"] = 12  # owned as a runtime call: the run goes one by one
    if rng.random() < 0.01:
        event["ts"] = "late"  # unusable: the run goes one by one
    return event


def with_frame_runs(events: list, seed: int, runs: int) -> list:
    """``events`` with ``runs`` runs of Python frames put in at random places."""
    rng = random.Random(seed)
    times = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    lo, hi = min(times), max(times)
    edges = [e["ts"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    out = list(events)
    for _ in range(runs):
        at = rng.randrange(len(out) + 1)
        out[at:at] = [frame(rng, lo, hi, edges) for _ in range(rng.randint(1, 40))]
    return out


def kineto_text(events: list) -> bytes:
    body = ",\n".join("  " + json.dumps(e) for e in events)
    return ('{\n  "traceEvents": [\n' + body + "\n  ]\n}\n").encode()


def spaced_text(events: list) -> bytes:
    """``kineto_text`` with each event's keys over lines, as libkineto and torch write their
    files (``json.dumps(indent=4)``: a key a line, torch 2.13's layout): the runs of frames
    are found however spaced (``decode._frame_runs``)."""
    body = ",\n".join("  " + json.dumps(e, indent=4).replace("\n", "\n  ") for e in events)
    return ('{\n  "traceEvents": [\n' + body + "\n  ]\n}\n").encode()


def assert_same(one_by_one: dict, batched: dict) -> None:
    assert batched["pairs"] == one_by_one["pairs"]
    assert batched["records"] == one_by_one["records"]
    for key in ("events_in", "outside", "invalid", "evidence", "iterations"):
        assert batched[key] == one_by_one[key], key


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), runs=st.integers(1, 12),
       detector=st.sampled_from(["steps", "auto"]), keep=st.booleans(),
       pending_limit=st.sampled_from([3, 50, 20_000]), chunk=st.sampled_from([700, 5000, 1 << 20]),
       layout=st.sampled_from([kineto_text, spaced_text]))
def test_frame_runs_decided_at_once_equal_feeding_them_one_by_one(
        seed, runs, detector, keep, pending_limit, chunk, layout):
    """One event a line (as the tiles are written) or each event's keys over lines (as
    libkineto and torch write their files): the frames' runs are found either way."""
    trace = generate("training", seed=seed % 50, steps=4)
    text = layout(with_frame_runs(trace.events, seed, runs))
    batches = decoded_batches(text, chunk)
    options = SplitOptions(detector=detector, keep_events=keep, pending_limit=pending_limit)
    one_by_one, batched = run_both_ways(batches, options)
    assert_same(one_by_one, batched)
    assert_same(one_by_one, run_both_ways(batches, options, decoded_batches(text, chunk, True))[1])


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("pending_limit", [7, 20_000])
def test_a_trace_with_many_frame_runs_splits_the_same_decided_at_once(keep, pending_limit):
    trace = generate("training", seed=11, steps=5)
    text = kineto_text(with_frame_runs(trace.events, 5, 30))
    # Two frames whose bytes are not UTF-8: handed back as their (repaired) dicts.
    text = text.replace(b'"train.py(12): step"', b'"train.py(12): st\xffp"', 2)
    batches = decoded_batches(text, 4096)
    assert None in [raw for batch in batches for raw in batch.raws]
    options = SplitOptions(detector="steps", keep_events=keep, pending_limit=pending_limit)
    one_by_one, batched = run_both_ways(batches, options)
    assert one_by_one["at_once"] == 0 and batched["at_once"] >= 80  # ten runs of 8 or more
    assert_same(one_by_one, batched)
    slim = decoded_batches(text, 4096, slim=True)
    assert any(run.starts is not None for batch in slim for run in batch.frame_runs)
    from_slim = run_both_ways(batches, options, slim)[1]
    assert from_slim["at_once"] >= 80
    assert_same(one_by_one, from_slim)


def test_a_file_spaced_as_kineto_writes_it_has_its_frames_read_in_bulk():
    trace = generate("training", seed=11, steps=5)
    text = spaced_text(with_frame_runs(trace.events, 5, 30))
    slim = decoded_batches(text, 1 << 20, slim=True)
    assert sum(run.j - run.i for batch in slim for run in batch.frame_runs
               if run.starts is not None) >= 80  # ten runs of 8 or more, their times in bulk
    options = SplitOptions(detector="auto", keep_events=True, pending_limit=20_000)
    one_by_one, from_slim = run_both_ways(decoded_batches(text, 4096), options, slim)
    assert from_slim["at_once"] >= 80
    assert_same(one_by_one, from_slim)


def with_odd_links(events: list, seed: int) -> list:
    """``events`` with linked events ``feed`` takes apart from the common ones put in at
    random places: flows with a string id, or a phase that is no flow's, or before any
    launch; GPU work that is not an ``X``, or without a correlation id; metadata of a
    flow's category."""
    rng = random.Random(seed)
    times = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    lo, hi = min(times), max(times)
    corrs = [e["args"]["correlation"] for e in events
             if e.get("cat") == "kernel" and "correlation" in e.get("args", {})]
    odd = [lambda ts: {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": "s-1", "pid": 1,
                       "tid": 1, "ts": ts},
           lambda ts: {"ph": "X", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 1, "tid": 1,
                       "ts": ts, "dur": 2.0},
           lambda ts: {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": rng.choice(corrs),
                       "pid": 1, "tid": 1, "ts": ts, "bp": "e"},
           lambda ts: {"ph": "i", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts,
                       "args": {"correlation": rng.choice(corrs)}},
           lambda ts: {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0,
                       "tid": 7, "ts": ts, "dur": 1.0},
           lambda ts: {"ph": "M", "cat": "ac2g", "name": "process_name", "pid": 0,
                       "ts": ts, "args": {"name": "odd"}}]
    out = list(events)
    out[:0] = [odd[2](lo)]  # a flow before any launch
    for _ in range(40):
        at = rng.randrange(len(out) + 1)
        out[at:at] = [rng.choice(odd)(rng.uniform(lo, hi))]
    return out


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("pending_limit", [7, 20_000])
@pytest.mark.parametrize("scenario, detector", [("training", "steps"), ("training", "auto"),
                                                 ("serving", "auto")])
def test_checked_batches_fed_by_category_equal_feeding_them_one_by_one(scenario, detector,
                                                                       keep, pending_limit):
    """A checked batch (the decoder's slim batches, as ``drive`` reads them) is fed by
    ``Splitter._feed_checked``: each event's category read first, a launch flow reading
    its phase, time and id only, the others their fields once and unchecked
    (``_feed_fields``), runtime calls, flows and GPU work owned inline, handed out or only
    counted. The pairs, records (the iterations' to each number's type: GPU times are sums
    added in order) and counts are those of feeding each event to ``feed``."""
    trace = generate(scenario, seed=7)
    text = kineto_text(with_odd_links(trace.events, seed=len(trace.events)))
    slim = decoded_batches(text, 4096, slim=True)
    assert all(batch.checked for batch in slim)
    options = SplitOptions(detector=detector, keep_events=keep, pending_limit=pending_limit)
    one_by_one, batched = run_both_ways(decoded_batches(text, 4096), options, slim)
    assert_same(one_by_one, batched)
    assert "'launches': 0" not in batched["iterations"]
    assert "'gpu_busy_us': 0.0" not in batched["iterations"]


@pytest.mark.parametrize("field", ["ts", "ph"])
def test_an_untimed_event_in_a_checked_batch_is_refused_as_feeding_it_alone_refuses_it(field):
    """``Splitter._feed_checked`` counts a checked batch's events at once: an event without
    ``ts`` (or ``ph``) in it is refused with the number ``feed`` gives it, and the events
    after it stay uncounted (``events_in`` is what feeding them one by one leaves)."""
    from stream_split.errors import TraceEventError
    events = list(generate("training", seed=5, steps=3).events)
    at = len(events) // 2
    untimed = {"ph": "X", "cat": "cpu_op", "name": "untimed", "pid": 1, "tid": 1, "ts": 1.0}
    del untimed[field]
    events.insert(at, untimed)
    text = kineto_text(events)
    slim = decoded_batches(text, 1 << 12, slim=True)
    assert all(batch.checked for batch in slim)
    outcomes = []
    for batched in (False, True):
        splitter = Splitter(SplitOptions(keep_events=False))
        with pytest.raises(TraceEventError) as refused:
            for batch in (slim if batched else decoded_batches(text, 1 << 12)):
                if batched:
                    splitter.feed_batch(batch.events, None, batch.frame_runs, batch.checked)
                else:
                    for event in batch.events:
                        splitter.feed(event)
        outcomes.append((str(refused.value), splitter.events_in))
    assert outcomes[0] == outcomes[1]
    assert outcomes[1][1] == at and f"event #{at + 1} " in outcomes[1][0]


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("pending_limit", [7, 20_000])
def test_slim_structs_and_dicts_in_one_batch_give_what_feeding_each_event_gives(
        keep, pending_limit):
    """A slim batch holds structs (``validate.SlimEvent``) where msgspec took the engine's
    types, and dicts where it refused them (here a ``dur`` that is a string, an invalid
    event); such a batch is not checked and each event goes to ``feed``, which takes a
    struct by the checked path. The pairs, records and counts are those of feeding the full
    dicts."""
    trace = generate("training", seed=5, steps=4)
    events = with_frame_runs(trace.events, 3, 6)
    for at in (len(events) // 3, 2 * len(events) // 3):
        events.insert(at, {"ph": "X", "cat": "cpu_op", "name": "odd", "pid": 1, "tid": 1,
                           "ts": events[at]["ts"], "dur": "5"})
    text = kineto_text(events)
    slim = decoded_batches(text, 1 << 14, slim=True)
    kinds = {e.__class__.__name__ for b in slim if not b.checked for e in b.events if e}
    assert {"dict", "SlimEventWithDims"} <= kinds, kinds
    options = SplitOptions(detector="auto", keep_events=keep, pending_limit=pending_limit)
    one_by_one, batched = run_both_ways(decoded_batches(text, 1 << 14), options, slim)
    assert_same(one_by_one, batched)
    assert batched["invalid"] >= 2  # (the frames put in include some invalid ones)


def test_a_slim_batch_holds_only_what_the_engine_reads_and_frame_runs_in_bulk():
    trace = generate("training", seed=3, steps=3)
    text = kineto_text(with_frame_runs(trace.events, 2, 8))
    full = [b for b in decoded_batches(text, 1 << 20)]
    slim = [b for b in decoded_batches(text, 1 << 20, slim=True)]
    assert [r for b in full for r in b.raws] == [r for b in slim for r in b.raws]
    events = [e for b in full for e in b.events]
    bulk = {k for b in slim for run in b.frame_runs if run.starts is not None
            for k in range(run.i, run.j)}
    assert bulk, "plain frame runs are read in bulk"
    structs = 0
    for k, (event, checked) in enumerate((e, b.checked) for b in slim for e in b.events):
        if k in bulk:
            assert event is None
            continue
        # the fields the engine reads, each read as the event's dict reads it; ``args`` only
        # with the keys the engine reads: as a struct (``validate.SlimEvent``) where their
        # types are the engine's, always so in a checked batch
        assert event.__class__ is not dict or not checked
        structs += event.__class__ is not dict
        assert {key: event.get(key) for key in ENGINE_FIELDS} == {
            key: events[k].get(key) for key in ENGINE_FIELDS}
        want_args = events[k].get("args")
        if want_args is not None:
            want_args = {key: want_args[key] for key in ENGINE_ARGS if key in want_args}
        assert event.get("args") == want_args
    assert structs
    offset = 0
    for b in slim:
        for run in b.frame_runs:
            if run.starts is not None:  # parsed in full on demand, with the times read in bulk
                parsed = run.events()
                assert parsed == events[offset + run.i:offset + run.j]
                assert run.starts.tolist() == [float(e["ts"]) for e in parsed]
        offset += len(b.events)


def test_the_decoder_marks_runs_of_kineto_python_frames_and_nothing_else():
    trace = generate("training", seed=2, steps=3)
    text = kineto_text(with_frame_runs(trace.events, 9, 6))
    batches = decoded_batches(text, 1 << 20)
    marked = [k for batch in batches for run in batch.frame_runs for k in range(run.i, run.j)]
    assert marked, "the runs of 8 or more frames are marked"
    events = [e for batch in batches for e in batch.events]
    raws = [r for batch in batches for r in batch.raws]
    assert all(raws[k].startswith(FRAME_PREFIX) for k in marked)
    assert all(events[k]["cat"] == "python_function" for k in marked)


def test_frames_named_like_launches_are_given_to_the_detector_as_feed_gives_them():
    trace = generate("training", seed=4, steps=3)
    events = list(trace.events)
    start = next(e["ts"] for e in events if e.get("cat") == "cpu_op")
    frames = [{"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1,
               "ts": start + k, "dur": 0.5, "args": {}}
              for k, name in enumerate(["f"] * 8 + [next(iter(LAUNCH_NAMES))] + ["g"] * 8)]
    text = kineto_text(frames + events)
    assert_same(*run_both_ways(decoded_batches(text, 1 << 20), SplitOptions()))


@settings(max_examples=200, deadline=None)
@given(edges=st.lists(st.floats(0, 1000, allow_nan=False), max_size=6, unique=True),
       ops=st.lists(st.tuples(st.floats(-10, 1010, allow_nan=False),
                              st.floats(-50, 300, allow_nan=False)), min_size=1, max_size=30),
       closed=st.booleans(), last_end=st.sampled_from([None, 900.0, 2000.0]))
def test_owners_of_many_ops_are_the_owner_of_each(edges, ops, closed, last_end):
    import numpy as np
    windows = Windows()
    for edge in sorted(edges):
        windows.add(edge)
    if closed:
        windows.close(last_end)
    starts = np.array([s for s, _ in ops])
    ends = np.array([s + d for s, d in ops])
    decidable = windows.decidable_many(ends)
    assert decidable.tolist() == [windows.decidable(e) for e in ends.tolist()]
    many = windows.owners(starts, ends).tolist()
    one = [windows.owner(s, e) for s, e in zip(starts.tolist(), ends.tolist())]
    assert many == one


@functools.lru_cache(maxsize=1)
def _traces_with_frames() -> list:
    paths = sorted(SHARED_TRACES.rglob("*.json.gz")) if SHARED_TRACES.is_dir() else []
    recorded = sorted((REPO / "tests" / "data" / "cuda").glob("*.json.gz"))
    return [p for p in paths + recorded if FRAME_PREFIX in gzip.open(p).read()]


@needs_shared
@pytest.mark.slow
@pytest.mark.parametrize("detector", ["steps", "auto"])
def test_real_traces_split_the_same_with_frame_runs_decided_at_once(detector):
    traces = _traces_with_frames()
    assert traces, "the shared resnet trace holds Python frames"
    for path in traces:
        batches = decoded_batches(gzip.open(path).read(), 1 << 20)
        assert any(batch.frame_runs for batch in batches), path
        options = SplitOptions(detector=detector, pending_limit=5000)
        one_by_one, batched = run_both_ways(batches, options)
        # The structure detector reads frames one by one while it still wants them as evidence
        # (the loop not decided yet): only with step annotations must runs go at once.
        assert batched["at_once"] or detector != "steps", path
        assert_same(one_by_one, batched)
        slim = decoded_batches(gzip.open(path).read(), 1 << 20, slim=True)
        assert_same(one_by_one, run_both_ways(batches, options, slim)[1])


@pytest.mark.parametrize("enabled", [True, False])
def test_reading_a_trace_leaves_garbage_collection_as_it_found_it(enabled):
    import gc
    from stream_split.cli import sample_trace_path
    from stream_split.run import scan_records
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        records = scan_records(sample_trace_path(), SplitOptions())
        assert records, "the sample trace has iterations"
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
