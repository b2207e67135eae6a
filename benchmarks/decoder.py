#!/usr/bin/env python3
"""The trace decoder alone against a bare ijson parse of the same file, in one process.

    python benchmarks/decoder.py TRACE.json.gz [--repeat 5] [--modes ijson slim raws full]
                                               [--profile slim] [--json out.json]

Issue 24 asks the decoder alone to run at 3x a bare ``ijson.items(f, "traceEvents.item",
use_float=True)`` parse (backend yajl2_c), which ``benchmarks/bench.py`` times as a whole
process. Here each mode reads the whole file in this one process, the modes alternating within
each repeat (ijson, slim, raws, then raws, slim, ijson, ...) so that drift of the machine's
load falls on all of them alike; the ratio of a mode is ``t_ijson / t_mode`` within one repeat
(events/s over ijson's), and the median over the repeats is printed with its range. Times are
CPU seconds of this process (``time.process_time``: the shared machine's other work counts
less than in wall time), the wall seconds beside them.

Modes (the decoder as ``run.drive`` reads it, through ``read.TraceReader.batches``):

- ``ijson``: the reference, every event a dict of every field;
- ``slim``: ``batches(raws=False, slim=True)``: what ``boundaries`` reads (the fields the
  engine reads, runs of Python frames in bulk, no original bytes);
- ``raws``: ``batches(raws=True, slim=True)``: what ``split`` and ``tag`` read (the same
  with each event's original bytes);
- ``full``: ``batches()``: every field of every event, with raws (the library's reader);
- ``native``: not the project's decoder but a probe (``benchmarks/probes/native_columns.c``,
  compiled here with ``cc``): the file inflated a piece at a time as the decoder does, each
  piece's events put by one native pass into numpy columns of the fields a columnar engine
  reads, trusting the input as Kineto writes it (no validation, no raws). A lower bound of what a native decoder giving
  columns would cost (README "What limits the speed").

As ``run.drive`` reads a file, the batches are regrouped in parts of ``run.FEED_EVENTS``
(``run._parts``) and the garbage collector runs only on the young generations every few parts
(``run.young_collections_only``, ``run.collect_young``); the engine itself is not run.

Each mode counts the events it saw; a count that differs from ijson's is an error.
``--profile MODE``: after the timing, one more pass of that mode under cProfile, the top
functions by own time printed.
"""
from __future__ import annotations

import argparse
import cProfile
import gzip
import json
import pstats
import ctypes
import statistics
import subprocess
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

import ijson
import numpy as np

from stream_split.decode import Decompressor
from stream_split.read import TraceReader
from stream_split.run import _parts, collect_young, young_collections_only

MODES = ("ijson", "slim", "raws", "full", "native")
REFERENCE = "ijson"


def count_ijson(path: str) -> int:
    """Events of a bare ijson parse (the reference of bench.py)."""
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        return sum(1 for _ in ijson.items(f, "traceEvents.item", use_float=True))


def count_decoder(path: str, mode: str) -> int:
    """Events of the decoder's batches read as ``mode`` (see the module docstring)."""
    kwargs = {"slim": {"raws": False, "slim": True}, "raws": {"raws": True, "slim": True},
              "full": {}}[mode]
    n = 0
    with TraceReader(path) as reader, young_collections_only():
        for fed, batch in enumerate(_parts(reader.batches(**kwargs)), 1):
            n += len(batch.events)
            collect_young(fed)
    return n


#: The native probe's source, and the columns it fills (name, dtype), in its arguments' order.
NATIVE_SOURCE = Path(__file__).resolve().parent / "probes" / "native_columns.c"
NATIVE_COLUMNS = (("starts", np.int64), ("ends", np.int64), ("ph", np.int8), ("cat", np.int8),
                  ("name_at", np.int64), ("name_len", np.int32), ("ts", np.float64),
                  ("dur", np.float64), ("pid", np.int64), ("tid", np.int64),
                  ("correlation", np.int64), ("external_id", np.int64))


@cache
def native_scan():
    """The probe's ``scan`` (``NATIVE_SOURCE`` compiled with ``cc -O2`` into a temporary
    folder, once a process); exits when there is no compiler."""
    out = Path(tempfile.mkdtemp(prefix="native-probe-")) / "native_columns.so"
    try:
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(out), str(NATIVE_SOURCE)],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"--modes native needs a C compiler (cc): {e}")
    scan = ctypes.CDLL(str(out)).scan
    scan.restype = ctypes.c_long
    scan.argtypes = [ctypes.c_char_p, ctypes.c_long, ctypes.c_int, ctypes.c_long] + \
        [ctypes.c_void_p] * len(NATIVE_COLUMNS)
    return scan


