"""A list whose old items wait in a temporary file: the engine's per-iteration state, bounded.

The engine keeps a few objects per iteration (its ``IterationRecord``, its breakdown, its
phase facts) that later events may still update: Kineto writes a step's GPU work long after its
CPU ops, so no iteration is ever certain to be done before the input ends. Kept in memory, a
trace of hundreds of thousands of iterations, or ``--follow`` on a server that runs for weeks,
grows without limit: by under 1 KB per iteration on a CPU-only trace, by some 21 KB on the
resnet training trace (pickled, at the end of the input). ``PagedList`` keeps them in pages
of ``PAGE_ITEMS`` (more where its family's first pages pickle small: ``paged_lists``); the
``RESIDENT_PAGES`` used most recently stay in memory, the others are pickled to an unnamed
temporary file (read back only by this process) and loaded again when an item of theirs is
asked for. An iteration's state is touched while its events are decided, which in a file's
order moves forward (the CPU sections, then the GPU block, each in time order), so few pages
come back more than once or twice.

The items are mutable and callers change them in place (``record.events += 1``): a page is
written back whole when it leaves memory, and only ``trim()`` makes one leave, so an item got
by ``[i]`` stays the object in the list until the next ``trim()`` (the engine trims between two
batches of input), and an item got from iterating stays so until the iteration has moved a
page past it. A caller that only reads goes through ``reading(items)`` (``PagedList.read``): a
page loaded for it is dropped, never written back. ``finish_with`` makes the items final where
they are read next, not in a pass of their own; once they are final, ``seal()`` saves writing
back what was only read. A list of up to ``PAGE_ITEMS * RESIDENT_PAGES`` items (128: more
iterations than most profiles hold) never touches the file. (It was 4,096 until 2026-12-04: the 180x
stripped resnet tile's 540 iterations then all stayed in memory, and ``boundaries`` peaked at
83 MB against 65.7 MB now, with ``IterationBreakdown.compact_host``; the same per-iteration
cost on a trace of 40 k one-op iterations, each of the first 4,096 iterations paged once
more: some 56 k instructions each.)
"""
from __future__ import annotations

import os
import pickle
from collections import OrderedDict

#: Items in one page (one pickle written or read at once), unless its family (``paged_lists``)
#: grows them.
PAGE_ITEMS = 64
#: Pages kept in memory at most after a ``trim()`` (the ones used last).
RESIDENT_PAGES = 2
#: Items a family's pages grow to at most (``paged_lists``): four times ``PAGE_ITEMS``.
MAX_PAGE_ITEMS = 256
#: Pickled bytes a family's pages grow to at most, as the first full page of each of its lists
#: says (``paged_lists``).
PAGE_BYTES = 64 * 1024


def paged_lists(directory: str | None = None):
    """A maker of ``PagedList``s (the engine's ``per_iteration``) in one family: their pages
    hold the same number of items (``FinalRecords`` reads the breakdowns of a page of records
    by its number), ``PAGE_ITEMS`` at first. At the first ``trim()`` of any of them, before a
    page is written, the family's pages grow to the most items (a power of two times
    ``PAGE_ITEMS``, up to ``MAX_PAGE_ITEMS``) whose pages pickle to at most ``PAGE_BYTES``,
    as the first page of each list says (the largest of them): most of the cost of paging
    is a page's (pickling it, the file, packing its columns), and a trace of one-op
    iterations pickles 64 records and their breakdowns to some 1.6 KB (callgrind,
    ``boundaries`` on 30 k one-op iterations: 256 items a page, 1.8 % fewer instructions).
    A page of large items (the resnet trace's breakdowns, 447 KB for 64) keeps its
    ``PAGE_ITEMS``: memory stays bounded by the pages, whatever the number of iterations."""
    family = _Family()

    def make() -> "PagedList":
        return PagedList(directory, family=family)
    return make


