"""The iteration records made final at the end of the input (``Splitter``'s last step).

What the end decides of each record: its start, where the Python frame that opens its step came
after its boundary (``owners.StepOpeners``); its end, the next one's start; its active GPU time
capped; its kind, phase and completeness; its breakdown's numbers. ``FinalRecords`` makes them
a page of records at a time. Records held in a list are made final in one pass. Those of a long
trace (a ``pages.PagedList``, most of its pages in a file) are read once for their numbers
(what ``stats`` judges before anything is written: ``Splitter.watch_final``), and made final
whole where they are read next (``PagedList.finish_with``: the pass that writes the manifest's
entries), not written back final by a pass of their own and read again.
"""
from __future__ import annotations

from operator import attrgetter, itemgetter

from stream_split.core.breakdown import final_dicts
from stream_split.core.records import IterationRecord
from stream_split.native import NATIVE as _native  # (None: the Python fallbacks)
from stream_split.pages import PagedList


class FinalRecords:
    """What makes ``count`` records final (see the module): ``opened`` (iteration -> the
    start and name of the frame that opens it, ``Windows.opened_steps``), ``last_end`` (where
    the last one ends: None or inf where the windows do not say), each one's kind and
    (phase, evidence), whether the input was ``complete``, and each one's breakdown (a list,
    or a ``PagedList`` paged as the records are)."""

    def __init__(self, count: int, opened: dict, last_end, kinds, phases, complete: bool,
                 breakdowns):
        self._count, self._opened, self._last_end = count, opened, last_end
        self._kinds, self._phases, self._complete = kinds, phases, complete
        self._breakdowns = breakdowns
        # Per page read by ``read``: the index of its first record, and the start of the
        # next page's first record as given (None after the last page).
        self._firsts: list = []
        self._starts_after: list = []

    def read(self, records, visit=None) -> int:
        """Read ``records`` (a list, or a ``PagedList``) once, a page at a time, each page (a
        list) handed to ``visit`` once its numbers are final; returns the events in them. A
        list is
        made final whole; a ``PagedList`` is made final where it is read next
        (``PagedList.finish_with``), the breakdowns of its pages not final yet kept until
        then, the others let go."""
        paged = isinstance(records, PagedList)
        pages = records.read_pages() if paged else iter((records,))
        events, first = 0, 0
        page = next(pages, None)
        while page is not None:
            following = next(pages, None)  # the start of its first record, as given
            self._firsts.append(first)
            self._starts_after.append(None if following is None else following[0].start_ts)
            events += self._finish(len(self._firsts) - 1, page, visit, not paged)
            first += len(page)
            page = following
        if paged:
            records.finish_with(self.page)
            self._keep_breakdowns(records.unfinished())
        else:
            self._breakdowns = None  # in the records now
        return events

    def _keep_breakdowns(self, pages: set) -> None:
        """Keep the breakdowns of the records of ``pages`` only (those not final yet): the
        others are in their records now (every one of them, where none was written to the
        file: a trace of up to ``pages.PAGE_ITEMS * RESIDENT_PAGES`` iterations)."""
        breakdowns = self._breakdowns
        if not isinstance(breakdowns, PagedList):
            return
        if pages:
            breakdowns.keep_only(pages)
        else:
            breakdowns.close()
            self._breakdowns = None

    def page(self, number: int, records: list) -> None:
        """Make the records of page ``number`` (as ``read`` read it) final, breakdown and all."""
        self._finish(number, records, None, True)

    def _finish(self, number: int, records: list, visit, breakdowns: bool) -> int:
        """Make the records of page ``number`` final (``breakdowns``: their breakdowns too),
        then handed to ``visit`` (the list); returns the events in them."""
        first, n = self._firsts[number], len(records)
        count, opened = self._count, self._opened
        # Each one's end: the next one's start as given (taken before any start moves to the
        # frame that opens it), or that frame's start; the page's last one's, the next
        # page's first start (none after the last page)
        starts, gpu_events, events = record_columns(records, _FINISH_READS)
        ends = starts[1:]
        ends.append(self._starts_after[number])
        if opened:  # (most traces: no frame opens a step after its boundary)
            for at, record in enumerate(records):
                if first + at + 1 in opened:
                    ends[at] = opened[first + at + 1][0]
                if first + at in opened:
                    record.start_ts, record.first_op = opened[first + at]
        if n and first + n == count:  # the last record of all
            last = records[-1]
            last_end = self._last_end
            if last_end is not None and last_end != float("inf"):
                ends[-1] = last_end
            else:
                ends[-1] = last.start_ts if last.end_ts < last.start_ts else last.end_ts
        any_gpu = any(gpu_events)
        if any_gpu:
            for record in records:
                if record.gpu_events:  # see ``Splitter._own_linked``: work decided out of order
                    record.gpu_active_us = min(record.gpu_active_us, record.gpu_busy_us,
                                               record.gpu_end_ts - record.gpu_start_ts)
        phases = self._phases[first:first + n]
        _set_final(records, (ends, self._kinds[first:first + n], [self._complete] * n,
                             list(map(_PHASE, phases)), list(map(_EVIDENCE, phases)),
                             self._breakdown_dicts(number, records, any_gpu) if breakdowns
                             else list(map(_BREAKDOWN, records))))
        if visit is not None:
            visit(records)
        return sum(events)

    def _breakdown_dicts(self, number: int, records: list, any_gpu: bool) -> list:
        """The final dicts of the breakdowns of page ``number``'s ``records``
        (``breakdown.final_dicts``: from a page as the file holds it, where it is there);
        ``any_gpu``: whether any of them has GPU work (``_finish`` read it already)."""
        if not any_gpu:  # (a trace of CPU iterations)
            spans = [None] * len(records)
        else:
            spans = [record.gpu_end_ts - record.gpu_start_ts if record.gpu_events else None
                     for record in records]
        breakdowns = self._breakdowns
        if isinstance(breakdowns, PagedList):  # paged as the records are
            return final_dicts(breakdowns.read_page(number, packed=True), spans)
        first = self._firsts[number]
        return final_dicts(breakdowns[first:first + len(records)], spans)


