#!/usr/bin/env python3
"""Throughput and peak memory of the stream-split CLI against a bare ijson parse, on tiled traces.

    python benchmarks/bench.py \
        --base ../shared/traces/tracelens/mi300/resnet_act_checkpoint.json.gz \
        --copies 1 10 40 [--strip-steps] [--commands boundaries split tag] \
        [--repeat 3] [--scale] [--json out.json] [--check]

What it does
------------
1. Tiles the base trace with ``shared/tools/tile_trace.py`` into ``--work-dir`` (default
   /tmp/stream-split-bench), once per copy count; tiles are cached by name
   (``<stem>-x<copies>[-nosteps].json.gz``) and reused by later runs.
2. For every tile runs, each as its own process, with the same ``.json.gz`` file as input:
   - ``ijson``: the reference, a bare ``ijson.items(f, "traceEvents.item", use_float=True)``
     over ``gzip.open(tile)`` that counts events (yajl2_c backend checked);
   - ``boundaries``: ``stream-split boundaries TILE --detector steps > /dev/null``;
   - ``split``: ``stream-split split TILE -o DIR --detector steps`` (DIR emptied before each run);
   - ``tag``: ``stream-split tag TILE --detector steps > /dev/null``.
   Wall time is taken around the child; peak RSS is the command's own peak (the whole
   process, interpreter included), from ``/usr/bin/time -f %M`` (see ``run_once``). After a warm-up parse, the commands
   are interleaved across repeats (ijson, A, B, C, then C, B, A, ijson, ...) so that drift of the
   machine's speed hits all of them alike.
3. Speed is a ratio within one repeat: ``ratio = t_ijson / t_command`` (events/s of the command
   over events/s of the bare parse of the same file, measured in the same repeat), then the
   median over repeats. Absolute events/s are medians too, and are only indicative on a shared
   machine; peak RSS is the median over repeats.
4. Evaluates the acceptance thresholds (see ``CHECKS`` below) on whatever tiles were measured and
   prints PASS / FAIL / n/a. ``--check`` makes the exit status 1 when one fails.

``--strip-steps`` tiles without ``ProfilerStep#N`` spans: ``--detector steps`` then finds no
iteration (everything goes to ``outside``), which is still a valid throughput and memory
measurement of reading, ownership and writing, but not of per-iteration bookkeeping.

``--scale`` adds a ~10 M-event tile (``--scale-copies``, default 180 copies of a 56 k-event base)
and a ~100 k-event tile (``--small-copies``, default 2) for the memory-flatness check; they are
run ``--scale-repeat`` times (default 1). Free disk space is checked first.

Before measuring, the bytecode of the ``stream_split`` package is written (``compile_package``),
as a regular ``pip install`` writes it; ``--no-compile`` measures the package as found.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_TILER = REPO.parent / "shared" / "tools" / "tile_trace.py"
DEFAULT_WORK = Path("/tmp/stream-split-bench")
ALL_COMMANDS = ("boundaries", "split", "tag")
REFERENCE = "ijson"

# The bare parse every ratio is taken against (argv[1] = trace path; prints the event count).
IJSON_SCRIPT = r"""
import gzip, sys, ijson
if ijson.backend != "yajl2_c":
    sys.exit("ijson backend is %r, not yajl2_c" % ijson.backend)
path = sys.argv[1]
f = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
n = 0
for _ in ijson.items(f, "traceEvents.item", use_float=True):
    n += 1
