#!/usr/bin/env python3
"""Real traces split one after another in one warm process, each against a bare ijson parse.

    python benchmarks/real_traces.py [TRACE_OR_FOLDER ...] [--repeat 3] [--json out.json]
                                     [--work-dir /dev/shm]

``bench.py`` measures tiles of one real trace, remade one event a line by
``../shared/tools/tile_trace.py``, at up to 10 M events. An archive job meets something else:
thousands of traces of tens of thousands of events, each as its profiler wrote it (libkineto
spreads an event's keys over lines; torch 2.13 writes a key a line), many never reaching an
iteration's end before the last (one denoising request, one serving step), and each split
by a worker that started once. Here each trace (by default every ``.json`` and ``.json.gz``
under ``../shared/traces``) is, within each repeat, parsed bare
(``ijson.items(f, "traceEvents.item", use_float=True)``, backend ``yajl2_c`` checked), then
split by the library (``stream_split.split``, as the Beam transform and the CLI split it)
into a new folder under ``--work-dir`` (tmpfs by default: the disk is not what is measured),
removed after. Times are CPU seconds of this process (``time.process_time``); the figure of a
trace is the median over the repeats of ``t_bare / t_split`` (events/s over the bare
parse's: above 1, faster than the parse), and the whole corpus's is the sum of the bare
parses' times over the sum of the splits' (each trace's median time). A trace ijson cannot
parse (a truncated file) is split, and left out of the sums. The package is imported and a
split made before the first trace (an archive worker pays that once).

Never asserts on time; ``test_real_traces.py`` checks the bookkeeping on the packaged sample.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import ijson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import stream_split  # noqa: E402
from decoder import count_ijson  # noqa: E402  (the bare parse, counting the events)
from scripts import SAMPLE  # noqa: E402

DEFAULT_TRACES = HERE.parent.parent / "shared" / "traces"


def traces_under(paths: list) -> list:
    """The ``.json`` and ``.json.gz`` files named, or under the folders named, sorted."""
    found = []
    for path in map(Path, paths):
        if path.is_dir():
            found += [p for p in path.rglob("*") if p.name.endswith((".json", ".json.gz"))]
        else:
            found.append(path)
    return sorted(found)


def split_once(path: Path, work: Path) -> dict:
    """``stream_split.split`` of ``path`` into a new folder under ``work`` (removed after):
    the manifest's counts."""
    folder = Path(tempfile.mkdtemp(dir=work))
    try:
        manifest = stream_split.split(str(path), str(folder / "out"))
        return {"events": manifest["counts"]["events_in"],
                "iterations": len(manifest.iterations), "complete": manifest.complete}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def cpu_seconds(call, *args):
    """(what ``call(*args)`` returned or raised, its CPU seconds in this process)."""
    started = time.process_time()
    try:
        out = call(*args)
    except Exception as e:  # noqa: BLE001 (told in the row)
        out = e
    return out, time.process_time() - started


def measure(path: Path, repeat: int, work: Path) -> dict:
    """The row of one trace: its events, and each repeat's bare parse and split times."""
    row = {"trace": str(path), "bare_s": [], "split_s": []}
    for _ in range(repeat):
        parsed, bare_s = cpu_seconds(count_ijson, str(path))
        made, split_s = cpu_seconds(split_once, path, work)
        row["bare_s"].append(None if isinstance(parsed, Exception) else bare_s)
        row["split_s"].append(None if isinstance(made, Exception) else split_s)
        row["events"] = None if isinstance(parsed, Exception) else parsed
        row["split"] = f"error: {made}" if isinstance(made, Exception) else made
    if None not in row["bare_s"] and None not in row["split_s"]:
        row["vs_bare"] = statistics.median(b / s for b, s in zip(row["bare_s"], row["split_s"]))
    return row


def summary(rows: list) -> dict:
    """The corpus as a whole: the bare parses' summed median times over the splits'."""
    timed = [r for r in rows if "vs_bare" in r]
    bare = sum(statistics.median(r["bare_s"]) for r in timed)
    split = sum(statistics.median(r["split_s"]) for r in timed)
    return {"traces": len(rows), "timed": len(timed), "bare_s": bare, "split_s": split,
            "vs_bare": bare / split if split else None,
            "events": sum(r["events"] for r in timed)}


def print_table(rows: list, total: dict, root: Path | None, out=None) -> None:
    out = out or sys.stdout
    print(f"{'events':>8} {'bare ms':>8} {'split ms':>9} {'vs bare':>7}  trace", file=out)
    for r in sorted(rows, key=lambda r: r.get("vs_bare", 0.0)):
        name = r["trace"]
        if root is not None and name.startswith(str(root)):
            name = name[len(str(root)) + 1:]
        if "vs_bare" not in r:
            print(f"{'-':>8} {'-':>8} {'-':>9} {'-':>7}  {name}: {r['split']}", file=out)
            continue
        print(f"{r['events']:8d} {1e3 * statistics.median(r['bare_s']):8.1f} "
              f"{1e3 * statistics.median(r['split_s']):9.1f} {r['vs_bare']:7.2f}  {name}",
              file=out)
    if total["split_s"]:
        print(f"all {total['timed']} traces timed ({total['events']} events): bare parse "
              f"{total['bare_s']:.2f} s, split {total['split_s']:.2f} s of CPU: "
              f"{total['vs_bare']:.2f}x the bare parse (median times of "
              f"{len(rows[0]['bare_s'])} repeats)", file=out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", help=f"files or folders (default {DEFAULT_TRACES})")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work-dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir()
                    else Path(tempfile.gettempdir()))
    ap.add_argument("--json", type=Path, help="write the rows and the summary here")
    args = ap.parse_args(argv)
    if ijson.backend != "yajl2_c":
        print(f"ijson's backend is {ijson.backend}, not yajl2_c: the reference is not the "
              "one the project measures against", file=sys.stderr)
        return 2
    roots = args.traces or [str(DEFAULT_TRACES)]
    paths = traces_under(roots)
    if not paths:
        print(f"no traces under {' '.join(roots)}", file=sys.stderr)
        return 2
    split_once(SAMPLE, args.work_dir)  # the package imported, its first split made
    rows = []
    for path in paths:
        rows.append(measure(path, args.repeat, args.work_dir))
        print(f"  {path.name}: {rows[-1].get('vs_bare', rows[-1]['split'])}", file=sys.stderr)
    total = summary(rows)
    print_table(rows, total, Path(roots[0]) if len(roots) == 1 else None)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": total,
                                         "repeat": args.repeat}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
