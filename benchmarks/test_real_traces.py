"""Checks of the real-traces benchmark's bookkeeping: it finds the traces, splits each, counts
its events as ijson does, and sums. Never asserts on time. Run with
``python -m pytest benchmarks/test_real_traces.py``.
"""
from __future__ import annotations

import gzip
import json
import shutil

from scripts import SAMPLE, load

real = load("real_traces", "real_traces_bench")


def test_each_trace_is_split_and_counted_as_ijson_counts_it(tmp_path, capsys):
    traces = tmp_path / "traces"
    (traces / "inner").mkdir(parents=True)
    shutil.copy(SAMPLE, traces / "a.json.gz")
    with gzip.open(SAMPLE, "rb") as f:
        (traces / "inner" / "b.json").write_bytes(f.read())
    (traces / "notes.txt").write_text("not a trace")
    out = tmp_path / "rows.json"
    assert real.main([str(traces), "--repeat", "2", "--work-dir", str(tmp_path),
                      "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    rows = written["rows"]
    assert [r["trace"].rsplit("/", 1)[-1] for r in rows] == ["a.json.gz", "b.json"]
    events = real.count_ijson(str(SAMPLE))
    for row in rows:
        assert row["events"] == events == row["split"]["events"]
        assert len(row["bare_s"]) == len(row["split_s"]) == 2 and row["vs_bare"] > 0
    assert written["summary"]["timed"] == 2 and written["summary"]["events"] == 2 * events
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.json", "traces"]  # removed
    assert "all 2 traces timed" in capsys.readouterr().out


def test_a_trace_ijson_cannot_parse_is_split_and_left_out_of_the_sums(tmp_path, capsys):
    with gzip.open(SAMPLE, "rb") as f:
        text = f.read()
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[:len(text) * 3 // 5])  # a killed writer's file
    shutil.copy(SAMPLE, tmp_path / "whole.json.gz")
    rows = [real.measure(p, 1, tmp_path) for p in (cut, tmp_path / "whole.json.gz")]
    assert "vs_bare" not in rows[0] and rows[0]["split"]["complete"] is False
    total = real.summary(rows)
    assert total["timed"] == 1 and total["events"] == rows[1]["events"]
    real.print_table(rows, total, tmp_path)
    printed = capsys.readouterr().out
    assert "cut.json: {" in printed and "all 1 traces timed" in printed
