"""Noisy variants of real traces: real loops are never the same twice.

What it is for: turning any real trace with ``ProfilerStep#N`` spans (and tiles of it) into
traces whose steps differ from one another the way real steps do, with the steps themselves as
the truth. Per step and per seed, among the loop thread's top-level ops inside the step:

- ``drop``: a small op goes, with its subtree (every CPU event of the thread inside it), the GPU
  work its runtime calls launched (by correlation), their ``ac2g`` flows and the GPU annotations
  of its annotations (by External id);
- ``insert``: a sporadic small op (``aten::zeros``, ``detach``, ...) appears in a gap;
- ``vary``: the count of a repeated small op changes (one more, or one fewer), or a short run
  of one small op appears.

The number of mutations of a step is ``rate`` times its top-level ops (the fraction decided by
a coin), each of a kind drawn at random. "Small" means at most ``SMALL_SHARE`` of the time of
the step's top-level ops (its work, not its span: a sleep makes no op small) and of its
kernels. The ``ProfilerStep#N`` spans are kept, so the reference split is the steps' own
(``--detector steps``); the detector under test runs with them made invisible.

What it must never do: write events that are not in the input except the inserted ops, or
change an event it keeps. The same ``(trace, rate, seed, copies)`` always gives the same events.

Library: ``noisy_events(events, rate, seed, copies=1)``; CLI:
``python -m stream_split.testing.noise BASE OUT --rate 0.2 --seed 1 [--copies 10]``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from bisect import bisect_left

from stream_split.trace_format import (
    GPU_ANNOTATION_CAT, GPU_WORK_CATS, LAUNCH_FLOW_CAT, METADATA_PHASE, PROFILER_STEP_PREFIX,
    STRUCTURE_CATS)

#: An op is small when it takes at most this share of its step's time and of its kernels.
SMALL_SHARE = 0.05
#: What sporadically comes and goes between the spine's ops in real steps (issue 8).
SPORADIC_OPS = ("aten::zeros", "aten::zero_", "aten::empty", "aten::detach", "detach",
                "record_param_comms", "aten::item", "aten::copy_")
KINDS = ("drop", "insert", "vary")
_SHIFTED_ARGS = ("External id", "correlation", "Ev Idx")
_CPU_SECTIONS = {"cpu_op", "user_annotation", "fwdbwd", "python_function", "cpu_instant_event",
                 "Trace"}


def _end(e: dict) -> float:
    return e["ts"] + (e.get("dur") or 0)


def _is_step(e: dict) -> bool:
    """A CPU ``ProfilerStep#N`` span (not its GPU mirror)."""
    return e.get("ph") == "X" and e.get("cat") in STRUCTURE_CATS and \
        str(e.get("name", "")).startswith(PROFILER_STEP_PREFIX)


def _timed(e: dict) -> bool:
    return e.get("ph") != METADATA_PHASE and isinstance(e.get("ts"), (int, float))


class _Base:
    """What every noisy copy of one trace reads, indexed once: the loop thread, its steps,
    its events, and the GPU work, flows and GPU annotations linked to each launch or
    annotation (so that dropping an op does not scan the whole trace)."""

    def __init__(self, events: list):
        self.events = events
        spans = [e for e in events if _is_step(e)]
        if not spans:
            raise ValueError("the trace has no ProfilerStep#N spans: nothing to take as the "
                             "truth")
        self.thread = max({(e["pid"], e["tid"]) for e in spans},
                          key=lambda t: sum((e["pid"], e["tid"]) == t for e in spans))
        self.spans = sorted((e for e in spans if (e["pid"], e["tid"]) == self.thread),
                            key=lambda e: e["ts"])
        self.thread_events = [e for e in events
                              if (e.get("pid"), e.get("tid")) == self.thread and _timed(e)]
        self.kernels_of: dict = {}
        self.by_correlation: dict = {}  # correlation -> GPU work and ac2g flows
        self.by_external: dict = {}  # External id -> gpu_user_annotation events
        for e in events:
            cat = e.get("cat")
            args = e.get("args") or {}
            if cat in GPU_WORK_CATS:
                corr = args.get("correlation")
                self.kernels_of[corr] = self.kernels_of.get(corr, 0) + 1
                self.by_correlation.setdefault(corr, []).append(e)
            elif cat == LAUNCH_FLOW_CAT:
                self.by_correlation.setdefault(e.get("id"), []).append(e)
            elif cat == GPU_ANNOTATION_CAT:
                self.by_external.setdefault(args.get("External id"), []).append(e)


