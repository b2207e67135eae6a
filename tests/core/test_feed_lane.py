"""The feed loop's common cases taken a run of events at a time (``_native.feed_lane``, where
built: ``engine.Splitter._feed_checked``) are fed as that method's loop feeds them, its
fallback: the same owners, in the same order, the same records and evidence, on generated
training runs and on random streams of runtime calls, launch flows, GPU work and CPU-side
events read through the decoder (checked batches of slim structs), and of structural ops of
every kind that the engine holds apart (the records compared as JSON, each iteration's phase
facts too)."""
import functools
import json

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from stream_split.core import SplitOptions, Splitter, engine, serving
from stream_split.core.validate import SlimEvent
from stream_split.run import read_through
from stream_split.testing.generate import generate, render

needs_native = pytest.mark.skipif(engine._feed_lane is None,
                                  reason="stream_split._native is not built")


def _read(path, keep: bool, pending_limit: int) -> tuple:
    """(each event's owner as handed out, in order; each record's dict; the evidence) of
    ``path`` read through a splitter."""
    splitter = Splitter(SplitOptions(keep_events=keep, pending_limit=pending_limit))
    pairs = []
    outcome = read_through(str(path), splitter, on_pairs=pairs.extend)
    assert outcome.error is None
    handed = [(owner, bytes(event)) for owner, event in pairs]
    return handed, [record.to_dict() for record in splitter.iterations], splitter.evidence


def _fed(events: list, cuts: list, keep: bool, pending_limit: int, raws: bool = True,
         detector: str = "auto") -> tuple:
    """``_read``'s answer for ``events`` (dicts) fed as checked batches of slim structs
    (what the decoder hands the engine), cut before the indices ``cuts``; ``raws``: each
    event's bytes given with it (else a kept event is handed out itself)."""
    splitter = Splitter(SplitOptions(keep_events=keep, pending_limit=pending_limit,
                                     detector=detector))
    texts = [json.dumps(event).encode() for event in events]
    slim = msgspec.json.decode(b"[" + b",".join(texts) + b"]", type=list[SlimEvent])
    pairs, facts = [], []
    infer = engine.infer_phases

    def seen(kinds, phase_facts, *rest):  # each iteration's phase facts, read as they are
        facts.extend(map(repr, phase_facts))
        return infer(kinds, phase_facts, *rest)

    engine.infer_phases = seen
    try:
        for i, j in zip([0, *cuts], [*cuts, len(events)]):
            splitter.feed_batch(slim[i:j], texts[i:j] if raws else None, checked=True)
            pairs.extend(splitter.decided().pairs)
        splitter.close()
    finally:
        engine.infer_phases = infer
    pairs.extend(splitter.pop_assigned())
    handed = [(owner, event if event.__class__ is bytes else msgspec.json.encode(event))
              for owner, event in pairs]
    # (the records as JSON: a time given as an integer stays one; how the ops were read:
    # the threads' sections, the order's reordered threads and late ops)
    order = splitter._order
    return (handed, [json.dumps(record.to_dict()) for record in splitter.iterations],
            splitter.evidence, facts, splitter._stacks.sections_started,
            order.reordered_threads, order.late_ops)


def _both_ways(split, monkeypatch, *args) -> int:
    """``split(*args)`` (``_read`` or ``_fed``) with and without ``feed_lane`` gives the same;
    returns how many events the lane took."""
    taken = []

    def counted(pairs, *args):
        seen = [0]

        def counting():
            for pair in pairs:
                seen[0] += 1
                yield pair

        back = engine._native.feed_lane(counting(), *args)
        taken.append(seen[0] - (back is not None))
        return back

    monkeypatch.setattr(engine, "_feed_lane", counted)
    native = split(*args)
    monkeypatch.setattr(engine, "_feed_lane", None)
    assert native == split(*args)
    return sum(taken)


@needs_native
@pytest.mark.parametrize("scenario, seed", [("training", 1), ("training", 7), ("serving", 3),
                                            ("noisy_training", 5)])
def test_a_generated_trace_is_split_alike_with_and_without_it(scenario, seed, tmp_path,
                                                               monkeypatch):
    path = tmp_path / "trace.json"
    path.write_text(render(generate(scenario, seed=seed), "object", True))
    assert _both_ways(_read, monkeypatch, path, True, 10_000) > 0


