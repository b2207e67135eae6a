"""Checks of the benchmark harness's bookkeeping: it runs, it counts, it judges thresholds.

Never asserts on time. Run with ``python -m pytest benchmarks/test_bench.py``.
"""
from __future__ import annotations

import json
import shutil
import sys

import pytest

from scripts import DATA as SAMPLE, load

bench = load("bench")


def _summary(copies, rss, ratio_b=1.0, ratio_s=1.0, ratio_t=1.0):
    row = lambda r, ratio: {"rss_mb": r, "ratio": ratio, "wall_s": 1.0}  # noqa: E731
    return {"tile": f"x{copies}", "events": 10, "json_mb": 1, "gz_mb": 1,
            "commands": {"ijson": row(20, 1.0), "boundaries": row(rss, ratio_b),
                         "split": row(rss, ratio_s), "tag": row(rss, ratio_t)}}


def test_checks_pass_and_fail():
    good = bench.evaluate_checks({1: _summary(1, 80), 10: _summary(10, 90, 2.1, 1.6, 1.5),
                                  40: _summary(40, 100, 2.0, 1.5, 1.7)}, None)
    assert {c["status"] for c in good} == {"PASS"}
    assert len(good) == 3 * 2 + 3 + 3  # RSS flat and capped per command, ratios at 10x, 40x
    bad = bench.evaluate_checks({1: _summary(1, 80), 10: _summary(10, 90, 1.9, 1.4, 1.4),
                                 40: _summary(40, 210, 1.0, 0.8, 0.8)}, None)
    assert [c["status"] for c in bad] == ["FAIL"] * 12
    missing = bench.evaluate_checks({10: _summary(10, 90, 2.0, 1.5, 1.5)}, None)
    assert [c["status"] for c in missing] == ["n/a"] * 6 + ["PASS"] * 3


def test_the_180x_tile_is_judged_when_it_was_measured():
    tiles = {10: _summary(10, 90, 2.1, 1.6, 1.5), 180: _summary(180, 95, 2.0, 1.49, 1.55)}
    checks = {c["check"]: c["status"] for c in bench.evaluate_checks(tiles, None)}
    assert checks["boundaries events/s vs bare ijson at 180x"] == "PASS"
    assert checks["split events/s vs bare ijson at 180x"] == "FAIL"
    assert checks["tag events/s vs bare ijson at 180x"] == "PASS"
    assert not any("180x" in c["check"]
                   for c in bench.evaluate_checks({10: _summary(10, 90)}, None))


def test_scale_checks():
    checks = bench.evaluate_checks({}, {"small": _summary(2, 100), "large": _summary(180, 140)})
    scale = [c for c in checks if "~10M" in c["check"]]
    assert len(scale) == 6
    assert [c["status"] for c in scale if "/" in c["check"]] == ["FAIL"] * 3  # 1.4x
    assert [c["status"] for c in scale if "at ~10M" in c["check"]] == ["PASS"] * 3


def test_ratio_is_per_repeat():
    runs = {"ijson": [{"repeat": 0, "rc": 0, "wall_s": 1.0, "rss_mb": 20},
                      {"repeat": 1, "rc": 0, "wall_s": 2.0, "rss_mb": 20}],
            "split": [{"repeat": 0, "rc": 0, "wall_s": 2.0, "rss_mb": 80},
                      {"repeat": 1, "rc": 0, "wall_s": 4.0, "rss_mb": 82}]}
    s = bench.summarize_tile("t", {"json_bytes": 10**6, "gz_bytes": 10**5},
                             {"runs": runs, "events": 1000})
    assert s["commands"]["split"]["ratios"] == [0.5, 0.5]
    assert s["commands"]["split"]["ratio"] == 0.5
    assert s["commands"]["split"]["rss_mb"] == 81


def test_cpu_time_is_reported_beside_the_wall_time():
    runs = {"ijson": [{"repeat": 0, "rc": 0, "wall_s": 3.0, "rss_mb": 20, "user_s": 1.8,
                       "sys_s": 0.2}],
            "split": [{"repeat": 0, "rc": 0, "wall_s": 2.0, "rss_mb": 80, "user_s": 3.5,
                       "sys_s": 0.5}]}
    s = bench.summarize_tile("t", {"json_bytes": 10**6, "gz_bytes": 10**5},
                             {"runs": runs, "events": 1000})
    split = s["commands"]["split"]
    assert split["ratio"] == 1.5  # the wall ratio stays the judged one
    assert split["cpu_s"] == 4.0 and split["cpu_ratio"] == 0.5


def test_progress_log_keeps_the_cpu_time(tmp_path):
    line = "  t-x10.json.gz rep 1 split         5.58 s    78.9 MB rc=0 cpu 5.21 s"
    old = "  t-x10.json.gz rep 0 split         5.58 s    78.9 MB rc=0"
    assert bench.LOG_LINE.match(line).groups()[-1] == "5.21"
    assert bench.LOG_LINE.match(old).groups()[-1] is None
    assert bench.cpu_s({"cpu_s": 5.21}) == 5.21 and bench.cpu_s({"wall_s": 1.0}) is None


@pytest.mark.slow
def test_harness_end_to_end(tmp_path):
    samples = sorted(SAMPLE.glob("*.json.gz"))
    if not samples or not bench.DEFAULT_TILER.exists():
        pytest.skip("no sample trace or no tiler")
    out = tmp_path / "r.json"
    rc = bench.main(["--base", str(samples[0]), "--copies", "1", "--repeat", "1",
                     "--work-dir", str(tmp_path / "w"), "--commands", "boundaries",
                     "--json", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    (summary,) = doc["summaries"]
    assert summary["events"] > 0
    assert summary["commands"]["boundaries"]["failed"] == 0
    assert summary["commands"]["boundaries"]["rss_mb"] > 0


def test_the_code_line_names_the_tree_the_cli_imports(tmp_path, monkeypatch):
    """Run from this checkout with ``PYTHONPATH`` naming another copy of the package, the
    harness fingerprints that copy (the one the CLI runs), not the checkout it lies in."""
    other = tmp_path / "other"
    shutil.copytree(bench.REPO / "stream_split", other / "stream_split",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (other / "stream_split" / "marker.py").write_text("# only in the other copy\n")
    monkeypatch.chdir(bench.REPO)
    monkeypatch.setenv("PYTHONPATH", str(other))
    package = bench.measured_package(sys.executable)
    assert package == other / "stream_split"
    code = bench.code_fingerprint(package)
    assert code["tree"] == str(other)
    assert code["head"] is None  # not a git checkout
    assert code["sources_sha1"] != bench.code_fingerprint()["sources_sha1"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_the_adversarial_table_gives_each_case_net_of_both_floors(capsys):
    """``beyond`` is a case's ratio to the tile net of the Python floor, ``beyondC`` net of the
    C floor (the kernel's work per file alone): (12 - 8) / 2 = 2.00 and (12 - 5) / 2 = 3.50."""
    adversarial = load("adversarial")
    row = {"case": "one_op_iterations", "events": 1_000_000, "rc": 0, "outcome": "ok",
           "rss_mb": 100.0, "wall_s": 12.0, "cpu_s": 12.0, "net_us_per_event": 12.0,
           "reference_us": 2.0, "vs_tile": 6.0, "floor_us_per_event": 8.0,
           "floor_c_us_per_event": 5.0}
    adversarial.print_table([row], 0.2)
    head, line = capsys.readouterr().out.splitlines()[:2]
    assert head.split()[-4:] == ["floor", "beyond", "floorC", "beyondC"]
    assert line.split()[-4:] == ["8.0", "2.00", "5.0", "3.50"]
