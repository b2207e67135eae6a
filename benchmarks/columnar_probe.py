#!/usr/bin/env python3
"""What a columnar engine could cost: a probe for issue 24's one-core targets, not an engine.

    python benchmarks/columnar_probe.py TRACE.json.gz [--repeat 3] [--json out.json]

Issue 24 asks ``boundaries`` to run at 2x a bare ijson parse on one core. Today's engine
(``core.engine.Splitter``) takes each event that is not a plain Python frame as a dict, one
call at a time; the sessions' notes name a columnar engine (numpy over a batch's events) as
the way to the target. Before anyone builds one, this measures, in one process, what its
parts would cost on a trace, each stage against today's:

- ``engine``: today's ``boundaries`` work: the slim decoder (``TraceReader.batches``) and the
  engine on its batches, records kept (no output written);
- ``detector``: within another such run, the time in the structure detector's per-op calls
  (``StructureDetector._observe_learning``, ``_observe_matching``, ``_observe_stepping``, each
  timed by ``time.perf_counter``: 0.1 us a call, where a CPU clock is a system call of 1 us;
  wall time, so measure on a quiet machine), which a columnar engine would still make for
  the structural ops;
- ``decode_slim``: the slim decoder alone (as ``benchmarks/decoder.py``'s ``slim``): the
  events that are not plain frames as ``validate.SlimEvent`` structs, their ``args`` dicts;
- ``decode_structs``: the same decoder with those events' ``args`` structs too (the same
  fields and types: ``validate.FIELD_TYPES``, ``ARG_TYPES``);
- ``columns``: those structs' fields as numpy columns (category, phase, times, thread,
  correlation, flow and External ids, whether the name is a launch's), the frames' times from
  their runs, made in Python;
- ``nesting``: every structural op's depth on its thread (ops sorted by thread and start, a
  loop with a stack of ends: what ``ThreadStacks`` does op by op);
- ``own``: every event's owner from today's boundaries, in numpy: CPU-side events by their
  window (``searchsorted``; an event over one boundary to the side holding more of it, over
  two to none, as ``Windows.owner``; steps opened by frames are not looked at); GPU work and
  launch flows joined to their launch's correlation id, GPU annotations to their annotation's
  External id (sorted joins); then each iteration's events, CPU ops, launches and kernels
  (``bincount``). Not the GPU time unions, the breakdown, held events or the spill: the
  stages' sum is a lower bound of such an engine's cost.

The probe's owners are checked against today's records: the share of iterations whose four
counts are equal (``agree``), and the share of the events counted in another iteration
(``events_moved``: frames that open a step, which the probe does not look at). A columnar
``boundaries`` would cost about start-up + ``decode_structs`` + ``columns`` + ``nesting`` +
``detector`` + ``own``, against ``engine`` (+ start-up) today. Times are CPU seconds of this
process (``time.process_time``), the garbage collector off (``run.drive`` runs it only on the
young generations), the stages alternating within each repeat; medians over the repeats.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Union

import msgspec
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stream_split import decode  # noqa: E402
from stream_split.core.detect.structure import StructureDetector  # noqa: E402
from stream_split.core.engine import SplitOptions  # noqa: E402
from stream_split.core.records import IterationRecord  # noqa: E402
from stream_split.core.validate import ARG_TYPES, FIELD_TYPES  # noqa: E402
from stream_split.read import TraceReader  # noqa: E402
from stream_split.run import drive, new_splitter  # noqa: E402
from stream_split.trace_format import (ANNOTATION_CAT, CPU_OP_CATS, FLOW_PHASES,  # noqa: E402
                                       GPU_ANNOTATION_CAT, GPU_WORK_CATS, KERNEL_CATS,
                                       LAUNCH_FLOW_CATS, LAUNCH_NAMES, STRUCTURE_CATS)

STAGES = ("engine", "detector", "decode_slim", "decode_structs", "columns", "nesting", "own")


def _struct_decoder() -> msgspec.json.Decoder:
    """A decoder of a JSON array of events into structs of the slim fields and types, their
    ``args`` structs too (``ProbeEvent``)."""
    args = msgspec.defstruct("ProbeArgs", [
        (_attr(name), Union[kind, None], msgspec.field(name=name, default=None))
        for name, kind in ARG_TYPES.items()], gc=False)
    event = msgspec.defstruct("ProbeEvent", [
        (_attr(name), Union[kind, None], msgspec.field(name=name, default=None))
        for name, kind in FIELD_TYPES.items()] + [("args", Union[args, None], None)],
        gc=False)
    return msgspec.json.Decoder(list[event])


def _attr(name: str) -> str:
    return name.lower().replace(" ", "_")


@contextmanager
def _decoding_structs():
    """``read.TraceReader`` decoding the stretches that are not frame runs into structs."""
    saved = dict(decode._SLIM_DECODERS)
    structs = _struct_decoder()
    for lazy, (checked, as_given) in saved.items():
        decode._SLIM_DECODERS[lazy] = (structs, as_given)
    try:
        yield
    finally:
        decode._SLIM_DECODERS.update(saved)


def _batches(path: str) -> list:
    return list(TraceReader(path).batches(raws=False, slim=True))


def _engine(path: str, time_detector: bool = False) -> tuple[float, float, list, np.ndarray]:
    """Today's ``boundaries`` work: (CPU seconds; with ``time_detector``, the seconds in the
    detector's per-op calls, by ``time.perf_counter`` around each, else 0; the iteration
    records; the windows' edges)."""
    spent = [0.0]
    saved = {name: getattr(StructureDetector, name)
             for name in ("_observe_learning", "_observe_matching", "_observe_stepping")}

    def timed(method):
        def call(*args):
            t = time.perf_counter()  # (a few dozen ns, not a system call per op)
            try:
                return method(*args)
            finally:
                spent[0] += time.perf_counter() - t
        return call

    records = []
    try:
        for name, method in saved.items():
            if time_detector:
                setattr(StructureDetector, name, timed(method))
        t = time.process_time()
        splitter = new_splitter(SplitOptions(detector="auto", keep_events=False))
        drive(TraceReader(path), splitter, on_record=records.append)
        took = time.process_time() - t
    finally:
        for name, method in saved.items():
            setattr(StructureDetector, name, method)
    windows = splitter._windows  # (a probe: the edges the engine ended with)
    edges = np.append(np.asarray(windows.starts, float), windows.last_end or np.inf)
    iterations = [r for r in records if isinstance(r, IterationRecord)]
    return took, spent[0], iterations, edges