def _stream(steps: list, name_pick: list, floats: bool, gpu_first: bool = False) -> list:
    """A Kineto-like stream: a loop of ``ProfilerStep#k`` annotations with ops inside, then
    each step's runtime calls (launches, others, some named as graph launches) with their
    flows, then the GPU work (kernels, and copies after a copy's call; on two streams) with
    its flows (or the GPU work first, ``gpu_first``: before any iteration is known, it waits
    held as links); ``steps``: per step, what each of its launches
    does (0: a kernel after it, 1: its kernel before it, 2: no kernel, 3: a second call
    with the same correlation id, 4: a flow whose id names no launch), ``name_pick`` the
    runtime names chosen in turn."""
    names = ["cudaLaunchKernel", "cudaMemcpyAsync", "cudaGraphLaunch", "cudaEventRecord",
             "cudaStreamSynchronize"]
    ts = (lambda t: t + 0.5) if floats else (lambda t: t)
    cpu, runtime, gpu = [], [], []
    at, corr, pick = 1000, 1, 0
    for k, launches in enumerate(steps):
        span = 30 + 10 * len(launches)
        cpu.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}",
                    "pid": 1, "tid": 1, "ts": ts(at), "dur": span})
        cpu.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                    "ts": ts(at + 1), "dur": span - 2})
        for j, kind in enumerate(launches):
            start = at + 2 + 10 * j
            name = names[name_pick[pick % len(name_pick)] if name_pick else 0]
            pick += 1
            runtime.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1,
                            "tid": 1, "ts": ts(start), "dur": 5,
                            "args": {"correlation": corr}})
            runtime.append({"ph": "s", "cat": "ac2g", "id": corr if kind != 4 else corr + 10 ** 6,
                            "pid": 1, "tid": 1, "ts": ts(start), "bp": "e", "name": "ac2g"})
            runtime.append({"ph": "f", "cat": "fwdbwd", "id": corr, "pid": 1, "tid": 1,
                            "ts": ts(start + 1), "bp": "e", "name": "fwdbwd"})
            kernel = {"ph": "X", "cat": "gpu_memcpy" if name == "cudaMemcpyAsync" else "kernel",
                      "name": f"k{j}" if j % 5 != 4 else f"ncclAllReduce{j}", "pid": 0,
                      "tid": 7 + j % 2, "ts": ts(start + 3),
                      "dur": j % 3 * 2, "args": {"correlation": corr}}
            flow = {"ph": "f", "cat": "ac2g", "id": corr, "pid": 0, "tid": 7,
                    "ts": ts(start + 3), "bp": "e", "name": "ac2g"}
            if kind == 1:
                cpu.append(kernel)
            elif kind != 2:
                gpu.extend([kernel, flow])
            if kind == 3:
                runtime.append(dict(runtime[-3], ts=ts(start + 6), dur=1))
            if j == 1:  # metadata and an instant among them (``M``: never the lane's)
                runtime.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1,
                                "ts": ts(start + 2), "args": {"name": "python"}})
                gpu.append({"ph": "M", "name": "process_name", "pid": 0, "tid": 0,
                            "ts": ts(start + 3), "args": {"name": "gpu"}})
                runtime.append({"ph": "i", "cat": "cuda_runtime", "name": "mark", "pid": 1,
                                "tid": 1, "ts": ts(start + 2), "s": "t"})
            corr += 1
        at += span + 5
    return gpu + cpu + runtime if gpu_first else cpu + runtime + gpu


@needs_native
@given(st.lists(st.lists(st.integers(0, 4), max_size=6), min_size=2, max_size=8),
       st.lists(st.integers(0, 4), max_size=5), st.booleans(), st.booleans(),
       st.sampled_from([10_000, 7]), st.lists(st.integers(1, 200), max_size=4), st.booleans(),
       st.booleans(), st.sampled_from(["auto", "steps"]))
@settings(max_examples=80, deadline=None)
def test_random_streams_are_fed_alike_with_and_without_it(steps, name_pick, floats, keep,
                                                           pending_limit, cuts, gpu_first,
                                                           raws, detector):
    events = _stream(steps, name_pick, floats, gpu_first)
    cuts = sorted({cut for cut in cuts if cut < len(events)})
    with pytest.MonkeyPatch.context() as monkeypatch:
        _both_ways(_fed, monkeypatch, events, cuts, keep, pending_limit, raws, detector)


