"""Checks of the Dask benchmark's table arithmetic. Never runs a cluster, never asserts on time.

Run with ``python -m pytest benchmarks/test_dask_bench.py``.
"""
from __future__ import annotations

from scripts import load

dask_bench = load("dask_bench")


def _row(workers, fixed, wall):
    return {"workers": workers, "cluster_start_s": 2.0, "fixed_s": fixed, "wall_s": wall,
            "work_s": 30.0, "load_before": 0.1, "load_after": 1.9}


def test_speed_ups_are_against_the_first_row_with_and_without_the_fixed_cost():
    lines = dask_bench.table([_row(1, 5.0, 45.0), _row(2, 5.0, 25.0)], 16, 80.0).splitlines()
    assert lines[0] == "16 traces, 80 MB of .json.gz"
    one, two = (line.split(" | ") for line in lines[3:])
    assert one[4:7] == ["40.0", "1.00x", "1.00x"]
    assert two[4:7] == ["20.0", "1.80x", "2.00x"]
    assert two[-1] == "0.1 / 1.9 |"
