"""The per-iteration GPU breakdown (``core.breakdown``) and the wall span outliers are judged
on: the layers add up to the GPU span, and agree with the exact unions of the piece's events."""
from __future__ import annotations

import glob
import gzip
import json
import math
import os
import random
import re

import numpy as np
import pytest

from stream_split import split
from stream_split.core import breakdown as bd
from stream_split.core.records import IterationRecord, rounded_us
from stream_split.testing.generate import generate, write_trace

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "traces")
RESNET = os.path.join(SHARED, "tracelens", "mi300", "resnet_act_checkpoint.json.gz")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def exact_union(intervals) -> float:
    total, current = 0.0, None
    for start, end in sorted(intervals):
        if current is None or start > current[1]:
            total += 0.0 if current is None else current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    return total + (0.0 if current is None else current[1] - current[0])


def exact_breakdown(events) -> dict:
    """What HTA's temporal breakdown computes, on one piece's GPU events, in floats."""
    work = [(e["ts"], e["ts"] + e.get("dur", 0), bd.gpu_layer(e["cat"], e["name"]))
            for e in events if e.get("cat") in GPU_CATS]
    span = max(w[1] for w in work) - min(w[0] for w in work)
    upto = [exact_union((s, e) for s, e, layer in work if layer <= k) for k in range(4)]
    return {"span_us": span, "compute_us": upto[0], "idle_us": span - upto[3],
            "comm_us": upto[1] - upto[0]}


def test_union_counts_any_order_exactly_while_the_intervals_fit():
    rng = random.Random(5)
    for _ in range(300):
        intervals = [(s, s + rng.uniform(0, 20)) for s in
                     (rng.uniform(0, 500) for _ in range(rng.randint(1, 60)))]
        rng.shuffle(intervals)
        union = bd.IntervalUnion()
        for start, end in intervals:
            union.add(start, end)
        assert union.total_us == pytest.approx(exact_union(intervals))


def nested_ops(rng: random.Random, n: int, at: float = 0.0) -> list:
    """A thread's ops, (start, end) in start order: nested calls, siblings, gaps, ops of no
    time, children that touch their parent's ends."""
    ops = []

    def calls(lo: float, hi: float, depth: int) -> None:
        t = lo
        while t < hi and len(ops) < n:
            start = t + rng.choice([0.0, 0.0, rng.uniform(0, 3)])
            if start > hi:
                return
            end = min(hi, start + rng.choice([0.0, rng.uniform(0, hi - start)]))
            ops.append((start, end))
            if depth < 4 and rng.random() < 0.5:
                calls(start, end, depth + 1)
            t = end + rng.choice([0.0, rng.uniform(0, 2)])
    calls(at, at + 1000.0, 0)
    return ops


def union_state(union) -> tuple:
    return list(union.starts), list(union.ends), union.frozen_us, union.total_us


@pytest.mark.parametrize("kept", [8, 64, 512])
def test_union_of_many_at_once_is_the_union_one_by_one_or_nothing(monkeypatch, kept):
    """``add_many`` adds a batch at once only where ``add`` one by one, in the batch's
    order, gives the same union to the last bit; else it adds nothing and says so (False).
    Held ops come in start order (held in memory), or end order (spilled: children
    before their parent, where one by one may hold more intervals than the batch's union),
    after what the union kept already (floats, integers, compacted). Times given as
    integers (``integer``) stay integers; with ``may_drop`` (nothing added again after) a
    batch in start order after the union's last interval is added at once however many
    it holds, the oldest dropped and summed as one by one drops them, frozen or not."""
    monkeypatch.setattr(bd, "KEPT_INTERVALS", kept)
    rng = random.Random(kept)
    answers = {True: 0, False: 0}
    dropped_at_once = 0
    for _ in range(600):
        integer = rng.random() < 0.3
        may_drop = rng.random() < 0.5
        ops = nested_ops(rng, rng.randint(1, 300))
        for more in range(1, 12 if rng.random() < 0.4 else 1):  # some long: many dropped
            ops += nested_ops(rng, 300, at=1100.0 * more)
        if integer:
            ops = [(int(start), int(end)) for start, end in ops]
        order = rng.choice(["start", "start", "end", "shuffled", "reversed"])
        if order == "end":
            ops.sort(key=lambda op: op[1])
        elif order == "shuffled":
            rng.shuffle(ops)
        elif order == "reversed":
            ops.reverse()
        before = nested_ops(rng, rng.randint(0, 30), at=rng.choice([-2000.0, 0.0, 3000.0]))
        if integer or rng.random() < 0.2:
            before = [(int(start), int(end)) for start, end in before]
        one, many = bd.IntervalUnion(), bd.IntervalUnion()
        for union in (one, many):
            for start, end in before:
                union.add(start, end)
            if rng.random() < 0.2:
                union.frozen = True
        many.frozen = one.frozen
        if rng.random() < 0.3:
            one.compact()
            many.compact()
        for start, end in ops:
            one.add(start, end)
        kept_before = union_state(many)
        added = many.add_many(np.array([op[0] for op in ops], np.float64),
                              np.array([op[1] for op in ops], np.float64), integer, may_drop)
        answers[added] += 1
        if not added:
            assert union_state(many) == kept_before
            for start, end in ops:
                many.add(start, end)
        elif many.frozen_us != kept_before[2]:
            dropped_at_once += 1
        assert union_state(many) == union_state(one), order
        assert [t.__class__ for t in many.starts] == [t.__class__ for t in one.starts]
        assert [t.__class__ for t in many.ends] == [t.__class__ for t in one.ends]
        if added and not may_drop:  # an interval in it changes nothing (``_own_cpu`` adds
            for start, end in ops:  # views again)
                many.add(start, end)
            assert union_state(many) == union_state(one)
    assert answers[True] > 20 and answers[False] > (0 if kept == 512 else 20)
    if kept < 512:  # (the batches here merge into fewer than 512 intervals)
        assert dropped_at_once > 10


