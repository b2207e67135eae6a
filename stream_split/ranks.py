"""Several ranks of one job at once: each rank's trace split into ``OUT/rank_<r>/``, and
iteration k lined up across the ranks in ``OUT/ranks.json`` (the straggler view).

- ``split_ranks``: splits the traces in parallel processes (up to the core count), one trace
  per process, each into a folder of its own, then names the folders by rank and writes
  ``ranks.json``. The rank is the header's ``distributedInfo.rank``, else the number after
  ``rank`` in the file name (``rank3.json.gz``, ``trace_rank_3...``); two traces of one rank,
  or a trace with neither, are an error.
- ``align_ranks`` (pure): iteration k of every rank, aligned by ``ProfilerStep`` number when
  every rank's iterations have one, else by position (with ``counts_agree`` saying whether the
  ranks have as many iterations each). Idle cycles are not aligned. Per iteration: each rank's
  duration, the slowest and fastest rank, the spread (slowest - fastest, and slowest /
  fastest), and ``straggler``: the slowest rank when it took at least ``STRAGGLER_RATIO``
  times the median of the other ranks.
- ``ranks_table``: the rows ``stream-split summary OUT`` prints for a multi-rank folder.
"""
from __future__ import annotations

import multiprocessing
import os
import re
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace

from rich.table import Table

from stream_split.config import SplitConfig
from stream_split.errors import RanksError
from stream_split.folder import split_to_folder
from stream_split.output import create_new
from stream_split.run import StopRequest
from stream_split.stats import quantile
from stream_split.serialize import strict_json
from stream_split.summary import (
    NUMBER, check_fields, load_checked, load_manifest, table_console)

RANKS_FILE = "ranks.json"
RANKS_FORMAT = "stream-split/ranks"
RANKS_VERSION = 1
#: The slowest rank of an iteration is a straggler when it took at least this many times the
#: median of the other ranks (a 20 % slower rank holds the whole job back by as much).
STRAGGLER_RATIO = 1.2
#: File names a folder of traces is searched for (not recursively).
TRACE_SUFFIXES = (".json", ".json.gz", ".zst", ".jsonl", ".jsonl.gz")

_RANK_IN_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)


def rank_folder(rank: int) -> str:
    return f"rank_{rank}"


def rank_from_name(path: str) -> int | None:
    """The rank a file name gives (``rank0.json.gz``, ``trace_rank_3.pt.trace.json``)."""
    found = _RANK_IN_NAME.findall(os.path.basename(path))
    return int(found[-1]) if found else None


def rank_from_header(header: dict) -> int | None:
    info = header.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


def expand_traces(paths: list[str]) -> list[str]:
    """The trace files named, a folder standing for the trace files directly inside it."""
    out = []
    for path in paths:
        if os.path.isdir(path):
            out += sorted(os.path.join(path, name) for name in os.listdir(path)
                          if name.endswith(TRACE_SUFFIXES)
                          and os.path.isfile(os.path.join(path, name)))
        else:
            out.append(path)
    return out


@dataclass(frozen=True, slots=True)
class _Job:
    source: str
    out_dir: str
    config: SplitConfig


class _WorkerStop(StopRequest):
    """A rank worker's stop: its own signals (``run.STOP_SIGNALS``), or its parent's stop
    request, a shared byte (a ``kill`` of the parent alone reaches every rank). A byte with
    no lock: a worker killed while it looked cannot leave the others waiting for a lock."""

    def __init__(self, parent_stop):
        super().__init__()
        self._parent_stop = parent_stop

    @property
    def requested(self) -> bool:
        return self.signal is not None or bool(self._parent_stop.value)


def _worker_init(parent_stop) -> None:
    global _STOP
    _STOP = _WorkerStop(parent_stop).install()


class _StopWorkers:
    """Passes a stop requested in the parent (``StopRequest.watch``) on to the workers."""

    def __init__(self, flag):
        self._flag = flag

    def stop(self) -> None:
        self._flag.value = 1


_STOP = None