@needs_native
def test_more_kernel_names_than_an_iteration_keeps_are_counted_alike(monkeypatch):
    """An iteration of 80 kernels of as many names, collectives among them: its kernels'
    names past ``breakdown.KEPT_KERNEL_NAMES`` are added by ``add_gpu`` itself."""
    events = _stream([[0] * 80, [0] * 3, [0]], [0], True)
    assert _both_ways(_fed, monkeypatch, events, [], True, 10_000) > len(events) // 3


@needs_native
def test_a_stream_of_launches_is_mostly_taken_by_it(monkeypatch):
    events = _stream([[0, 0, 1, 3, 0], [0, 2, 4, 0, 0, 0], [0, 0, 0]], [0, 1, 2, 3], False)
    assert _both_ways(_fed, monkeypatch, events, [], True, 10_000) > len(events) // 3


#: Op names of each kind ``_hold_cpu`` tells apart: none of a phase role, a GEMM (its ``Input
#: Dims`` given or not), an attention's and a backward's (phase evidence), a step number, an
#: empty name, None, and names never seen before (``serving.ROLES`` not filled yet).
_OP_NAMES = ["aten::relu", "aten::mm", "aten::addmm", "flash_attention_fwd",
             "autograd::engine::evaluate_function: MmBackward0", "ProfilerStep#9", "", None]


def _op_stream(loops: list, floats: bool, big: bool) -> list:
    """A training loop's CPU section as the structure detector reads it: per iteration a
    top-level op over nested ones (``loops``: per iteration, per nested op, a pick of name,
    ``args`` and thread), then a runtime call and its kernel per iteration, a metadata event
    and a flow among the ops; times floats, integers, or integers beyond 2**53 (``big``)."""
    base = 2 ** 53 + 8 if big else 1000
    ts = (lambda t: base + t + 0.25) if floats else (lambda t: base + t)
    cpu, gpu = [], []
    at, corr = 0, 1
    for k, ops in enumerate(loops):
        span = 20 + 6 * len(ops)
        cpu.append({"ph": "X", "cat": "cpu_op", "name": "Optimizer.step", "pid": 1, "tid": 1,
                    "ts": ts(at), "dur": span})
        for j, (pick, linked, thread) in enumerate(ops):
            name = _OP_NAMES[pick % len(_OP_NAMES)] if pick < 100 else f"aten::op{pick}"
            op = {"ph": "X", "cat": "user_annotation" if pick % 11 == 3 else "cpu_op",
                  "name": name, "pid": 1, "tid": 1 + thread, "ts": ts(at + 1 + 6 * j),
                  "dur": 4 if j % 4 else 0}
            if linked == 1:
                op["args"] = {"Input Dims": [[2, 1, 3], [3, 4]]}
            elif linked == 2:
                op["args"] = {"correlation": 10 ** 6 + corr}
            elif linked == 3:
                op["args"] = {}
            cpu.append(op)
            if j == 2:
                cpu.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1,
                            "args": {"name": "python"}})
                cpu.append({"ph": "s", "cat": "ac2g", "id": corr, "pid": 1, "tid": 1,
                            "ts": ts(at + 2), "bp": "e", "name": "ac2g"})
        cpu.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                    "tid": 1, "ts": ts(at + 2), "dur": 2, "args": {"correlation": corr}})
        gpu.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
                    "ts": ts(at + 5), "dur": 3, "args": {"correlation": corr}})
        at += span + 3
        corr += 1
    return cpu + gpu


_OP = st.tuples(st.integers(0, 120), st.integers(0, 3), st.integers(0, 1))


@needs_native
@given(st.lists(st.lists(_OP, max_size=7), min_size=3, max_size=10), st.booleans(),
       st.booleans(), st.booleans(), st.booleans(), st.sampled_from([10_000, 5]),
       st.lists(st.integers(1, 150), max_size=4), st.sampled_from(["auto", "steps"]))
@settings(max_examples=80, deadline=None)
def test_random_ops_are_read_and_held_alike_with_and_without_it(loops, floats, big, keep, raws,
                                                                 pending_limit, cuts, detector):
    """Structural ops, read and held by the lane (``lane47_op``) or by ``_feed_fields``:
    ops of every kind that ``_hold_cpu`` holds differently, kept with or without their bytes,
    spilled often or never."""
    events = _op_stream(loops, floats, big)
    cuts = sorted({cut for cut in cuts if cut < len(events)})
    with pytest.MonkeyPatch.context() as monkeypatch:
        _both_ways(_fed, monkeypatch, events, cuts, keep, pending_limit, raws, detector)