def test_a_reversed_or_unbounded_interval_goes_one_by_one():
    for starts, ends in (([0.0, 5.0], [1.0, 4.0]), ([0.0, 1.0], [float("inf"), 2.0])):
        assert not bd.IntervalUnion().add_many(np.array(starts), np.array(ends))


def test_compact_union_counts_as_before_and_keeps_integer_times_as_given():
    """``compact`` keeps float times in float64 arrays, an interval added later turns them
    back into lists; an integer that float64 would round (beyond 2**53) is kept as given."""
    rng = random.Random(7)
    intervals = [(s, s + rng.uniform(0, 20)) for s in (rng.uniform(0, 500) for _ in range(80))]
    plain, compacted = bd.IntervalUnion(), bd.IntervalUnion()
    for k, (start, end) in enumerate(intervals):
        plain.add(start, end)
        compacted.add(start, end)
        if k % 7 == 0:
            compacted.compact()
    assert compacted.total_us == plain.total_us
    union = bd.IntervalUnion()
    big = 2 ** 53
    for start, end in ((0.5, 1.0), (big + 1, big + 2), (big + 5, big + 6)):
        union.add(start, end)  # as floats, 2**53 + 1 is 2**53: 2 µs, not 1
    union.compact()
    union.add(big + 3, big + 4)  # out of order: between the two
    assert union.total_us == 0.5 + 3  # as floats: 0.5 + 4
    assert list(union.starts) == [0.5, big + 1, big + 3, big + 5]


def test_compact_host_keeps_each_threads_time_in_ops_and_a_later_op_still_counts():
    """An iteration's host unions are made arrays once its window has closed (a quarter of
    the memory: Kineto writes every CPU section before the GPU work, so every iteration's
    unions live until then); the time in ops is the same, and an op decided later joins."""
    plain, compacted = bd.IterationBreakdown(), bd.IterationBreakdown()
    ops = [((1, 1), 0.0, 10.0), ((1, 1), 2.0, 3.0), ((1, 1), 20.0, 25.5), ((1, 2), 5.0, 9.0)]
    ops += [(thread, 100.0 + k * 3, 101.0 + k * 3) for thread in ((1, 1), (1, 2))
            for k in range(bd.ARRAY_MIN_INTERVALS)]
    for b in (plain, compacted):
        for thread, start, end in ops:
            b.add_op(thread, start, end)
    compacted.compact_host()
    assert all(u.starts.__class__ is not list for u in compacted.cpu_ops.values())
    assert compacted.host_dict() == plain.host_dict()
    for b in (plain, compacted):
        b.add_op((1, 1), 9.0, 21.0)  # late: joins two intervals
    assert compacted.host_dict() == plain.host_dict() == {
        "cpu_op_us": 29.5 + 2 * bd.ARRAY_MIN_INTERVALS, "launch_delay_mean_us": None,
        "launch_delay_max_us": None, "launches_timed": 0}


def test_compact_leaves_a_union_of_few_intervals_as_lists():
    """Below ``ARRAY_MIN_INTERVALS`` the lists stay (arrays would save a few hundred bytes
    and cost a conversion per iteration of a trace of tiny ones); from there on, arrays."""
    union = bd.IntervalUnion()
    for k in range(bd.ARRAY_MIN_INTERVALS):
        union.compact()
        assert union.starts.__class__ is list and union.ends.__class__ is list
        union.add(k * 2.0, k * 2.0 + 1.0)
    union.compact()
    assert union.starts.__class__ is not list and union.ends.__class__ is not list
    assert union.total_us == float(bd.ARRAY_MIN_INTERVALS)


