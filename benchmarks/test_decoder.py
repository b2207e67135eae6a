"""Checks of the decoder benchmark's bookkeeping: it runs, it counts, it summarizes.

Never asserts on time. Run with ``python -m pytest benchmarks/test_decoder.py``.
"""
from __future__ import annotations

import json

from scripts import SAMPLE, load

decoder = load("decoder", "decoder_bench")


def test_every_mode_counts_the_events_ijson_counts():
    events = decoder.count_ijson(str(SAMPLE))
    assert events > 0
    for mode in ("slim", "raws", "full"):
        assert decoder.count_decoder(str(SAMPLE), mode) == events


def test_a_run_prints_a_ratio_per_mode(tmp_path, capsys):
    out = tmp_path / "runs.json"
    assert decoder.main([str(SAMPLE), "--repeat", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    for mode in ("ijson", "slim", "raws"):
        assert f"\n{mode} " in printed
    record = json.loads(out.read_text())
    assert len(record["repeats"]) == 2 and record["modes"]["ijson"]["ratio"] == 1.0
