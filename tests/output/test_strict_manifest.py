"""The manifest says what the folder holds, in strict JSON (issue 22, item 9): timestamps whose
sums and differences overflow a double give null, never ``Infinity``, in the manifest, the
``boundaries`` lines and ``summary --json``; a selection (``--iterations``, ``--steps``) counts
the events of the pieces it wrote, and the ones it left out apart."""
from __future__ import annotations

import json

import pytest

from conftest import events_of, run_cli
from stream_split.testing.generate import generate

LARGEST = 1.79e308  # the largest double: 1.7976931348623157e308


def _strict(text: str):
    """``text`` parsed as JSON that refuses ``Infinity``, ``-Infinity`` and ``NaN``."""
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def huge_trace(tmp_path_factory):
    """A training trace stretched over the doubles from -1.79e308 (its last third all at
    1.79e308): every ts and dur is legal, but iteration ends and durations overflow."""
    events = generate("training", seed=3).events
    stamps = [e["ts"] for e in events if "ts" in e]
    low, span = min(stamps), max(stamps) - min(stamps)
    for event in events:
        if "ts" in event:
            x = (event["ts"] - low) / span  # 0 to 1
            event["ts"] = min(LARGEST, (3 * x - 1) * LARGEST)
            if "dur" in event:
                event["dur"] = event["dur"] / span * LARGEST
    path = tmp_path_factory.mktemp("huge") / "huge.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_timestamps_near_the_largest_double_give_a_strict_json_manifest(huge_trace, tmp_path):
    run_cli("split", huge_trace, "-o", tmp_path / "out", "-q")
    text = (tmp_path / "out" / "manifest.json").read_text()
    manifest = _strict(text)
    # the overflow happened (else this test checks nothing), and went out as null
    assert any(it["end_ts"] is None for it in manifest["iterations"])
    assert manifest["counts"]["conserved"] is True


def test_timestamps_near_the_largest_double_give_strict_boundaries_and_summary(huge_trace,
                                                                               tmp_path):
    lines = run_cli("boundaries", huge_trace).stdout.decode().splitlines()
    records = [_strict(line) for line in lines]
    assert any(r["type"] == "iteration" and r["end_ts"] is None for r in records)
    run_cli("split", huge_trace, "-o", tmp_path / "out", "-q")
    for source in (huge_trace, tmp_path / "out"):
        table = _strict(run_cli("summary", "--json", source).stdout.decode())
        assert any(row["duration_ms"] is None for row in table["rows"])
    assert run_cli("summary", tmp_path / "out").returncode == 0


@pytest.mark.parametrize("selection", [["--iterations", "0"], ["--iterations", "steady"],
                                       ["--steps", "2-3"]])
def test_a_selection_counts_the_events_of_the_pieces_it_wrote(tmp_path, selection):
    run_cli("split", "--sample", "-o", tmp_path / "out", "-q", *selection)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    counts = manifest["counts"]
    written = [it for it in manifest["iterations"] if it["file"]]
    in_pieces = {}
    for name in [it["file"] for it in written] + [manifest["outside"]["file"]]:
        events = events_of((tmp_path / "out" / name).read_bytes())
        in_pieces[name] = sum(e.get("ph") != "M" for e in events)
    assert counts["events_out"] == sum(in_pieces.values())
    assert counts["events_in_iterations"] == sum(in_pieces[it["file"]] for it in written)
    assert counts["events_not_written"] == sum(it["events"] for it in manifest["iterations"]
                                               if not it["file"])
    assert counts["events_out"] + counts["events_not_written"] == counts["non_metadata_in"]
    assert counts["conserved"] is True
    assert manifest["selection"]["iterations_written"] == len(written)
    assert manifest["selection"][selection[0][2:]] == selection[1]


def test_iterations_0_writes_fewer_events_than_it_reads(tmp_path):
    run_cli("split", "--sample", "-o", tmp_path / "out", "-q", "--iterations", "0")
    counts = json.loads((tmp_path / "out" / "manifest.json").read_text())["counts"]
    assert 0 < counts["events_out"] < counts["non_metadata_in"]
    assert counts["events_not_written"] > 0


def test_a_full_split_has_no_selection_and_no_count_of_events_not_written(tmp_path):
    run_cli("split", "--sample", "-o", tmp_path / "out", "-q")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert "selection" not in manifest and "events_not_written" not in manifest["counts"]
    assert manifest["counts"]["events_out"] == manifest["counts"]["non_metadata_in"]