class _Step:
    """One step of the loop thread: its top-level ops and what each launched."""

    def __init__(self, span: dict, base: _Base):
        self.span = span
        self.ends_trace = False  # the trace's last step: nothing is inserted after its ops
        lo, hi = span["ts"], _end(span)
        window = [e for e in base.thread_events if e is not span and lo <= e["ts"] < hi]
        inside = [e for e in window if e.get("ph") == "X" and e.get("cat") in STRUCTURE_CATS]
        inside.sort(key=lambda e: (e["ts"], -(e.get("dur") or 0)))
        self.top: list = []
        reach = float("-inf")
        for e in inside:
            if e["ts"] >= reach:
                self.top.append(e)
                reach = _end(e)
        runtime = sorted((e["ts"], base.kernels_of.get(e["args"]["correlation"], 0))
                         for e in window if e.get("ph") == "X"
                         and "correlation" in (e.get("args") or {}))
        starts = [t for t, _ in runtime]
        self.kernels = [sum(k for _, k in runtime[bisect_left(starts, op["ts"]):
                                                  bisect_left(starts, _end(op))])
                        for op in self.top]
        total_kernels = sum(self.kernels)
        work_us = sum(op.get("dur") or 0 for op in self.top)  # not the span: idle time is no work
        self.small = [i for i, op in enumerate(self.top)
                      if (op.get("dur") or 0) <= SMALL_SHARE * work_us
                      and self.kernels[i] <= SMALL_SHARE * total_kernels]


def _subtree(op: dict, base: _Base) -> list:
    """Every CPU event of the loop thread that lies inside ``op`` (``op`` included)."""
    lo, hi = op["ts"], _end(op)
    return [e for e in base.thread_events if lo <= e["ts"] and _end(e) <= hi
            and e.get("cat") in _CPU_SECTIONS | {"cuda_runtime", "cuda_driver", "ac2g"}]


def _drop(op: dict, base: _Base, removed: set) -> None:
    gone = _subtree(op, base)
    for e in gone:
        removed.add(id(e))
        args = e.get("args") or {}
        for linked in base.by_correlation.get(args.get("correlation"), ()) \
                if "correlation" in args else ():
            removed.add(id(linked))
        if e.get("cat") == "user_annotation" and "External id" in args:
            for linked in base.by_external.get(args["External id"], ()):
                removed.add(id(linked))


def _new_op(name: str, like: dict, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": like["pid"], "tid": like["tid"],
            "ts": round(ts, 3), "dur": round(dur, 3), "args": {"noise": True}}


def _insert_into_gap(step: _Step, rng: random.Random, names: list, inserted: list,
                     removed: set) -> None:
    """Put ``names`` (one small op each) one after the other into a gap between two top-level
    ops of the step that are still there."""
    ops = [op for op in step.top if id(op) not in removed]
    if not ops:
        return
    # Between two ops, or after the last one: the step's first op stays its first op (what
    # comes before it is the previous step's as far as any splitter can tell), also where
    # the first op was dropped; and the trace's last step keeps its last op (what comes
    # after it is the epilogue as far as any splitter can tell).
    edges = [_end(op) for op in ops]
    nexts = [op["ts"] for op in ops[1:]] + ([] if step.ends_trace else [_end(step.span)])
    gaps = [(a, b) for a, b in zip(edges, nexts) if b - a > 0.01 * len(names) + 0.002]
    if not gaps:
        return
    a, b = rng.choice(gaps)
    slot = (b - a) / (len(names) + 1)
    for k, name in enumerate(names):
        ts = a + slot * (k + 0.5)
        dur = min(slot * 0.5, 2.0)
        inserted.append(_new_op(name, step.span, ts, dur))


def _mutate_step(step: _Step, rate: float, rng: random.Random, base: _Base, removed: set,
                 inserted: list) -> None:
    want = rate * len(step.top)
    count = int(want) + (rng.random() < want - int(want))
    runs = []  # inserted after every drop: into the gaps between the ops that remain
    for _ in range(count):
        kind = rng.choice(KINDS)
        small = [i for i in step.small if id(step.top[i]) not in removed]
        if kind == "drop" and small:
            _drop(step.top[rng.choice(small)], base, removed)
        elif kind == "vary":
            names = [step.top[i].get("name") for i in small]
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated and rng.random() < 0.5:
                name = rng.choice(repeated)
                victims = [i for i in small if step.top[i].get("name") == name]
                _drop(step.top[rng.choice(victims)], base, removed)
            elif repeated:
                runs.append([rng.choice(repeated)])
            else:
                runs.append([rng.choice(SPORADIC_OPS)] * rng.randint(2, 4))
        else:
            runs.append([rng.choice(SPORADIC_OPS)])
    for names in runs:
        _insert_into_gap(step, rng, names, inserted, removed)


def _noisy_copy(base: _Base, rate: float, rng: random.Random, last: bool = True) -> list:
    """One noisy version of the base's events in their own file order; ``last``: the copy
    that ends the trace."""
    removed: set = set()
    inserted: list = []
    for i, span in enumerate(base.spans):
        step = _Step(span, base)
        step.ends_trace = last and i == len(base.spans) - 1
        _mutate_step(step, rate, rng, base, removed, inserted)
    out = [e for e in base.events if id(e) not in removed]
    mine = [i for i, e in enumerate(out) if (e.get("pid"), e.get("tid")) == base.thread
            and e.get("cat") in _CPU_SECTIONS and _timed(e)]
    ops = [i for i in mine if out[i].get("cat") == "cpu_op"]
    at: dict = {}
    for op in inserted:
        at.setdefault(_file_place(out, mine, ops, op["ts"]), []).append(op)
    placed = []
    for i, e in enumerate(out):
        placed.extend(sorted(at.pop(i, ()), key=_start_ts))
        placed.append(e)
    placed.extend(sorted((op for ops in at.values() for op in ops), key=_start_ts))
    return placed


