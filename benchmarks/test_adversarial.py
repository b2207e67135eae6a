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


def test_a_repeated_case_is_the_run_of_the_median_ratio_with_the_range_beside_it():
    runs = [{"vs_tile": 3.4, "net_us_per_event": 10.2}, {"vs_tile": 2.8, "net_us_per_event": 8.4},
            {"vs_tile": 3.0, "net_us_per_event": 9.3}]
    row = adversarial.median_run(runs)
    assert row["vs_tile"] == 3.0 and row["net_us_per_event"] == 9.3
    assert row["runs"] == 3 and row["vs_tile_runs"] == [2.8, 3.0, 3.4]
    assert adversarial.median_run(runs[:2])["vs_tile"] == 2.8  # the lower middle of two
    unjudged = [{"vs_tile": None, "net_us_per_event": 5.0},
                {"vs_tile": None, "net_us_per_event": 4.0},
                {"vs_tile": None, "net_us_per_event": 6.0}]
    row = adversarial.median_run(unjudged)  # no tile: the median time per event
    assert row["net_us_per_event"] == 5.0 and row["vs_tile_runs"] == []


def test_each_run_of_a_repeated_case_is_judged_and_the_table_shows_their_range(tmp_path,
                                                                                capsys):
    out = tmp_path / "attacks.json"
    assert adversarial.main(["threads", "--small", "--repeat", "3", "--reference-us", "2.5",
                             "--work-dir", str(tmp_path), "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["rc"] == 0 and row["conserved"] is True and row["runs"] == 3
    assert len(row["vs_tile_runs"]) == 3 and row["vs_tile_runs"] == sorted(row["vs_tile_runs"])
    assert row["vs_tile"] == row["vs_tile_runs"][1]
    assert row["vs_tile"] == pytest.approx(row["net_us_per_event"] / 2.5)
    assert "runs" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == [out]  # every run's input and output removed


def test_repeat_below_one_is_refused(capsys):
    with pytest.raises(SystemExit):
        adversarial.main(["threads", "--small", "--repeat", "0"])
    assert "--repeat must be at least 1" in capsys.readouterr().err
