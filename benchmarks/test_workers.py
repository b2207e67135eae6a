"""Checks of the ``--workers`` benchmark's bookkeeping: it runs, it compares, it summarizes.

Never asserts on time. Run with ``python -m pytest benchmarks/test_workers.py``.
"""
from __future__ import annotations

import gzip
import json

from scripts import SAMPLE, load

workers = load("workers", "workers_bench")


def test_a_run_compares_the_folders_and_prints_a_row_per_worker_count(tmp_path, capsys):
    out = tmp_path / "runs.json"
    assert workers.main([str(SAMPLE), "--repeat", "2", "--work-dir", str(tmp_path / "w"),
                         "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    record = json.loads(out.read_text())
    assert len(record["repeats"]) == 2
    assert set(record["workers"]) == {"1", "2"} and record["workers"]["1"]["speedup"] == 1.0
    assert all(row["agree"] for row in record["workers"].values())
    assert "speed-up" in printed and not list((tmp_path / "w").iterdir())


def test_folders_that_differ_in_a_piece_do_not_agree(tmp_path):
    for name, text in (("a", b"[1]"), ("b", b"[2]")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text('{"input": "%s"}' % name)
        (tmp_path / name / "iteration_00000.json.gz").write_bytes(gzip.compress(text))
    a, b = workers.folder_contents(tmp_path / "a"), workers.folder_contents(tmp_path / "b")
    assert a["manifest.json"] == b["manifest.json"] and a != b
