#!/usr/bin/env python3
"""Any order within a thread costs no more than start order: time and peak RSS of
``boundaries`` and ``split`` on one tile in start order, end order and shuffled.

    python benchmarks/order.py \
        --base ../shared/traces/tracelens/mi300/resnet_act_checkpoint.json.gz \
        [--copies 10] [--repeat 3] [--window 8] [--json out.json] [--check]

1. Tiles the base trace (``bench.make_tile``, steps stripped as ``bench.py --strip-steps``
   does, so the structure decides) and writes its end-order and shuffled copies beside it
   (``stream_split.testing.reorder``: each thread's ``cpu_op`` / ``user_annotation`` events
   permuted among their places; cached as ``<tile>-end.json.gz``, ``<tile>-shuffled.json.gz``).
2. Runs ``stream-split boundaries`` and ``split`` (``--detector auto``) on each, each run its
   own process, the orders interleaved across repeats; wall time and peak RSS as ``bench.py``
   takes them (``bench.run_once``), medians over repeats.
3. Checks: each order's time within ``TIME_RATIO`` of start order's, its peak RSS within
   ``RSS_RATIO``, and the same number of iterations (``--check``: exit status 1 otherwise).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from bench import DEFAULT_TILER, DEFAULT_WORK, compile_package, make_tile, run_once, tile_path

ORDERS = ("start", "end", "shuffled")
COMMANDS = ("boundaries", "split")
TIME_RATIO = 1.5  # end order and shuffled within 1.5x of start order's time (issue 21)
RSS_RATIO = 1.15  # ... and a flat peak RSS


def ordered_tile(python: str, tile: Path, order: str, window: int) -> Path:
    """``tile`` with each thread's ops in ``order`` (made once, cached beside it)."""
    if order == "start":
        return tile
    out = tile.with_name(tile.name.replace(".json.gz", f"-{order}.json.gz"))
    if not out.exists():
        partial = out.with_name(".partial-" + out.name)
        print(f"writing {out.name} ...", file=sys.stderr, flush=True)
        subprocess.run([python, "-m", "stream_split.testing.reorder", str(tile), str(partial),
                        "--order", order, "--window", str(window)], check=True)
        partial.replace(out)
    return out


def argv_of(command: str, tile: Path, python: str, out_dir: Path) -> list:
    argv = [python, "-m", "stream_split.cli", command, str(tile), "--detector", "auto",
            "--quiet"]
    if command == "split":
        argv += ["-o", str(out_dir), "--overwrite"]
    return argv


def measure(tiles: dict, python: str, repeat: int, work: Path) -> dict:
    """{(order, command): [run, ...]}, the orders interleaved (forward, then backward)."""
    runs: dict = {}
    for r in range(repeat):
        for order in (ORDERS if r % 2 == 0 else ORDERS[::-1]):
            for command in COMMANDS:
                run = run_once(argv_of(command, tiles[order], python, work / "order-out"),
                               capture=command == "boundaries")
                if run["rc"] != 0:
                    sys.exit(f"{command} on {tiles[order].name} failed: {run['stderr']}")
                run["boundaries"] = run["stdout"].count('"boundary"') if command == "boundaries" \
                    else len(json.loads((work / "order-out" / "manifest.json").read_text())
                             ["iterations"])
                run.pop("stdout")
                runs.setdefault((order, command), []).append(run)
                print(f"  {order:8} {command:10} {run['wall_s']:7.2f} s "
                      f"{run['rss_mb']:7.1f} MB", file=sys.stderr, flush=True)
    return runs


def summarize(runs: dict) -> list:
    rows = []
    for command in COMMANDS:
        base = statistics.median(r["wall_s"] for r in runs[("start", command)])
        base_rss = statistics.median(r["rss_mb"] for r in runs[("start", command)])
        for order in ORDERS:
            rs = runs[(order, command)]
            wall = statistics.median(r["wall_s"] for r in rs)
            rss = statistics.median(r["rss_mb"] for r in rs)
            rows.append({"order": order, "command": command, "wall_s": wall, "rss_mb": rss,
                         "time_ratio": wall / base, "rss_ratio": rss / base_rss,
                         "boundaries": rs[0]["boundaries"]})
    return rows


def checks(rows: list) -> list:
    out = []
    start = {row["command"]: row for row in rows if row["order"] == "start"}
    for row in rows:
        if row["order"] == "start":
            continue
        ok = row["time_ratio"] <= TIME_RATIO and row["rss_ratio"] <= RSS_RATIO and \
            row["boundaries"] == start[row["command"]]["boundaries"]
        out.append((f"{row['order']} {row['command']}", ok))
    return out


def print_table(rows: list) -> None:
    print(f"{'order':9} {'command':11} {'wall s':>7} {'x start':>8} {'peak RSS MB':>12} "
          f"{'x start':>8} {'iterations':>10}")
    for row in rows:
        print(f"{row['order']:9} {row['command']:11} {row['wall_s']:7.2f} "
              f"{row['time_ratio']:8.2f} {row['rss_mb']:12.1f} {row['rss_ratio']:8.2f} "
              f"{row['boundaries']:>10}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--window", type=int, default=8, help="how far a shuffled op moves")
    ap.add_argument("--work-dir", type=Path, default=DEFAULT_WORK)
    ap.add_argument("--tiler", type=Path, default=DEFAULT_TILER)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    a.work_dir.mkdir(parents=True, exist_ok=True)
    print(compile_package(a.python), file=sys.stderr)
    tile = tile_path(a.work_dir, a.base, a.copies, True)
    make_tile(a.python, a.tiler, a.base, tile, a.copies, True)
    tiles = {order: ordered_tile(a.python, tile, order, a.window) for order in ORDERS}
    rows = summarize(measure(tiles, a.python, a.repeat, a.work_dir))
    print_table(rows)
    results = checks(rows)
    for name, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: within {TIME_RATIO}x time, "
              f"{RSS_RATIO}x peak RSS, same iterations as start order")
    if a.json:
        a.json.write_text(json.dumps({"tile": tile.name, "rows": rows}, indent=1))
    return 1 if a.check and not all(ok for _, ok in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