def _split_one(job: _Job) -> dict:
    os.mkdir(job.out_dir)
    result = split_to_folder(job.source, job.out_dir, job.config, stop=_STOP, in_place=True)
    manifest = result.manifest
    return {"header_rank": rank_from_header(result.header), "error": result.error,
            "complete": manifest["complete"],
            "iterations": [{**{k: it.get(k) for k in ("index", "kind", "step", "duration_us",
                                                       "gpu_busy_us", "phase", "file")},
                            "comm_kernel_us": (it.get("breakdown") or {}).get("comm_kernel_us")}
                           for it in rank_iterations(manifest)]}


def rank_iterations(manifest: dict) -> list[dict]:
    """The iteration records of a rank's manifest: the one place this module reads them."""
    return manifest["iterations"]


def rank_pieces(out_dir: str, data: dict):
    """``pieces_of(row)``: ``{rank: path of its piece}`` of an aligned iteration of a split of
    several ranks into ``out_dir`` (``data``: its ``ranks.json``), for the ranks that wrote
    one (a selection may have left it out)."""
    files = {}
    for rank in data["ranks"]:
        folder = os.path.join(out_dir, rank["folder"])
        manifest = load_manifest(folder)
        files[str(rank["rank"])] = {
            it["index"]: os.path.normpath(os.path.join(folder, it["file"]))
            for it in rank_iterations(manifest) if it.get("file")}

    def pieces_of(row: dict) -> dict[int, str]:
        return {int(r): files[r][i] for r, i in row["index"].items() if i in files.get(r, {})}
    return pieces_of


def split_ranks(sources: list[str], staging: str, config: SplitConfig, *,
                workers: int | None = None, stop: StopRequest | None = None) -> dict:
    """Split every trace of ``sources`` into ``staging/rank_<r>/`` as ``config`` says (each
    by ``folder.split_to_folder``, in place) and write ``staging/ranks.json``; returns its
    content. ``stop``: a stop requested is passed on to the workers (each rank then ends
    incomplete). Raises ``RanksError``, also when a worker died (killed)."""
    if len(sources) < 2:
        raise RanksError("several ranks need two or more traces")
    workers = max(1, min(len(sources), workers or os.cpu_count() or 1))
    jobs = [_Job(src, os.path.join(staging, f".trace-{i}"),
                 replace(config, rank=rank_from_name(src) or 0)) for i, src in enumerate(sources)]
    context = multiprocessing.get_context()
    parent_stop = context.RawValue("b", 0)
    if stop is not None:
        stop.watch(_StopWorkers(parent_stop))
        if stop.requested:
            parent_stop.value = 1
    with ProcessPoolExecutor(max_workers=workers, mp_context=context,
                             initializer=_worker_init, initargs=(parent_stop,)) as pool:
        try:
            results = list(pool.map(_split_one, jobs))
        except BrokenProcessPool:
            # The pool's own SIGTERM only asks the others to stop (``_worker_init``), and the
            # queues a dead worker shared may block them for ever: they are ended here.
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                process.kill()
            raise RanksError("a worker process splitting a rank died (killed?): "
                             "no rank was written") from None
    ranks: dict[int, dict] = {}
    for job, result in zip(jobs, results):
        rank, source = result["header_rank"], "distributedInfo"
        if rank is None:
            rank, source = rank_from_name(job.source), "file name"
        if rank is None:
            raise RanksError(f"cannot tell the rank of {job.source}: no distributedInfo.rank "
                             "in its header and no rank number in its name")
        if rank in ranks:
            raise RanksError(f"{ranks[rank]['trace']} and {job.source} are both rank {rank}")
        os.rename(job.out_dir, os.path.join(staging, rank_folder(rank)))
        ranks[rank] = {"rank": rank, "trace": job.source, "folder": rank_folder(rank),
                       "rank_from": source, "complete": result["complete"],
                       "error": result["error"], "iterations": result["iterations"]}
    data = align_ranks({r: ranks[r]["iterations"] for r in ranks})
    data["ranks"] = [{k: v for k, v in ranks[r].items() if k != "iterations"}
                     | {"iterations": sum(it["kind"] != "idle" for it in ranks[r]["iterations"])}
                     for r in sorted(ranks)]
    data = {"format": RANKS_FORMAT, "version": RANKS_VERSION, **data}
    with create_new(os.path.join(staging, RANKS_FILE), "w", encoding="utf-8") as f:
        f.write(strict_json(data, indent=1))
        f.write("\n")
    return data


