"""Several ranks side by side: the collective skew table of ``summary`` and ``split
--merge-ranks`` (iteration k of every rank as one Chrome trace, a process per rank).

The merged file is checked as strict JSON and by its structure (the Perfetto trace processor's
Python package needs a binary it downloads, which these machines cannot fetch): every event
under a rank's process, ``process_name`` naming the rank, no thread shared by two ranks, every
event of the ranks' pieces there once, flows paired within a rank."""
from __future__ import annotations

import json
from collections import Counter

from conftest import load_piece, run_cli
from stream_split.ranks import collective_skew
from test_collective_stragglers import job_rank


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def _two_ranks(tmp_path, *options):
    for rank in (0, 1):
        job_rank(tmp_path / f"rank{rank}.json.gz", rank, late_step=3, late_us=1_500.0)
    return run_cli("split", tmp_path / "rank0.json.gz", tmp_path / "rank1.json.gz",
                   "-o", tmp_path / "out", "-q", *options)


def test_the_skew_table_shows_how_late_each_rank_reached_its_collectives(tmp_path):
    _two_ranks(tmp_path)
    rows = json.loads((tmp_path / "out" / "ranks.json").read_text())["iterations"]
    assert [row["collective_skew_us"] for row in rows] == (
        [{"0": 0.0, "1": 0.0}] * 3 + [{"0": 0.0, "1": 1_500.0}] + [{"0": 0.0, "1": 0.0}] * 2)
    text = run_cli("summary", tmp_path / "out").stdout.decode()
    skew = text[text.index("collective start skew"):]
    line = next(line for line in skew.splitlines() if line.startswith("│ 3 "))
    assert [cell.strip() for cell in line.strip("│").split("│")] == [
        "3", "3", "0.000", "1.500", "1", "1.500"]  # k, step, skews, late rank, wait caused


def test_skew_needs_two_ranks_with_collectives_and_is_largest_for_the_last_to_arrive():
    assert collective_skew({0: 700.0}) is None
    assert collective_skew({0: 2_200.0, 1: 2_150.0, 2: 700.0}) == {
        "0": 0.0, "1": 50.0, "2": 1_500.0}


def test_merged_iterations_put_each_rank_in_a_process_of_its_own(tmp_path):
    proc = _two_ranks(tmp_path, "--merge-ranks")
    out = tmp_path / "out"
    assert "6 iterations of every rank merged" in proc.stdout.decode()
    merged = sorted(p.name for p in (out / "merged").iterdir())
    assert merged == [f"iteration_{k:05d}.json.gz" for k in range(6)]
    import gzip
    document = _strict(gzip.decompress((out / "merged" / merged[3]).read_bytes()).decode())
    events = document["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {1: "rank 0", 2: "rank 1"}  # both ranks' GPU was pid 0: apart now
    assert all(isinstance(e["pid"], int) and e["pid"] in names for e in events)
    threads = {(e["pid"], e["tid"]) for e in events if e["ph"] != "M"}
    assert len({tid for _, tid in threads}) == 2 and len(threads) == 4  # host + stream, each
    # Every event of the two pieces, once, with its times.
    own = [e for r in (0, 1)
           for e in load_piece(out / f"rank_{r}" / "iteration_00003.json.gz")["traceEvents"]
           if e["ph"] != "M"]
    moved = [e for e in events if e["ph"] != "M"]
    key = lambda e: (e["name"], e["ts"], e.get("dur"))
    assert Counter(map(key, moved)) == Counter(map(key, own))
    nccl = {e["pid"]: e["dur"] for e in moved if e["name"].startswith("nccl")}
    assert nccl == {1: 2_200.0, 2: 700.0}  # rank 1 came 1.5 ms late to its all-reduce
    header = document["stream_split_merged"]
    assert header["iteration"] == 3 and header["step"] == 3
    assert header["ranks"]["1"]["piece"] == "rank_1/iteration_00003.json.gz"


def test_merged_flows_stay_paired_within_their_rank(tmp_path):
    from stream_split.merge import _RankEvents
    movers = [_RankEvents(rank, 2, rank) for rank in (0, 1)]
    flows = [m.move({"ph": ph, "id": 7, "cat": "ac2g", "pid": 0, "tid": 7, "ts": 1.0})
             for m in movers for ph in ("s", "f")]
    ids = [f["id"] for f in flows]
    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]


def test_merge_ranks_of_one_trace_is_an_error(tmp_path):
    job_rank(tmp_path / "rank0.json.gz", 0, late_step=3, late_us=0.0)
    proc = run_cli("split", tmp_path / "rank0.json.gz", "-o", tmp_path / "out",
                   "--merge-ranks", check=False)
    assert proc.returncode == 2 and "--merge-ranks" in proc.stderr.decode()
    assert not (tmp_path / "out").exists()
