"""``pages.PagedList``: the engine's per-iteration state with its old pages in a file, and a
split whose iteration state is paged out after every batch giving the records of one kept in
memory; ``manifest_entries``: the manifest's entries made from the records and written one
at a time, the text of ``json.dump``."""
from __future__ import annotations

import io
import json
import os
import pickle
import random
from pathlib import Path

import pytest

from stream_split.core import SplitOptions
from stream_split.core.records import IterationRecord
from stream_split.core import Splitter
from stream_split.manifest_entries import (
    CHUNK_ENTRIES, ManifestIterations, dump_manifest, manifest_entry)
from stream_split.pages import (
    MAX_PAGE_ITEMS, PAGE_BYTES, PAGE_ITEMS, RESIDENT_PAGES, PagedList, paged_lists)
from stream_split.run import read_through, scan_records
from stream_split.serialize import strict_json
from stream_split.spill import TempFileSpill
from stream_split.summary import TableBuilder, build_table, render_text

CUDA = Path(__file__).resolve().parents[1] / "data" / "cuda"


def test_items_come_back_in_order_after_their_pages_left_memory(tmp_path):
    pages = PagedList(str(tmp_path), page_items=4, resident_pages=2)
    for i in range(50):
        pages.append(IterationRecord(index=i))
        pages.trim()
    assert pages.pages_written > 0
    assert [r.index for r in pages] == list(range(50))
    assert pages[7].index == 7 and pages[-1].index == 49
    assert len(pages) == 50


def test_a_change_made_in_place_survives_the_page_leaving_memory(tmp_path):
    pages = PagedList(str(tmp_path), page_items=4, resident_pages=1)
    for i in range(40):
        pages.append(IterationRecord(index=i))
    pages.trim()
    pages[3].events += 5  # a page read back from the file
    pages.trim()
    for record in pages:  # changed while iterating: written back as the iteration moves on
        record.kernels = record.index
    pages.trim()
    assert pages[3].events == 5
    assert [r.kernels for r in pages] == list(range(40))


def test_pop_takes_the_last_item_also_from_a_page_in_the_file(tmp_path):
    pages = PagedList(str(tmp_path), page_items=4, resident_pages=1)
    for i in range(9):
        pages.append(i)
    pages.append(9)
    pages[0]  # the last page is now the least recently used
    pages.trim()
    assert pages.pop() == 9
    assert pages.pop() == 8  # its page now empty
    pages.append(8)
    assert list(pages) == list(range(9))
    with pytest.raises(IndexError):
        pages[9]


def test_a_short_list_never_makes_a_file(tmp_path):
    pages = PagedList(str(tmp_path))
    for i in range(PAGE_ITEMS * RESIDENT_PAGES):
        pages.append(i)
    pages.trim()
    assert pages.pages_written == 0
    pages.close()
    assert os.listdir(tmp_path) == []


def test_needs_trim_says_whether_trim_has_work(tmp_path):
    """``needs_trim`` (read by the engine at each boundary instead of a call of ``trim``) is
    true whenever more than the resident pages are in memory: after a new page, after a
    page read back; false once ``trim`` has run."""
    pages = PagedList(str(tmp_path), page_items=4, resident_pages=2)
    for i in range(8):  # two pages: none too many
        pages.append(i)
    assert not pages.needs_trim
    pages.append(8)  # a third page
    assert pages.needs_trim
    pages.trim()
    assert not pages.needs_trim and pages.pages_written == 1
    assert pages[0] == 0  # page 0 read back: a third page in memory again
    assert pages.needs_trim
    pages.trim()
    assert not pages.needs_trim


def test_a_long_list_keeps_few_items_in_memory(tmp_path):
    """Memory does not grow with the number of iterations: past the resident pages, items
    go to the file (the 180x resnet tile's 540 iterations once all stayed in memory)."""
    pages = PagedList(str(tmp_path))
    for i in range(PAGE_ITEMS * RESIDENT_PAGES * 4):
        pages.append(i)
        if i % PAGE_ITEMS == 0:
            pages.trim()
    pages.trim()
    resident = sum(map(len, pages._resident.values()))
    assert resident <= PAGE_ITEMS * RESIDENT_PAGES <= 256
    assert pages.pages_written >= 2
    assert list(pages) == list(range(PAGE_ITEMS * RESIDENT_PAGES * 4))
    pages.close()


