"""stream_split.summary: the table's data, and how a long one is shortened at split's end."""
import io
import tracemalloc

import pytest

from stream_split.summary import TableBuilder, build_table, render_text, shown_rows, step_number


def manifest(durations, kinds=None, outliers=()):
    kinds = kinds or ["iteration"] * len(durations)
    its, ts = [], 0.0
    for i, (d, k) in enumerate(zip(durations, kinds)):
        its.append({"index": i, "kind": k, "start_ts": ts, "end_ts": ts + d, "duration_us": d,
                    "first_op": f"ProfilerStep#{i + 10}", "cpu_ops": 5, "kernels": 2,
                    "gpu_busy_us": 3.0, "gpu_active_us": 2.0, "outlier": i in outliers,
                    "outlier_reason": "9.0x median" if i in outliers else None,
                    "complete": True, "file": None})
        ts += d
    return {"input": "t.json", "complete": True, "iterations": its,
            "steady_state": {"first": 0, "last": len(durations) - 1}}


def test_rows_carry_step_numbers_times_in_ms_and_flags():
    table = build_table(manifest([1000, 9000, 1000, 1000], outliers={1}))
    row = table["rows"][1]
    assert row["step"] == 11 and row["start_ms"] == 1.0 and row["duration_ms"] == 9.0
    assert row["gpu_active_ms"] == 0.002 and row["flags"] == ["outlier (9.0x median)"]
    assert table["footer"]["median_ms"] == 1.0 and table["footer"]["outliers"] == [1]


def test_idle_cycles_are_not_in_the_footer_statistics():
    table = build_table(manifest([1000, 10, 1000, 1000], kinds=["iteration", "idle",
                                                                "iteration", "iteration"]))
    assert table["footer"]["iterations"] == 3 and table["footer"]["idle"] == 1
    assert table["footer"]["median_ms"] == 1.0


def test_a_long_table_keeps_its_ends_and_its_outliers():
    rows = build_table(manifest([1000] * 100, outliers={50}))["rows"]
    shown = shown_rows(rows, 40)
    indices = [r["index"] if r else None for r in shown]
    assert indices == list(range(10)) + [None, 50, None] + list(range(90, 100))
    out = io.StringIO()
    render_text(build_table(manifest([1000] * 100, outliers={50})), out, limit=40)
    assert "79 rows left out" in out.getvalue()


def test_a_name_is_drawn_as_it_is_written_never_as_an_emoji():
    """``:name:`` in a trace's path (or an op's name) is text: the table's console reads no
    emoji codes (rich's would draw ``:fire:`` as one)."""
    data = manifest([1000, 1000])
    data["input"] = "runs/a:fire:b.json"
    out = io.StringIO()
    render_text(build_table(data), out)
    assert out.getvalue().splitlines()[0] == "runs/a:fire:b.json"


def test_step_number_only_from_profiler_steps():
    assert step_number("ProfilerStep#7") == 7
    assert step_number("aten::randn") is None and step_number(None) is None


def _with_reasons(durations, outliers):
    """``manifest`` whose outliers' reasons say more than the ratio (explained below)."""
    data = manifest(durations, outliers=outliers)
    for it in data["iterations"]:
        if it["outlier"]:
            it["outlier_reason"] = f"{it['duration_us'] / 1000:.1f}x median, +1 ms: eval x1"
    return data


@pytest.mark.parametrize("n, outliers", [
    (10, {3}), (40, {0, 39}), (41, {20}), (100, set(range(0, 100, 3))),
    (1000, {5, 11, 500, 501, 502, 990, 999}),
    (2000, {30, 255, 256, 511, 1024, 1990, 1999})])  # (at the edges of chunks: ``_items``)
def test_a_table_built_for_a_limit_is_drawn_as_the_whole_table_is(n, outliers):
    durations = [1000 + (7 * i) % 13 * 1000 for i in range(n)]
    whole, kept = io.StringIO(), io.StringIO()
    render_text(build_table(_with_reasons(durations, outliers)), whole, limit=40)
    render_text(build_table(_with_reasons(durations, outliers), 40), kept, limit=40)
    assert kept.getvalue() == whole.getvalue()


@pytest.mark.parametrize("at", [0, 20, 500, 999])
@pytest.mark.parametrize("only", ["phase", "comm", "idle"])
def test_an_optional_column_shown_when_one_row_left_out_has_a_value(only, at):
    """A column left out when no row has a value (phase, comm, GPU idle) is drawn when one
    row has one, shown or not, with or without a limit (the limited table does not make
    the rows it does not show)."""
    data = manifest([1000 + (7 * i) % 13 * 1000 for i in range(1000)])
    it = data["iterations"][at]
    if only == "phase":
        it["phase"] = "decode"
    else:
        it["breakdown"] = {"span_us": 900.0, "compute_us": 500.0, "comm_us": 0.0,
                           "memcpy_us": 0.0, "memset_us": 0.0, "idle_us": 0.0,
                           f"{only}_us": 400.0}
    whole, kept = io.StringIO(), io.StringIO()
    render_text(build_table(data), whole, limit=40)
    render_text(build_table(data, 40), kept, limit=40)
    assert kept.getvalue() == whole.getvalue()
    header = {"phase": "phase", "comm": "comm ms", "idle": "GPU idle ms"}[only]
    assert header in whole.getvalue()