@needs_native
def test_a_loop_of_plain_ops_is_mostly_taken_by_it(monkeypatch):
    events = _op_stream([[(0, 0, 0)] * 6] * 12, True, False)
    assert _both_ways(_fed, monkeypatch, events, [], False, 10_000) > len(events) // 2


@needs_native
def test_a_loop_of_ops_held_named_is_mostly_held_by_it(monkeypatch):
    """Ops whose names are phase evidence (a backward's, an attention's) or a step number,
    held as their thread and name (``lane47_hold``, held48): held by the lane, the first of
    each name too (the lane asks ``serving.role_of`` where ``ROLES`` does not know it, as
    ``_hold_cpu`` does: role53), handed out alike."""
    events = _op_stream([[(4, 0, 0), (11, 0, 0), (5, 0, 0), (4, 3, 0)] * 2] * 12, True, False)
    held, hold = [], engine.Splitter._hold_cpu
    monkeypatch.setattr(engine.Splitter, "_hold_cpu",
                        lambda self, *args: held.append(args[6]) or hold(self, *args))
    roles = dict(serving.ROLES)  # (emptied: other tests may have filled it to its bound)
    serving.ROLES.clear()
    try:
        for keep in (False, True):
            _both_ways(_fed, monkeypatch, events, [], keep, 10_000)
    finally:
        serving.ROLES.clear()
        serving.ROLES.update(roles)
    # (each held by ``_hold_cpu`` without the lane, never with it)
    for name, ops in (("flash_attention_fwd", 24), (_OP_NAMES[4], 48), ("ProfilerStep#9", 24)):
        assert held.count(name) == 2 * ops


@needs_native
@pytest.mark.parametrize("remembered", [0, 10_000])
def test_ops_of_names_of_their_own_are_held_by_it_as_without_it(monkeypatch, remembered):
    """Ops of names never seen before (``testing.attacks.unique_names``: no loop, all held),
    whose roles ``serving.ROLES`` has room for or not (full: a million names of their own),
    some of them phase evidence: held by the lane (not by ``_hold_cpu``, as before role53),
    handed out and recorded alike, held in memory or spilled; ``ROLES`` is left as without
    the lane."""
    names = [f"op_{k}_{'attention' if k % 5 == 0 else 'mm'}_x{k * 7919 % 1000}"
             for k in range(300)]
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 6 * k,
               "dur": 5} for k, name in enumerate(names)]
    held, hold = [], engine.Splitter._hold_cpu
    monkeypatch.setattr(engine.Splitter, "_hold_cpu",
                        lambda self, *args: held.append(args[6]) or hold(self, *args))
    monkeypatch.setattr(serving, "_CACHE_LIMIT", remembered)
    roles = dict(serving.ROLES)
    runs = []  # (ops held by ``_hold_cpu``, ``ROLES`` after) with the lane, then without

    def split(*args):
        held.clear()
        serving.ROLES.clear()
        made = _fed(*args)
        runs.append((len(held), dict(serving.ROLES)))
        return made
    try:
        for pending_limit in (10_000, 7):
            taken = _both_ways(split, monkeypatch, events, [100], True, pending_limit)
            assert taken >= len(events) - 5
    finally:
        serving.ROLES.clear()
        serving.ROLES.update(roles)
    for (with_lane, table), (without, table_without) in (runs[0:2], runs[2:4]):
        assert with_lane <= 5 and without == len(events)
        assert table == table_without and len(table) == min(remembered, len(names))


def _threads_stream(ops: list, floats: bool) -> list:
    """Structural ops of a few threads, as ``_read_op`` meets them in files not in Kineto's
    order: per op (its thread, or the one before's from 4 on: runs of a thread; how far back
    from the clock it starts; its duration; a pick of name); every ninth a
    ``ProfilerStep#N`` of its thread (the detector's steps). An op that starts back in time
    is held by the order (``OpOrder``) until its thread's ops can be read in start order,
    or, the first of another category (``back`` over 100: an annotation), begins a new
    section of its thread."""
    ts = (lambda t: t + 0.5) if floats else (lambda t: t)
    events, at, thread = [], 1000, 0
    for k, (pick_thread, back, dur, pick) in enumerate(ops):
        at += 3
        thread = pick_thread if pick_thread < 4 else thread
        name = f"ProfilerStep#{k}" if k % 9 == 0 else \
            (_OP_NAMES[pick % len(_OP_NAMES)] if pick < 20 else f"aten::op{pick % 5}")
        events.append({"ph": "X", "cat": "user_annotation" if k % 9 == 0 or back > 100
                       else "cpu_op", "name": name, "pid": 1, "tid": 1 + thread,
                       "ts": ts(at - back % 100), "dur": dur})
    return events


