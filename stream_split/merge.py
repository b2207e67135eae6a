"""``split RANKS... --merge-ranks``: iteration k of every rank as one Chrome trace, so that one
Perfetto (or chrome://tracing) window shows the ranks one above the other.

Each rank's piece of aligned iteration k (``ranks.align_ranks``) is read back and its events
are written under one process per rank: the process id is ``rank_pid(rank)`` and a
``process_name`` metadata event names it ``rank <r>``, so two ranks' processes (every rank's
GPU is pid 0, say) never share a track. A rank's threads and GPU streams become threads of
that process, numbered anew (``thread_name`` says which pid and thread or stream they were);
flow ids (launch -> kernel arrows) are made unique per rank. Timestamps are kept: ranks whose
clocks differ (other hosts) stay apart by as much. The file is ``MERGED_FOLDER/
iteration_<k>.json.gz`` beside ``ranks.json`` (``.json`` with ``--plain-json``); its header
``stream_split_merged`` says which piece of which rank each process came from.
"""
from __future__ import annotations

import gzip
import os

import orjson

from stream_split.output import create_new

#: The folder of the merged iterations, in a split of several ranks.
MERGED_FOLDER = "merged"
#: Flow events (``s``, ``t``, ``f``) and async ones bind by ``id``: made unique per rank.
FLOW_PHASES = frozenset("stfbenS")
#: Metadata events about a process: replaced by the rank's own.
PROCESS_METADATA = frozenset(("process_name", "process_labels", "process_sort_index"))
#: Metadata events about a thread: moved to the thread's new id.
THREAD_METADATA = frozenset(("thread_name", "thread_sort_index"))


def rank_pid(rank: int) -> int:
    """The process id of ``rank``'s track in a merged file (1 and up: Perfetto keeps pid 0
    for the idle task)."""
    return rank + 1


def merged_name(k: int, compress: bool) -> str:
    return f"iteration_{k:05d}.json" + (".gz" if compress else "")


def load_piece(path: str) -> dict:
    """A piece written by stream-split (gzip or plain JSON), as a document."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return orjson.loads(data)


class _RankEvents:
    """One rank's events, moved under its own process: ``move`` rewrites an event."""

    def __init__(self, rank: int, ranks: int, position: int):
        self.rank, self.pid = rank, rank_pid(rank)
        self._ranks, self._position = ranks, position
        self.threads: dict = {}  # (pid, tid) of the rank's trace -> new tid
        self.process_names: dict = {}  # pid of the rank's trace -> its process_name
        self.thread_names: dict = {}  # new tid -> the thread's own name

    def tid(self, pid, tid) -> int:
        return self.threads.setdefault((pid, tid), len(self.threads) + 1)

    def move(self, event: dict) -> dict | None:
        """The event under the rank's process (None: metadata replaced by the rank's)."""
        pid, tid = event.get("pid"), event.get("tid")
        if event.get("ph") == "M":
            name = event.get("name")
            args = event.get("args") or {}
            if name == "process_name":
                self.process_names[pid] = args.get("name")
            if name in PROCESS_METADATA:
                return None
            if name == "thread_name":
                self.thread_names[self.tid(pid, tid)] = args.get("name")
                return None
            if name in THREAD_METADATA:
                return None
        event = dict(event, pid=self.pid)
        if "tid" in event or event.get("ph") != "C":
            event["tid"] = self.tid(pid, tid)
        if event.get("ph") in FLOW_PHASES and "id" in event:
            event["id"] = self._unique_id(event["id"])
        return event

    def _unique_id(self, value):
        if isinstance(value, int) and not isinstance(value, bool):
            return value * self._ranks + self._position
        return f"rank{self.rank}:{value}"

    def metadata(self) -> list[dict]:
        """The rank's process and thread names (``thread_name``: the pid and thread or
        stream it was, and its own name), sorted by rank and by the order first seen."""
        out = [{"ph": "M", "name": "process_name", "pid": self.pid, "tid": 0,
                "args": {"name": f"rank {self.rank}"}},
               {"ph": "M", "name": "process_sort_index", "pid": self.pid, "tid": 0,
                "args": {"sort_index": self.rank}}]
        for (pid, tid), new in self.threads.items():
            own = self.thread_names.get(new)
            process = self.process_names.get(pid)
            label = f"{process or 'pid'} {pid} / {own or f'thread {tid}'}"
            out += [{"ph": "M", "name": "thread_name", "pid": self.pid, "tid": new,
                     "args": {"name": label}},
                    {"ph": "M", "name": "thread_sort_index", "pid": self.pid, "tid": new,
                     "args": {"sort_index": new}}]
        return out


def merge_pieces(pieces: dict[int, str], header: dict) -> tuple[list[dict], dict]:
    """The events of ``pieces`` (``{rank: path}``), each rank under its own process, and the
    ``stream_split_merged`` header (``header`` and, per rank, its pid and piece)."""
    events, merged = [], dict(header, ranks={})
    for position, rank in enumerate(sorted(pieces)):
        document = load_piece(pieces[rank])
        mover = _RankEvents(rank, len(pieces), position)
        own = [e for e in map(mover.move, document.get("traceEvents") or []) if e is not None]
        events += mover.metadata() + own
        merged["ranks"][str(rank)] = {"pid": mover.pid, "piece": pieces[rank],
                                      "distributedInfo": document.get("distributedInfo")}
    return events, merged


def write_merged(path: str, events: list[dict], merged: dict, compress: bool) -> None:
    """One Chrome trace: ``traceEvents`` one event a line, then the merge's header."""
    body = b"".join((b",\n" if i else b"") + orjson.dumps(e) for i, e in enumerate(events))
    data = (b'{"traceEvents": [\n' + body + b'\n],\n"displayTimeUnit": "ms",\n'
            b'"stream_split_merged": ' + orjson.dumps(merged) + b"}\n")
    with create_new(path) as f:
        f.write(gzip.compress(data, compresslevel=1) if compress else data)


def merge_ranks(out_dir: str, data: dict, pieces_of, compress: bool = True) -> list[str]:
    """Write ``out_dir/MERGED_FOLDER/iteration_<k>`` for every aligned iteration of ``data``
    (``ranks.json``'s content) that some rank wrote a piece of; ``pieces_of(row)`` gives
    ``{rank: path}`` of row k. Returns the files written (relative to ``out_dir``)."""
    written = []
    for row in data["iterations"]:
        pieces = pieces_of(row)
        if not pieces:
            continue
        if not written:
            os.mkdir(os.path.join(out_dir, MERGED_FOLDER))
        events, merged = merge_pieces(pieces, {"iteration": row["k"], "step": row["step"]})
        merged["ranks"] = {r: dict(v, piece=os.path.relpath(v["piece"], out_dir))
                           for r, v in merged["ranks"].items()}
        name = os.path.join(MERGED_FOLDER, merged_name(row["k"], compress))
        write_merged(os.path.join(out_dir, name), events, merged, compress)
        written.append(name)
    return written