class Columns:
    """The events of slim batches (structs) as numpy columns, frames included."""

    def __init__(self, batches: list):
        codes: dict = {}
        threads: dict = {}
        cat, ph, ts, dur, thread, corr, flow, ext, launch_name = [], [], [], [], [], [], [], [], []
        for batch in batches:
            events, at = batch.events, 0
            for run in [*batch.frame_runs, None]:
                stop = len(events) if run is None else run.i
                part = [e if e.__class__ is not dict else _AsStruct(e) for e in events[at:stop]]
                cat += [codes.setdefault(e.cat, len(codes)) for e in part]
                ph += [e.ph for e in part]
                ts += [e.ts for e in part]
                dur += [e.dur or 0 for e in part]
                thread += [threads.setdefault((e.pid, e.tid), len(threads)) for e in part]
                corr += [e.args.correlation if e.args is not None and e.args.correlation
                         is not None else -1 for e in part]
                flow += [e.id if e.id.__class__ is int else -1 for e in part]
                ext += [e.args.external_id if e.args is not None and e.args.external_id
                        is not None else -1 for e in part]
                launch_name += [e.name in LAUNCH_NAMES for e in part]
                if run is None:
                    break
                starts, ends = _frame_times(run)
                n = len(starts)
                cat += [codes.setdefault("python_function", len(codes))] * n
                ph += ["X"] * n
                ts += starts.tolist()
                dur += (ends - starts).tolist()
                thread += [threads.setdefault(t, len(threads)) for t in _frame_threads(run)]
                corr += [-1] * n
                flow += [-1] * n
                ext += [-1] * n
                launch_name += [False] * n
                at = run.j
        self.codes = codes
        self.cat = np.array(cat, np.int16)
        self.complete = np.array([p == "X" for p in ph])
        self.flow_phase = np.array([p in FLOW_PHASES for p in ph])
        self.ts = np.array(ts, float)
        self.end = self.ts + np.array(dur, float)
        self.thread = np.array(thread, np.int64)
        self.corr = np.array(corr, np.int64)
        self.flow = np.array(flow, np.int64)
        self.ext = np.array(ext, np.int64)
        self.launch_name = np.array(launch_name, bool)

    def of(self, names) -> np.ndarray:
        wanted = [self.codes[name] for name in names if name in self.codes]
        return np.isin(self.cat, wanted)


