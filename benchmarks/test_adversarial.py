"""Checks of the attack suite's bookkeeping: it runs the cases, judges each against the tile's
time beside it, and writes what it printed as JSON.

Never asserts on time. Run with ``python -m pytest benchmarks/test_adversarial.py``.
"""
from __future__ import annotations

import json

import pytest

from scripts import load

adversarial = load("adversarial")


def test_a_case_is_judged_against_the_mean_of_the_tile_runs_beside_it():
    assert adversarial.beside(2.0, 4.0) == 3.0
    assert adversarial.beside(None, 4.0) == 4.0  # one of the tile's runs failed
    assert adversarial.beside(2.0, None) == 2.0
    assert adversarial.beside(None, None) is None  # no tile: not judged


def test_the_suite_runs_small_cases_and_records_each_ones_reference(tmp_path, capsys):
    out = tmp_path / "attacks.json"
    assert adversarial.main(["threads", "unique_names", "--small", "--reference-us", "2.5",
                             "--work-dir", str(tmp_path), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["case"] for r in rows] == ["threads", "unique_names"]
    for row in rows:
        assert row["rc"] == 0 and row["conserved"] is True
        assert row["reference_us"] == 2.5
        assert row["vs_tile"] == pytest.approx(row["net_us_per_event"] / 2.5)
    table = capsys.readouterr().out
    assert "vs tile" in table and "threads" in table and "unique_names" in table