def test_union_beyond_its_intervals_sums_the_oldest_and_closes_no_gap(monkeypatch):
    monkeypatch.setattr(bd, "KEPT_INTERVALS", 4)
    union = bd.IntervalUnion()
    for k in range(10):  # 10 intervals of 1 µs, the gaps 1 µs except one of 100 µs
        start = k * 2.0 + (100.0 if k >= 5 else 0.0)
        union.add(start, start + 1.0)
    assert len(union.starts) <= 4
    assert union.total_us == 10.0  # in time order: exact


def test_union_beyond_its_intervals_counts_blocks_in_any_order_exactly(monkeypatch):
    """GPU work comes in time order within each block Kineto writes, the blocks in any order
    (newest first in h100 owlv2), a thread's ops likewise between what was held: past its
    intervals the union sums the oldest, so every gap stays idle, whichever block came
    first."""
    monkeypatch.setattr(bd, "KEPT_INTERVALS", 8)
    blocks = [[(b * 1000.0 + k * 10.0, b * 1000.0 + k * 10.0 + 4.0) for k in range(30)]
              for b in range(4)]
    for order in (blocks, blocks[::-1], [blocks[2], blocks[0], blocks[3], blocks[1]]):
        union = bd.IntervalUnion()
        for block in order:
            for start, end in block:
                union.add(start, end)
        assert len(union.starts) <= 8
        assert union.total_us == pytest.approx(4 * 30 * 4.0)  # never a gap counted busy


def test_collective_under_compute_counts_as_compute_and_the_rest_as_comm():
    b = bd.IterationBreakdown()
    b.add_gpu("kernel", "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", 0.0, 100.0)
    b.add_gpu("kernel", "gemm", 10.0, 40.0)
    b.add_gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 120.0, 130.0)
    b.add_gpu("gpu_memset", "Memset (Device)", 125.0, 140.0)
    numbers = b.to_dict(150.0)
    assert {k: numbers[k] for k in ("compute_us", "comm_us", "memcpy_us", "memset_us",
                                    "idle_us", "span_us")} == {
        "compute_us": 30.0, "comm_us": 70.0, "memcpy_us": 10.0, "memset_us": 10.0,
        "idle_us": 30.0, "span_us": 150.0}
    assert [k["name"] for k in numbers["top_kernels"]][0].startswith("nccl")


def test_top_kernels_stay_bounded_and_keep_the_heaviest(monkeypatch):
    monkeypatch.setattr(bd, "KEPT_KERNEL_NAMES", 8)
    b = bd.IterationBreakdown()
    for k in range(100):
        b.add_gpu("kernel", f"small_{k}", k, k + 0.5)
        b.add_gpu("kernel", "big", k + 0.5, k + 0.9)
    assert len(b.kernels) <= 8
    assert b.top_kernels()[0] == {"name": "big", "count": 100, "total_us": 40.0}


def test_launch_delay_is_kernel_start_minus_launch_end_once_per_launch():
    times = bd.LaunchTimes()
    assert times.add(7, 100.0) is None
    assert times.delay(7, 130.0) == 30.0
    assert times.delay(7, 140.0) is None  # a graph's later kernels wait for the earlier ones


def test_launch_delay_of_work_decided_before_its_launch_comes_with_the_launch():
    times = bd.LaunchTimes()  # the launch was held (spilled) while its kernels were decided
    assert times.delay(9, 130.0, owner=3) is None
    assert times.delay(9, 150.0, owner=3) is None  # not the first: never timed
    assert times.add(9, 100.0) == (3, 30.0)


def test_wall_span_covers_the_gpu_work_past_the_cpu_window():
    record = IterationRecord(0, start_ts=100.0, end_ts=200.0, gpu_start_ts=150.0,
                             gpu_end_ts=420.0)
    assert record.duration_us == 100.0 and record.wall_us == 320.0


