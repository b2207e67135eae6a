"""Checks of the columnar probe: its numpy owners give today's records' counts, and it runs.

Never asserts on time. Run with ``python -m pytest benchmarks/test_columnar_probe.py``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts import HERE, SAMPLE, load
from stream_split.core.validate import SlimEvent

probe = load("columnar_probe")
RESNET = HERE.parent.parent / "shared" / "traces" / "tracelens" / "mi300" / \
    "resnet_act_checkpoint.json.gz"


def _counts_and_records(path: Path) -> tuple[dict, list]:
    _, _, records, edges = probe._engine(str(path))
    with probe._decoding_structs():
        batches = probe._batches(str(path))
    return probe.own(probe.Columns(batches), edges), records


def test_numpy_owners_give_the_engines_counts_on_the_sample():
    counts, records = _counts_and_records(SAMPLE)
    assert len(records) == 8
    assert probe.agreement(counts, records) == (1.0, 0.0)


@pytest.mark.skipif(not RESNET.exists(), reason="../shared is absent (a user's clone)")
def test_numpy_owners_give_the_engines_counts_on_a_real_training_trace():
    counts, records = _counts_and_records(RESNET)
    assert records and probe.agreement(counts, records) == (1.0, 0.0)


def test_the_decoder_gives_the_probes_structs_while_probing_and_its_own_after():
    with probe._decoding_structs():
        inside = probe._batches(str(SAMPLE))
    after = probe._batches(str(SAMPLE))
    inside = {e.__class__.__name__ for b in inside for e in b.events if e is not None}
    after = {e.__class__.__name__ for b in after for e in b.events if e is not None}
    assert "ProbeEvent" in inside and SlimEvent.__name__ not in inside
    assert SlimEvent.__name__ in after and "ProbeEvent" not in after


def test_a_run_prints_each_stage_and_writes_the_record(tmp_path, capsys):
    out = tmp_path / "probe.json"
    assert probe.main([str(SAMPLE), "--repeat", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    for stage in probe.STAGES:
        assert f"  {stage} " in printed
    record = json.loads(out.read_text())
    assert record["agree"] == 1.0 and len(record["runs"]["engine"]) == 2