class _Family:
    """The lists ``paged_lists`` made, and whether their page size is decided."""
    __slots__ = ("members", "decided")

    def __init__(self):
        self.members: list = []
        self.decided = False

    def decide(self) -> None:
        """Grow every member's pages as ``paged_lists`` says, once (no page is written yet)."""
        self.decided = True
        per_item = max(map(_pickled_per_item, self.members), default=0.0)
        items = PAGE_ITEMS
        while items < MAX_PAGE_ITEMS and per_item * items * 2 <= PAGE_BYTES:
            items *= 2
        if items != PAGE_ITEMS:
            for paged in self.members:
                paged._repage(items)


def _pickled_per_item(paged: "PagedList") -> float:
    """The pickled bytes an item of ``paged``'s first page takes (0 with no page)."""
    page = paged._resident.get(0)
    if not page:
        return 0.0
    return len(pickle.dumps(_packed(page), protocol=pickle.HIGHEST_PROTOCOL)) / len(page)


def reading(items):
    """``items`` (a list or a ``PagedList``) to be read only: iterated (as often as wanted)
    through ``PagedList.read``, never written back."""
    return _Reading(items) if isinstance(items, PagedList) else items


def read_pages(items):
    """``items`` (a list or a ``PagedList``) a page at a time (lists of up to ``PAGE_ITEMS``
    items), to be read only: a ``PagedList``'s pages as ``PagedList.read_pages`` gives them,
    a list's slices."""
    if isinstance(items, PagedList):
        return items.read_pages()
    return (items[at:at + PAGE_ITEMS] for at in range(0, len(items), PAGE_ITEMS))


class _Reading:
    __slots__ = ("_items",)

    def __init__(self, items: "PagedList"):
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self):
        return self._items.read()


#: The class attributes of items whose pages are pickled as one value made for the whole page:
#: ``pack_page(items)`` (a page of items of that class: what is pickled) and
#: ``unpack_page(packed)`` (the items again), not a ``__reduce__`` call and a pickle of its
#: own per item.
PAGE_PACK, PAGE_UNPACK = "pack_page", "unpack_page"


def _packed(items: list):
    """A page as it is pickled: its items, or, where each is of one class that has
    ``PAGE_PACK``, ``(that class, its pack_page(items))``."""
    if items:
        kind = items[0].__class__
        pack = getattr(kind, PAGE_PACK, None)
        if pack is not None and set(map(type, items)) == {kind}:  # (read in C)
            return kind, pack(items)
    return items


def _unpacked(page) -> list:
    """The items of a page as ``_packed`` made it."""
    if page.__class__ is tuple:
        kind, packed = page
        return getattr(kind, PAGE_UNPACK)(packed)
    return page