#: Rows of each column the probe fills per piece of inflated text (a piece is about 1 MB).
NATIVE_ROWS = 1 << 17


def native_pieces(path: str):
    """The probe's columns of ``path``, a piece at a time: ``{name: column}`` of the events of
    each piece (views of the same arrays, overwritten by the next piece). The file is inflated
    a piece at a time as the decoder does (``decode.Decompressor``), and each piece's whole
    events scanned (a piece is cut after its last ``},`` and line break, as Kineto ends an
    event; the rest is carried to the next)."""
    scan = native_scan()
    columns = {name: np.empty(NATIVE_ROWS, kind) for name, kind in NATIVE_COLUMNS}
    pointers = [c.ctypes.data for c in columns.values()]
    decompressor, carry, inside = Decompressor(), b"", 0

    def scanned(text: bytes) -> dict:
        n = scan(text, len(text), inside, NATIVE_ROWS, *pointers)
        if n < 0:
            sys.exit(f"the native probe cannot read {path} (status {n})")
        return {name: column[:n] for name, column in columns.items()}

    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            for piece in decompressor.pieces(block):
                text = carry + piece
                cut = text.rfind(b"},\n")
                if cut < 0 or not inside and b'"traceEvents"' not in text[:cut]:
                    carry = text
                    continue
                yield scanned(text[:cut + 1])
                carry, inside = text[cut + 1:], 1
    yield scanned(carry + decompressor.finish())


def count_native(path: str) -> int:
    return sum(len(piece["ts"]) for piece in native_pieces(path))


def run_mode(path: str, mode: str) -> dict:
    count = {REFERENCE: count_ijson, "native": count_native}.get(
        mode, lambda p: count_decoder(p, mode))
    wall, cpu = time.perf_counter(), time.process_time()
    events = count(path)
    return {"mode": mode, "events": events, "cpu_s": time.process_time() - cpu,
            "wall_s": time.perf_counter() - wall}


def measure(path: str, modes: list, repeat: int) -> list:
    """Every repeat's runs, the order of the modes reversed every other repeat."""
    repeats = []
    for r in range(repeat):
        order = modes if r % 2 == 0 else modes[::-1]
        runs = {mode: run_mode(path, mode) for mode in order}
        repeats.append(runs)
        line = "  ".join(f"{m} {runs[m]['cpu_s']:.2f}s" for m in modes)
        print(f"repeat {r + 1}: {line}", file=sys.stderr)
    return repeats


def summarize(repeats: list, modes: list) -> dict:
    events = repeats[0][REFERENCE]["events"]
    summary = {}
    for mode in modes:
        for runs in repeats:
            if runs[mode]["events"] != events:
                sys.exit(f"{mode} saw {runs[mode]['events']} events, ijson {events}")
        ratios = [runs[REFERENCE]["cpu_s"] / runs[mode]["cpu_s"] for runs in repeats]
        summary[mode] = {
            "cpu_s": statistics.median(runs[mode]["cpu_s"] for runs in repeats),
            "wall_s": statistics.median(runs[mode]["wall_s"] for runs in repeats),
            "ratio": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios)}
    return {"events": events, "modes": summary}


def print_summary(summary: dict, out=None) -> None:
    out = out or sys.stdout
    print(f"{summary['events']} events; medians over the repeats; 'vs ijson' = CPU time of "
          "the bare ijson parse / the mode's, same repeat", file=out)
    print(f"{'mode':<6} {'cpu s':>7} {'wall s':>7} {'vs ijson':>9}  range", file=out)
    for mode, row in summary["modes"].items():
        print(f"{mode:<6} {row['cpu_s']:>7.3f} {row['wall_s']:>7.3f} {row['ratio']:>9.2f}  "
              f"{row['ratio_min']:.2f}-{row['ratio_max']:.2f}", file=out)


def profile(path: str, mode: str, top: int = 25) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    run_mode(path, mode)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--modes", nargs="+", choices=MODES, default=["ijson", "slim", "raws"])
    p.add_argument("--profile", choices=MODES[1:])
    p.add_argument("--json", help="write the runs and the summary here")
    a = p.parse_args(argv)
    if ijson.backend != "yajl2_c":
        sys.exit(f"ijson backend is {ijson.backend!r}, not yajl2_c")
    modes = [REFERENCE] + [m for m in a.modes if m != REFERENCE]
    run_mode(a.trace, REFERENCE)  # warm-up: imports, the file in the page cache
    repeats = measure(a.trace, modes, a.repeat)
    summary = summarize(repeats, modes)
    print_summary(summary)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"trace": a.trace, "repeats": repeats, **summary}, f, indent=1)
    if a.profile:
        profile(a.trace, a.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
