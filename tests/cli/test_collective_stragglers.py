"""Stragglers by collectives: in a job synchronised by collectives every rank's step lasts as
long, so the rank the others wait for shows only in its collectives, which start late and
end with everyone's (``ranks.collective_straggler``)."""
from __future__ import annotations

import gzip
import json

from conftest import run_cli
from stream_split.ranks import collective_straggler

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def job_rank(path, rank: int, late_step: int, late_us: float, steps: int = 6) -> None:
    """A rank's trace: per step a GEMM, then an all-reduce that ends at the same time on
    every rank; in ``late_step`` rank 1 reaches the all-reduce ``late_us`` late (its GEMM
    takes that much longer), so rank 0's all-reduce waits that much longer."""
    events = [{"ph": "M", "name": "process_name", "pid": 100 + rank, "tid": 0,
               "args": {"name": "python"}}]
    host = {"pid": 100 + rank, "tid": 1}
    gpu = {"pid": 0, "tid": 7}
    for k in range(steps):
        t = 10_000.0 + 5_000.0 * k
        late = late_us if k == late_step and rank == 1 else 0.0
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}",
                       "ts": t, "dur": 4_000.0, **host})
        for j, (op, kernel, start, end) in enumerate((
                ("aten::mm", "gemm_kernel", t + 300, t + 1_500 + late),
                ("c10d::allreduce_", NCCL, t + 1_600 + late, t + 3_800))):
            corr = 1000 * k + j + 1
            events.append({"ph": "X", "cat": "cpu_op", "name": op, "ts": t + 100 + 100 * j,
                           "dur": 80.0, **host})
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                           "ts": t + 110 + 100 * j, "dur": 20.0, "args": {"correlation": corr},
                           **host})
            events.append({"ph": "X", "cat": "kernel", "name": kernel, "ts": start,
                           "dur": end - start, "args": {"correlation": corr}, **gpu})
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump({"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
                   "traceEvents": events}, f)


def test_the_rank_whose_collectives_start_late_is_named_though_steps_last_the_same(tmp_path):
    for rank in (0, 1):
        job_rank(tmp_path / f"rank{rank}.json.gz", rank, late_step=3, late_us=1_500.0)
    run_cli("split", tmp_path / "rank0.json.gz", tmp_path / "rank1.json.gz",
            "-o", tmp_path / "out", "-q")
    data = json.loads((tmp_path / "out" / "ranks.json").read_text())
    rows = data["iterations"]
    assert [row["straggler"] for row in rows] == [None] * 6  # by duration: nobody
    assert [row["spread_us"] for row in rows] == [0.0] * 6
    assert [row["collective_straggler"] for row in rows] == [None, None, None, 1, None, None]
    assert rows[3]["collective_wait_us"] == 1_500.0
    assert rows[3]["comm_kernel_us"] == {"0": 2_200.0, "1": 700.0}
    assert data["collective_stragglers"] == 1
    text = run_cli("summary", tmp_path / "out").stdout.decode()
    line = next(line for line in text.splitlines() if line.startswith("│ 3 "))
    assert "late" in line and "1.500" in line  # the late rank, the wait (ms), the flag
    assert "1 iteration(s) in which the others waited for one rank" in text


def test_a_small_or_even_difference_in_collectives_names_nobody():
    assert collective_straggler({0: 2_000.0, 1: 1_950.0})["collective_straggler"] is None
    assert collective_straggler({0: 150.0, 1: 60.0})["collective_straggler"] is None  # 90 µs
    assert collective_straggler({0: 700.0}) == {"collective_straggler": None,
                                                "collective_wait_us": None}
    many = collective_straggler({0: 2_200.0, 1: 2_150.0, 2: 700.0, 3: 2_250.0})
    assert many == {"collective_straggler": 2, "collective_wait_us": 1_500.0}
