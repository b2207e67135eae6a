"""The core engine: ownership by window and by correlation, with step annotations as the
detector (the structural detector has its own tests). Fed event lists directly, no I/O."""

import pytest
from hypothesis import given, settings, strategies as st

from conftest import REPO, SHARED_TRACES, owners_of
from stream_split.core import OUTSIDE, SplitOptions, Splitter, TraceEventError
from stream_split.testing.generate import generate

STEPS = SplitOptions(detector="steps")


@pytest.mark.parametrize("layout", ["kineto", "time"])
def test_annotated_training_matches_ground_truth_exactly(layout):
    trace = generate("training", seed=1, layout=layout)
    got, splitter = owners_of(trace.events, STEPS)
    assert got == trace.truth.owners
    assert len(splitter.iterations) == len(trace.truth.iterations)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), steps=st.integers(1, 9), layers=st.integers(1, 4),
       layout=st.sampled_from(["kineto", "time"]), metadata=st.sampled_from(["first", "last"]),
       streams=st.integers(1, 3), lag=st.sampled_from([None, 50.0, 3000.0]))
def test_every_event_owned_as_the_truth_says_for_random_training_runs(
        seed, steps, layers, layout, metadata, streams, lag):
    trace = generate("training", seed=seed, steps=steps, layers=layers, layout=layout,
                     metadata=metadata, streams=streams, queue_lag_us=lag)
    got, _ = owners_of(trace.events, STEPS)
    assert got == trace.truth.owners


def test_kernels_that_run_after_the_next_step_began_belong_to_their_launching_step():
    trace = generate("training", seed=3, queue_lag_us=3000.0)
    got, splitter = owners_of(trace.events, STEPS)
    starts = [it.start_ts for it in splitter.iterations]
    late = [(o, e) for o, e in zip(got, trace.events)
            if e.get("cat") == "kernel" and o is not None and o >= 0 and o + 1 < len(starts)
            and e["ts"] > starts[o + 1]]
    assert late, "the scenario must have kernels running after the next step began"
    assert got == trace.truth.owners


def test_gpu_buffers_written_newest_first_are_owned_the_same():
    trace = generate("training", seed=5)
    gpu = [e for e in trace.events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset",
                                                         "cuda_runtime", "ac2g")]
    rest = [e for e in trace.events if e not in gpu]
    # Three activity "buffers" written newest-first, as in the h100 owlv2 trace.
    third = len(gpu) // 3
    buffers = [gpu[:third], gpu[third:2 * third], gpu[2 * third:]]
    cpu_part = [e for e in rest if e.get("cat") != "gpu_user_annotation"]
    tail = [e for e in rest if e.get("cat") == "gpu_user_annotation"]
    reordered = cpu_part + buffers[2] + buffers[1] + buffers[0] + tail
    got_sorted, _ = owners_of(trace.events, STEPS)
    got_reordered, _ = owners_of(trace.events, STEPS, feed_order=reordered)
    assert got_reordered == got_sorted == trace.truth.owners


def test_gpu_work_launched_before_the_trace_goes_outside():
    trace = generate("training", seed=2, pre_trace_kernels=7)
    got, splitter = owners_of(trace.events, STEPS)
    assert got == trace.truth.owners
    assert splitter.outside_kernels >= 7


def test_graph_launch_one_correlation_many_kernels():
    trace = generate("sample")
    got, splitter = owners_of(trace.events, STEPS)
    assert got == trace.truth.owners
    graph_corrs = {e["args"]["correlation"] for e in trace.events
                   if e.get("name") == "cudaGraphLaunch"}
    assert graph_corrs
    per_corr = {}
    for o, e in zip(got, trace.events):
        if e.get("cat") == "kernel" and e["args"]["correlation"] in graph_corrs:
            per_corr.setdefault(e["args"]["correlation"], set()).add(o)
    assert all(len(owners) == 1 for owners in per_corr.values())
    assert max(sum(1 for e in trace.events if e.get("cat") == "kernel"
                   and e["args"]["correlation"] == c) for c in graph_corrs) > 1


