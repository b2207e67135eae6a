"""Synthetic Kineto traces with ground truth: a built program assembled into a trace.

What it is for: ``generate(scenario, seed=0, **params)`` runs a scenario (``scenarios``) on a
``TraceBuilder`` (``builder``, whose docstring says how time, GPU queues and ownership work),
then lays the events out in a file order (Kineto's sections, or time order as a live writer
writes them) and derives the truth: the iteration windows and the owner of every event.

What it must never do: read real traces, use global state or a clock. The same
``(scenario, seed, params)`` always gives the same bytes.

Library: ``generate``, ``write_trace``, ``write_truth``, ``SCENARIOS``, ``random_variant(seed)``,
``scenario_params()`` (a hypothesis strategy), ``check_consistency(gen)``.
CLI: ``python -m stream_split.testing.generate --list``.
"""
from __future__ import annotations

import argparse
import bisect
import contextlib
import dataclasses
import gzip
import inspect
import io
import json
import random
import sys
from dataclasses import dataclass
from typing import Any

from stream_split.testing.builder import (
    FORMS, GPU_PID, LAYOUTS, OUTSIDE, GeneratedTrace, TraceBuilder, TraceOptions, Truth, _Rec, _us)
from stream_split.testing.scenarios import SCENARIOS

__all__ = [
    "GeneratedTrace", "Truth", "TraceOptions", "TraceBuilder", "Variant", "SCENARIOS",
    "generate", "write_trace", "write_truth", "random_variant", "scenario_params",
    "check_consistency", "render", "truth_dict", "main",
]

# Assembling the trace: metadata, spans, GPU annotations, ownership, file order


def _metadata(b: TraceBuilder, ts: int) -> list[_Rec]:
    recs = []

    def meta(name: str, pid, tid, args: dict) -> None:
        ev = {"name": name, "ph": "M", "ts": _us(ts), "pid": pid, "tid": tid, "args": args}
        recs.append(_Rec(ev, "meta", ts, ts, b._next_seq()))

    if b.threads:
        meta("process_name", b.pid, 0, {"name": "python3"})
        meta("process_labels", b.pid, 0, {"labels": "CPU"})
        meta("process_sort_index", b.pid, 0, {"sort_index": b.pid})
    meta("process_name", GPU_PID, 0, {"name": "python3"})
    meta("process_labels", GPU_PID, 0, {"labels": "GPU 0"})
    meta("process_sort_index", GPU_PID, 0, {"sort_index": 5000000})
    for s in b.streams:
        meta("thread_name", GPU_PID, s, {"name": f"stream {s} "})
        meta("thread_sort_index", GPU_PID, s, {"sort_index": s})
    for tid, name in b.threads.items():
        meta("thread_name", b.pid, tid, {"name": f"thread {tid} ({name})"})
        meta("thread_sort_index", b.pid, tid, {"sort_index": tid})
    return recs