def _records(path: Path, per_iteration) -> list:
    splitter = Splitter(SplitOptions(keep_events=False, pending_limit=50),
                        spill=TempFileSpill(), per_iteration=per_iteration)
    records = []
    outcome = read_through(str(path), splitter, on_record=records.append)
    assert outcome.error is None
    return [r.to_dict() for r in records]


@pytest.mark.parametrize("name", ["train_eval", "serving_graphs_annotated"])
def test_paging_every_iteration_out_after_each_batch_changes_no_record(name, tmp_path):
    """Recorded GPU loops in Kineto's order (a step's GPU work long after its CPU ops, so
    pages come back), with pages of one iteration and one page in memory."""
    path = CUDA / f"{name}.json.gz"
    kept = _records(path, list)
    made = []

    def paged_list():
        made.append(PagedList(str(tmp_path), page_items=1, resident_pages=1))
        return made[-1]

    paged = _records(path, paged_list)
    assert sum(r["type"] == "iteration" for r in kept) >= 3
    assert paged == kept
    assert min(p.pages_read for p in made) > 0  # records, facts, breakdowns all came back


def test_the_manifest_written_entry_by_entry_is_the_text_of_json_dump(tmp_path):
    """``manifest_entries.dump_manifest`` against ``json.dumps(indent=1)`` of the same manifest
    as plain lists, on a recorded GPU loop (breakdowns, top kernels, nested lists) and with
    no iteration at all; an entry assigned (an outlier's reason) reads back changed."""
    records = [r for r in _records_of(CUDA / "train_eval.json.gz")]
    files = {r.index: f"iteration_{r.index:05d}.json.gz" for r in records[::2]}
    for chosen in (records, []):
        entries = ManifestIterations(chosen, files)
        manifest = {"format": "f", "iterations": entries, "outside": {"events": 3},
                    "steady_state": {"first": 0, "last": 1}}
        if chosen:
            entries[1] = {**entries[1], "outlier_reason": "2.0x median, eval x1"}
            assert entries[1]["outlier_reason"] == "2.0x median, eval x1"
        text = io.BytesIO()
        dump_manifest(manifest, text)
        plain = dict(manifest, iterations=list(entries))
        assert text.getvalue().decode() == json.dumps(plain, indent=1)
        assert json.loads(text.getvalue().decode())["iterations"] == list(entries)
        assert pickle.loads(pickle.dumps(entries)) == list(entries)