def test_a_table_built_for_a_limit_keeps_about_that_many_rows():
    data = manifest([1000] * 10_000, outliers={5000})
    tracemalloc.start()
    table = build_table(data, 40)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    rows = table["rows"]
    assert len(rows) == 10_000 and len(rows.shown()) == 10 + 3 + 10
    assert held < 400_000  # every row: about 10 MB


@pytest.mark.parametrize("limit", [None, 1, 4, 40])
@pytest.mark.parametrize("chunk", [2, 7, 256])
def test_a_table_made_a_chunk_at_a_time_is_the_one_made_an_entry_at_a_time(limit, chunk):
    """``TableBuilder.add_many`` (``split`` hands the entries a chunk at a time) makes the
    table that ``add`` makes an entry at a time: idle cycles, serving phases, outliers with
    reasons and without, GPU work in one row, chunks across the limit's edges."""
    n = 300
    kinds = ["idle" if i % 11 == 3 else "iteration" for i in range(n)]
    data = _with_reasons([1000 + (7 * i) % 13 * 1000 for i in range(n)], {2, 45, 46, 150, 299})
    for it, kind in zip(data["iterations"], kinds):
        it["kind"] = kind
        if it["index"] % 5 == 1:
            it["phase"] = "decode" if it["index"] % 2 else "prefill"
    data["iterations"][9]["outlier_reason"] = "9.0x median"
    data["iterations"][77]["breakdown"] = {"span_us": 900.0, "compute_us": 500.0,
                                           "comm_us": 0.0, "memcpy_us": 0.0,
                                           "memset_us": 0.0, "idle_us": 400.0}
    tables = []
    for size in (1, chunk):
        builder = TableBuilder(limit)
        builder.start(data)
        for at in range(0, n, size):
            its = data["iterations"][at:at + size]
            if size == 1:
                builder.add(its[0])
            else:
                builder.add_many(its)
        tables.append(builder.table())
    one_by_one, chunked = tables
    assert chunked["footer"] == one_by_one["footer"]
    if limit is None:
        assert chunked["rows"] == one_by_one["rows"]
    else:
        assert chunked["rows"].kept() == one_by_one["rows"].kept()
        assert chunked["rows"].kinds == one_by_one["rows"].kinds
        texts = [io.StringIO(), io.StringIO()]
        for table, text in zip(tables, texts):
            render_text(table, text, limit=limit)
        assert texts[0].getvalue() == texts[1].getvalue()



def test_the_columns_read_of_a_chunk_of_entries_are_each_ones_get():
    """``summary._entry_columns`` (one ``itemgetter`` an entry where each has every key the
    table reads) gives each entry's ``get`` of each key: entries with every key, other
    mappings, a key some lack (older manifests: no ``wall_us``), none at all; and a table
    of entries without ``wall_us`` nor ``outlier`` made a chunk at a time is the one made an
    entry at a time (each one's duration judged)."""
    from types import MappingProxyType
    from stream_split.summary import _COLUMN_KEYS, _entry_columns
    full = {"kind": "iteration", "start_ts": 5, "phase": None, "outlier": False,
            "wall_us": 7.5, "breakdown": {"span_us": 0.0}}
    old = {"index": 1, "kind": "iteration", "start_ts": 9, "duration_us": 4, "step": None}
    for entries in ([full, dict(full, start_ts=6)], [MappingProxyType(full)], [full, old],
                    (old,), []):
        assert _entry_columns(entries) == tuple([it.get(key) for it in entries]
                                                for key in _COLUMN_KEYS)
    olds = [dict(old, index=i, start_ts=i * 10, duration_us=1000 + i % 3 * 500)
            for i in range(9)]
    tables = []
    for size in (1, 9):
        builder = TableBuilder(4)
        builder.start({"iterations": olds})
        for at in range(0, 9, size):
            builder.add_many(olds[at:at + size])
        tables.append(builder.table())
    assert tables[0]["footer"] == tables[1]["footer"]
    assert tables[1]["footer"]["median_ms"] == 1.5


def test_a_key_read_over_a_chunk_of_entries_is_each_ones_get():
    """``summary._gets`` (``dict.get`` mapped in C where each entry is a dict) reads what
    each entry's ``get`` gives: dicts, other mappings, a mix, a key some lack."""
    from types import MappingProxyType
    from stream_split.summary import _gets
    dicts = [{"phase": "decode", "outlier": 2.5}, {"phase": None}, {}, {"outlier": False}]
    for entries in (dicts, [MappingProxyType(it) for it in dicts],
                    [dicts[0], MappingProxyType(dicts[1]), *dicts[2:]], tuple(dicts), []):
        for key in ("phase", "outlier"):
            assert _gets(entries, key) == [it.get(key) for it in entries]