def _spans(b: TraceBuilder, end: int) -> list[_Rec]:
    t0 = b.t0
    trace = {"ph": "X", "cat": "Trace", "ts": _us(t0), "dur": _us(end - t0), "pid": "Spans",
             "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}}
    sort = {"name": "process_sort_index", "ph": "M", "ts": _us(t0), "pid": "Spans", "tid": 0,
            "args": {"sort_index": 536870912}}
    start = {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces",
             "tid": "Trace PyTorch Profiler", "ts": _us(t0)}
    stop = {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": _us(end)}
    return [_Rec(trace, "span", t0, end, b._next_seq()), _Rec(sort, "meta", t0, t0, b._next_seq()),
            _Rec(start, "span", t0, t0, b._next_seq()), _Rec(stop, "span", end, end, b._next_seq())]


def _gpu_annotations(b: TraceBuilder) -> list[_Rec]:
    by_corr: dict[int, list[_Rec]] = {}
    for r in b.recs:
        if r.role == "gpu":
            by_corr.setdefault(r.corr, []).append(r)
    out = []
    for cpu_rec, corrs in b._mirrors:
        work = [g for c in corrs for g in by_corr.get(c, ())]
        if not work:
            continue
        start = min(g.ts for g in work)
        end = max(g.end for g in work)
        stream = min(work, key=lambda g: g.ts).tid
        ev = {"ph": "X", "cat": "gpu_user_annotation", "name": cpu_rec.ev["name"], "pid": GPU_PID,
              "tid": stream, "ts": _us(start), "dur": _us(end - start),
              "args": {"External id": cpu_rec.ext}}
        out.append(_Rec(ev, "gpu_ann", start, end, b._next_seq(), tid=stream, ext=cpu_rec.ext))
    return out


def _owners(recs: list[_Rec], boundaries: list[tuple[int, str]], last_end: int | None) -> dict:
    """Owner of every record by the rules of the module docstring (keyed by seq)."""
    starts = [t for t, _ in boundaries]
    ends = starts[1:] + ([last_end] if starts else [])

    def window(ts: int, end: int) -> int:
        i = bisect.bisect_right(starts, ts) - 1
        if i < 0 or ts >= ends[i] or end > ends[i]:
            return OUTSIDE
        return i

    owner: dict[int, Any] = {}
    corr_owner: dict[int, int] = {}
    ext_owner: dict[int, int] = {}
    for r in recs:
        if r.role in ("cpu", "frame", "instant", "runtime", "flow_s"):
            o = window(r.ts, r.end)
            owner[r.seq] = o
            if r.role == "runtime":
                corr_owner[r.corr] = o
            elif r.role == "cpu":
                ext_owner[r.ext] = o
    for r in recs:
        if r.role in ("gpu", "flow_f"):
            owner[r.seq] = corr_owner.get(r.corr, OUTSIDE)
        elif r.role == "gpu_ann":
            owner[r.seq] = ext_owner.get(r.ext, OUTSIDE)
        elif r.role == "meta":
            owner[r.seq] = None
        elif r.role == "span":
            owner[r.seq] = OUTSIDE
    return owner


def _file_order(b: TraceBuilder, recs: list[_Rec], meta: list[_Rec], spans: list[_Rec],
                anns: list[_Rec], options: TraceOptions) -> list[_Rec]:
    if options.layout == "time":
        body = recs + anns + [r for r in spans if r.role != "meta"]
        body.sort(key=lambda r: (r.ts, -r.end, r.seq))
        return meta + [r for r in spans if r.role == "meta"] + body
    cpu: list[_Rec] = []
    thread_order = ([b.loop_tid] if b.loop_tid is not None else []) + \
        [t for t in b.threads if t != b.loop_tid]
    for tid in thread_order:
        ops = [r for r in recs if r.role == "cpu" and r.tid == tid]
        ops.sort(key=lambda r: (r.ts, -r.end, r.seq))
        cpu.extend(ops)
    for tid in thread_order:  # Kineto writes the Python frames after every op
        frames = [r for r in recs if r.role == "frame" and r.tid == tid]
        frames.sort(key=lambda r: (r.ts, -r.end, r.seq))
        cpu.extend(frames)
    instants = sorted((r for r in recs if r.role == "instant"), key=lambda r: (r.ts, r.seq))
    # GPU activity block in completion order; a flow goes right after its activity.
    keyed = []
    by_corr_runtime = {r.corr: r for r in recs if r.role == "runtime"}
    gpu_by_key = {(r.corr, r.ts): r for r in recs if r.role == "gpu"}
    for r in recs:
        if r.role == "runtime" or r.role == "gpu":
            keyed.append(((r.end, r.seq, 0), r))
        elif r.role == "flow_s":
            p = by_corr_runtime[r.corr]
            keyed.append(((p.end, p.seq, 1), r))
        elif r.role == "flow_f":
            p = gpu_by_key[(r.corr, r.ts)]
            keyed.append(((p.end, p.seq, 1), r))
    keyed.sort(key=lambda kr: kr[0])
    gpu_block = [r for _, r in keyed]
    anns = list(anns)
    b.rng.shuffle(anns)  # "in no useful order"
    spans_x = [r for r in spans if r.role != "meta"]
    spans_m = [r for r in spans if r.role == "meta"]
    if options.metadata == "first":
        return meta + cpu + instants + gpu_block + anns + spans_m + spans_x
    return cpu + instants + gpu_block + anns + meta + spans_m + spans_x


def _header(b: TraceBuilder, options: TraceOptions, scenario: str) -> tuple[dict, dict]:
    before: dict = {
        "schemaVersion": 1,
        "deviceProperties": [{
            "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912,
            "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
            "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
            "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
            "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}],
        "cupti_version": 24,
        "cuda_runtime_version": 12060,
    }
    if options.distributed:
        before["distributedInfo"] = {"backend": "nccl", "rank": int(options.rank),
                                     "world_size": int(options.world_size),
                                     "pg_count": 1, "pg_config": [], "nccl_version": "2.21.5"}
    before.update({"record_shapes": 1, "cuda_driver_version": 12080, "profile_memory": 0,
                   "with_stack": int(any(r.role == "frame" for r in b.recs)),
                   "trace_id": "".join(b.rng.choice("0123456789ABCDEF") for _ in range(32))})
    after = {"traceName": f"./traces/{scenario}_rank{int(options.rank)}.pt.trace.json",
             "displayTimeUnit": "ms",
             "baseTimeNanoseconds": 1767189312000000000 + b.rng.randint(0, 10**9) * 1000}
    return before, after


def _split_params(params: dict) -> tuple[TraceOptions, dict]:
    names = {f.name for f in dataclasses.fields(TraceOptions)}
    common = {k: v for k, v in params.items() if k in names}
    own = {k: v for k, v in params.items() if k not in names}
    return TraceOptions(**common), own


def generate(scenario: str, seed: int = 0, **params: Any) -> GeneratedTrace:
    """Build scenario ``scenario`` with ``seed``; ``params`` are ``TraceOptions`` fields and the
    scenario's own keywords (see ``SCENARIOS[name]``). Deterministic."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    options, own = _split_params(params)
    fn = SCENARIOS[scenario]
    accepted = set(inspect.signature(fn).parameters) - {"b"}
    unknown = set(own) - accepted
    if unknown:
        raise TypeError(f"scenario {scenario!r} has no parameter(s) {sorted(unknown)}; "
                        f"it takes {sorted(accepted)} and {sorted(f.name for f in dataclasses.fields(TraceOptions))}")
    rng = random.Random(seed)
    b = TraceBuilder(rng, options)
    if options.pre_trace_kernels and scenario != "gpu_only":
        b.pre_trace_gpu(int(options.pre_trace_kernels))
    fn(b, **own)
    if b.boundaries and b.last_end is None:
        raise AssertionError(f"scenario {scenario} began an iteration but never ended one")

    recs = b.recs
    anns = _gpu_annotations(b)
    end = max([r.end for r in recs + anns] + [b.now]) + b.cost(20, 80)
    meta = _metadata(b, b.t0 + b.cost(50, 150))
    spans = _spans(b, end)
    owner = _owners(recs + anns + meta + spans, b.boundaries, b.last_end)
    ordered = _file_order(b, recs, meta, spans, anns, options)
    ev_idx = 0
    for r in ordered:
        if r.role in ("cpu", "frame", "instant"):
            r.ev["args"]["Ev Idx"] = ev_idx
            ev_idx += 1

    starts = [t for t, _ in b.boundaries]
    ends = starts[1:] + ([b.last_end] if starts else [])
    iterations = [{"index": i, "kind": kind, "start_ts": _us(t), "end_ts": _us(ends[i])}
                  for i, (t, kind) in enumerate(b.boundaries)]
    for i, phase in b.phases.items():
        iterations[i]["phase"] = phase
    if iterations:  # the last window ends where a reader computes its last op's end: ts + dur
        last_op = next(r for r in recs if r.role in ("cpu", "frame") and r.tid == b.loop_tid
                       and r.end == b.last_end)
        iterations[-1]["end_ts"] = last_op.ev["ts"] + last_op.ev["dur"]
    doc = (inspect.getdoc(fn) or scenario).split("\n")[0]
    loop = (b.pid, b.loop_tid) if b.loop_tid is not None else None
    truth = Truth(iterations, [owner[r.seq] for r in ordered], loop,
                  f"{scenario}: {doc} ({len(iterations)} records)")
    before, after = _header(b, options, scenario)
    return GeneratedTrace(scenario, seed, dict(params), before, [r.ev for r in ordered], after,
                          truth)


# ----------------------------------------------------------------------------------------------
# Self-check: the invariants the truth promises (used by the tests, handy for debugging)


def _ns(x: float) -> int:
    return round(x * 1000)


def check_consistency(gen: GeneratedTrace) -> list[str]:
    """Problems with ``gen``'s events or truth (an empty list when all invariants hold)."""
    problems: list[str] = []
    ev, owners, its = gen.events, gen.truth.owners, gen.truth.iterations
    if len(ev) != len(owners):
        return [f"{len(ev)} events but {len(owners)} owners"]
    for i, (e, o) in enumerate(zip(ev, owners)):
        if e.get("ph") == "M":
            if o is not None:
                problems.append(f"metadata event {i} has owner {o}")
        elif not isinstance(o, int) or not -1 <= o < len(its):
            problems.append(f"event {i} has owner {o!r}")
    for a, c in zip(its, its[1:]):
        if not (a["start_ts"] < a["end_ts"] <= c["start_ts"]):
            problems.append(f"windows {a} and {c} are not ordered and disjoint")
    if its and not its[-1]["start_ts"] < its[-1]["end_ts"]:
        problems.append("last window is empty")
    # correlation linkage
    runtime = {e["args"]["correlation"]: (e, o) for e, o in zip(ev, owners)
               if e.get("cat") == "cuda_runtime"}
    for e, o in zip(ev, owners):
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") or (
                e.get("cat") == "ac2g" and e.get("ph") == "f"):
            corr = e["args"]["correlation"] if e.get("ph") == "X" else e["id"]
            want = runtime[corr][1] if corr in runtime else OUTSIDE
            if o != want:
                problems.append(f"GPU event {e['name'][:30]} corr {corr}: owner {o}, launch {want}")
            if corr in runtime and e.get("ph") == "X":
                r = runtime[corr][0]
                if _ns(e["ts"]) < _ns(r["ts"]) + _ns(r["dur"]):
                    problems.append(f"kernel of corr {corr} starts before its launch ends")
    # Ev Idx strictly increasing in file order
    idx = [e["args"]["Ev Idx"] for e in ev if isinstance(e.get("args"), dict)
           and "Ev Idx" in e["args"]]
    if any(x >= y for x, y in zip(idx, idx[1:])):
        problems.append("Ev Idx not strictly increasing in file order")
    # per-thread nesting of CPU X events (ops and runtime calls), and per-stream serialization
    per: dict = {}
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime",
                                                     "kernel", "gpu_memcpy", "gpu_memset"):
            per.setdefault((e["pid"], e["tid"], e["pid"] == GPU_PID), []).append(
                (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])))
    for (pid, tid, gpu), spans in per.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[int] = []
        for s, t in spans:
            if gpu:
                if stack and s < stack[-1]:
                    problems.append(f"stream {tid}: overlapping GPU work at {s}")
                stack = [t]
                continue
            while stack and stack[-1] <= s:
                stack.pop()
            if stack and t > stack[-1]:
                problems.append(f"thread {tid}: op at {s} crosses its parent")
            stack.append(t)
    # boundaries: only wrappers (owner -1) may straddle one on the loop thread
    if gen.truth.loop_thread is not None:
        pid, tid = gen.truth.loop_thread
        starts = [_ns(it["start_ts"]) for it in its]
        for e, o in zip(ev, owners):
            if e.get("ph") == "X" and e.get("pid") == pid and e.get("tid") == tid and o != OUTSIDE:
                s, t = _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])
                if any(s < b < t for b in starts):
                    problems.append(f"op {e['name']} straddles a boundary but is owned by {o}")
        loop_starts = {_ns(e["ts"]) for e in ev if e.get("ph") == "X" and e.get("pid") == pid
                       and e.get("tid") == tid
                       and e.get("cat") in ("cpu_op", "user_annotation", "python_function")}
        for it in its:
            if _ns(it["start_ts"]) not in loop_starts:
                problems.append(f"iteration {it['index']} does not start at a loop-thread op")
    return problems