def test_kernel_arriving_before_its_launch_waits_for_it():
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
              "ts": 15.0, "dur": 1.0, "args": {"correlation": 42}}
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 40.0,
              "dur": 5.0, "args": {"correlation": 42}}
    steps = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1,
              "tid": 1, "ts": 10.0 + 20 * i, "dur": 19.0} for i in range(2)]
    events = steps + [kernel, launch]
    got, splitter = owners_of(events, STEPS)
    assert got == [0, 1, 0, 0]
    assert splitter.iterations[0].kernels == 1


def test_a_wrapper_spanning_several_iterations_belongs_to_none():
    wrapper = {"ph": "X", "cat": "user_annotation", "name": "train_loop", "pid": 1, "tid": 1,
               "ts": 5.0, "dur": 100.0}
    steps = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1,
              "tid": 1, "ts": 10.0 + 20 * i, "dur": 19.0} for i in range(3)]
    got, _ = owners_of([wrapper] + steps, STEPS)
    assert got == [OUTSIDE, 0, 1, 2]


def test_an_op_crossing_one_boundary_goes_where_most_of_it_is():
    steps = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1,
              "tid": 1, "ts": 10.0 + 20 * i, "dur": 19.0} for i in range(3)]
    frame = {"ph": "X", "cat": "python_function", "name": "step (train.py:3)", "pid": 1,
             "tid": 1, "ts": 29.5, "dur": 19.0}  # opened just before step 1's first op
    got, _ = owners_of(steps + [frame], STEPS)
    assert got == [0, 1, 2, 1]


def test_a_gpu_annotation_waits_for_its_cpu_annotation_held_undecided():
    # Kineto writes the GPU annotations after every CPU op. The last step's CPU annotation
    # (External id 30) is still undecided then, and the ids the step before owns (11, and
    # 50 from a communication thread) surround it: its GPU mirror takes the owner of its own
    # CPU annotation, not a guess from the id ranges.
    def annotation(ext, ts, cat="user_annotation", tid=1):
        return {"ph": "X", "cat": cat, "name": f"a{ext}", "pid": 1, "tid": tid, "ts": ts,
                "dur": 1.0, "args": {"External id": ext}}
    steps = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1,
              "tid": 1, "ts": 20.0 * i, "dur": 19.0} for i in range(3)]
    events = [steps[0], annotation(10, 2.0), steps[1], annotation(11, 22.0),
              annotation(50, 25.0, tid=2), steps[2], annotation(30, 42.0),
              annotation(30, 100.0, "gpu_user_annotation", 7)]
    got, _ = owners_of(events, STEPS)
    assert got == [0, 0, 1, 1, 1, 2, 2, 2]


def test_metadata_is_owned_by_every_piece_and_counted_apart():
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}]
    got, splitter = owners_of(events, STEPS)
    assert got == [None] and splitter.metadata_events == 1 and splitter.events_out == 0


@pytest.mark.parametrize("event, message", [
    ({"ts": 1.0}, 'no "ph"'),
    ({"ph": "X", "name": "x"}, 'no "ts"'),
])
def test_events_missing_required_fields_are_errors(event, message):
    splitter = Splitter(STEPS)
    with pytest.raises(TraceEventError, match=message):
        splitter.feed(event)


@pytest.mark.parametrize("event, field", [
    ({"ph": "X", "ts": "soon"}, "ts"),
    ({"ph": "X", "ts": 1.0, "dur": "5", "cat": "cpu_op", "name": "x"}, "dur"),
    ({"ph": "X", "ts": 1.0, "args": "text"}, "args"),
    ({"ph": "X", "ts": 1.0, "cat": "kernel", "args": {"correlation": {"a": 1}}}, "correlation"),
    ({"ph": "X", "ts": 1.0, "cat": ["cpu_op"]}, "cat"),
    ({"ph": "X", "ts": 1.0, "pid": [1]}, "pid"),
])
def test_an_event_with_an_unusable_field_goes_to_outside_and_is_counted(event, field):
    got, splitter = owners_of([event], STEPS)
    assert got == [OUTSIDE] and splitter.outside_events == 1
    assert splitter.invalid_events == 1
    assert splitter.invalid_examples[0]["event_index"] == 0
    assert f'"{field}"' in splitter.invalid_examples[0]["problem"]