def _start_ts(e: dict) -> float:
    return e["ts"]


def _file_place(out: list, mine: list, ops: list, ts: float) -> int:
    """Where an op of the loop thread starting at ``ts`` goes in the file: among the thread's
    cpu_ops (their section, when the file keeps them apart), before the first that starts
    later, and before the thread's events just ahead of that one that start later too (an
    annotation, a ``ProfilerStep``, written among the cpu_ops): the thread's events stay in
    time order, as a profiler writes them, so the op opens no new section. ``mine``, ``ops``:
    the file positions of the thread's CPU events, and of its cpu_ops."""
    later = next((i for i in ops if out[i]["ts"] > ts), None)
    if later is None:  # after the last cpu_op, and the thread's events that follow it in time
        if not ops:
            return len(out)
        k = bisect_left(mine, ops[-1])
        while k + 1 < len(mine) and out[mine[k]]["ts"] <= out[mine[k + 1]]["ts"] <= ts:
            k += 1
        return mine[k] + 1
    k = bisect_left(mine, later)
    while k > 0 and out[mine[k - 1]]["ts"] > ts:
        k -= 1
    return mine[k]


def _section(e: dict) -> tuple:
    if e.get("ph") == METADATA_PHASE:
        return ("M",)
    cat = e.get("cat")
    if cat in _CPU_SECTIONS:
        return (cat, str(e.get("pid")), str(e.get("tid")))
    if cat == GPU_ANNOTATION_CAT:
        return (cat,)
    return ("activity",)


def _shift(e: dict, k: int, dt: float, strides: dict, step_stride: int) -> dict:
    if k == 0 or e.get("ph") == METADATA_PHASE:
        return e
    e = dict(e)
    if isinstance(e.get("ts"), (int, float)):
        e["ts"] = round(e["ts"] + k * dt, 3)
    if isinstance(e.get("id"), int):
        e["id"] += k * strides["id"]
    args = e.get("args")
    if args:
        args = e["args"] = dict(args)
        for key in _SHIFTED_ARGS:
            if isinstance(args.get(key), int):
                args[key] += k * strides[key]
    if e.get("ph") == "X" and str(e.get("name", "")).startswith(PROFILER_STEP_PREFIX):
        e["name"] = f"{PROFILER_STEP_PREFIX}{int(e['name'].split('#', 1)[1]) + k * step_stride}"
    return e


def noisy_events(events: list, rate: float, seed: int, copies: int = 1) -> list:
    """``copies`` copies of the trace one after the other (ids and step numbers shifted), each
    with its own noise, in Kineto's section layout (each section holds that section of every
    copy, as in a long real trace); one copy keeps the input's file order."""
    rng = random.Random(f"{seed}:{rate}")
    if copies == 1:
        return _noisy_copy(_Base(events), rate, rng)
    meta = [e for e in events if e.get("ph") == METADATA_PHASE]
    body = [e for e in events if e.get("ph") != METADATA_PHASE]
    timed = [e for e in body if _timed(e)]
    dt = max(_end(e) for e in timed) - min(e["ts"] for e in timed) + 1000.0
    strides = {key: 1 + max([a[key] for e in body if isinstance(a := (e.get("args") or {}),
                                                                dict)
                             and isinstance(a.get(key), int)] or [0]) for key in _SHIFTED_ARGS}
    strides["id"] = 1 + max([e["id"] for e in body if isinstance(e.get("id"), int)] or [0])
    numbers = [int(e["name"].split("#", 1)[1]) for e in body if _is_step(e)]
    step_stride = max(numbers) - min(numbers) + 1 if numbers else 1
    sections: dict = {}
    base = _Base(body)
    for k in range(copies):
        for e in _noisy_copy(base, rate, rng, last=k == copies - 1):
            sections.setdefault(_section(e), []).append(_shift(e, k, dt, strides, step_stride))
    out = [e for section in sections.values() for e in section]
    return out + meta


def _load(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    return {"traceEvents": doc} if isinstance(doc, list) else doc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stream_split.testing.noise",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("base", help="a trace with ProfilerStep#N spans (.json or .json.gz)")
    ap.add_argument("out", help="where to write the noisy trace (.json or .json.gz)")
    ap.add_argument("--rate", type=float, default=0.2,
                    help="mutations per step, as a share of its top-level ops (default 0.2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--copies", type=int, default=1, help="tile this many noisy copies")
    args = ap.parse_args(argv)
    doc = _load(args.base)
    doc["traceEvents"] = noisy_events(
        [e for e in doc["traceEvents"] if isinstance(e, dict)], args.rate, args.seed,
        args.copies)
    opener = gzip.open if args.out.endswith(".gz") else open
    with opener(args.out, "wt", encoding="utf-8") as f:
        json.dump(doc, f)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
