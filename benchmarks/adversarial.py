"""The attack suite, big: each adversarial input of issue 22 under the CLI, with time and memory.

For each case of ``stream_split.testing.attacks.ATTACKS`` (or those named), writes the input
in a temporary folder, runs ``stream-split split INPUT -o DIR`` as a child with a timeout
(through ``/usr/bin/time``, as ``bench.py`` does, for the child's own peak RSS), and prints a
table: case, events, exit status, a one-line outcome (the last line the command printed, or
"timed out"), peak RSS in MB, wall and CPU seconds, CPU microseconds per event beyond the
start-up (the CPU time of a split of one event, measured first) and that against the 10x
resnet tile's, computed alike (``--reference-us``, or measured on ``--reference TILE``).

The tile is split again before each case and after the last, and each case is judged against
the mean of the tile's two runs beside it: on a shared VM our commands run up to 60 % slower
for minutes at a time (benchmarks/README.md), so a tile measured once at the start can be off
by that much for a case run ten minutes later. With ``--repeat N`` each case is split N times
from the same input, each run judged against the tile's runs beside it, and the row is the run
of the median ratio, with the lowest and highest ratio beside it (``vs_tile_runs``): a single
run of a case of two seconds moved by a quarter between two runs of the same code.

    python benchmarks/adversarial.py                       # every case, big (~1 h, ~3 GB disk)
    python benchmarks/adversarial.py random_names metadata --timeout 300
    python benchmarks/adversarial.py --small               # the sizes the tests use
    python benchmarks/adversarial.py --scale 0.1           # a tenth of each big size
    python benchmarks/adversarial.py one_op_iterations --repeat 3   # the median of 3 runs

See benchmarks/README.md ("Adversarial inputs").
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import ijson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from stream_split.testing.attacks import ATTACKS, BY_NAME, one_op_iterations  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench", HERE / "bench.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

#: The acceptance of issue 22: peak RSS at most this ...
RSS_LIMIT_MB = 200
#: ... and CPU time per event within this many times the 10x resnet tile's.
TIME_RATIO_LIMIT = 3.0
DEFAULT_TILE = bench.DEFAULT_WORK / "resnet_act_checkpoint-x10-nosteps.json.gz"
#: Below this many files written, the file-creation floor is not measured (it is noise).
FLOOR_MIN_FILES = 1000
#: A case whose CPU time beyond the start-up is below this is not judged against the tile:
#: the start-up's own spread (some 20 ms) would be too much of it.
MIN_JUDGED_CPU_S = 0.5


def run_case(attack, size: int, work: Path, cli: list, timeout: float,
             startup_s: float = 0.0, judge=None, repeat: int = 1) -> dict:
    """Write the input of ``attack`` at ``size``, split it ``repeat`` times, and measure the
    runs; its folder is removed after (with what a run killed at the timeout left: its
    staging folder). ``judge(row)``, called after each run, sets the run's ``reference_us``
    and ``vs_tile`` (``main``: against the tile's runs beside it); the row returned is the
    run of the median ratio (``median_run``), the floor measured after the last run."""
    work = work / attack.name
    work.mkdir()
    try:
        path = work / (attack.name + attack.suffix)
        events = attack.make(str(path), size)
        runs = []
        for k in range(repeat):
            if k:  # the previous run's output: a split refuses a folder that exists
                shutil.rmtree(work / (attack.name + ".out"), ignore_errors=True)
            row = _measure(attack, size, path, events, work, cli, timeout)
            row["net_us_per_event"] = net_us(row["cpu_s"], startup_s, row["events"])
            if judge is not None:
                judge(row)
            runs.append(row)
        row = median_run(runs)
        row["floor_us_per_event"] = floor_us(work, row)
        row["floor_c_us_per_event"] = floor_c_us(work, row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return row


def median_run(runs: list) -> dict:
    """Of one case's runs, the run whose ratio to the tile is the median (the lower middle of
    an even count; by time per event where none was judged), with every run's ratio in
    ``vs_tile_runs`` (empty where none was judged)."""
    ratios = [r.get("vs_tile") for r in runs]
    judged = all(ratio is not None for ratio in ratios)
    key = (lambda r: r["vs_tile"]) if judged else (lambda r: r["net_us_per_event"])
    ranked = sorted(runs, key=key)
    row = dict(ranked[(len(ranked) - 1) // 2])
    row["runs"] = len(runs)
    row["vs_tile_runs"] = sorted(ratios) if judged else []
    return row


def floor_us(work: Path, row: dict) -> float:
    """CPU microseconds per event that creating the files the run wrote costs by itself, on
    this file system as the run left it: as many new files of the same mean size, written
    one ``os.open`` / ``os.write`` / ``os.close`` each into one fresh folder (what the writer
    does per piece, nothing else), by a child process (its own CPU time, as the run's), while
    the run's output is still there (deleting a million files first makes the next million
    slower to create). A run of 1 M one-op iterations writes 1 M pieces (the output contract:
    one file per iteration), so this much of its time is the file system's whatever the
    splitter does. 0 below ``FLOOR_MIN_FILES`` files. Sets ``row["files"]``."""
    written = _written(work, row)
    if written is None:
        return 0.0
    return _floor([sys.executable, "-c", _FLOOR_CHILD], written, work / "floor", row)


def floor_c_us(work: Path, row: dict) -> float:
    """``floor_us`` with the files created by a C program (``CREATE_FILES_SOURCE``, compiled
    with ``cc``), not by Python: the kernel's work per file alone, with no interpreter around
    it (the project's writer creates tiny pieces in C too: ``_native.small_pieces``). On
    ``/dev/shm`` it was 5.9-6.4 us a file against 10.3 from Python (session 42). 0 below
    ``FLOOR_MIN_FILES`` files or without a C compiler."""
    written = _written(work, row)
    program = _create_files_program()
    if written is None or program is None:
        return 0.0
    # ``floor_us``'s files go first: a tmpfs has inodes for some 3 M files (half its pages),
    # and a run of 1 M one-op iterations, its floor and this would take as many
    shutil.rmtree(work / "floor", ignore_errors=True)
    try:
        return _floor([program], written, work / "floor-c", row)
    except subprocess.CalledProcessError as e:
        print(f"no C floor: {e.stderr.strip()[-200:]}", file=sys.stderr)
        return 0.0


def _written(work: Path, row: dict):
    """``(count, mean size)`` of the files the run of ``row`` wrote (its manifest aside), None
    below ``FLOOR_MIN_FILES``."""
    out = work / (row["case"] + ".out")
    count = total = 0
    if out.is_dir():
        with os.scandir(out) as entries:
            for entry in entries:
                if entry.name != "manifest.json":
                    count += 1
                    total += entry.stat().st_size
    row["files"] = count
    return (count, total // count) if count >= FLOOR_MIN_FILES else None


def _floor(child: list, written: tuple, folder: Path, row: dict) -> float:
    """CPU microseconds per event of ``row`` that ``child COUNT SIZE FOLDER`` reports."""
    count, size = written
    run = subprocess.run(child + [str(count), str(size), str(folder)], capture_output=True,
                         text=True, check=True)
    return 1e6 * float(run.stdout) / max(row["events"], 1)


#: The C child of ``floor_c_us``.
CREATE_FILES_SOURCE = HERE / "probes" / "create_files.c"
_program: list = []  # [the compiled program, or None without a compiler], once a process


def _create_files_program():
    """``CREATE_FILES_SOURCE`` compiled with ``cc -O2`` into a temporary folder (once a
    process), or None where it cannot be."""
    if not _program:
        out = Path(tempfile.mkdtemp(prefix="create-files-")) / "create_files"
        try:
            subprocess.run(["cc", "-O2", "-o", str(out), str(CREATE_FILES_SOURCE)],
                           check=True, capture_output=True)
            _program.append(str(out))
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"no C floor (cc: {e})", file=sys.stderr)
            _program.append(None)
    return _program[0]


#: The child of ``floor_us``: creates argv[1] files of argv[2] bytes in the new folder
#: argv[3], prints its CPU seconds (user and system) for that alone.
_FLOOR_CHILD = """
import os, resource, sys
count, size, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
os.mkdir(folder)
data, flags = bytes(size), os.O_WRONLY | os.O_CREAT | os.O_EXCL
before = resource.getrusage(resource.RUSAGE_SELF)
for i in range(count):
    fd = os.open(os.path.join(folder, "iteration_%05d.json.gz" % i), flags, 0o644)
    os.write(fd, data)
    os.close(fd)
after = resource.getrusage(resource.RUSAGE_SELF)
print(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
"""


def _measure(attack, size: int, path: Path, events: int, work: Path, cli: list,
             timeout: float) -> dict:
    out = work / (attack.name + ".out")
    argv = ["timeout", "-s", "KILL", str(int(timeout))] + cli + ["split", str(path), "-o", str(out)]
    run = bench.run_once(argv, capture=True)
    text = (run["stderr"].strip() or run["stdout"].strip()).splitlines()
    outcome = "timed out" if run["rc"] in (124, 137, -9) else (text[-1] if text else "")
    outcome = outcome.split(" -> ")[0]  # not the temporary folder's name
    conserved = None
    manifest = out / "manifest.json"
    if manifest.exists():
        with open(manifest, "rb") as f:  # read up to it: the manifest of 1 M iterations is GBs
            conserved = next(ijson.items(f, "counts.conserved"), None)
    cpu = run["user_s"] + run["sys_s"]
    return {"case": attack.name, "size": size, "events": events, "rc": run["rc"],
            "outcome": outcome[:70], "conserved": conserved, "rss_mb": run["rss_mb"],
            "wall_s": run["wall_s"], "cpu_s": cpu, "us_per_event": 1e6 * cpu / max(events, 1)}


def startup_cpu_s(cli: list, work: Path) -> float:
    """CPU seconds of ``split`` on a trace of one event: the start-up every run pays (imports),
    taken off each case's time before it is divided by its events (a case of 2,000 events
    would otherwise be judged on its start-up)."""
    path = work / "one_event.json"
    one_op_iterations(str(path), 1)
    run = bench.run_once(cli + ["split", str(path), "-o", str(work / "one_event.out")],
                         capture=True)
    shutil.rmtree(work / "one_event.out", ignore_errors=True)
    path.unlink()
    return run["user_s"] + run["sys_s"]


def net_us(cpu_s: float, startup_s: float, events: int) -> float:
    """CPU microseconds per event beyond the start-up."""
    return 1e6 * max(cpu_s - startup_s, 0.0) / max(events, 1)


def reference_us(tile: Path, cli: list, work: Path, startup_s: float) -> float | None:
    """CPU microseconds per event of ``split`` on the 10x resnet tile, or None without it."""
    if not tile.exists():
        return None
    meta = bench.tile_meta(tile)
    run = bench.run_once(cli + ["split", str(tile), "-o", str(work / "reference.out")],
                         capture=True)
    shutil.rmtree(work / "reference.out", ignore_errors=True)
    if run["rc"] != 0:
        print(f"the reference run failed (rc {run['rc']}): {run['stderr'][-300:]}",
              file=sys.stderr)
        return None
    events = meta.get("events") or 563_874
    return net_us(run["user_s"] + run["sys_s"], startup_s, events)


def print_table(rows: list, startup_s: float, out=None) -> None:
    """The table of cases, on ``out`` (standard output when None); each row is judged against
    its own ``reference_us`` (the tile's time per event beside it)."""
    out = out or sys.stdout
    repeated = any(len(r.get("vs_tile_runs", ())) > 1 for r in rows)
    head = (f"{'case':<18} {'events':>9} {'rc':>4}  {'outcome':<52} {'RSS MB':>7} "
            f"{'wall s':>7} {'cpu s':>7} {'us/ev':>8} {'tile':>5} {'vs tile':>7} "
            + (f"{'runs':>11} " if repeated else "")
            + f"{'floor':>6} {'beyond':>6} {'floorC':>6} {'beyondC':>7}")
    print(head, file=out)
    for r in rows:
        ref = r.get("reference_us")
        timed_out = r["outcome"] == "timed out"
        # a bomb's time is its bytes', not its two events'; a short case's is its start-up's
        judged = ref and r["events"] > 2 and not timed_out and \
            r["net_us_per_event"] * r["events"] >= 1e6 * MIN_JUDGED_CPU_S
        floor = r.get("floor_us_per_event") or 0.0
        floor_c = r.get("floor_c_us_per_event") or 0.0
        ratio = f"{r['vs_tile']:7.2f}" if judged else "      -"
        spread = r.get("vs_tile_runs") or ()
        if repeated:  # the lowest and highest ratio of the case's runs
            ratio += f" {spread[0]:5.2f}-{spread[-1]:<5.2f}" if judged and len(spread) > 1 \
                else f" {'-':>11}"
        beyond = _net_ratio(r, floor, ref, 6) if judged and floor else "     -"
        beyond_c = _net_ratio(r, floor_c, ref, 7) if judged and floor_c else "      -"
        rss, cpu = ("      -", "      -") if timed_out else \
            (f"{r['rss_mb']:7.0f}", f"{r['cpu_s']:7.1f}")
        print(f"{r['case']:<18} {r['events']:>9} {r['rc']:>4}  {r['outcome'][:52]:<52} "
              f"{rss} {r['wall_s']:7.1f} {cpu} "
              f"{r['net_us_per_event']:8.1f} " + (f"{ref:5.1f}" if ref else "    -")
              + f" {ratio} "
              + (f"{floor:6.1f}" if floor else "     -") + f" {beyond} "
              + (f"{floor_c:6.1f}" if floor_c else "     -") + f" {beyond_c}", file=out)
    print(f"(us/ev: CPU microseconds per event beyond the start-up of {startup_s:.2f} s; "
          "tile: the 10x resnet tile's, the mean of its runs before and after the case; "
          + ("runs: the lowest and highest ratio of the case's runs, the row being the run "
             "of the median; " if repeated else "") +
          f"the bounds: RSS <= {RSS_LIMIT_MB} MB, <= {TIME_RATIO_LIMIT:g}x the tile's "
          f"time per event, judged where the case takes {MIN_JUDGED_CPU_S:g} s beyond the "
          f"start-up; floor: us/ev of creating as many files of the same size alone "
          f"(from {FLOOR_MIN_FILES} files), beyond: the ratio net of it; floorC: the same "
          f"files created by a C program, the kernel's share alone (as the writer creates tiny "
          f"pieces in C), beyondC: the ratio net of that, the splitter's own share)", file=out)


def _net_ratio(row: dict, floor_us: float, reference: float, width: int) -> str:
    """The case's CPU time per event net of ``floor_us``, against the tile's."""
    return f"{(row['net_us_per_event'] - floor_us) / reference:{width}.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help=f"cases to run (default all: {', '.join(BY_NAME)})")
    ap.add_argument("--small", action="store_true", help="the sizes the tests use")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply the big sizes by this (0.1: a tenth of each)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per case (default 600)")
    ap.add_argument("--reference", type=Path, default=DEFAULT_TILE,
                    help="the 10x resnet tile (made by bench.py); skipped when absent")
    ap.add_argument("--reference-us", type=float, default=None,
                    help="CPU us/event of the tile beyond the start-up, instead of measuring it")
    ap.add_argument("--work-dir", type=Path, default=None, help="where inputs are written")
    ap.add_argument("--json", type=Path, default=None, help="write the rows as JSON")
    ap.add_argument("--repeat", type=int, default=1,
                    help="split each case this many times; its row is the run of the median "
                         "ratio to the tile, the range of ratios beside it (default 1)")
    a = ap.parse_args(argv)
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    unknown = [c for c in a.cases if c not in BY_NAME]
    if unknown:
        ap.error(f"unknown case(s): {', '.join(unknown)}")
    attacks = [BY_NAME[c] for c in a.cases] if a.cases else list(ATTACKS)
    cli = bench.default_cli(sys.executable)
    with tempfile.TemporaryDirectory(prefix="stream-split-attacks-", dir=a.work_dir) as tmp:
        work = Path(tmp)
        startup = startup_cpu_s(cli, work)

        def reference() -> float | None:
            return a.reference_us or reference_us(a.reference, cli, work, startup)

        rows, tile = [], [reference()]  # the tile's latest run

        def judge(row: dict) -> None:  # a run against the tile's runs before and after it
            before, tile[0] = tile[0], reference()
            row["reference_us"] = beside(before, tile[0])
            row["vs_tile"] = row["net_us_per_event"] / row["reference_us"] \
                if row["reference_us"] else None  # (judged or not: ``print_table``)

        for attack in attacks:
            size = attack.small if a.small else attack.big if not attack.scales else \
                max(attack.small, int(attack.big * a.scale))
            row = run_case(attack, size, work, cli, a.timeout, startup, judge, a.repeat)
            rows.append(row)
            print(f"  {row['case']}: rc {row['rc']}, {row['wall_s']:.1f} s"
                  + (f", ratios {', '.join(f'{v:.2f}' for v in row['vs_tile_runs'])}"
                     if a.repeat > 1 and row["vs_tile_runs"] else ""),
                  file=sys.stderr, flush=True)
    print_table(rows, startup)
    if a.json:
        a.json.write_text(json.dumps({"startup_s": startup, "rows": rows}, indent=1))
    return 0


def beside(before: float | None, after: float | None) -> float | None:
    """The tile's time per event to judge a case by: the mean of its runs just before and
    just after the case (the one there is, if the other failed)."""
    runs = [r for r in (before, after) if r]
    return sum(runs) / len(runs) if runs else None


if __name__ == "__main__":
    sys.exit(main())