print(n)
"""

# Acceptance thresholds from the issues.
RSS_FLAT_40X = 1.3          # each command's peak RSS at 40x <= 1.3 x its peak RSS at 1x
RSS_CAP_40X_MB = 200        # ... and < 200 MB
# Issue 24's targets: events/s as a share of a bare ijson parse's, on the 10x tile and (when
# they were measured: ``--copies 10 40 180``) the 40x and 180x ones. (Issue 10's, met with
# ProfilerStep#N, were 1.0 / 0.8 / 0.8.)
RATIO_TARGETS = {"boundaries": 2.0, "split": 1.5, "tag": 1.5}
RATIO_TILES = (10, 40, 180)
RSS_FLAT_SCALE = 1.3        # at ~10 M events <= 1.3 x the ~100 k-event tile
RSS_CAP_SCALE_MB = 250      # ... and < 250 MB


# -- tiles ---------------------------------------------------------------------------------

def stem_of(path: Path) -> str:
    name = path.name
    for suffix in (".json.gz", ".json", ".gz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def tile_path(work: Path, base: Path, copies: int, strip_steps: bool) -> Path:
    return work / f"{stem_of(base)}-x{copies}{'-nosteps' if strip_steps else ''}.json.gz"


def make_tile(python: str, tiler: Path, base: Path, out: Path, copies: int,
              strip_steps: bool) -> None:
    if out.exists():
        return
    tmp = out.with_name(".partial-" + out.name)  # keeps the .json.gz ending: the tiler gzips
    cmd = [python, str(tiler), str(base), str(tmp), "--copies", str(copies)]
    if strip_steps:
        cmd.append("--strip-steps")
    print(f"tiling {out.name} ({copies} copies) ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    os.replace(tmp, out)
    print(f"  done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


def tile_meta(tile: Path) -> dict:
    """Sizes of a tile (cached next to it): gzip bytes, JSON bytes; events filled in later."""
    meta_path = tile.with_name(tile.name + ".meta.json")
    stat = tile.stat()
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("gz_bytes") == stat.st_size and meta.get("mtime") == stat.st_mtime:
            return meta
    n = 0
    with gzip.open(tile, "rb") as f:
        while True:
            chunk = f.read(1 << 22)
            if not chunk:
                break
            n += len(chunk)
    meta = {"gz_bytes": stat.st_size, "json_bytes": n, "mtime": stat.st_mtime, "events": None}
    meta_path.write_text(json.dumps(meta))
    return meta


def save_meta(tile: Path, meta: dict) -> None:
    tile.with_name(tile.name + ".meta.json").write_text(json.dumps(meta))


def check_disk(work: Path, need_bytes: int) -> None:
    free = shutil.disk_usage(work).free
    print(f"disk: {free / 1e9:.1f} GB free in {work}, about {need_bytes / 1e9:.1f} GB needed",
          file=sys.stderr, flush=True)
    if free < need_bytes:
        sys.exit(f"not enough disk space in {work}: {free / 1e9:.1f} GB free, "
                 f"about {need_bytes / 1e9:.1f} GB needed")


# -- one measured run -------------------------------------------------------------------------

def command_argv(command: str, tile: Path, *, python: str, cli: list, detector: str,
                 out_dir: Path) -> list:
    if command == REFERENCE:
        return [python, "-c", IJSON_SCRIPT, str(tile)]
    argv = cli + [command, str(tile), "--detector", detector]
    if command == "split":
        argv += ["-o", str(out_dir)]
    return argv


GNU_TIME = "/usr/bin/time"


def run_once(argv: list, *, capture: bool) -> dict:
    """Run one child; wall seconds, peak RSS (MiB) of that process, exit status, stdout.

    Peak RSS: Linux folds the memory high-water mark of the process that exec'd the command
    into its ``ru_maxrss``; Python starts children by vfork/fork + exec, so ``os.wait4`` would
    report at least this (Python) process's peak. The command is therefore started through
    ``/usr/bin/time -f %M`` (a small C process, ~1 MB floor), which reports the command's own
    peak; ``os.wait4`` is the fallback where it is missing.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r", suffix=".rss") as rss_file:
        wrapped = ([GNU_TIME, "-f", "%M", "-o", rss_file.name] + argv
                   if os.access(GNU_TIME, os.X_OK) else argv)
        t0 = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdout=out if capture else subprocess.DEVNULL,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # reaps it: rusage of this child alone
        wall = time.perf_counter() - t0
        proc.returncode = rc = os.waitstatus_to_exitcode(status)
        rss_kib = usage.ru_maxrss  # KiB on Linux
        if wrapped is not argv:
            lines = [ln for ln in rss_file.read().split() if ln.strip().isdigit()]
            if lines:
                rss_kib = int(lines[-1])
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    return {"wall_s": wall, "rss_mb": rss_kib / 1024.0,
            "user_s": usage.ru_utime, "sys_s": usage.ru_stime, "rc": rc,
            "stdout": stdout.decode("utf-8", "replace"),
            "stderr": stderr.decode("utf-8", "replace")[-2000:]}