class _AsStruct:
    """An event that the struct decoder refused (decoded as a dict), read as a struct is."""

    def __init__(self, event: dict):
        self._event = event
        args = event.get("args")
        self.args = None if not isinstance(args, dict) else _AsStruct(args)

    def __getattr__(self, name: str):
        return self._event.get({"external_id": "External id"}.get(name, name))


def _frame_times(run) -> tuple[np.ndarray, np.ndarray]:
    if run.starts is not None:
        return run.starts, run.ends
    events = run.events()
    events = [e if e.__class__ is not dict else _AsStruct(e) for e in events]
    starts = np.array([e.ts for e in events], float)
    return starts, starts + np.array([e.dur or 0 for e in events], float)


def _frame_threads(run) -> list:
    if run.starts is not None:
        return run.threads_and_names()[0]
    return [(e.pid, e.tid) if e.__class__ is not dict else (e.get("pid"), e.get("tid"))
            for e in run.events()]


def nesting(cols: Columns) -> np.ndarray:
    """The depth of each structural op on its thread (0: top level)."""
    ops = np.flatnonzero(cols.of(STRUCTURE_CATS) & cols.complete)
    order = ops[np.lexsort((-cols.end[ops], cols.ts[ops], cols.thread[ops]))]
    depth = np.empty(len(order), np.int32)
    stack, last = [], None
    for k, (thread, end) in enumerate(zip(cols.thread[order].tolist(),
                                          cols.end[order].tolist())):
        if thread != last:
            stack, last = [], thread
        while stack and stack[-1] < end:
            stack.pop()
        depth[k] = len(stack)
        stack.append(end)
    return depth


def own(cols: Columns, edges: np.ndarray) -> dict:
    """Each iteration's events, CPU ops, launches and kernels, owned in numpy."""
    n_iter = len(edges) - 1
    owner = np.full(len(cols.ts), -1, np.int64)
    gpu_work, annotation = cols.of(GPU_WORK_CATS), cols.of((GPU_ANNOTATION_CAT,))
    flows = cols.of(LAUNCH_FLOW_CATS) & cols.flow_phase
    cpu = np.flatnonzero(~(gpu_work | annotation | flows))
    start, end = cols.ts[cpu], np.where(cols.complete[cpu], cols.end[cpu], cols.ts[cpu])
    seg_s = np.searchsorted(edges, start, "right") - 1
    seg_e = np.where(end > start, np.searchsorted(edges, end, "left") - 1, seg_s)
    edge = edges[np.clip(seg_s + 1, 0, len(edges) - 1)]
    one = np.where(edge - start >= end - edge, seg_s, seg_e)
    found = np.where(seg_e == seg_s, seg_s, np.where(seg_e - seg_s >= 2, -1, one))
    owner[cpu] = np.where((found >= 0) & (found < n_iter), found, -1)
    # a launch: a CPU-side X event with a correlation id, not a structural op
    launches = cols.complete & ~cols.of(STRUCTURE_CATS) & (cols.corr > 0) & ~gpu_work
    _join(owner, np.flatnonzero(launches), cols.corr, [(gpu_work, cols.corr), (flows, cols.flow)])
    _join(owner, np.flatnonzero(cols.of((ANNOTATION_CAT,)) & (cols.ext >= 0)), cols.ext,
          [(annotation, cols.ext)])
    counted = owner >= 0
    count = lambda mask: np.bincount(owner[counted & mask], minlength=n_iter)  # noqa: E731
    return {"events": count(np.ones(len(owner), bool)),
            "cpu_ops": count(cols.of(CPU_OP_CATS) & cols.complete),
            "launches": count(launches & cols.launch_name),
            "kernels": count(cols.of(KERNEL_CATS))}


