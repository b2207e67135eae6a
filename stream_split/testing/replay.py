"""Replay generated loops live into the CLI and measure how soon each boundary comes out.

    python benchmarks/replay.py [--scenarios training serving ...] [--seeds 0 1] \
        [--mode pipe follow] [--timeout 1] [--json out.json] [--markdown]

A live profiler writer is imitated: the events of a generated scenario
(``stream_split.testing.generate``, ``layout="time"``: sorted by time, as a writer produces
them) are written one JSON object per line, each line flushed at once,

- ``pipe``: into ``stream-split boundaries -`` through a real pipe;
- ``follow``: into a growing file that ``stream-split boundaries --follow FILE`` reads.

After writing the first op of an iteration (the loop thread's outermost op at the iteration's
true start), the writer waits up to ``--timeout`` seconds for the boundary record with that
start before it writes anything else. A boundary is **on time** when it came out before the
writer wrote the next event. Its lag is counted in events (written after the first op before
the record arrived) and in milliseconds (from the first op's write to the record's arrival).

Only boundaries from the 4th iteration on are scored: the first instances are how the unit is
learned. A ``revision`` record (a boundary moved or retracted, see the README) is applied as
a consumer would: the final boundaries of the stream must equal the boundaries of the finished
file (``final_equals_file``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field

from stream_split.core.records import apply_revision
from stream_split.testing.generate import generate
from stream_split.trace_format import STRUCTURE_CATS

#: Scenario name -> (generator scenario, its parameters). Each is a loop shape a live user
#: runs; ``steps`` ones carry ``ProfilerStep#N``.
SCENARIOS = {
    "training_steps": ("training", {"steps": 10}),
    "training": ("training", {"steps": 10, "annotate_steps": False}),
    "serving": ("serving", {"steps": 12}),
    "serving_polls": ("serving_polls", {}),
    "idle_steps": ("idle_steps", {}),
    "layer_annotations": ("layer_annotations", {"steps": 8}),
    "deep_roots": ("deep_roots", {"inner_steps": 6, "minor_roots": 3}),
    "async_tail": ("preamble", {"iterations": 10}),
    "noisy_training": ("noisy_training", {"steps": 10}),
    "dynamic_shapes": ("dynamic_shapes", {"steps": 10}),
    "rollout": ("rollout", {"steps": 8}),
    "sample": ("sample", {"steps": 8}),
}
#: Scored boundaries: the 4th iteration on.
FIRST_SCORED = 3


@dataclass
class Result:
    scenario: str
    seed: int
    mode: str
    iterations: int
    scored: int = 0
    on_time: int = 0
    lag_events: list = field(default_factory=list)
    lag_ms: list = field(default_factory=list)
    revisions: int = 0
    final_equals_file: bool | None = None
    missing: int = 0

    @property
    def share(self) -> float:
        return self.on_time / self.scored if self.scored else 1.0

    def summary(self) -> dict:
        d = asdict(self)
        d.update(share=round(self.share, 3),
                 median_lag_ms=round(statistics.median(self.lag_ms), 2) if self.lag_ms else None,
                 median_lag_events=statistics.median(self.lag_events) if self.lag_events else None,
                 max_lag_events=max(self.lag_events, default=None))
        return d


def _ts_key(ts) -> int:
    return round(float(ts) * 1000)


def live_trace(scenario: str, params: dict, seed: int):
    """The lines a live writer writes, and line index -> true start (ns key) of the iteration
    whose first op it is (iterations from the 4th on only)."""
    gen = generate(scenario, seed=seed, layout="time", **params)
    lines = [json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in gen.events]
    pid, tid = gen.truth.loop_thread
    starts = {_ts_key(it["start_ts"]): i for i, it in enumerate(gen.truth.iterations)}
    first_ops = {}
    for n, e in enumerate(gen.events):
        key = _ts_key(e.get("ts", -1))
        if key in starts and e.get("cat") in STRUCTURE_CATS and e.get("pid") == pid \
                and e.get("tid") == tid and e.get("ph") == "X":
            index = starts.pop(key)
            if index >= FIRST_SCORED:
                first_ops[n] = key
    return lines, first_ops, len(gen.truth.iterations)


def cli() -> list[str]:
    return [sys.executable, "-m", "stream_split.cli"]


class _Records:
    """Reads the CLI's records as they come; remembers when each boundary arrived and how
    many events the writer had written by then."""

    def __init__(self, stream, written):
        self.arrived: dict = {}  # start key -> (monotonic time, events written)
        self.boundaries: list = []  # the stream's boundaries, revisions applied
        self.revisions = 0
        self._written = written
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            record = json.loads(line)
            now = time.monotonic()
            with self._cond:
                if record.get("type") == "boundary":
                    self.boundaries.append(record)
                    self.arrived.setdefault(_ts_key(record["start_ts"]),
                                            (now, self._written[0]))
                elif record.get("type") == "revision":
                    self.revisions += 1
                    self.boundaries = apply_revision(self.boundaries, record)
                    if record.get("start_ts") is not None:
                        self.arrived.setdefault(_ts_key(record["start_ts"]),
                                                (now, self._written[0]))
                self._cond.notify_all()

    def wait_for(self, key: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while key not in self.arrived:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def join(self) -> None:
        self._thread.join()


def _file_boundaries(path: str) -> list:
    out = subprocess.run(cli() + ["boundaries", path], capture_output=True, check=True)
    return [r for r in map(json.loads, out.stdout.splitlines()) if r.get("type") == "boundary"]


def replay(name: str, seed: int = 0, mode: str = "pipe", timeout: float = 1.0,
           work_dir: str | None = None) -> Result:
    """Replay one scenario live (``mode`` "pipe" or "follow"); see the module docstring."""
    scenario, params = SCENARIOS[name]
    lines, first_ops, n_iter = live_trace(scenario, params, seed)
    result = Result(name, seed, mode, n_iter)
    written = [0]
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        path = os.path.join(tmp, "live.jsonl")
        if mode == "pipe":
            proc = subprocess.Popen(cli() + ["boundaries", "-"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE)
            sink = proc.stdin
        else:
            sink = open(path, "wb", buffering=0)
            proc = subprocess.Popen(cli() + ["boundaries", "--follow", "--idle-timeout", "1",
                                             path], stdout=subprocess.PIPE)
        records = _Records(proc.stdout, written)
        sent: dict = {}  # start key -> (monotonic time, line index) of its first op
        file_copy = open(path if mode == "pipe" else os.path.join(tmp, "copy.jsonl"), "wb")
        for n, line in enumerate(lines):
            sink.write(line)
            sink.flush()
            file_copy.write(line)
            written[0] = n + 1
            key = first_ops.get(n)
            if key is not None:
                sent[key] = (time.monotonic(), n + 1)
                records.wait_for(key, timeout)
        file_copy.close()
        sink.close()
        records.join()
        proc.wait()
        for key, (t0, position) in sent.items():
            result.scored += 1
            got = records.arrived.get(key)
            if got is None:
                result.missing += 1
                continue
            t1, written_then = got
            late_by = max(0, written_then - position)
            result.on_time += late_by == 0
            result.lag_events.append(late_by)
            result.lag_ms.append(max(0.0, (t1 - t0) * 1000))
        result.revisions = records.revisions
        final = [(_ts_key(b["start_ts"]), b["first_op"]) for b in records.boundaries]
        whole = [(_ts_key(b["start_ts"]), b["first_op"])
                 for b in _file_boundaries(file_copy.name)]
        result.final_equals_file = final == whole
    return result


def markdown(results: list) -> str:
    """The README table: per scenario (seeds together), on-time share and median lag for
    each mode, the worst lag in events, revisions, and whether every final split matched."""
    modes = list(dict.fromkeys(r.mode for r in results))
    header = ["scenario"]
    for mode in modes:
        header += [f"on time, {mode}", f"median lag, {mode}"]
    header += ["max lag in events", "revisions", "final split == file's"]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in dict.fromkeys(r.scenario for r in results):
        mine = [r for r in results if r.scenario == name]
        cells = [name]
        for mode in modes:
            of_mode = [r for r in mine if r.mode == mode]
            on, scored = sum(r.on_time for r in of_mode), sum(r.scored for r in of_mode)
            lags = [ms for r in of_mode for ms in r.lag_ms]
            cells += [f"{on}/{scored} ({100 * on / scored if scored else 100:.0f} %)",
                      f"{statistics.median(lags):.1f} ms" if lags else "-"]
        cells += [str(max((e for r in mine for e in r.lag_events), default=0)),
                  str(sum(r.revisions for r in mine)),
                  "yes" if all(r.final_equals_file for r in mine) else "NO"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--mode", nargs="+", default=["pipe", "follow"], choices=["pipe", "follow"])
    ap.add_argument("--timeout", type=float, default=1.0,
                    help="seconds the writer waits for each boundary (default 1)")
    ap.add_argument("--json", default=None, help="write every result as JSON")
    ap.add_argument("--markdown", action="store_true", help="print a README table")
    args = ap.parse_args(argv)
    results = []
    for mode in args.mode:
        for name in args.scenarios:
            for seed in args.seeds:
                r = replay(name, seed, mode, args.timeout)
                results.append(r)
                s = r.summary()
                print(f"{mode:6} {name}#{seed}: {r.on_time}/{r.scored} on time, "
                      f"lag events median {s['median_lag_events']} max {s['max_lag_events']}, "
                      f"lag ms median {s['median_lag_ms']}, revisions {r.revisions}, "
                      f"final == file: {r.final_equals_file}", flush=True)
    for mode in args.mode:
        lags = [ms for r in results if r.mode == mode for ms in r.lag_ms]
        if lags:
            print(f"{mode}: median lag {statistics.median(lags):.1f} ms over {len(lags)} "
                  f"boundaries")
    if args.markdown:
        print(markdown(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.summary() for r in results], f, indent=1)
    return 0