def align_ranks(iterations: dict[int, list[dict]]) -> dict:
    """Line iteration k up across ranks (``{rank: [manifest iteration, ...]}``); pure."""
    busy = {r: [it for it in its if it.get("kind") != "idle"] for r, its in iterations.items()}
    counts = {r: len(its) for r, its in busy.items()}
    by_step = all(its and all(it.get("step") is not None for it in its)
                  for its in busy.values())
    if by_step:
        keyed = {r: {it["step"]: it for it in its} for r, its in busy.items()}
        keys = sorted(set().union(*(k.keys() for k in keyed.values())))
    else:
        keyed = {r: dict(enumerate(its)) for r, its in busy.items()}
        keys = list(range(max(counts.values(), default=0)))
    rows = []
    slowest_count = {r: 0 for r in sorted(iterations)}
    for k, key in enumerate(keys):
        present = {r: keyed[r][key] for r in sorted(keyed) if key in keyed[r]}
        durations = {r: it["duration_us"] for r, it in present.items()}
        row = {"k": k, "step": key if by_step else None,
               "index": {str(r): it["index"] for r, it in present.items()},
               "duration_us": {str(r): d for r, d in durations.items()},
               "gpu_busy_us": {str(r): it.get("gpu_busy_us") for r, it in present.items()},
               "missing_ranks": [r for r in sorted(keyed) if key not in keyed[r]]}
        # a duration beyond a double is null in the manifest: no rank's to compare
        row.update(_spread({r: d for r, d in durations.items() if d is not None}))
        comm = {r: it.get("comm_kernel_us") for r, it in present.items()}
        row["comm_kernel_us"] = {str(r): c for r, c in comm.items()}
        row.update(collective_straggler({r: c for r, c in comm.items() if c}))
        row["collective_skew_us"] = collective_skew({r: c for r, c in comm.items() if c})
        if row["slowest_rank"] is not None:
            slowest_count[row["slowest_rank"]] += 1
        rows.append(row)
    return {"aligned_by": "step" if by_step else "index",
            "counts": {str(r): n for r, n in sorted(counts.items())},
            "counts_agree": len(set(counts.values())) <= 1,
            "straggler_ratio": STRAGGLER_RATIO,
            "stragglers": sum(row["straggler"] is not None for row in rows),
            "collective_stragglers": sum(row["collective_straggler"] is not None
                                         for row in rows),
            "slowest_count": {str(r): n for r, n in slowest_count.items()},
            "iterations": rows}


#: A rank is the straggler by collectives of an iteration when the others spent at least this
#: much longer in their collectives than it did (their median), waiting for it ...
COLLECTIVE_WAIT_RATIO = 1.2
#: ... and at least this many µs longer.
MIN_COLLECTIVE_WAIT_US = 100.0


def collective_straggler(comm_us: dict[int, float]) -> dict:
    """The rank the others waited for in an iteration's collectives (``{rank: its collective
    kernels' durations summed}``, ranks with collectives only). A collective ends on every
    rank together and starts on each when that rank gets there: the rank that comes last has
    the shortest collectives, and each other rank's are longer by the time it waited. So
    durations tell it whatever the ranks' clocks (their starts would need one clock); a
    straggler by duration alone is hidden, since every rank's step lasts as long.
    ``collective_straggler``: the rank with the shortest, when the others' median is at
    least ``COLLECTIVE_WAIT_RATIO`` times it and ``MIN_COLLECTIVE_WAIT_US`` longer;
    ``collective_wait_us``: that median minus its (the wait it caused), with two ranks or
    more."""
    if len(comm_us) < 2:
        return {"collective_straggler": None, "collective_wait_us": None}
    late = min(comm_us, key=lambda r: (comm_us[r], r))
    others = quantile(sorted(c for r, c in comm_us.items() if r != late), 0.5)
    wait = round(others - comm_us[late], 3)
    flagged = others >= COLLECTIVE_WAIT_RATIO * comm_us[late] and wait >= MIN_COLLECTIVE_WAIT_US
    return {"collective_straggler": late if flagged else None, "collective_wait_us": wait}