def measure_tile(tile: Path, commands: list, *, repeat: int, warmup: int, python: str,
                 cli: list, detector: str, work: Path) -> dict:
    """All runs of one tile; returns {"runs": {command: [run, ...]}, "events": n, ...}."""
    out_dir = work / f"out-{tile.name.replace('.json.gz', '')}"
    order = [REFERENCE] + list(commands)
    runs = {c: [] for c in order}
    events = None
    for _ in range(warmup):  # page cache, imports
        r = run_once(command_argv(REFERENCE, tile, python=python, cli=cli, detector=detector,
                                  out_dir=out_dir), capture=True)
        if r["rc"] != 0:
            sys.exit(f"bare ijson parse failed on {tile}: {r['stderr']}")
    for rep in range(repeat):
        seq = order if rep % 2 == 0 else order[::-1]  # A B C D, D C B A, ...
        for command in seq:
            if command == "split" and out_dir.exists():
                shutil.rmtree(out_dir)
            argv = command_argv(command, tile, python=python, cli=cli, detector=detector,
                                out_dir=out_dir)
            r = run_once(argv, capture=command == REFERENCE)
            r["repeat"] = rep
            if command == REFERENCE and r["rc"] == 0:
                events = int(r["stdout"].strip())
            if command == "split" and r["rc"] == 0:
                r["manifest"] = split_summary(out_dir)
            r.pop("stdout", None)
            if r["rc"] == 0:
                r.pop("stderr", None)
            runs[command].append(r)
            print(f"  {tile.name} rep {rep} {command:<10} {r['wall_s']:7.2f} s "
                  f"{r['rss_mb']:7.1f} MB rc={r['rc']} cpu {cpu_s(r):.2f} s", file=sys.stderr,
                  flush=True)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    return {"runs": runs, "events": events}