def test_memory_state_does_not_grow_with_iterations_per_launch():
    trace = generate("training", seed=0, steps=40, layers=2)
    _, splitter = owners_of(trace.events, STEPS)
    # One correlation range per run of launches with the same owner, not one per launch.
    assert splitter.evidence["correlation_ranges"] <= 3 * len(splitter.iterations) + 3


@pytest.mark.parametrize("detector", ["steps", "auto"])
@pytest.mark.parametrize("scenario", ["training", "serving", "idle_steps"])
def test_spilling_undecided_events_changes_no_owner(scenario, detector):
    # A tiny pending limit forces every undecided event through the spill and the two-pass
    # close; owners must be the same as when nothing is spilled.
    trace = generate(scenario, seed=7, pre_trace_kernels=5)
    spilled, splitter = owners_of(trace.events, SplitOptions(detector=detector, pending_limit=7))
    kept, _ = owners_of(trace.events, SplitOptions(detector=detector))
    assert spilled == kept
    if detector == "auto" or scenario == "training":  # the others have no ProfilerStep
        assert kept == trace.truth.owners
    assert splitter.max_pending > 7


def test_cpu_side_events_spilled_while_nothing_waits_for_a_launch_stay_columns():
    # Without GPU work (nothing held for a link) each spill's batches, its last one too, are
    # ``HeldColumns``: decided and held again a batch at a time, never one item at a time.
    from stream_split.spill import HeldColumns, MemorySpill
    from stream_split.trace_format import GPU_ANNOTATION_CAT, GPU_WORK_CATS, LAUNCH_FLOW_CATS
    linked = GPU_WORK_CATS | LAUNCH_FLOW_CATS | {GPU_ANNOTATION_CAT}
    kinds = []

    class Watched(MemorySpill):
        def put(self, items):
            kinds.append(type(items))
            super().put(items)

    trace = generate("training", seed=7)
    splitter = Splitter(SplitOptions(detector="auto", pending_limit=7), spill=Watched())
    for event in trace.events:
        if event.get("cat") not in linked:
            splitter.feed(event)
    splitter.close()
    assert kinds and set(kinds) == {HeldColumns}


@pytest.mark.parametrize("scenario", ["training", "serving"])
def test_gpu_work_waiting_for_its_launch_is_spilled_as_links_and_changes_no_owner(scenario):
    # GPU work and flows fed before any window (moved to the front) wait for their launch,
    # held as ``HeldLinks``; spilled, a batch of them at a time (``HeldLinks``, never items),
    # they get the owners they get when nothing is spilled: their launch's.
    from stream_split.spill import HeldLinks, MemorySpill
    from stream_split.trace_format import GPU_WORK_CATS, LAUNCH_FLOW_CATS
    linked = GPU_WORK_CATS | LAUNCH_FLOW_CATS
    trace = generate(scenario, seed=7)
    order = [e for e in trace.events if e.get("cat") in linked] + \
        [e for e in trace.events if e.get("cat") not in linked]
    spilled, _ = owners_of(trace.events, SplitOptions(pending_limit=7), feed_order=order)
    kept, _ = owners_of(trace.events, SplitOptions(), feed_order=order)
    assert spilled == kept == trace.truth.owners
    kinds = []

    class Watched(MemorySpill):
        def put(self, items):
            kinds.append(type(items))
            super().put(items)

    splitter = Splitter(SplitOptions(pending_limit=7), spill=Watched())
    for event in order:
        splitter.feed(event)
    splitter.close()
    assert HeldLinks in kinds and list not in kinds