@needs_native
@given(st.lists(st.tuples(st.integers(0, 15), st.sampled_from([0] * 30 + [1, 5, 160]),
                          st.integers(0, 12), st.integers(0, 40)), min_size=5, max_size=120),
       st.booleans(), st.booleans(), st.sampled_from([10_000, 6]),
       st.lists(st.integers(1, 100), max_size=3), st.sampled_from(["auto", "steps"]))
@settings(max_examples=80, deadline=None)
def test_ops_of_threads_in_any_order_are_read_alike_with_and_without_it(ops, floats, keep,
                                                                         pending_limit, cuts,
                                                                         detector):
    """Ops read by the lane in C (``held48_read``: noted by the order, pushed, observed,
    their boundaries taken) or by ``_read_op``: the same boundaries and records whatever the
    threads' order, sections and nesting."""
    events = _threads_stream(ops, floats)
    cuts = sorted({cut for cut in cuts if cut < len(events)})
    with pytest.MonkeyPatch.context() as monkeypatch:
        # (a thread's first 2 ops remembered, not ``order.HISTORY``: its ops soon settled)
        monkeypatch.setattr(engine, "OpOrder", functools.partial(engine.OpOrder, history=2))
        _both_ways(_fed, monkeypatch, events, cuts, keep, pending_limit, True, detector)


@needs_native
@pytest.mark.parametrize("threads", [1, 5000])
def test_a_loop_of_one_op_iterations_is_read_alike_with_and_without_it(threads, monkeypatch):
    """A loop of one-op iterations (the detector reads each op in one call once the loop is
    matched: ``fast_read``), on one thread or on many (more than ``stack.LIVE_THREADS``:
    the idle ones forgotten)."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,
               "tid": 1 + k // 5 % threads, "ts": 1000 + 10 * k, "dur": 6}
              for k in range(5 * 5000)]  # (5 ops a thread in a row: it settles in the order)
    forgot, forget = [], engine.Splitter._forget_idle_threads
    monkeypatch.setattr(engine.Splitter, "_forget_idle_threads",
                        lambda self: forgot.append(len(self._stacks)) or forget(self))
    monkeypatch.setattr(engine, "OpOrder", functools.partial(engine.OpOrder, history=2))
    reads, read_op = [], engine.Splitter._read_op
    monkeypatch.setattr(engine.Splitter, "_read_op",
                        lambda self, *args: reads.append(1) or read_op(self, *args))
    after_each = []

    def fed(*args):
        out = _fed(*args)
        after_each.append(len(reads))
        return out

    assert _both_ways(fed, monkeypatch, events, [100, 3000], True, 10_000) > 20_000
    assert forgot[:len(forgot) // 2] == forgot[len(forgot) // 2:]  # (with it, then without)
    assert (threads > 4096) == bool(forgot)
    with_lane, without = after_each[0], after_each[1] - after_each[0]
    # (the C read the ops of a settled thread: on 5,000 threads, a thread's first two ops
    # are read by ``_read_op``, and again after it was forgotten)
    assert without == len(events) and with_lane * (10 if threads == 1 else 1.2) < without


@needs_native
@pytest.mark.parametrize("tail", [
    [("cpu_op", 1085)], [("user_annotation", 1095), ("cpu_op", 1040)],
    [("cpu_op", 1095), ("user_annotation", 1040), ("cpu_op", 1094)]])
def test_an_op_back_in_time_after_ops_read_in_c_is_read_alike(tail, monkeypatch):
    """Ops of a thread that the order has settled, read in C (``held48_noted``: their start
    and category noted), then an op that starts back in time: reordered (of the same
    category as the latest), or the thread's one jump back (of another), as ``_read_op``
    reads it."""
    events = [{"ph": "X", "cat": cat, "name": f"aten::op{k % 3}", "pid": 1, "tid": 1,
               "ts": ts, "dur": 3} for k, (cat, ts) in
              enumerate([("cpu_op", 1000 + 10 * k) for k in range(10)] + tail)]
    monkeypatch.setattr(engine, "OpOrder", functools.partial(engine.OpOrder, history=2))
    _both_ways(_fed, monkeypatch, events, [], True, 10_000)