def collective_skew(comm_us: dict[int, float]) -> dict | None:
    """Per rank, how much later than the first rank to get there it reached the iteration's
    collectives, in µs (``{"rank": skew}``; None with fewer than two ranks with collectives).
    A collective ends on every rank together, so a rank that arrives later spends less in
    it: the skew is the longest time in collectives less the rank's own (summed over the
    iteration's collectives: clock-free, like ``collective_straggler``). The straggler's is
    the largest."""
    if len(comm_us) < 2:
        return None
    first = max(comm_us.values())
    return {str(r): round(first - c, 3) for r, c in sorted(comm_us.items())}


def _spread(durations: dict[int, float]) -> dict:
    if not durations:
        return {"slowest_rank": None, "fastest_rank": None, "spread_us": None,
                "spread_ratio": None, "straggler": None}
    slowest = max(durations, key=lambda r: (durations[r], -r))
    fastest = min(durations, key=lambda r: (durations[r], r))
    others = [d for r, d in durations.items() if r != slowest]
    straggler = None
    if others and durations[slowest] >= STRAGGLER_RATIO * quantile(sorted(others), 0.5):
        straggler = slowest
    low = durations[fastest]
    return {"slowest_rank": slowest, "fastest_rank": fastest,
            "spread_us": round(durations[slowest] - low, 3),
            "spread_ratio": round(durations[slowest] / low, 3) if low > 0 else None,
            "straggler": straggler}


#: The fields of ``ranks.json`` that ``ranks_table`` and ``render_ranks`` read (required,
#: then those that may be null), checked before use (``summary.check_fields``).
RANKS_FIELDS = ({"ranks": (list,), "iterations": (list,), "aligned_by": (str,),
                 "stragglers": (int,), "straggler_ratio": NUMBER, "counts_agree": (bool,),
                 "counts": (dict,)}, {})
RANK_FIELDS = ({"rank": (int, str)}, {})
ALIGNED_FIELDS = ({"k": (int,), "duration_us": (dict,), "missing_ranks": (list,)},
                  {"step": (int,), "slowest_rank": (int, str), "spread_us": NUMBER,
                   "spread_ratio": NUMBER})


def load_ranks(out_dir: str) -> dict | None:
    """``OUT/ranks.json`` of a multi-rank split, or None when ``out_dir`` is not one; OSError
    when it cannot be read, ValueError when it is not one the table can use."""
    path = os.path.join(out_dir, RANKS_FILE)
    if not os.path.isfile(path):
        return None
    return load_checked(path, check_ranks, f"stream-split {RANKS_FILE}")


def check_ranks(data) -> None:
    """A ``ValueError`` naming the first field of a ``ranks.json`` the table could not use."""
    check_fields(data, RANKS_FIELDS, RANKS_FILE)
    for i, rank in enumerate(data["ranks"]):
        check_fields(rank, RANK_FIELDS, f"ranks[{i}]")
    for i, row in enumerate(data["iterations"]):
        check_fields(row, ALIGNED_FIELDS, f"iterations[{i}]")
        for rank, duration in row["duration_us"].items():
            check_fields({rank: duration}, ({}, {rank: NUMBER}), f"iterations[{i}].duration_us")