@pytest.mark.parametrize("limit", [7, 100_000])
@pytest.mark.parametrize("scenario", ["training", "serving"])
def test_records_are_the_same_whether_held_events_are_kept_whole_or_not(scenario, limit):
    # Not handed out, a held CPU-side event keeps less than itself (an op its thread, an event
    # only counted nothing: ``Splitter._hold_cpu``); handed out without its bytes, it is kept
    # whole. The records must not tell them apart, held in memory or spilled.
    trace = generate(scenario, seed=3)
    records = {}
    for keep in (True, False):
        splitter = Splitter(SplitOptions(detector="auto", keep_events=keep, pending_limit=limit))
        for event in trace.events:
            splitter.feed(event)
        splitter.close()
        records[keep] = [record.to_dict() for record in splitter.iterations]
        assert splitter.max_pending > 100  # the loop's structure is decided late: ops wait
    assert records[False] == records[True]


def _annotated_steps(n: int) -> list:
    """``n`` annotated steps, each of an ``aten::mm`` and an annotation of a phase role,
    one annotation in three with ``args`` (an External id, or none it links by), times in
    integers and floats, an instant annotation and one before the first step (outside)."""
    events = [{"ph": "i", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1,
               "ts": 0.5, "s": "t"}]
    for i in range(n):
        ts = 10 + 20 * i
        step = {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1,
                "tid": 1, "ts": ts if i % 2 else float(ts), "dur": 15}
        if i % 3 == 1:
            step["args"] = {"External id": 1000 + i}
        elif i % 3 == 2:
            step["args"] = {"Record function id": 0}
        events.append(step)
        events.append({"ph": "X", "cat": "user_annotation", "name": "backward" if i % 2
                       else None, "pid": 1, "tid": 1, "ts": ts + 1, "dur": 3})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                       "ts": ts + 5, "dur": 5})
        if i % 4 == 0:
            events.append({"ph": "i", "cat": "user_annotation", "name": "mark", "pid": 1,
                           "tid": 1, "ts": ts + 12, "s": "t"})
    return events


@pytest.mark.parametrize("limit", [7, 100_000])
@pytest.mark.parametrize("detector", ["steps", "auto"])
def test_annotations_held_as_their_names_give_the_records_of_whole_ones(limit, detector):
    # Not handed out, a held annotation without ``args`` keeps its name alone, a string
    # (``Splitter._hold_cpu``); one with ``args`` its view. The pairs' owners, counts and
    # records are those of events held whole (``keep_events``), held in memory or spilled
    # (counted at once there: ``_own_held``, ``_count_outside_quiet``).
    events = _annotated_steps(40)
    results, held = {}, []
    for keep in (True, False):
        splitter = Splitter(SplitOptions(detector=detector, keep_events=keep,
                                         pending_limit=limit))
        for event in events:
            splitter.feed(event)
            held.extend(item[3] for item in splitter._cpu_rows.items
                        if item[3].__class__ is str)
        splitter.close()
        results[keep] = (repr([record.to_dict() for record in splitter.iterations]),
                         splitter.outside_events, splitter.events_out)
    assert results[False] == results[True]
    assert len(results[True][0]) > 1000  # (the steps were found)
    assert "ProfilerStep#0" in held and "" in held and "mark" in held


