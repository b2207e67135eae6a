"""The manifest's entries written from their records' slots (``_native.entry_texts``, by
``manifest_entries._record_chunk_text``) are the text ``laid_out`` writes of the entries
themselves (``_entry_dicts``), byte for byte, or None where ``laid_out`` writes none (a number
that is not finite, a value of another type) or the entry is not made from the slots alone (an
``extra`` to spread): the caller then makes the dicts. What ``ManifestIterations.texts`` hands
its reader in place of the dicts (``RecordEntries``) reads as they do: its entries are the
dicts, its columns the dicts' values (``summary._entry_columns``), the table made of it the
table made of them."""
import io
import math

import pytest
from hypothesis import given, settings, strategies as st

import stream_split.decode
from stream_split import manifest_entries, summary
from stream_split.core.records import IterationRecord

_native = stream_split.decode._native
needs_native = pytest.mark.skipif(_native is None, reason="stream_split._native is not built")

_numbers = st.one_of(st.integers(-10**20, 10**20), st.floats(), st.sampled_from(
    [0.0, -0.0, 1.0005, 2.0, 1e17, 0.0005, -7.12345, math.inf, 30, 36]))
_texts = st.sampled_from(["op", "train_step", "é", "a\"b", "\x7f", "ProfilerStep#3", "\ud800"])
_breakdowns = st.sampled_from([None, {}, {"span_us": 0.0, "top_kernels": [],
                                          "host": {"cpu_op_us": 5.0, "x": None}},
                               {"span_us": math.nan}, {"k": [1, "two", 3.5]}])


@st.composite
def _records(draw):
    rows = draw(st.lists(st.tuples(_numbers, _numbers, _numbers, _numbers, _texts,
                                   st.none() | st.tuples(_numbers, _numbers), _breakdowns,
                                   st.booleans(), st.sampled_from([None, "decode"])),
                         max_size=40))
    records = []
    for index, (start, end, busy, active, op, gpu, breakdown, outlier, phase) in enumerate(rows):
        record = IterationRecord(index, start_ts=start, end_ts=end, gpu_busy_us=busy,
                                 gpu_active_us=active, first_op=op, outlier=outlier,
                                 outlier_reason="slow" if outlier else None, phase=phase)
        if gpu is not None:
            record.gpu_start_ts, record.gpu_end_ts = gpu
        record.breakdown = breakdown
        records.append(record)
    if records and draw(st.booleans()):
        records[draw(st.integers(0, len(records) - 1))].extra = {"more": 1}
    return records


def _names(records):
    return [None if record.index % 3 == 2 else f"iteration_{record.index:05d}.json.gz"
            for record in records]


@needs_native
@settings(max_examples=150, deadline=None)
@given(_records(), st.integers(0, 3))
def test_entries_from_the_slots_are_the_text_of_their_dicts(records, level):
    names = _names(records)
    made = _native.entry_texts(records, *manifest_entries._ENTRY_LAYOUT, names, 1, level)
    if any(record.extra for record in records):
        assert made is None
        return
    entries = manifest_entries._entry_dicts(records, names)
    assert made == _native.laid_out(entries, 1, level, True)


@needs_native
def test_records_of_another_class_or_an_unset_slot_are_left_to_the_dicts():
    class Other(IterationRecord):
        __slots__ = ()
    records = [IterationRecord(0), Other(1)]
    assert _native.entry_texts(records, *manifest_entries._ENTRY_LAYOUT, [None, None], 1,
                               2) is None
    unset = IterationRecord.__new__(IterationRecord)
    assert _native.entry_texts([unset], *manifest_entries._ENTRY_LAYOUT, [None], 1, 2) is None
    with pytest.raises(ValueError):  # a name a record
        _native.entry_texts([IterationRecord(0)], *manifest_entries._ENTRY_LAYOUT, [], 1, 2)


def _plain_records(count: int, outliers=()) -> list:
    records = []
    for index in range(count):
        record = IterationRecord(index, start_ts=10.0 * index, end_ts=10.0 * index + 6,
                                 first_op="train_step", events=1, cpu_ops=1,
                                 outlier=index in outliers,
                                 outlier_reason="slow, 3x" if index in outliers else None)
        record.breakdown = {"span_us": 0.0, "host": {"cpu_op_us": 5.0}}
        records.append(record)
    return records


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 600), st.sets(st.integers(0, 599), max_size=8), st.booleans())
def test_the_manifest_and_the_table_are_those_of_the_entries(count, outliers, changed):
    records = _plain_records(count, outliers)
    files = {index: f"iteration_{index:05d}.json.gz" for index in range(count)}
    iterations = manifest_entries.ManifestIterations(records, files)
    if changed and count:
        iterations[count // 2] = dict(iterations[count // 2], outlier_reason="said")
    as_list = list(iterations)
    texts = {}
    for entries in (iterations, as_list):
        out, table = io.BytesIO(), summary.TableBuilder(40)
        manifest = {"input": "x", "steady_state": None, "iterations": entries}
        table.start(manifest)
        manifest_entries.dump_manifest(manifest, out, table.add_many)
        texts[entries.__class__] = out.getvalue(), _shown(table.table())
    assert texts[list] == texts[manifest_entries.ManifestIterations]


def _shown(table: dict) -> str:
    out = io.StringIO()
    summary.render_text(table, out, limit=40)
    return out.getvalue() + repr(table["footer"])


@needs_native
@settings(max_examples=60, deadline=None)
@given(_records())
def test_record_entries_read_as_their_dicts(records):
    records = [record for record in records if not record.extra]
    names = _names(records)
    lazy = manifest_entries.RecordEntries(records, names)
    entries = manifest_entries._entry_dicts(records, names)
    assert list(lazy) == entries or _nan_in(entries)
    assert len(lazy) == len(entries)
    if records:
        assert lazy[len(records) // 2] == entries[len(records) // 2] or _nan_in(entries)
        assert lazy[1:3] == entries[1:3] or _nan_in(entries)
    keys = summary._COLUMN_KEYS + ("file", "duration_us", "gpu_busy_us", "index")
    assert repr(lazy.columns(keys)) == repr([[entry[key] for entry in entries]
                                             for key in keys])


def _nan_in(entries) -> bool:
    return "nan" in repr(entries)