_BREAKDOWN = attrgetter("breakdown")
_PHASE, _EVIDENCE = itemgetter(0), itemgetter(1)
#: The fields ``FinalRecords._finish`` reads of every record of a page (``record_columns``).
_FINISH_READS = ("start_ts", "gpu_events", "events")


def record_columns(records: list, names: tuple) -> list:
    """A list a field of ``names`` (a tuple, kept: the native part remembers the offsets of
    the fields it names) of every one of ``records``' values of it, in order: by
    ``_native.slot_columns`` (one call in C for all of them) where built and every record is
    an ``IterationRecord``, else ``attrgetter`` a field at a time (some 170 instructions a
    value: a page's columns were read so 17 times on the way to the manifest)."""
    if _native is not None and records and records[0].__class__ is IterationRecord:
        try:
            return _native.slot_columns(records, names, False)
        except TypeError:  # (a record of another class among them)
            pass
    return [list(map(attrgetter(name), records)) for name in names]
#: The fields that ``FinalRecords._finish`` sets, in the order of its columns.
_FINAL_FIELDS = ("end_ts", "kind", "complete", "phase", "phase_evidence", "breakdown")


def _set_final_fallback(records: list, names: tuple, columns: tuple) -> None:
    """``_native.set_slots``'s fallback: each record's field ``names[i]`` set to
    ``columns[i][k]``, ``k`` its place."""
    for name, column in zip(names, columns):
        for record, value in zip(records, column):
            setattr(record, name, value)


def _set_final(records: list, columns: tuple) -> None:
    """Each of ``records`` (a page) given its final values of ``_FINAL_FIELDS``, a column of
    each: by ``_native.set_slots`` where built (no frame of Python a record), else a value at a
    time. Callgrind, 47 pages of one-op records made final as a split makes them (``read``
    with ``stats.RecordColumns.add_page``, then every page loaded again with its breakdowns),
    with ``breakdown._native_cpu_dicts`` and ``stats._judged_times``: 91.5 -> 76.3 M
    instructions."""
    if _native is not None and records and records[0].__class__ is IterationRecord:
        try:
            _native.set_slots(records, _FINAL_FIELDS, columns)
            return
        except TypeError:  # (a record of another class among them)
            pass
    _set_final_fallback(records, _FINAL_FIELDS, columns)