def _join(owner: np.ndarray, keyed: np.ndarray, keys: np.ndarray, linked: list) -> None:
    """The events of each ``(mask, ids)`` of ``linked`` owned as the event of ``keyed`` whose
    key (``keys``) is their id, the last such one where several have it (a sorted join)."""
    order = np.argsort(keys[keyed], kind="stable")
    sorted_keys, sorted_owner = keys[keyed][order], owner[keyed][order]
    for mask, ids in linked:
        members = np.flatnonzero(mask)
        if not len(sorted_keys):
            continue
        at = np.searchsorted(sorted_keys, ids[members], "right") - 1
        hit = (at >= 0) & (sorted_keys[np.maximum(at, 0)] == ids[members])
        owner[members] = np.where(hit, sorted_owner[np.maximum(at, 0)], -1)


def agreement(counts: dict, records: list) -> tuple[float, float]:
    """(the share of iterations whose four counts are today's records', the share of their
    events counted in another iteration or none: the sum of the differences of the events
    counts over today's events)."""
    records = [r for r in records if r.index < len(counts["events"])]
    same = sum(all(counts[key][r.index] == getattr(r, key) for key in counts) for r in records)
    moved = sum(abs(int(counts["events"][r.index]) - r.events) for r in records)
    return same / max(len(records), 1), moved / max(sum(r.events for r in records), 1)


def measure(path: str, repeat: int) -> dict:
    times = {stage: [] for stage in STAGES}
    clock = time.process_time
    gc.disable()
    try:
        for r in range(repeat):
            for stage in (STAGES if r % 2 == 0 else STAGES[::-1]):
                t = clock()
                if stage == "engine":
                    _, _, records, edges = _engine(path)
                elif stage == "detector":
                    spent = _engine(path, time_detector=True)[1]
                elif stage == "decode_slim":
                    _batches(path)
                elif stage == "decode_structs":
                    with _decoding_structs():
                        batches = _batches(path)
                elif stage == "columns":
                    cols = Columns(batches)
                elif stage == "nesting":
                    depth = nesting(cols)
                else:
                    counts = own(cols, edges)
                times[stage].append(spent if stage == "detector" else clock() - t)
                gc.collect()
        return {"trace": path, "repeat": repeat, "events": len(cols.ts),
                "structural_ops": len(depth), "top_level_ops": int((depth == 0).sum()),
                "iterations": len(records), "agree": agreement(counts, records)[0],
                "events_moved": agreement(counts, records)[1],
                "seconds": {k: statistics.median(v) for k, v in times.items()},
                "runs": times}
    finally:
        gc.enable()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", help="write the measurements here")
    args = p.parse_args(argv)
    found = measure(args.trace, args.repeat)
    s = found["seconds"]
    print(f"{args.trace}: {found['events']} events, {found['structural_ops']} structural ops "
          f"({found['top_level_ops']} top level), {found['iterations']} iterations")
    for stage in STAGES:
        print(f"  {stage:15s} {s[stage]:7.3f} s")
    columnar = s["decode_structs"] + s["columns"] + s["nesting"] + s["detector"] + s["own"]
    print(f"  a columnar engine's parts: {columnar:.3f} s against {s['engine']:.3f} s "
          f"today ({columnar / s['engine']:.2f}); its counts are today's records' in "
          f"{100 * found['agree']:.1f} % of the iterations, {100 * found['events_moved']:.3f} "
          f"% of the events counted elsewhere")
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
