"""Checks of the decoder benchmark's bookkeeping: it runs, it counts, it summarizes.

Never asserts on time. Run with ``python -m pytest benchmarks/test_decoder.py``.
"""
from __future__ import annotations

import gzip
import json
import shutil

import ijson
import numpy as np
import pytest

from scripts import SAMPLE, load

decoder = load("decoder", "decoder_bench")


def test_every_mode_counts_the_events_ijson_counts():
    events = decoder.count_ijson(str(SAMPLE))
    assert events > 0
    for mode in ("slim", "raws", "full"):
        assert decoder.count_decoder(str(SAMPLE), mode) == events


def test_the_native_probe_reads_each_events_fields_as_ijson_does():
    """``--modes native`` (a probe, ``probes/native_columns.c``): the same events, and the
    fields a columnar engine reads, equal to ijson's (skipped without a C compiler)."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    with gzip.open(SAMPLE, "rb") if str(SAMPLE).endswith(".gz") else open(SAMPLE, "rb") as f:
        events = list(ijson.items(f, "traceEvents.item", use_float=True))
    pieces = [{name: column.copy() for name, column in piece.items()}
              for piece in decoder.native_pieces(str(SAMPLE))]
    columns = {name: np.concatenate([piece[name] for piece in pieces]) for name in pieces[0]}
    assert decoder.count_native(str(SAMPLE)) == len(events) == len(columns["ts"])
    assert columns["ts"].tolist() == [float(e.get("ts", 0.0)) for e in events]
    assert columns["dur"].tolist() == [float(e.get("dur", -1.0)) for e in events]
    args = [e.get("args") or {} for e in events]
    missing = np.iinfo(np.int64).min
    assert columns["correlation"].tolist() == [a.get("correlation", missing) for a in args]
    assert columns["external_id"].tolist() == [a.get("External id", missing) for a in args]
    assert [chr(c) for c in columns["ph"]] == [e["ph"] for e in events]


def test_a_run_prints_a_ratio_per_mode(tmp_path, capsys):
    out = tmp_path / "runs.json"
    assert decoder.main([str(SAMPLE), "--repeat", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    for mode in ("ijson", "slim", "raws"):
        assert f"\n{mode} " in printed
    record = json.loads(out.read_text())
    assert len(record["repeats"]) == 2 and record["modes"]["ijson"]["ratio"] == 1.0
