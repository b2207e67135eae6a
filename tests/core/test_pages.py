"""``pages.PagedList``: the engine's per-iteration state with its old pages in a file, and a
split whose iteration state is paged out after every batch giving the records of one kept in
memory."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from stream_split.core import SplitOptions
from stream_split.core.records import IterationRecord
from stream_split.pages import PagedList
from stream_split.run import read_through
from stream_split.core import Splitter
from stream_split.spill import TempFileSpill

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
    for i in range(4096):
        pages.append(i)
    pages.trim()
    assert pages.pages_written == 0
    pages.close()
    assert os.listdir(tmp_path) == []


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