def check_against_pieces(out_dir: str, tolerance: float) -> int:
    with open(os.path.join(out_dir, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    checked = 0
    for it in manifest["iterations"]:
        if not it["gpu_events"]:
            continue
        b = it["breakdown"]
        layers = sum(b[k] for k in ("compute_us", "comm_us", "memcpy_us", "memset_us",
                                    "idle_us"))
        assert layers == pytest.approx(b["span_us"], rel=0.01)
        assert b["span_us"] == pytest.approx(it["gpu_end_ts"] - it["gpu_start_ts"], abs=0.01)
        with gzip.open(os.path.join(out_dir, it["file"]), "rt", encoding="utf-8") as f:
            exact = exact_breakdown(json.load(f)["traceEvents"])
        for key, value in exact.items():
            assert b[key] == pytest.approx(value, rel=tolerance, abs=0.01 * exact["span_us"]), key
        checked += 1
    return checked


def test_breakdown_of_a_generated_training_loop_matches_its_pieces(tmp_path):
    trace = str(tmp_path / "training.json.gz")
    write_trace(generate("training", seed=3), trace)
    split(trace, str(tmp_path / "out"))
    assert check_against_pieces(str(tmp_path / "out"), tolerance=0.001) >= 8


@pytest.mark.skipif(not os.path.exists(RESNET), reason="needs ../shared/traces")
def test_breakdown_of_the_resnet_trace_matches_its_pieces_collectives_included(tmp_path):
    split(RESNET, str(tmp_path / "out"))
    assert check_against_pieces(str(tmp_path / "out"), tolerance=0.01) == 3
    with open(tmp_path / "out" / "manifest.json", encoding="utf-8") as f:
        first = json.load(f)["iterations"][0]["breakdown"]
    assert first["comm_us"] > first["compute_us"] > 0  # its all-reduces outlast its kernels
    assert re.match(r"^nccl", first["top_kernels"][0]["name"])
    assert first["host"]["launches_timed"] > 0 and first["host"]["cpu_op_us"] > 0


RECORDED_CUDA = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "data", "cuda",
                                             "*.json.gz")))
SHARED_GPU = sorted(p for p in glob.glob(os.path.join(SHARED, "**", "*.json*"), recursive=True)
                    if "torch_cpu" not in p)


@pytest.mark.parametrize("trace", RECORDED_CUDA, ids=os.path.basename)
def test_breakdown_of_each_recorded_cuda_loop_adds_up_and_matches_its_pieces(trace, tmp_path):
    """Issue 23's acceptance: each iteration's layers add up to its GPU span within 1 %, and
    each layer is the exact union of its piece's GPU events (HTA's temporal breakdown, in
    floats) within 1 % of the span."""
    split(trace, str(tmp_path / "out"))
    assert check_against_pieces(str(tmp_path / "out"), tolerance=0.01) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("trace", SHARED_GPU, ids=lambda p: os.path.relpath(p, SHARED))
def test_breakdown_of_each_shared_gpu_trace_adds_up_and_matches_its_pieces(trace, tmp_path):
    split(trace, str(tmp_path / "out"))
    check_against_pieces(str(tmp_path / "out"), tolerance=0.01)


def test_a_frozen_union_keeps_its_total_and_only_its_latest_intervals():
    union = bd.IntervalUnion()
    for k in range(100):
        union.add(3.0 * k, 3.0 * k + 1.0)
    union.freeze()
    assert len(union.starts) == bd.FROZEN_KEPT and union.total_us == pytest.approx(100.0)
    union.add(400.0, 402.0)  # later work: still counted, still few kept
    union.add(297.5, 298.5)  # overlapping a kept interval by half: that half counted once
    assert len(union.starts) <= bd.FROZEN_KEPT
    assert union.total_us == pytest.approx(102.5)


@pytest.mark.parametrize("us", [5.0, -3.0, 0.0, -0.0, 2.0 ** 60, 1e300, 1234.5678, 0.0004,
                                -7.0005, 5, 0, True, float("inf"), -float("inf")])
def test_a_time_rounded_to_the_nanosecond_is_what_round_makes_of_it(us):
    """``rounded_us`` leaves a zero and a whole number of µs as they are (``round`` would
    convert them to decimal and back: a trace whose times are integers, e.g. one of many
    one-op iterations, has one such in every iteration's breakdown); everything else is
    ``round(us, 3)``: the same value, type and text in the manifest."""
    made, expected = rounded_us(us), round(us, 3)
    assert made.__class__ is expected.__class__
    assert json.dumps(made) == json.dumps(expected)
    assert math.copysign(1, made) == math.copysign(1, expected)


def test_a_nan_time_is_left_nan():
    assert math.isnan(rounded_us(float("nan")))


def test_the_time_in_ops_of_a_whole_number_of_us_is_written_as_round_writes_it():
    """``host_dict``'s ``cpu_op_us``: ``rounded_us`` of the union's total, whole or not."""
    for start, end in ((0.0, 5.0), (0.0, 5.0004), (1, 7), (0.25, 1.5)):
        b = bd.IterationBreakdown()
        b.add_op((1, 1), start, end)
        made = b.host_dict()["cpu_op_us"]
        (union,) = b.cpu_ops.values()
        expected = round(union.total_us, 3)
        assert made.__class__ is expected.__class__ and json.dumps(made) == json.dumps(expected)