# ----------------------------------------------------------------------------------------------
# Writing


def _open_out(path: str):
    if path == "-":
        return contextlib.nullcontext(sys.stdout)
    if str(path).endswith(".gz"):
        return gzip.open(path, "wt", encoding="utf-8", compresslevel=6)
    return open(path, "w", encoding="utf-8")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(", ", ": "), ensure_ascii=False)


def render(gen: GeneratedTrace, form: str = "object", close_array: bool = True) -> str:
    """The trace as text in ``form`` ("object", "array" or "jsonl")."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, not {form!r}")
    out = io.StringIO()
    body = ",\n".join("  " + _dumps(e) for e in gen.events)
    if form == "jsonl":
        for e in gen.events:
            out.write(_dumps(e) + "\n")
    elif form == "array":
        out.write("[\n" + body)
        out.write("\n]\n" if close_array else ",\n")
    else:
        out.write("{\n")
        for k, v in gen.header_before.items():
            out.write(f"  {_dumps(k)}: {_dumps(v)},\n")
        out.write('  "traceEvents": [\n' + body + "\n  ]")
        for k, v in gen.header_after.items():
            out.write(f",\n  {_dumps(k)}: {_dumps(v)}")
        out.write("\n}\n")
    return out.getvalue()


def write_trace(gen: GeneratedTrace, path: str, form: str = "object",
                close_array: bool = True) -> None:
    """Write the trace to ``path`` (gzip if it ends with ``.gz``; ``-`` is stdout).

    ``close_array=False`` (array form only) leaves the array open, ending in ``},``, as a
    killed or still-running writer does."""
    text = render(gen, form, close_array)
    with _open_out(path) as f:
        f.write(text)


def truth_dict(gen: GeneratedTrace) -> dict:
    t = gen.truth
    return {"scenario": gen.scenario, "seed": gen.seed, "params": gen.params,
            "description": t.description,
            "loop_thread": list(t.loop_thread) if t.loop_thread else None,
            "iterations": t.iterations, "owners": t.owners}


def write_truth(gen: GeneratedTrace, path: str) -> None:
    """Write the truth as JSON: iterations, owners parallel to the events, loop thread."""
    with _open_out(path) as f:
        json.dump(truth_dict(gen), f)
        f.write("\n")


# ----------------------------------------------------------------------------------------------
# Random variants for property tests


@dataclass(slots=True, frozen=True)
class Variant:
    scenario: str
    seed: int
    params: dict

    def generate(self) -> GeneratedTrace:
        return generate(self.scenario, self.seed, **self.params)


#: Scenarios a plain ``random_variant(seed)`` never draws: the sample, and those added after
#: the property tests were checked on its draws (so that a seed's variant stays the same;
#: the loops of issue 21 have their own seeds and noisy variants in the accuracy harness).
#: ``random_variant(seed, among=...)`` draws them.
NOT_DRAWN = ("sample", "serving_phases", "warmup_root", "wrapped_steps", "step_bookkeeping",
             "dynamic_shapes_cpu", "serving_cpu")


def random_variant(seed: int, among: tuple = ()) -> Variant:
    """A random scenario (of ``among``, else any but ``NOT_DRAWN``) with random parameters,
    kept small (a few hundred to a few thousand events). Deterministic from ``seed``."""
    rng = random.Random(seed)
    scenario = rng.choice(list(among) or [s for s in SCENARIOS if s not in NOT_DRAWN])
    p: dict[str, Any] = {
        "layout": rng.choice(LAYOUTS),
        "metadata": rng.choice(("first", "last")),
        "streams": rng.randint(1, 3),
        "pre_trace_kernels": rng.choice([0, 0, 3]),
        "distributed": rng.random() < 0.5,
    }
    if rng.random() < 0.5:
        p["queue_lag_us"] = rng.choice([0, 20, 300, 2000])
    if scenario == "training":
        p.update(steps=rng.randint(3, 6), layers=rng.randint(1, 3),
                 annotate_steps=rng.random() < 0.5, eval_every=rng.choice([0, 2, 4]),
                 eval_forwards=rng.randint(1, 3), autograd_thread=rng.random() < 0.7,
                 prologue=rng.random() < 0.7, epilogue=rng.random() < 0.7,
                 outer_wrapper=rng.random() < 0.3, memory_events=rng.random() < 0.3,
                 graph_eval=rng.random() < 0.3)
        if p["eval_every"]:
            # Structure alone cannot tell an eval pass exactly every k steps from an
            # optimizer step after k micro-batches (the coarser unit is chosen), nor an eval
            # pass after the very last step from an epilogue: keep one eval, mid-run.
            p.update(eval_every=4, steps=rng.randint(5, 7))
        if p["outer_wrapper"] and not p["annotate_steps"]:
            # Unannotated steps inside one wrapper look like the layers of one forward unless
            # a step holds a model with layers of its own.
            p["layers"] = rng.randint(4, 6)
    elif scenario == "serving":
        lo = rng.randint(5, 40)
        p.update(steps=rng.randint(3, 10), prefill_every=rng.choice([0, 3, 5]),
                 graph_kernels=[lo, lo + rng.randint(0, 30)], layers=rng.randint(1, 3),
                 prologue=rng.random() < 0.7)
    elif scenario == "diffusion":
        # A denoiser has blocks: with fewer than 4 it looks like layers of one forward.
        p.update(steps=rng.randint(3, 5), layers=rng.randint(4, 8))
    elif scenario == "single_forward":
        p.update(layers=rng.randint(1, 16))
    elif scenario == "layer_annotations":
        p.update(steps=rng.randint(3, 6), layers=rng.randint(1, 8),
                 family=rng.choice(["layer", "compiled"]))
    elif scenario == "idle_steps":
        p.update(iterations=rng.randint(3, 10), idle=rng.randint(0, 4), layers=rng.randint(1, 3))
    elif scenario == "deep_roots":
        p.update(inner_steps=rng.randint(3, 6), minor_roots=rng.randint(1, 3),
                 layers=rng.randint(1, 2))
    elif scenario == "warmup_root":
        p.update(warmup_roots=rng.randint(1, 2), inner_steps=rng.randint(3, 6),
                 minor_roots=rng.randint(0, 2), layers=rng.randint(1, 2))
    elif scenario == "wrapped_steps":
        p.update(steps=rng.randint(3, 7), layers=rng.randint(1, 3), wrappers=rng.randint(1, 3),
                 rng_calls=rng.randint(0, 3))
    elif scenario == "step_bookkeeping":
        p.update(steps=rng.randint(3, 8), layers=rng.randint(1, 3),
                 idle_us=rng.choice([20.0, 50.0, 200.0]))
    elif scenario == "preamble":
        p.update(iterations=rng.randint(3, 8), layers=rng.randint(1, 3))
    elif scenario == "gpu_only":
        p.update(kernels=rng.randint(0, 200))
    return Variant(scenario, rng.randint(0, 2**31 - 1), p)


def scenario_params():
    """A hypothesis strategy of ``Variant``s (imports hypothesis only when called)."""
    from hypothesis import strategies as st
    return st.builds(random_variant, st.integers(min_value=0, max_value=2**31 - 1))


# ----------------------------------------------------------------------------------------------
# CLI


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        return text


def _describe() -> str:
    lines = []
    for name, fn in SCENARIOS.items():
        params = ", ".join(f"{p.name}={p.default!r}" for p in inspect.signature(fn).parameters.values()
                           if p.kind is p.KEYWORD_ONLY)
        doc = " ".join((inspect.getdoc(fn) or "").split())
        lines.append(f"{name}({params})\n    {doc}")
    common = ", ".join(f"{f.name}={f.default!r}" for f in dataclasses.fields(TraceOptions))
    lines.append(f"common to all: {common}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stream_split.testing.generate",
                                 description="Write a synthetic Kineto trace with ground truth.")
    ap.add_argument("scenario", nargs="?", help="scenario name (see --list)")
    ap.add_argument("out", nargs="?", help="output path (.gz: gzip; -: stdout)")
    ap.add_argument("--list", action="store_true", help="list scenarios and their parameters")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layout", choices=LAYOUTS, default=None)
    ap.add_argument("--form", choices=FORMS, default="object")
    ap.add_argument("--no-close", action="store_true", help="array form: omit the closing ]")
    ap.add_argument("--truth", metavar="TRUTH.json", help="also write the ground truth here")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a scenario or common parameter (value parsed as JSON if it can be)")
    args = ap.parse_args(argv)
    if args.list:
        print(_describe())
        return 0
    if not args.scenario or not args.out:
        ap.error("SCENARIO and OUT are required (or --list)")
    params: dict[str, Any] = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key:
            ap.error(f"--param wants KEY=VALUE, not {item!r}")
        params[key.strip()] = _parse_value(value)
    if args.layout:
        params["layout"] = args.layout
    try:
        gen = generate(args.scenario, args.seed, **params)
        write_trace(gen, args.out, args.form, close_array=not args.no_close)
        if args.truth:
            write_truth(gen, args.truth)
    except (ValueError, TypeError, OSError) as exc:
        print(f"generate: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