class PagedList:
    """A list of picklable items (``append``, ``pop``, ``[i]``, ``[i] = item``, ``len``,
    iteration) with at most ``resident_pages`` pages in memory after each ``trim()``; the
    others in a temporary file in ``directory`` (the system's by default), made at the first
    page that leaves memory."""

    # (slots: ``_native.open_iteration`` appends at offsets, as ``append``'s first case)
    __slots__ = ("_directory", "_page_items", "_resident_pages", "_resident", "_stored", "_file",
                 "_len", "_sealed", "_clean", "needs_trim", "_hot", "_hot_items", "_unfinished",
                 "_finish", "pages_written", "pages_read", "_family")

    def __init__(self, directory: str | None = None, *, page_items: int = PAGE_ITEMS,
                 resident_pages: int = RESIDENT_PAGES, family: "_Family | None" = None):
        self._directory = directory
        self._page_items = page_items
        self._resident_pages = resident_pages
        self._resident: OrderedDict = OrderedDict()  # page number -> items, last used last
        self._stored: dict = {}  # page number -> (offset, size) of its pickle in the file
        self._file = None
        self._len = 0
        self._sealed = False  # read-only: a page read back is dropped, not written again
        self._clean: set = set()  # resident pages the file holds as they are
        #: More than ``resident_pages`` may be in memory: ``trim()`` has work to do (read
        #: without a call: the engine trims at each boundary, most often for nothing).
        self.needs_trim = False
        # The page used last (its number and items): most look-ups ask for it again, and
        # it is already the last in ``_resident``. Forgotten when a page leaves memory.
        self._hot, self._hot_items = -1, None
        # Pages the file holds as they were before ``finish_with``, and what makes them final.
        self._unfinished: set = set()
        self._finish = None
        #: Pages written to the file and read back from it (for tests and benchmarks).
        self.pages_written = 0
        self.pages_read = 0
        self._family = family  # its ``paged_lists`` family, if any
        if family is not None:
            family.members.append(self)

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def append(self, item) -> None:
        n = self._len
        number = n // self._page_items
        if number == self._hot:  # the page used last: the last in ``_resident`` already
            self._hot_items.append(item)
        else:
            self._page(number, create=True).append(item)
        self._len = n + 1

    def pop(self):
        """Remove and return the last item."""
        if not self._len:
            raise IndexError("pop from an empty PagedList")
        number = (self._len - 1) // self._page_items
        page = self._page(number)
        item = page.pop()
        self._len -= 1
        self._clean.discard(number)
        if not page:
            del self._resident[number]
            self._stored.pop(number, None)
            if number == self._hot:
                self._hot, self._hot_items = -1, None
        return item

    def __setitem__(self, index: int, item) -> None:
        """Item ``index`` (an existing one) is ``item`` from now on."""
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("PagedList assignment index out of range")
        number = index // self._page_items
        self._page(number)[index % self._page_items] = item
        self._clean.discard(number)

    def __getitem__(self, index: int):
        if 0 <= index < self._len and index // self._page_items == self._hot:
            return self._hot_items[index % self._page_items]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("PagedList index out of range")
        return self._page(index // self._page_items)[index % self._page_items]

    def __iter__(self):
        """Every item in order, a page at a time; pages beyond the resident ones go back to
        the file as the iteration moves on (with what the caller changed in them). (Taken
        by the index of the next item: its family may grow the pages at a ``trim()``.)"""
        at = 0
        while at < self._len:
            page = self._page(at // self._page_items)
            offset = at % self._page_items
            yield from (page[offset:] if offset else page)
            at += len(page) - offset
            self.trim()

    def read(self):
        """Every item in order, for reading only: a page that was not in memory is loaded,
        read and dropped, never written back (the caller changes nothing it is given), and
        the pages in memory stay as they are. Half the cost of ``__iter__`` on a list
        mostly in the file."""
        for page in self.read_pages():
            yield from page

    def read_pages(self):
        """The items of every page in order, a page (a list) at a time, for reading only (as
        ``read``). (The family's pages are grown, if ever, before any is read so: at its first
        ``trim()``, which a reader does not call.)"""
        for number in range((self._len + self._page_items - 1) // self._page_items):
            yield self.read_page(number)

    def read_page(self, number: int, packed: bool = False):
        """The items of page ``number`` (items ``number * page_items`` on), for reading only
        (as ``read``). ``packed``: a page read back from the file as ``(the items' class,
        its PAGE_PACK value)`` where its items are of one class that packs its pages, not
        unpacked, for a reader that takes what it needs straight from that
        (``core.breakdown.final_dicts``); a list of the items where the page is in memory,
        or its items are of no such class, or not final yet (``finish_with``)."""
        page = self._resident.get(number)
        if page is not None:
            return page
        if packed and number not in self._unfinished:
            return self._read_stored(number)
        return self._load(number)

    def finish_with(self, finish) -> None:
        """The items are made final by ``finish(number, items)``, which changes the items of
        page ``number`` in place, alike each time it is given the same: at once in the pages
        in memory, and in a page of the file each time it is read back (once written back,
        it is final there). A pass that made a long list's items final would write every
        page back, to be read again by the next: they are made final where they are read
        next instead (``core.finish``)."""
        self._finish = finish
        self._unfinished = set(self._stored)
        for number, items in self._resident.items():
            finish(number, items)

    def seal(self) -> None:
        """No item changes from now on (the records are final): a page that leaves memory
        after it was read back from the file is dropped, not written again."""
        self._sealed = True

    def unfinished(self) -> set:
        """The pages that ``finish_with``'s ``finish`` makes final when read back."""
        return set(self._unfinished)

    def keep_only(self, numbers) -> None:
        """Let go of every page but those of ``numbers``, in memory and in the file: the
        items of the others will not be asked for again (``core.finish`` keeps the
        breakdowns of the records not yet final)."""
        numbers = set(numbers)
        for number in [n for n in self._resident if n not in numbers]:
            del self._resident[number]
        for number in [n for n in self._stored if n not in numbers]:
            del self._stored[number]
        self._clean &= numbers
        self._hot, self._hot_items = -1, None

    def trim(self) -> None:
        """Write the pages used least recently to the file until at most ``resident_pages``
        are in memory (its family's page size decided first: ``paged_lists``)."""
        if self._family is not None and not self._family.decided:
            self._family.decide()
        while len(self._resident) > self._resident_pages:
            number, items = self._resident.popitem(last=False)
            if number == self._hot:
                self._hot, self._hot_items = -1, None
            if number in self._clean:
                self._clean.discard(number)
            else:
                self._store(number, items)
        self.needs_trim = False

    def _repage(self, page_items: int) -> None:
        """Hold the items in pages of ``page_items`` from now on (none is in the file yet)."""
        assert not self._stored, "a page in the file keeps its items"
        items = [item for number in sorted(self._resident) for item in self._resident[number]]
        self._page_items = page_items
        self._resident = OrderedDict((at // page_items, items[at:at + page_items])
                                     for at in range(0, len(items), page_items))
        self._hot, self._hot_items = -1, None
        self.needs_trim = len(self._resident) > self._resident_pages

    def _page(self, number: int, create: bool = False) -> list:
        page = self._resident.get(number)
        if page is not None:
            self._resident.move_to_end(number)
            self._hot, self._hot_items = number, page
            return page
        if number in self._stored:
            page = self._load(number)
            if self._sealed:
                self._clean.add(number)
        elif create:
            page = []
        else:
            raise IndexError(f"page {number} is neither in memory nor stored")
        self._resident[number] = page
        self.needs_trim = len(self._resident) > self._resident_pages
        self._hot, self._hot_items = number, page
        return page

    def _load(self, number: int) -> list:
        """The items of page ``number``, read back from the file."""
        items = _unpacked(self._read_stored(number))
        if number in self._unfinished:
            self._finish(number, items)
        return items

    def _read_stored(self, number: int):
        """Page ``number`` as the file holds it (``_packed``'s value)."""
        offset, size = self._stored[number]
        self._file.seek(offset)
        self.pages_read += 1
        return pickle.loads(self._file.read(size))

    def _store(self, number: int, items: list) -> None:
        """Pickle page ``number`` to the file: where it was when it still fits, else at the end."""
        data = pickle.dumps(_packed(items), protocol=pickle.HIGHEST_PROTOCOL)
        if self._file is None:
            import tempfile  # here: a run that never pages out never loads it (``spill``)
            self._file = tempfile.TemporaryFile(dir=self._directory,
                                                prefix="stream-split-pages-")
        offset, size = self._stored.get(number, (None, 0))
        if offset is None or len(data) > size:
            self._file.seek(0, os.SEEK_END)
            offset = self._file.tell()
        else:
            self._file.seek(offset)
        self._file.write(data)
        self._stored[number] = (offset, len(data))
        self._unfinished.discard(number)
        self.pages_written += 1

    def close(self) -> None:
        """Drop every item and give the file back (idempotent)."""
        self._resident.clear()
        self._hot, self._hot_items = -1, None
        self._stored.clear()
        self._clean.clear()
        self._unfinished.clear()
        self._finish = None
        self._len = 0
        if self._file is not None:
            self._file.close()
            self._file = None