def split_summary(out_dir: Path) -> dict | None:
    try:
        m = json.loads((out_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    kinds = {}
    for it in m.get("iterations", []):
        kinds[it.get("kind")] = kinds.get(it.get("kind"), 0) + 1
    c = m.get("counts", {})
    return {"iterations": kinds, "events_in": c.get("events_in"),
            "events_outside": c.get("events_outside"), "conserved": c.get("conserved"),
            "complete": m.get("complete")}


# -- summary -----------------------------------------------------------------------------------

def summarize_tile(name: str, meta: dict, result: dict) -> dict:
    """Medians per command; ratio = median over repeats of t_ijson / t_command (same repeat)."""
    events = result["events"] or meta.get("events") or 0
    ref = {r["repeat"]: r for r in result["runs"][REFERENCE] if r["rc"] == 0}
    rows = {}
    for command, runs in result["runs"].items():
        ok = [r for r in runs if r["rc"] == 0]
        row = {"runs": len(runs), "failed": len(runs) - len(ok)}
        if ok:
            wall = statistics.median(r["wall_s"] for r in ok)
            row.update(wall_s=wall, events_per_s=events / wall if wall > 0 else None,
                       mb_per_s=meta["json_bytes"] / 1e6 / wall if wall > 0 else None,
                       rss_mb=statistics.median(r["rss_mb"] for r in ok),
                       rss_mb_max=max(r["rss_mb"] for r in ok))
            pairs = [ref[r["repeat"]]["wall_s"] / r["wall_s"] for r in ok
                     if r["repeat"] in ref and r["wall_s"] > 0]
            row["ratio"] = statistics.median(pairs) if pairs else None
            row["ratios"] = pairs
            row.update(_cpu_ratio(ok, ref))
            manifests = [r["manifest"] for r in ok if r.get("manifest")]
            if manifests:
                row["manifest"] = manifests[-1]
        else:
            row["error"] = runs[-1].get("stderr", "") if runs else ""
        rows[command] = row
    return {"tile": name, "copies": meta.get("copies"), "events": events,
            "json_mb": meta["json_bytes"] / 1e6, "gz_mb": meta["gz_bytes"] / 1e6,
            "commands": rows}


def cpu_s(run: dict) -> float | None:
    """User + system CPU seconds of one run (its children's included), None where the run
    did not record them (a progress log of an older version)."""
    if "cpu_s" in run:  # as a progress log gives it
        return run["cpu_s"]
    if "user_s" not in run:
        return None
    return run["user_s"] + run["sys_s"]


def _cpu_ratio(ok: list, ref: dict) -> dict:
    """The CPU time beside the wall time: its median (``cpu_s``) and the median over repeats
    of ``cpu_ijson / cpu_command`` (``cpu_ratio``). On a shared machine the CPU time of a
    process moves less than its wall time (the others' work waits less on it), so this
    compares runs of different days better; the acceptance ratios stay the wall ones, which
    is what a user waits."""
    times = [t for t in map(cpu_s, ok) if t is not None]
    if not times:
        return {}
    pairs = [cpu_s(ref[r["repeat"]]) / cpu_s(r) for r in ok
             if r["repeat"] in ref and cpu_s(ref[r["repeat"]]) and cpu_s(r)]
    return {"cpu_s": statistics.median(times),
            "cpu_ratio": statistics.median(pairs) if pairs else None}


def _get(tiles: dict, copies: int, command: str, key: str):
    t = tiles.get(copies)
    if not t:
        return None
    return t["commands"].get(command, {}).get(key)


def evaluate_checks(tiles: dict, scale: dict | None) -> list:
    """tiles: {copies: summary}; scale: {"small": summary, "large": summary} or None."""
    checks = []

    def add(name, value, limit, ok, detail):
        checks.append({"check": name, "value": value, "limit": limit,
                       "status": "n/a" if ok is None else ("PASS" if ok else "FAIL"),
                       "detail": detail})

    for command in ALL_COMMANDS:
        r1, r40 = _get(tiles, 1, command, "rss_mb"), _get(tiles, 40, command, "rss_mb")
        if r1 and r40:
            add(f"{command} peak RSS 40x / 1x", round(r40 / r1, 3), f"<= {RSS_FLAT_40X}",
                r40 / r1 <= RSS_FLAT_40X, f"{r40:.1f} MB / {r1:.1f} MB")
        else:
            add(f"{command} peak RSS 40x / 1x", None, f"<= {RSS_FLAT_40X}", None,
                "needs 1x and 40x")
        add(f"{command} peak RSS at 40x", round(r40, 1) if r40 else None,
            f"< {RSS_CAP_40X_MB} MB", None if r40 is None else r40 < RSS_CAP_40X_MB, "MB")
    for copies in RATIO_TILES:
        for command, limit in RATIO_TARGETS.items():
            ratio = _get(tiles, copies, command, "ratio")
            if ratio is None and copies != RATIO_TILES[0]:
                continue  # the large tile is optional (minutes to make and to run)
            add(f"{command} events/s vs bare ijson at {copies}x",
                None if ratio is None else round(ratio, 3), f">= {limit}",
                None if ratio is None else ratio >= limit, "median of per-repeat ratios")
    if scale:
        small, large = scale.get("small"), scale.get("large")
        for command in ALL_COMMANDS:
            s = small and small["commands"].get(command, {}).get("rss_mb")
            big = large and large["commands"].get(command, {}).get("rss_mb")
            name = f"{command} peak RSS ~10M / ~100k events"
            if s and big:
                add(name, round(big / s, 3), f"<= {RSS_FLAT_SCALE}", big / s <= RSS_FLAT_SCALE,
                    f"{big:.1f} MB / {s:.1f} MB")
            else:
                add(name, None, f"<= {RSS_FLAT_SCALE}", None, "not measured")
            add(f"{command} peak RSS at ~10M events", round(big, 1) if big else None,
                f"< {RSS_CAP_SCALE_MB} MB", None if not big else big < RSS_CAP_SCALE_MB, "MB")
    return checks


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def print_table(summaries: list, commands: list, out=sys.stdout) -> None:
    head = (f"{'tile':<38} {'events':>10} {'MB json':>8} {'MB gz':>7}  {'command':<10} "
            f"{'wall s':>7} {'events/s':>10} {'MB/s':>6} {'vs ijson':>8} {'peak RSS MB':>11} "
            f"{'cpu s':>7} {'cpu vs':>7}")
    print(head, file=out)
    print("-" * len(head), file=out)
    for s in summaries:
        first = True
        for command in [REFERENCE] + list(commands):
            row = s["commands"].get(command)
            if row is None:
                continue
            lead = (f"{s['tile']:<38} {s['events']:>10} {s['json_mb']:>8.1f} {s['gz_mb']:>7.1f}"
                    if first else " " * 67)
            first = False
            if "wall_s" not in row:
                print(f"{lead}  {command:<10} FAILED: {row.get('error', '')[:60]}", file=out)
                continue
            ratio = "1 (ref)" if command == REFERENCE else fmt(row["ratio"], ".2f") + "x"
            cpu_ratio = "1 (ref)" if command == REFERENCE else \
                fmt(row.get("cpu_ratio"), ".2f") + ("x" if row.get("cpu_ratio") else "")
            print(f"{lead}  {command:<10} {row['wall_s']:>7.2f} {fmt(row['events_per_s'], ',.0f'):>10} "
                  f"{fmt(row['mb_per_s'], '.1f'):>6} {ratio:>8} {row['rss_mb']:>11.1f} "
                  f"{fmt(row.get('cpu_s'), '.2f'):>7} {cpu_ratio:>7}", file=out)
        m = s["commands"].get("split", {}).get("manifest")
        if m:
            print(f"{'':67}  split: iterations {m['iterations'] or 0}, outside "
                  f"{m['events_outside']} events, conserved {m['conserved']}", file=out)


def print_checks(checks: list, out=sys.stdout) -> None:
    print("\nacceptance checks", file=out)
    for c in checks:
        value = "-" if c["value"] is None else c["value"]
        print(f"  [{c['status']:>4}] {c['check']:<44} {value!s:>8}  (limit {c['limit']}; "
              f"{c['detail']})", file=out)


# -- main ----------------------------------------------------------------------------------------

LOG_LINE = re.compile(r"^\s+(\S+) rep (\d+) (\S+)\s+([\d.]+) s\s+([\d.]+) MB rc=(-?\d+)"
                      r"(?: cpu ([\d.]+) s)?$")


def report_from_log(a) -> int:
    """Table and checks from the progress lines of a (possibly interrupted) run."""
    tiles: dict = {}
    for line in a.from_log.read_text().splitlines():
        m = LOG_LINE.match(line)
        if not m:
            continue
        name, rep, command, wall, rss, rc, cpu = m.groups()
        tiles.setdefault(name, {}).setdefault(command, []).append(
            {"repeat": int(rep), "wall_s": float(wall), "rss_mb": float(rss), "rc": int(rc),
             **({} if cpu is None else {"cpu_s": float(cpu)})})
    summaries, by_copies, scale = [], {}, {}
    for name, runs in tiles.items():
        tile = a.work_dir / name
        meta = tile_meta(tile)
        copies = int(re.search(r"-x(\d+)", name).group(1))
        meta["copies"] = copies
        if not meta.get("events"):  # the interrupted run never got to save it
            r = run_once(command_argv(REFERENCE, tile, python=a.python, cli=[], detector="",
                                      out_dir=a.work_dir), capture=True)
            meta["events"] = int(r["stdout"].strip()) if r["rc"] == 0 else None
            save_meta(tile, meta)
        done = {r["repeat"] for r in runs.get(REFERENCE, [])}
        for command in runs:  # a repeat counts only where its reference ran
            runs[command] = [r for r in runs[command] if r["repeat"] in done]
        summary = summarize_tile(name, meta, {"runs": runs, "events": meta.get("events")})
        summaries.append(summary)
        if copies == a.scale_copies:
            scale["large"] = summary
        elif a.scale and copies == a.small_copies:
            scale["small"] = summary
        else:
            by_copies[copies] = summary
    commands = [c for c in ALL_COMMANDS if any(c in t for t in tiles.values())]
    print(f"from {a.from_log}: medians over the repeats listed there; 'vs ijson' = events/s "
          "relative to the bare ijson parse of the same tile in the same repeat")
    print_table(summaries, commands)
    for s in summaries:
        print(f"  {s['tile']}: repeats per command "
              + ", ".join(f"{c} {r['runs']}" for c, r in s["commands"].items()))
    checks = evaluate_checks(by_copies, scale or None)
    print_checks(checks)
    if a.json:
        a.json.write_text(json.dumps({"from_log": str(a.from_log), "summaries": summaries,
                                      "checks": checks}, indent=1))
    return 1 if a.check and any(c["status"] == "FAIL" for c in checks) else 0


def measured_package(python: str) -> Path:
    """The ``stream_split`` folder that ``python`` imports, so that the CLI runs: the tree
    under test (``PYTHONPATH``, an editable install, or an installed copy), which need not
    be the checkout this script lies in."""
    # ``-c`` puts the current folder first on the path, where the CLI's script does not:
    # without it, a run from a checkout would name that checkout whatever ``PYTHONPATH`` says
    where = subprocess.run([python, "-c", "import sys; del sys.path[0]; import os, stream_split; "
                            "print(os.path.dirname(stream_split.__file__))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    return Path(where)


def code_fingerprint(package: Path | None = None) -> dict:
    """Which code is measured: ``package`` (the ``stream_split`` folder run: by default this
    checkout's), its checkout's HEAD and a hash of its sources as they are on disk (an
    editable install runs the working tree, which others may be editing meanwhile); ``tree``
    names the folder, ``head`` is None outside a git checkout."""
    import hashlib
    package = Path(package) if package is not None else REPO / "stream_split"
    tree = package.parent
    h = hashlib.sha1()
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes())
    head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--",
                            package.name], capture_output=True, text=True).stdout.split("\n")
    return {"tree": str(tree), "head": head or None, "sources_sha1": h.hexdigest()[:12],
            "modified": sorted(line[3:] for line in dirty if line.strip())}


def default_cli(python: str) -> list:
    beside = Path(python).parent / "stream-split"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("stream-split")
    return [found] if found else [python, "-m", "stream_split.cli"]


def compile_package(python: str) -> str:
    """Write the bytecode of the ``stream_split`` that ``python`` imports, as ``pip install``
    does for a regular install (and for ijson, the reference). An editable install compiles
    its modules at the first import, unless ``PYTHONDONTWRITEBYTECODE`` is set: then every run
    compiles them again (about 60 ms on these machines), which no installed copy does."""
    where = measured_package(python)
    subprocess.run([python, "-m", "compileall", "-q", str(where)], check=True,
                   stdout=subprocess.DEVNULL)
    return f"compiled ({where})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, required=True, help="trace to tile (.json or .json.gz)")
    ap.add_argument("--copies", type=int, nargs="+", default=[1, 10, 40])
    ap.add_argument("--strip-steps", action="store_true",
                    help="tile without ProfilerStep#N (steps detector then finds 0 iterations)")
    ap.add_argument("--commands", nargs="+", choices=ALL_COMMANDS, default=list(ALL_COMMANDS))
    ap.add_argument("--detector", default="steps", choices=("steps", "auto", "structure"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="untimed bare parses per tile")
    ap.add_argument("--scale", action="store_true",
                    help="also a ~10M-event and a ~100k-event tile (memory flatness)")
    ap.add_argument("--scale-copies", type=int, default=180)
    ap.add_argument("--small-copies", type=int, default=2)
    ap.add_argument("--scale-repeat", type=int, default=1)
    ap.add_argument("--only-scale", action="store_true", help="skip the --copies tiles")
    ap.add_argument("--work-dir", type=Path, default=DEFAULT_WORK)
    ap.add_argument("--tiler", type=Path, default=DEFAULT_TILER)
    ap.add_argument("--python", default=sys.executable, help="interpreter for the bare parse")
    ap.add_argument("--cli", default=None, help="stream-split executable (default: beside --python)")
    ap.add_argument("--json", type=Path, help="write all runs, summaries and checks here")
    ap.add_argument("--no-compile", action="store_true",
                    help="do not write stream_split's bytecode before measuring (see "
                         "``compile_package``)")
    ap.add_argument("--check", action="store_true", help="exit 1 when an acceptance check fails")
    ap.add_argument("--from-log", type=Path,
                    help="rebuild the table and checks from the progress lines (stderr) of a "
                         "run that was interrupted; measures nothing")
    a = ap.parse_args(argv)
    if a.from_log:
        return report_from_log(a)

    a.work_dir.mkdir(parents=True, exist_ok=True)
    cli = [a.cli] if a.cli else default_cli(a.python)
    backend = subprocess.run([a.python, "-c", "import ijson; print(ijson.backend)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    if backend != "yajl2_c":
        sys.exit(f"ijson backend is {backend!r}; the reference must be yajl2_c")

    plan = [] if a.only_scale else [(c, "main") for c in a.copies]
    if a.scale:
        plan += [(a.small_copies, "small"), (a.scale_copies, "large")]
        # Disk: the gzip tile, plus split's spool + pieces (about the JSON size again).
        one = tile_path(a.work_dir, a.base, 1, a.strip_steps)
        make_tile(a.python, a.tiler, a.base, one, 1, a.strip_steps)
        m1 = tile_meta(one)
        need = 0 if tile_path(a.work_dir, a.base, a.scale_copies, a.strip_steps).exists() \
            else m1["gz_bytes"] * a.scale_copies
        if "split" in a.commands:
            need += int(m1["json_bytes"] * a.scale_copies * 1.3)
        check_disk(a.work_dir, need)

    bytecode = "as found" if a.no_compile else compile_package(a.python)
    package = measured_package(a.python)
    env = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "ijson_backend": backend,
           "bytecode": bytecode, "cli": cli, "detector": a.detector, "repeat": a.repeat, "base": str(a.base),
           "strip_steps": a.strip_steps, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
           "code": code_fingerprint(package)}
    print(f"# {env}", file=sys.stderr, flush=True)

    summaries, by_copies, scale = [], {}, {}
    raw = {}
    for copies, role in plan:
        tile = tile_path(a.work_dir, a.base, copies, a.strip_steps)
        make_tile(a.python, a.tiler, a.base, tile, copies, a.strip_steps)
        meta = tile_meta(tile)
        meta["copies"] = copies
        repeat = a.repeat if role == "main" else a.scale_repeat
        result = measure_tile(tile, a.commands, repeat=repeat, warmup=a.warmup,
                              python=a.python, cli=cli, detector=a.detector, work=a.work_dir)
        if result["events"] is not None:
            meta["events"] = result["events"]
            save_meta(tile, meta)
        summary = summarize_tile(tile.name, meta, result)
        summary["role"] = role
        summaries.append(summary)
        raw[f"{tile.name}:{role}"] = result["runs"]
        if role == "main":
            by_copies[copies] = summary
        else:
            scale[role] = summary
        if a.json:  # after every tile, so that an interrupted run keeps what it measured
            a.json.write_text(json.dumps({"env": env, "summaries": summaries, "partial": True,
                                          "runs": raw}, indent=1))

    print(f"\n{a.detector} detector, median of {a.repeat} repeats (scale tiles: "
          f"{a.scale_repeat}); 'vs ijson' = events/s relative to the bare ijson parse of the "
          "same tile in the same repeat; peak RSS = whole process")
    if a.strip_steps and a.detector == "steps":
        print("tiles have no ProfilerStep#N: the steps detector finds no iteration and the "
              "commands end with status 2; use --detector auto to measure the stripped tiles")
    print_table(summaries, a.commands)
    code_end = code_fingerprint(package)
    env["code_at_end"] = code_end
    print(f"code: {env['code']['tree']} at HEAD {env['code']['head']}, sources "
          f"{env['code']['sources_sha1']}"
          + (f", modified: {' '.join(env['code']['modified'])}" if env["code"]["modified"] else ""))
    if code_end["sources_sha1"] != env["code"]["sources_sha1"]:
        print(f"WARNING: stream_split sources changed during the run ({env['code']['sources_sha1']}"
              f" -> {code_end['sources_sha1']}): the runs measured different code")
    checks = evaluate_checks(by_copies, scale or None)
    print_checks(checks)
    if a.json:
        a.json.write_text(json.dumps({"env": env, "summaries": summaries, "checks": checks,
                                      "runs": raw}, indent=1))
        print(f"\nwrote {a.json}")
    if a.check and any(c["status"] == "FAIL" for c in checks):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