@pytest.mark.parametrize("count", [1, PAGE_ITEMS + 1, CHUNK_ENTRIES + PAGE_ITEMS + 3])
def test_the_entries_made_a_page_at_a_time_are_those_made_one_by_one(count, tmp_path):
    """``ManifestIterations`` makes its entries a page of records at a time
    (``_shared_entries``: one dict display and a file name each); its entries, what
    ``to_read`` gives and the text ``dump_manifest`` writes are those of ``manifest_entry``
    one record at a time and ``to_dict``: with ``extra`` keys (one named ``file``, which the
    file's name overrides), entries assigned since, a number that is not finite, records
    without a file, paged or in a list, across pages and chunks."""
    paged = PagedList(str(tmp_path))
    records = []
    for i in range(count):
        record = IterationRecord(i, start_ts=i * 6, end_ts=i * 6 + 5.5, first_op="op",
                                 events=1, gpu_busy_us=i / 7,
                                 breakdown={"host": {"cpu_op_us": i / 3}})
        if i % 3:  # GPU work past its CPU window
            record.gpu_start_ts, record.gpu_end_ts = i * 6 + 1.0, i * 6 + 9.25
        if i % 5 == 2:
            record.extra = {"tag": i, "file": "not this"}
        if i == count - 1:
            record.gpu_active_us = float("inf")
        records.append(record)
        paged.append(record)
        paged.trim()
    files = {r.index: f"iteration_{r.index:05d}.json" for r in records if r.index % 4}
    for held in (records, paged):
        entries = ManifestIterations(held, files)
        entries[count // 2] = {**entries[count // 2], "outlier_reason": "changed"}
        one_by_one = [manifest_entry(r, files) for r in records]
        one_by_one[count // 2]["outlier_reason"] = "changed"
        assert list(entries) == one_by_one
        assert [entry["file"] for entry in one_by_one] == [files.get(i) for i in range(count)]
        text = io.BytesIO()
        dump_manifest({"iterations": entries}, text)
        assert text.getvalue().decode() == strict_json({"iterations": one_by_one}, indent=1)
        assert list(entries.to_read()) == one_by_one
    if count > 2:  # ``to_dict``: ``type`` first, ``extra`` spread over the field ``file``
        typed = records[2].to_dict()
        assert list(typed)[:2] == ["type", "index"] and typed["file"] == "not this"
        assert {**typed, "file": files.get(2)} == {"type": "iteration", **one_by_one[2]}


@pytest.mark.parametrize("limit", [None, 4])
def test_the_table_made_as_the_manifest_is_written_is_build_tables(limit):
    """``dump_manifest`` hands the entries to ``read`` (a chunk at a time) as
    ``entries_to_read`` gives them: a ``summary.TableBuilder`` fed so (``split``'s table,
    ``add_many``) is ``build_table`` of the manifest, with an entry assigned since, one
    holding a number that is not finite, and as a list."""
    records = _records_of(CUDA / "train_eval.json.gz")
    records[2].gpu_active_us = float("inf")
    entries = ManifestIterations(records, {})
    entries[1] = {**entries[1], "outlier": True, "outlier_reason": "2.0x median, eval x1"}
    for iterations in (entries, list(entries)):
        manifest = {"input": "t", "complete": True, "iterations": iterations,
                    "steady_state": {"first": 1, "last": len(records) - 1}}
        builder = TableBuilder(limit)
        builder.start(manifest)
        dump_manifest(manifest, io.BytesIO(), builder.add_many)
        made, wanted = builder.table(), build_table(manifest, limit)
        if limit is None:
            assert made == wanted
        else:
            texts = [io.StringIO(), io.StringIO()]
            render_text(made, texts[0], limit=limit)
            render_text(wanted, texts[1], limit=limit)
            assert texts[0].getvalue() == texts[1].getvalue()
        assert 1 in made["footer"]["outliers"]


@pytest.mark.parametrize("name", ["\ud800 lone", "a\udc00\ud83d\ude00", "\U0001f600 emoji",
                                  "\x00\x1f\x7f", "\u00e9\u2028", "1e-05 1e+16"])
@pytest.mark.parametrize("count", [0, 1, 256, 300])
def test_the_manifest_text_is_json_dumps_whatever_the_strings_and_chunks(name, count):
    """``dump_manifest`` lays out the C encoder's text with ``msgspec.json.format``, a chunk
    of entries at a time: the text is ``strict_json(indent=1)``'s for strings msgspec
    refuses to read back (a lone surrogate's escape: laid out by the standard library),
    for every count of entries around a chunk's size, and with numbers that are not finite."""
    entries = [{"index": i, "first_op": name, "ts": float("inf") if i == 7 else i / 3,
                "breakdown": {"top_kernels": [{"name": name}], "host": {}}} for i in range(count)]
    manifest = {"detection": {"name": name, "similarity": [0.5, float("nan")]},
                "iterations": entries, "outside": {}}
    text = io.BytesIO()
    dump_manifest(manifest, text)
    assert text.getvalue().decode() == strict_json(manifest, indent=1)


def test_the_manifest_text_is_json_dumps_for_numbers_of_every_size_and_odd_values():
    """``dump_manifest`` writes plain chunks from msgspec's text (``_plain_laid_out``), the
    others with the C encoder: the text is ``strict_json(indent=1)``'s for floats of every
    magnitude (where the two write exponents and small numbers differently), -0.0, large
    integers, and values msgspec writes otherwise or not at all (a key that is not a
    string, a tuple, a float subclass, non-finite numbers), one odd entry in a chunk."""
    numbers = [5e-324, 1e-05, 0.0001, 0.00012345, 1 / 3, -0.0, 2.5, 1e15 + 0.5, 1e16,
               1.7e18, 1.7976931348623157e308, -1e-7, 123456789.123, 10 ** 20, -2 ** 63]
    odd = [{1: "int key"}, (1, 2), type("F", (float,), {})(1.5), float("nan"), float("-inf")]
    cases = [(value, None) for value in numbers] + [(2.5, extra) for extra in odd]
    for value, extra in cases:  # a chunk each: one number that differs sends all to the encoder
        entries = [{"index": i, "value": value, "nested": {"x": [value, {"y": value}]}}
                   for i in range(3)]
        if extra is not None:
            entries[1]["extra"] = extra
        manifest = {"iterations": entries, "outside": {}}
        text = io.BytesIO()
        dump_manifest(manifest, text)
        assert text.getvalue().decode() == strict_json(manifest, indent=1)


def test_the_manifest_text_is_json_dumps_with_entries_of_the_same_keys_and_odd_values():
    """Entries of the same keys are looked at a key at a time (``_plain_columns``): one odd
    value in a column, or in a nested dict or list of it, still sends the chunk to the
    encoder; a key of a subclass of ``str`` is written as its text by both."""
    key = type("Key", (str,), {})
    odd = [1e16, 1e-05, float("nan"), (1, 2), type("F", (float,), {})(1.5), {1: "int key"},
           [1, {"y": 1e-07}], {"y": [True, 1.7e18]}, None, "text", 0.0, -0.0]
    for value in odd:
        for at in ("value", "nested"):
            entries = [{"index": i, "value": 2.5, "nested": {"x": [2.5, {"y": 0.5}]}}
                       for i in range(4)]
            entries[2][at] = value
            entries[3] = {key(k) if k == "index" else k: v for k, v in entries[3].items()}
            manifest = {"iterations": entries, "outside": {}}
            text = io.BytesIO()
            dump_manifest(manifest, text)
            assert text.getvalue().decode() == strict_json(manifest, indent=1)


def _records_of(path: Path) -> list:
    return [r for r in scan_records(str(path), SplitOptions()) if r.__class__ is IterationRecord]


def test_the_manifest_text_is_json_dumps_for_columns_of_mixed_floats():
    """A column of floats is plain from its least and greatest alone where all are zero or
    all at least ``_FIXED_LOW`` from it on one side; any other mix (zeros and small
    numbers, both signs, a huge one, a non-finite one) is looked at value by value or sent
    to the encoder: the text is ``strict_json(indent=1)``'s either way."""
    columns = [[0.0, 0.0, 0.0], [-0.0, 0.0, 0.0], [0.5, 2.5, 1e15], [-0.5, -2.5, -1e-4],
               [0.0, 0.5, 1e-05], [0.0, 2.5, -3.5], [1e-05, 2.5, 3.5], [0.5, 1e16, 2.5],
               [-1e16, -0.5, -2.5], [0.5, float("inf"), float("-inf")], [1e308, 1e308, 0.5],
               [0.0, -1e-07, 0.0], [0.0001, 0.5, 7.0]]
    for column in columns:
        entries = [{"index": i, "value": value, "nested": {"x": value}}
                   for i, value in enumerate(column)]
        manifest = {"iterations": entries, "outside": {}}
        text = io.BytesIO()
        dump_manifest(manifest, text)
        assert text.getvalue().decode() == strict_json(manifest, indent=1), column


def test_a_sealed_list_drops_the_pages_it_read_back_without_writing_them(tmp_path):
    pages = PagedList(str(tmp_path), page_items=4, resident_pages=1)
    for i in range(40):
        pages.append(i)
    pages.trim()
    written = pages.pages_written
    pages.seal()
    assert list(pages) == list(range(40))
    assert list(pages) == list(range(40))
    assert pages.pages_written == written + 1  # only the last page, never written before


def test_items_finished_with_are_final_where_read_without_a_page_written(tmp_path):
    pages = PagedList(str(tmp_path), page_items=4, resident_pages=1)
    for i in range(12):
        pages.append(IterationRecord(index=i))
    pages.trim()
    written, finished = pages.pages_written, []

    def finish(number, records):
        finished.append(number)
        for record in records:
            record.end_ts = record.index * 10
    pages.finish_with(finish)
    assert finished == [2]  # the page in memory, at once
    assert [r.end_ts for r in pages.read()] == [i * 10 for i in range(12)]
    assert [r.end_ts for r in pages.read()] == [i * 10 for i in range(12)]
    assert finished == [2, 0, 1, 0, 1]  # read back twice: made final each time
    assert pages.pages_written == written
    pages[1].end_ts = -1  # changed once final ...
    pages[9]
    pages.trim()  # ... and written back so: never made final again
    assert pages.pages_written > written
    del finished[:]
    assert [r.end_ts for r in pages.read()][:4] == [0, -1, 20, 30]
    assert 0 not in finished


def _slots_of(breakdown) -> dict:
    """Every slot's value of a breakdown, its unions as their state."""
    slots = {slot: getattr(breakdown, slot) for slot in breakdown.__slots__}
    slots["layers"] = [u.__reduce__()[1] for u in slots["layers"]]
    slots["cpu_ops"] = {k: u.__reduce__()[1] for k, u in slots["cpu_ops"].items()}
    return slots


def test_a_paged_breakdown_comes_back_with_every_slot():
    # A slot added to IterationBreakdown but not to its __reduce__ (or to its page's columns)
    # is lost when its page leaves memory (the GPU unions of the busy and active time were,
    # after a merge).
    from stream_split.core.breakdown import IterationBreakdown
    breakdown = IterationBreakdown()
    breakdown.add_gpu("kernel", "gemm", 10.0, 20.0)
    breakdown.add_op(("1", "2"), 5.0, 25.0)
    for slot in IterationBreakdown.__slots__:
        if getattr(breakdown, slot) in (None, 0, 0.0, {}, []):
            setattr(breakdown, slot, {"a slot": slot})
    back = pickle.loads(pickle.dumps(breakdown))
    assert _slots_of(back) == _slots_of(breakdown)
    # a page of them: the unions of each one, however many, come back to their own
    two_threads, nothing = IterationBreakdown(), IterationBreakdown()
    two_threads.add_op(1, 1.0, 2.0)
    two_threads.add_op(2, 3.0, 5.0)
    two_threads.freeze_gpu()
    page = [two_threads, breakdown, nothing, two_threads]
    pages = PagedList(page_items=4, resident_pages=0)
    for item in page:
        pages.append(item)
    pages.trim()
    assert pages.pages_written == 1
    assert [_slots_of(b) for b in pages.read()] == [_slots_of(b) for b in page]


def test_the_breakdowns_are_let_go_once_every_record_is_final(tmp_path):
    made = []

    def paged_list():
        made.append(PagedList(str(tmp_path)))
        return made[-1]

    splitter = Splitter(SplitOptions(keep_events=False), per_iteration=paged_list)
    assert read_through(str(CUDA / "train_eval.json.gz"), splitter).error is None
    records, breakdowns = made[0], made[2]  # as the engine makes them
    assert len(records) >= 3 and all(r.breakdown for r in records.read())
    assert len(breakdowns) == 0  # closed: in the records now, none in the file


def test_the_columns_of_entries_are_plain_where_each_entry_is():
    """``_plain_columns`` (every value in one list, a column its slice; one comparison of
    types where each key's values are of one type; a column of zeros by one ``count``)
    says what ``_plain_each`` says of the entries one by one, for entries of the same keys
    whose values are of one type a key, or not, with zeros, NaN and floats out of range in
    any place; entries of the same keys in another order are not of the same keys."""
    from stream_split.manifest_entries import _plain_columns, _plain_each
    rng = random.Random(7)
    pool = [0.0, -0.0, 0.0, 2.5, 1e-05, 1e16, float("nan"), None, 3, True, "s", 0.0,
            {"y": 0.0}, {"y": 1e-07}, [0.0, 1.5], [], (1, 2)]
    for _ in range(400):
        width, count = rng.randint(0, 4), rng.randint(1, 6)
        template = [rng.choice(pool) for _ in range(width)]
        entries = [{f"k{at}": (value if rng.random() < 0.8 else rng.choice(pool))
                    for at, value in enumerate(template)} for _ in range(count)]
        assert _plain_columns(entries) == all(map(_plain_each, entries))
    same = [{"a": 0.0, "b": 1}, {"a": 0.0, "b": 1}]
    assert _plain_columns(same) is True
    assert _plain_columns([same[0], {"b": 1, "a": 0.0}]) is None
    assert _plain_columns([same[0], {"a": 0.0}]) is None
    assert _plain_columns([{"a": float("nan")}, {"a": 0.0}]) is False
    assert _plain_columns([{"a": 0.0}, {"a": float("nan")}]) is False


def test_the_final_dicts_of_a_page_read_packed_are_those_of_its_breakdowns():
    """``breakdown.final_dicts`` of a page as the file holds it (``read_page(packed=True)``)
    gives each breakdown's ``to_dict``: made straight from the packed values where no
    breakdown of the page has GPU work or kernels, of the objects where one has."""
    from stream_split.core.breakdown import ARRAY_MIN_INTERVALS, IterationBreakdown, final_dicts
    one, two, nothing, delayed, frozen, many, whole = (IterationBreakdown() for _ in range(7))
    one.add_op(("1", "2"), 5.0, 25.123456)
    two.add_op(1, 1.0, 2.0)
    two.add_op(2, 3.0, 5.5)
    delayed.add_op(1, 0.5, 1.25)
    delayed.add_launch_delay(3.3333333)
    delayed.add_launch_delay(1.0)
    frozen.add_op(1, 2.0, 4.0)
    frozen.freeze_gpu()  # four layers made, none with work
    for i in range(ARRAY_MIN_INTERVALS + 1):  # compacted: its union's times in arrays
        many.add_op(7, i * 10.0, i * 10.0 + 0.1)
    many.compact_host()
    whole.add_op(1, 3, 8)  # integer times, kept as given
    cpu_only = [one, two, nothing, delayed, frozen, many, whole]
    gpu = IterationBreakdown()
    gpu.add_gpu("kernel", "gemm", 10.0, 20.0)
    gpu.add_op(1, 5.0, 6.0)
    for page, spans in ((cpu_only, [None] * len(cpu_only)),
                        (cpu_only + [gpu], [None] * len(cpu_only) + [12.5])):
        pages = PagedList(page_items=len(page), resident_pages=0)
        for item in page:
            pages.append(item)
        pages.trim()
        packed = pages.read_page(0, packed=True)
        assert packed[0] is IterationBreakdown  # as the file holds it, not unpacked
        expected = [b.to_dict(span) for b, span in zip(page, spans)]
        made = final_dicts(packed, spans)
        assert made == expected
        assert list(map(json.dumps, made)) == list(map(json.dumps, expected))  # the same
        # types too (an integer time stays one)
        assert final_dicts(page, spans) == expected  # a list: its objects'
        assert [_slots_of(b) for b in pages.read_page(0)] == [_slots_of(b) for b in page]


def test_paging_the_records_of_tiny_cpu_iterations_changes_none(tmp_path):
    """A trace of one-op iterations, every page but one in the file: its breakdowns' final
    dicts made from their pages as the file holds them (``breakdown.final_dicts``) are
    those of a split that keeps them in memory."""
    path = tmp_path / "oneop.json"
    events = [{"ph": "X", "cat": "cpu_op", "name": "train_step", "pid": 1, "tid": 1,
               "ts": i * 6 + (i % 3) * 0.25, "dur": 5 + (i % 7) / 3} for i in range(300)]
    path.write_text(json.dumps({"traceEvents": events}))
    kept = _records(path, list)

    def paged_list():
        return PagedList(str(tmp_path), page_items=8, resident_pages=1)

    assert sum(r["type"] == "iteration" for r in kept) >= 250
    assert _records(path, paged_list) == kept


@pytest.mark.parametrize("shape", ["one_op", "two_intervals", "int_times", "no_ops",
                                   "kernels", "delays", "two_threads", "negative_zero"])
def test_a_page_of_breakdowns_held_as_flat_columns_reads_back_as_its_objects(shape):
    """A page whose unions all hold lists is written as flat columns (``_flat_states``), its
    all-empty dict slots as None: its breakdowns come back slot for slot, and its final dicts
    (``final_dicts``, from the page as the file holds it: the one-thread path that makes the
    dicts inline included) are each one's ``to_dict``, types, key order and signed zeros
    too."""
    from stream_split.core.breakdown import IterationBreakdown, final_dicts
    page = []
    for i in range(12):
        breakdown = IterationBreakdown()
        if shape != "no_ops":
            start = i * 6 if shape == "int_times" else i * 6.0 + i / 7
            breakdown.add_op((1, 1), start, start + (5 if shape == "int_times" else 5.25))
        if shape == "two_intervals" and i % 2:
            breakdown.add_op((1, 1), i * 6.0 + 5.5, i * 6.0 + 5.75)
        if shape == "two_threads" and i % 3 == 0:
            breakdown.add_op((1, 2), i * 6.0, i * 6.0 + 1.0)
        if shape == "kernels" and i == 5:
            breakdown.kernels["gemm"] = [1, 2.5]
        if shape == "delays" and i == 4:
            breakdown.add_launch_delay(1.5)
        if shape == "negative_zero":
            breakdown.cpu_ops[(1, 1)].starts[0] = 0.0
            breakdown.cpu_ops[(1, 1)].ends[0] = -0.0  # a length of -0.0
            breakdown.cpu_ops[(1, 1)].frozen_us = -0.0
            breakdown.comm_kernel_us = -0.0
        page.append(breakdown)
    pages = PagedList(page_items=len(page), resident_pages=0)
    for item in page:
        pages.append(item)
    pages.trim()
    spans = [None] * len(page)
    expected = [b.to_dict(None) for b in page]
    made = final_dicts(pages.read_page(0, packed=True), spans)
    assert list(map(repr, made)) == list(map(repr, expected))
    assert [_slots_of(b) for b in pages.read_page(0)] == [_slots_of(b) for b in page]


def test_a_family_of_small_items_grows_every_members_pages_alike(tmp_path):
    """``paged_lists``: at the first ``trim()`` of any member, before a page is written,
    every member's pages hold ``MAX_PAGE_ITEMS`` where the items pickle small (the records
    and their breakdowns stay page for page); the items stay in order, in memory and back
    from the file."""
    make = paged_lists(str(tmp_path))
    records, breakdowns, facts = make(), make(), make()
    count = 3 * MAX_PAGE_ITEMS + 5
    for i in range(count):
        records.append(i)
        breakdowns.append(-i)
        if i % 5 == 0:
            facts.append(i)
        if records.needs_trim:
            records.trim()
            breakdowns.trim()
    facts.trim()
    assert records.pages_written > 0 and facts.pages_written == 0
    for paged, expected in ((records, list(range(count))),
                            (breakdowns, [-i for i in range(count)]),
                            (facts, list(range(0, count, 5)))):
        assert len(paged.read_page(0)) == min(MAX_PAGE_ITEMS, len(expected))
        assert list(paged.read()) == expected == list(paged)
    assert records.read_page(2)[0] == -breakdowns.read_page(2)[0] == 2 * MAX_PAGE_ITEMS


def test_a_family_of_large_items_keeps_its_pages(tmp_path):
    """Items whose first page pickles beyond ``PAGE_BYTES`` halved: pages of
    ``PAGE_ITEMS`` (memory bounded by pages, not by a number of items alone)."""
    make = paged_lists(str(tmp_path))
    small, large = make(), make()
    item_bytes = PAGE_BYTES // PAGE_ITEMS  # a page of two PAGE_ITEMS is too large
    for i in range(3 * PAGE_ITEMS):
        small.append(i)
        large.append(bytes([i % 256]) * item_bytes)
    small.trim()
    large.trim()
    assert large.pages_written == small.pages_written == 1
    assert len(small.read_page(0)) == len(large.read_page(0)) == PAGE_ITEMS
    assert [item[0] for item in large.read()] == [i % 256 for i in range(3 * PAGE_ITEMS)]


def test_a_family_grown_while_a_member_is_iterated_gives_every_item_once(tmp_path):
    """The first ``trim()`` comes from iterating a member (``__iter__`` trims after each
    page): its pages grow under the iteration, which goes on from the next item."""
    make = paged_lists(str(tmp_path))
    paged = make()
    count = 5 * PAGE_ITEMS + 3
    for i in range(count):
        paged.append([i])
    seen = []
    for item in paged:
        seen.append(item[0])
        item.append(0)  # changed in place: kept
    assert seen == list(range(count))
    assert len(paged.read_page(0)) > PAGE_ITEMS
    assert all(item == [i, 0] for i, item in enumerate(paged.read()))


def test_a_split_through_a_family_of_lists_changes_no_record(tmp_path):
    """One-op iterations (small state: the family's pages grow), some pages in the file:
    the records of a split that keeps them in lists."""
    path = tmp_path / "oneop.json"
    events = [{"ph": "X", "cat": "cpu_op", "name": "train_step", "pid": 1, "tid": 1,
               "ts": i * 6 + (i % 3) * 0.25, "dur": 5 + (i % 7) / 3} for i in range(1500)]
    path.write_text(json.dumps({"traceEvents": events}))
    make, made = paged_lists(str(tmp_path)), []

    def paged_list():
        made.append(make())
        return made[-1]

    assert _records(path, paged_list) == _records(path, list)
    assert made[0].pages_written > 0 and len(made[0].read_page(0)) == MAX_PAGE_ITEMS