@pytest.mark.parametrize("limit", [7, 100_000])
@pytest.mark.parametrize("integer_every", [None, 1, 5])
def test_held_ops_counted_at_once_give_the_records_one_by_one_gives(limit, integer_every):
    # Not handed out, an op held as its thread is counted with the others of its batch at
    # once where every time of the batch is a float (``Splitter._own_held``), else one by
    # one (``_own_cpu``: an integer end is kept as given); handed out without its bytes, it
    # is kept whole and always decided one by one. The records are the same to the type of
    # each number (``repr``), held in memory or spilled.
    trace = generate("training", seed=3)
    events = trace.events
    if integer_every:
        events = [dict(e, ts=int(e["ts"]), **({"dur": int(e["dur"])} if "dur" in e else {}))
                  if k % integer_every == 0 and "ts" in e else e for k, e in enumerate(events)]
    records = {}
    for keep in (True, False):
        splitter = Splitter(SplitOptions(detector="auto", keep_events=keep, pending_limit=limit))
        for event in events:
            splitter.feed(event)
        splitter.close()
        records[keep] = repr([record.to_dict() for record in splitter.iterations])
    assert records[False] == records[True]


def records_held_ops_added_at_once_and_one_by_one(monkeypatch, events: list,
                                                  limit: int) -> tuple[list, dict]:
    """Split ``events`` (``pending_limit=limit``) with the held ops' time in ops added at once
    where ``IntervalUnion.add_many`` can, and forced one by one (``add_many`` refusing), each
    with and without the events kept: ``add_many``'s answers, and the records by (way, keep)."""
    from stream_split.core import breakdown
    at_once = breakdown.IntervalUnion.add_many
    answers = []

    def counted(union, starts, ends, *how):
        answers.append(at_once(union, starts, ends, *how))
        return answers[-1]
    records = {}
    for way in ("at once", "one by one"):
        monkeypatch.setattr(breakdown.IntervalUnion, "add_many", counted if way == "at once"
                            else lambda union, starts, ends, *how: False)
        for keep in (True, False):
            splitter = Splitter(SplitOptions(detector="auto", keep_events=keep,
                                             pending_limit=limit))
            for event in events:
                splitter.feed(event)
            splitter.close()
            records[way, keep] = repr([record.to_dict() for record in splitter.iterations])
    return answers, records


@pytest.mark.parametrize("kept_intervals", [8, 512])
@pytest.mark.parametrize("limit", [7, 100_000])
@pytest.mark.parametrize("scenario", ["training", "serving", "deep_roots"])
def test_held_ops_time_in_ops_added_at_once_gives_the_records_one_by_one_gives(
        monkeypatch, scenario, limit, kept_intervals):
    # The held ops' time in ops is added per iteration and thread at once
    # (``Splitter._add_held_ops``, ``IntervalUnion.add_many``), the views of CPU ops among
    # them too, where the order cannot change the union; else one by one in their place.
    # Forced one by one (``add_many`` refusing), the records are the same to the last digit,
    # held in memory or spilled (in end order), and where few intervals are kept (8: the
    # order would change the union, so some go one by one).
    from stream_split.core import breakdown
    monkeypatch.setattr(breakdown, "KEPT_INTERVALS", kept_intervals)
    answers, records = records_held_ops_added_at_once_and_one_by_one(
        monkeypatch, generate(scenario, seed=3).events, limit)
    # (8: some one by one; but deep_roots held in memory: its CPU ops all held as their
    # thread, its GEMMs' names telling nothing without their ``Input Dims``, none named among
    # them, so the oldest intervals are dropped as one by one drops them: ``may_drop``)
    assert answers and all(answers) == (kept_intervals == 512 or
                                        (scenario, limit) == ("deep_roots", 100_000))
    for keep in (True, False):
        assert records["at once", keep] == records["one by one", keep]


