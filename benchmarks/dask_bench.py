#!/usr/bin/env python3
"""The archive pipeline on a local Dask cluster of 1 and of 2 workers: wall time, speed-up,
and the fixed cost measured apart.

    python benchmarks/dask_bench.py [--traces 16] [--workers 1 2] [--repeat 2] \
        [--work-dir /tmp/stream-split-dask-bench] [--json FILE]

What it does
------------
1. Writes ``--traces`` generated training traces (``stream_split.testing.generate``, 150 to 750
   steps: the largest is about 4x the smallest) into ``--work-dir`` (kept and reused), and
   one small trace apart.
2. For each worker count, starts a scheduler and that many single-threaded worker processes
   on 127.0.0.1 (``stream_split.testing.dask_cluster``), then runs, ``--repeat`` times,
   alternately:
   - ``fixed``: ``python -m pipelines.split_archive`` on the one small trace: starting the
     process, importing Beam, building the graph, connecting to the scheduler, matching, the
     shuffles and writing the five outputs, with (almost) no splitting;
   - ``archive``: the same command on all the traces.
   Wall time is taken around each process with ``time.perf_counter``; medians are reported.
   ``work`` is the sum of the per-trace ``seconds`` of ``summaries.jsonl`` (the splitting
   itself, in the workers).
3. Prints one row per worker count: cluster start, fixed cost, wall time, wall time less the
   fixed cost, the speed-ups against the first worker count, and the machine's 1-minute load
   average before and after (other processes take cores from the workers).

On a shared 2-core machine two workers can at best halve the variable part; the fixed part
does not shrink. Run nothing else meanwhile and quote the speed-ups with the table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stream_split.testing import generate  # noqa: E402
from stream_split.testing.dask_cluster import local_dask_cluster  # noqa: E402

DEFAULT_WORK = Path("/tmp/stream-split-dask-bench")
RUNNER = "--runner=stream_split.dask_runner.DaskRunner"


def write_traces(work: Path, count: int) -> tuple[str, str]:
    """The archive's pattern and the small trace's pattern (traces written once, then kept)."""
    archive, small = work / "archive", work / "small"
    archive.mkdir(parents=True, exist_ok=True)
    small.mkdir(exist_ok=True)
    for i in range(count):
        path = archive / f"rank{i:02d}.json.gz"
        if not path.exists():
            steps = 150 + (600 * i) // max(1, count - 1)
            generate.write_trace(generate.generate("training", seed=i, steps=steps, layers=6),
                                 str(path))
    if not (small / "sample.json.gz").exists():
        generate.write_trace(generate.generate("sample", seed=0), str(small / "sample.json.gz"))
    return str(archive / "*.json.gz"), str(small / "*.json.gz")


def run_pipeline(pattern: str, out: Path, address: str) -> tuple[float, float]:
    """Wall seconds of one run, and the sum of its per-trace seconds."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.split_archive", "--input", pattern,
         "--output", str(out), "--detector", "steps", RUNNER,
         f"--dask_client_address={address}"],
        cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"pipeline failed:\n{done.stderr[-3000:]}")
    summaries = [json.loads(line) for line in (out / "summaries.jsonl").read_text().splitlines()]
    return wall, sum(s["seconds"] for s in summaries)


def measure(workers: int, archive: str, small: str, work: Path, repeat: int) -> dict:
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with local_dask_cluster(workers, work / f"cluster-{workers}", cwd=str(REPO),
                            python_path=[str(REPO)]) as address:
        cluster_start = time.perf_counter() - started
        fixed, wall, busy = [], [], []
        for r in range(repeat):
            fixed.append(run_pipeline(small, work / "out-fixed", address)[0])
            seconds, split_seconds = run_pipeline(archive, work / "out-archive", address)
            wall.append(seconds)
            busy.append(split_seconds)
            print(f"workers={workers} repeat={r}: fixed {fixed[-1]:.2f} s, "
                  f"archive {wall[-1]:.2f} s, work {busy[-1]:.2f} s", file=sys.stderr)
    # Other processes on the machine take cores from the workers: the 1-minute load average
    # around the runs says whether the figures can be quoted.
    return {"workers": workers, "load_before": load_before, "load_after": os.getloadavg()[0],
            "cluster_start_s": cluster_start,
            "fixed_s": statistics.median(fixed), "wall_s": statistics.median(wall),
            "work_s": statistics.median(busy), "runs": {"fixed": fixed, "wall": wall,
                                                         "work": busy}}


def table(rows: list[dict], traces: int, total_mb: float) -> str:
    base = rows[0]
    lines = [f"{traces} traces, {total_mb:.0f} MB of .json.gz",
             "| workers | cluster start s | fixed s | wall s | wall - fixed s | speed-up (wall) "
             "| speed-up (wall - fixed) | work s (sum per trace) | load avg before / after |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        variable = row["wall_s"] - row["fixed_s"]
        base_variable = base["wall_s"] - base["fixed_s"]
        lines.append(
            f"| {row['workers']} | {row['cluster_start_s']:.1f} | {row['fixed_s']:.1f} "
            f"| {row['wall_s']:.1f} | {variable:.1f} | {base['wall_s'] / row['wall_s']:.2f}x "
            f"| {base_variable / variable:.2f}x | {row['work_s']:.1f} "
            f"| {row['load_before']:.1f} / {row['load_after']:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=16)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK)
    parser.add_argument("--json", type=Path, help="write every run and the medians here")
    args = parser.parse_args(argv)

    archive, small = write_traces(args.work_dir, args.traces)
    total_mb = sum(p.stat().st_size for p in Path(archive).parent.glob("*.json.gz")) / 1e6
    rows = [measure(w, archive, small, args.work_dir, args.repeat) for w in args.workers]
    print(table(rows, args.traces, total_mb))
    if args.json:
        args.json.write_text(json.dumps({"traces": args.traces, "mb": total_mb, "rows": rows},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