def ranks_table(data: dict) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the straggler table: per aligned iteration, each rank's duration,
    the slowest rank, the spread (slowest - fastest; times in ms), slowest / fastest, and the
    straggler flag."""
    ranks = [str(r["rank"]) for r in data["ranks"]]
    collectives = any(row.get("collective_wait_us") is not None for row in data["iterations"])
    header = ["k", "step"] + [f"rank {r}" for r in ranks] + [
        "slowest", "spread", "ratio"] + (["late rank", "wait"] if collectives
                                         else []) + ["flag"]
    rows = []
    for row in data["iterations"]:
        cells = [str(row["k"]), "" if row["step"] is None else str(row["step"])]
        for r in ranks:
            d = row["duration_us"].get(r)
            cells.append("-" if d is None else f"{d / 1000:.3f}")
        cells += ["" if row["slowest_rank"] is None else str(row["slowest_rank"]),
                  "" if row["spread_us"] is None else f"{row['spread_us'] / 1000:.3f}",
                  "" if row["spread_ratio"] is None else f"{row['spread_ratio']:.2f}x"]
        late, wait = row.get("collective_straggler"), row.get("collective_wait_us")
        if collectives:
            cells += ["" if late is None else str(late),
                      "" if wait is None else f"{wait / 1000:.3f}"]
        flags = [name for name, rank in (("straggler", row["straggler"]),
                                         ("late to collectives", late)) if rank is not None]
        if row["missing_ranks"]:
            flags.append("missing: " + ",".join(map(str, row["missing_ranks"])))
        cells.append(", ".join(flags))
        rows.append(cells)
    return header, rows


def skew_table(data: dict) -> tuple[list[str], list[list[str]]] | None:
    """Header and rows of the collective skew table (None when no iteration has collectives
    on two ranks): per aligned iteration, each rank's collective start skew
    (``collective_skew_us``: how much later than the first rank it got there), the straggler
    by collectives and the wait it caused the others; times in ms."""
    if not any(row.get("collective_skew_us") for row in data["iterations"]):
        return None
    ranks = [str(r["rank"]) for r in data["ranks"]]
    header = ["k", "step"] + [f"rank {r}" for r in ranks] + ["late rank", "wait caused"]
    rows = []
    for row in data["iterations"]:
        skew = row.get("collective_skew_us") or {}
        late, wait = row.get("collective_straggler"), row.get("collective_wait_us")
        rows.append([str(row["k"]), "" if row["step"] is None else str(row["step"])]
                    + ["-" if skew.get(r) is None else f"{skew[r] / 1000:.3f}" for r in ranks]
                    + ["" if late is None else str(late),
                       "" if late is None or wait is None else f"{wait / 1000:.3f}"])
    return header, rows


def _print_table(console, title: str, header: list[str], rows: list[list[str]],
                 flagged) -> None:
    table = Table(title=title)
    for i, name in enumerate(header):
        table.add_column(name, justify="left" if i >= len(header) - 1 else "right")
    for cells in rows:
        table.add_row(*cells, style="bold red" if flagged(cells) else None)
    console.print(table)


def render_ranks(data: dict, console=None) -> None:
    """Print the straggler table with ``rich`` (to ``console``, or stdout), then the
    collective skew table where the ranks have collectives."""
    console = console or table_console()
    header, rows = ranks_table(data)
    _print_table(console, f"{len(data['ranks'])} ranks, aligned by {data['aligned_by']} "
                          "(times in ms)", header, rows,
                 lambda cells: cells[-1].startswith(("straggler", "late")))
    skew = skew_table(data)
    if skew is not None:
        _print_table(console, "collective start skew: how late each rank reached its "
                              "collectives after the first (ms)", *skew,
                     lambda cells: bool(cells[-2]))
    notes = [f"{data['stragglers']} straggling iteration(s) (slowest rank >= "
             f"{data['straggler_ratio']}x the median of the others)"]
    if any(row.get("collective_wait_us") is not None for row in data["iterations"]):
        notes.append(f"{data['collective_stragglers']} iteration(s) in which the others waited "
                     f"for one rank at their collectives (the wait: the others' collectives "
                     f"less its, >= {COLLECTIVE_WAIT_RATIO}x and "
                     f"{MIN_COLLECTIVE_WAIT_US / 1000:g} ms)")
    if not data["counts_agree"]:
        notes.append("the ranks have different iteration counts: "
                     + ", ".join(f"rank {r}: {n}" for r, n in data["counts"].items()))
    for note in notes:
        console.print(note)