@pytest.mark.parametrize("kept_intervals", [8, 512])
@pytest.mark.parametrize("limit", [7, 100_000])
def test_held_ops_stamped_in_integers_added_at_once_give_the_records_one_by_one_gives(
        monkeypatch, limit, kept_intervals):
    # A trace stamped in integers whose ops are all held (no loop: names of their own) and
    # decided at the end: their time in ops is added at once too, kept as integers, the
    # oldest intervals dropped as one by one drops them (``add_many``'s ``integer`` and
    # ``may_drop``); forced one by one, the records are the same to the last digit.
    from stream_split.core import breakdown, engine
    monkeypatch.setattr(breakdown, "KEPT_INTERVALS", kept_intervals)
    monkeypatch.setattr(engine, "_INTEGER_BULK_MIN", 1)  # (spilled batches of 7 too)

    def name(i: int) -> str:  # letters only (a digit would make names of one family)
        return "".join(chr(97 + i // 26 ** k % 26) for k in range(3))
    events = []
    for i in range(3000):
        thread = 1 + (i // 500) % 2  # runs of 500 ops on each of two threads
        events.append({"ph": "X", "cat": "cpu_op", "name": "op_" + name(i), "pid": 1,
                       "tid": thread, "ts": 10 * i, "dur": 7 if i % 5 else 9})
        if i % 3 == 0:  # a nested child, and one that touches its parent's end
            events.append({"ph": "X", "cat": "cpu_op", "name": "child_" + name(i), "pid": 1,
                           "tid": thread, "ts": 10 * i + 1, "dur": 6})
    answers, records = records_held_ops_added_at_once_and_one_by_one(monkeypatch, events,
                                                                     limit)
    # held in memory: in start order, all at once; spilled, some come back in end order
    assert answers and (all(answers) if limit > len(events) else True in answers)
    for keep in (True, False):
        assert records["at once", keep] == records["one by one", keep]
    # kept whole, each is decided through ``_own_cpu``; else the ops are counted at once
    assert records["at once", False] == records["at once", True]
    assert "cpu_op_us" in records["at once", True]


def test_events_fed_with_their_original_bytes_come_back_as_those_bytes():
    """Held (and spilled) or decided at once, an event fed with its original bytes is handed
    back as exactly those bytes, through ``decided()``."""
    import json
    trace = generate("training", seed=3, annotate_steps=False)
    raws = [json.dumps(e, indent=1).encode() for e in trace.events]  # not orjson's layout
    splitter = Splitter(SplitOptions(pending_limit=11))
    out = []
    for event, raw in zip(trace.events, raws):
        splitter.feed(event, raw)
        out.extend(splitter.decided().pairs)
    splitter.end_of_input()
    while True:
        decided = splitter.decided()
        out.extend(decided.pairs)
        if not decided.more:
            break
    assert splitter.max_pending > 11  # some waited, in the spill too
    assert sorted(e for _, e in out) == sorted(raws)


def _records_with_limit(path: str, detector: str, limit: int) -> list:
    from stream_split.run import scan_records
    return [r.to_dict() for r in scan_records(path, SplitOptions(detector=detector,
                                                                 pending_limit=limit))]


_GPU_ORDER_TRACES = [
    REPO / "tests" / "data" / "cuda" / "train_eval.json.gz",
    REPO / "tests" / "data" / "cuda" / "serving_graphs.json.gz",
    # GPU work of its first iteration is decided out of order (held for its launch), and its
    # iterations have ~1000 kernels: past KEPT_INTERVALS the breakdown sums the oldest
    # intervals (core.breakdown.GpuUnion); closing the shortest gaps, as it did, counted
    # idle time as busy by an amount that depended on the order (idle_us 2569 at
    # pending_limit 100000 against the exact 3177 at 50).
    pytest.param(SHARED_TRACES / "tracelens" / "h100" /
                 "google_owlv2-large-patch14-ensemble__1016001.json.gz",
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize("path", _GPU_ORDER_TRACES, ids=lambda p: p.name)
def test_iteration_records_do_not_depend_on_how_much_is_held_in_memory(path):
    """GPU busy and active time are kept per iteration, and work decided out of order (held,
    spilled, waiting for its launch) counts whole on its stream: the records, GPU times
    included, are the same whatever ``pending_limit`` spills."""
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    records = {limit: _records_with_limit(str(path), "auto", limit) for limit in (50, 100_000)}
    assert records[50] == records[100_000]
    for record in records[50]:
        if record.get("type") == "iteration" and record["gpu_events"]:
            assert 0 < record["gpu_active_us"] <= record["gpu_busy_us"] + 1e-6


def test_gpu_work_decided_out_of_order_still_counts_its_busy_time():
    """A kernel that waits for its launch is decided after a later kernel of its iteration on
    the same stream: the busy and active times are still the union of the two (20 µs)."""
    def op(name, ts, dur, cat="cpu_op", **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": args}

    def kernel(corr, ts):
        return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts,
                "dur": 10.0, "args": {"correlation": corr}}
    events = [op("ProfilerStep#1", 0.0, 100.0, "user_annotation"),
              op("ProfilerStep#2", 100.0, 100.0, "user_annotation"),
              op("cudaLaunchKernel", 5.0, 1.0, "cuda_runtime", correlation=2),
              kernel(2, 30.0),
              kernel(1, 10.0),  # before its launch in the file: it waits
              op("cudaLaunchKernel", 4.0, 0.5, "cuda_runtime", correlation=1)]
    splitter = Splitter(SplitOptions(detector="steps"))
    for event in events:
        splitter.feed(event)
    splitter.close()
    first = splitter.iterations[0]
    assert first.kernels == 2
    assert first.gpu_busy_us == pytest.approx(20.0)
    assert first.gpu_active_us == pytest.approx(20.0)


@pytest.mark.parametrize("scenario, detector", [("training", "steps"), ("training", "auto"),
                                                 ("serving", "auto")])
def test_runtime_calls_flows_and_gpu_work_counted_inline_give_the_same_records(scenario,
                                                                               detector):
    # A runtime call in the window known is owned in ``feed`` itself (``_feed_fields``), a
    # flow whose launch is known too, and GPU work with the fields ``feed`` read
    # (``Splitter._route``), handed out or only counted; what waited for its launch goes
    # through ``_own_linked`` either way. The records must not tell them apart.
    trace = generate(scenario, seed=5)
    records = {}
    for keep in (True, False):
        splitter = Splitter(SplitOptions(detector=detector, keep_events=keep))
        for event in trace.events:
            splitter.feed(event)
        splitter.close()
        records[keep] = [record.to_dict() for record in splitter.iterations]
    assert records[False] == records[True]
    assert sum(r["launches"] for r in records[True]) and sum(r["kernels"] for r in records[True])


@pytest.mark.parametrize("scenario", ["training", "serving"])
def test_odd_structural_ops_give_the_records_of_split_when_only_counted(scenario):
    # ``boundaries`` only counts (``keep_events=False``) and decides most CPU-side events in
    # ``feed``'s inline path; ``split`` keeps them (``_own_cpu``). Structural ops that are not
    # the common ``X`` cpu_op must tell the same there: an instant cpu_op with a phase role,
    # a cpu_op named like a step, a user_annotation without args named like a step.
    trace = generate(scenario, seed=3,
                     **({"annotate_steps": False} if scenario == "training" else {}))
    ops = [k for k, e in enumerate(trace.events) if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    late = set(ops[len(ops) // 2:])  # once the loop is known: most are decided inline
    events, added = [], 0
    for k, event in enumerate(trace.events):
        events.append(event)
        if k in late:
            added += 1
            at = {"pid": event["pid"], "tid": event["tid"], "ts": event["ts"]}
            events += [{**at, "ph": "i", "cat": "cpu_op", "name": "flash_attention_fwd", "s": "t"},
                       {**at, "ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{added}",
                        "dur": 0},
                       {**at, "ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{added}",
                        "dur": 0}][added % 3:][:1]
    records = {}
    for keep in (True, False):
        splitter = Splitter(SplitOptions(detector="auto", keep_events=keep))
        for event in events:
            splitter.feed(event)
        splitter.close()
        records[keep] = repr([record.to_dict() for record in splitter.iterations])
    assert records[False] == records[True]


def test_held_ops_grouped_by_thread_at_once_keep_each_threads_rows_in_order():
    # ``Splitter._add_held_ops`` groups a batch's held ops by thread with ``_rows_by_thread``
    # (runs of one thread found in C): each thread's rows in their order, the threads in the
    # order they first come, equal threads together (as a dict keys them), as row by row.
    import numpy as np
    from stream_split.core.engine import _rows_by_thread
    a, b, c = (1, 1), (1, 2), (2.0, 1)
    threads = [a, a, b, b, b, a, c, b, (2, 1)]
    rows = np.arange(10, 10 + len(threads))
    one_by_one = {}
    for thread, row in zip(threads, rows.tolist()):
        one_by_one.setdefault(thread, []).append(row)
    grouped = _rows_by_thread(threads, rows)
    assert [(t, part.tolist()) for t, part in grouped] == list(one_by_one.items())
    assert [(t, part.tolist()) for t, part in _rows_by_thread([b] * 3, rows[:3])] == [
        (b, [10, 11, 12])]


@pytest.mark.parametrize("limit", [7, 100_000])
def test_ops_of_a_thread_held_as_their_thread_hold_one_tuple(limit):
    # Not handed out, a held op keeps its thread (``Splitter._hold_cpu``); the ops of one
    # thread that follow each other hold the same tuple (a spilled batch pickles it once),
    # one whose name is phase evidence its thread and name; the records are those of ops
    # held whole (``keep_events``), held or spilled.
    from stream_split.core.serving import role_of
    from stream_split.spill import HeldColumns
    from stream_split.trace_format import PROFILER_STEP_PREFIX
    trace = generate("training", seed=3)
    records, held, named = {}, [], []
    for keep in (True, False):
        splitter = Splitter(SplitOptions(detector="auto", keep_events=keep, pending_limit=limit))
        spill_put = splitter._spill.put

        def put(batch):
            if isinstance(batch, HeldColumns) and batch.events is not None:
                for e in batch.events.tolist():
                    if e.__class__ is tuple:
                        (held if len(e) == 2 else named).append(e)
            spill_put(batch)
        splitter._spill.put = put
        for event in trace.events:
            splitter.feed(event)
        splitter.close()
        records[keep] = repr([record.to_dict() for record in splitter.iterations])
    assert records[False] == records[True]
    if limit == 7:
        assert len(held) > 100 and len({id(thread) for thread in held}) < len(held) // 10
        assert named and all(role_of(name) or name.startswith(PROFILER_STEP_PREFIX)
                             for _, _, name in named)


@pytest.mark.parametrize("limit", [7, 100_000])
@pytest.mark.parametrize("keep", [True, False])
def test_held_events_owned_outside_counted_at_once_give_what_one_by_one_gives(
        monkeypatch, limit, keep):
    # Held rows owned by ``OUTSIDE`` that link nothing (an op held as its thread, a view or
    # event without ``args``) are counted at once (``Splitter._count_outside_quiet``); the
    # others, launches and annotations among them, still go through ``_own_cpu``. Forced
    # one by one, the pairs (in order), the counts and the records are the same, held in
    # memory or spilled. The trace: one op of a phase role on each of many threads (no loop:
    # all but the first outside; ``testing.attacks.threads``), integer times, then a
    # training loop's events.
    import json

    trace = generate("training", seed=3)
    ops = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 100 + i,
            "ts": i, "dur": 1} for i in range(300)]
    events = ops + trace.events
    results = {}
    for way in ("at once", "one by one"):
        if way == "one by one":
            monkeypatch.setattr(Splitter, "_count_outside_quiet", lambda *args: None)
        splitter = Splitter(SplitOptions(detector="auto", keep_events=keep, pending_limit=limit))
        for event in events:
            splitter.feed(event, json.dumps(event).encode() if keep else None)
        splitter.close()
        results[way] = (splitter.pop_assigned(), splitter.outside_events,
                        repr([record.to_dict() for record in splitter.iterations]))
    assert results["at once"] == results["one by one"]
    assert results["at once"][1] >= 299
