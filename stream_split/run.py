"""The one loop that drives the core: reader batches in, decisions out to the caller's sinks.

Every adapter (CLI commands, the library, ``--follow``, Beam) runs a trace through ``drive``
(opened by ``read_through``); none of them repeats its logic. ``drive`` ends with the one step
that needs every iteration (``stats.finish``: outliers) before it hands out the records. ``drive`` never raises for bad input: the error is returned
(one line) after the splitter has been closed, so whatever was decided before it is written.
"""
from __future__ import annotations

import gc
import signal
from contextlib import contextmanager
from dataclasses import dataclass, replace

import stream_split
from stream_split.allocator import give_back_free_pages
from stream_split.core import Splitter, SplitOptions
from stream_split.decode import MAX_EVENT_BYTES
from stream_split.errors import ReadInterrupted, TraceEventError, TraceInputError
from stream_split.follow import FollowedFile
from stream_split.options import check_honoured
from stream_split.pages import PagedList, paged_lists, read_pages
from stream_split.read import TraceReader
from stream_split.spill import TempFileSpill
from stream_split.stats import IterationStats, RecordColumns, finish


#: The signals that stop a run between two batches (with a truthful manifest): an interrupt,
#: a termination, a closed terminal, and SIGUSR1 (whose default would kill the process
#: with its staging folder left behind).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)


class StopRequest:
    """A request to stop reading (from a signal handler). ``drive`` honours it between two
    batches of events, never inside the engine, so what was decided stays consistent; a followed file
    or a pipe being waited on is told to stop waiting (``watch``; the reader polls).

    The first signal asks for the stop; further ones are only counted (``repeats``): raising
    from a handler could cut a write or the manifest in half. ``signal`` is the number of the
    first one, for the exit status (128 + signal)."""

    def __init__(self):
        self.signal: int | None = None
        self.repeats = 0
        self._sources: list = []

    @property
    def requested(self) -> bool:
        return self.signal is not None

    def install(self) -> "StopRequest":
        """Make every one of ``STOP_SIGNALS`` request this stop (main thread only)."""
        for signum in STOP_SIGNALS:
            signal.signal(signum, self.request)
        return self

    def watch(self, source) -> None:
        """A source with ``stop()`` (``FollowedFile``) to release when a stop is requested."""
        self._sources.append(source)

    @staticmethod
    def ignore_further() -> None:
        """Ignore every one of ``STOP_SIGNALS`` from now on (called from the main thread; it
        holds for every thread): for a process that has decided how it ends. Python puts
        back the default handlers when it shuts down (but leaves an ignored signal ignored),
        so a signal that came during the shutdown would kill the process by the signal
        instead of letting it exit with its status."""
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)

    def request(self, signum: int = 0, _frame=None) -> None:
        if self.signal is not None:
            self.repeats += 1
            return
        self.signal = signum
        for source in self._sources:
            source.stop()


@dataclass(slots=True)
class RunOutcome:
    """How a run ended: the reader's account (``reader_info``), the input error (one line)
    or None, whether a stop cut it short, and the reader (None when the input could not be
    opened; its header keys are still there after the run), and the verdicts on its
    iterations (``stats.finish``, made once: the manifest's steady state and outliers are
    taken from it, not from another pass over the records; None when the splitter was
    closed without a run)."""
    reader_info: dict
    error: str | None
    stopped: bool = False
    reader: TraceReader | None = None
    stats: IterationStats | None = None


#: The ``stop_reason`` of a run a signal stopped.
INTERRUPTED = ReadInterrupted.DEFAULT


def reader_info(reader: TraceReader | None) -> dict:
    if reader is None:
        return {"complete": False, "stop_reason": None, "form": None, "bytes_read": 0}
    return {"complete": reader.complete, "stop_reason": reader.stop_reason,
            "form": reader.form, "bytes_read": reader.bytes_read}


def new_splitter(options: SplitOptions, spill_dir: str | None = None) -> Splitter:
    """A splitter whose held events (``spill``) and per-iteration state (``pages``) go to
    temporary files in ``spill_dir`` when there are many."""
    return Splitter(options, spill=TempFileSpill(spill_dir),
                    per_iteration=paged_lists(spill_dir))


def drive(reader: TraceReader, splitter: Splitter, *, on_pairs=None, on_record=None,
          stop: StopRequest | None = None, on_records=None) -> RunOutcome:
    """Feed all of ``reader`` to ``splitter``, a batch (one chunk of input) at a time, until
    the end or until ``stop`` is requested; end its input; hand out every decision as it is
    made (``on_pairs(pairs)``, ``on_record(record)``; or ``on_records(records)``, a list of
    the records decided together, in order: a sink that flushes once for them, not once a
    record, ``write.JsonlRecordSink.write_many``)."""
    if on_records is None and on_record is not None:
        on_records = _one_by_one(on_record)
    with splitter, young_collections_only():  # the spill file is given back on every path
        return _drive(reader, splitter, on_pairs, on_records, stop)


def _one_by_one(on_record):
    """``on_records`` of a sink that takes one record at a time."""
    def on_records(records) -> None:
        for record in records:
            on_record(record)
    return on_records


@contextmanager
def young_collections_only():
    """Replace Python's automatic garbage collection, while a trace is read, by a collection
    of the young generations every ``COLLECT_EVERY`` batches (``collect_young``); while a
    split's pieces and manifest are written (``folder``), by none.

    Every event makes a few containers (its dict, a pair, a held item) that refcounting frees
    as soon as the event is decided; the automatic collector still walks them every 700
    allocations and, every hundred walks, everything alive (the interpreter's own objects
    too): it took about a quarter of the run's time (and 2 % of a split of one-op
    iterations while each piece and manifest entry was made). A cycle made while reading is
    still collected when it is young, and everything at the end (automatic collection
    resumes)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def settle_imports() -> None:
    """For a process that has loaded what it runs (the console script, once the CLI is
    imported): every object alive now is put out of the collector's reach (``gc.freeze``:
    the modules, classes, functions and tables the imports made, which live as long as the
    process), and automatic collection is on (``launch.script`` turns it off while the CLI
    is imported). The collector walked those tens of thousands of objects again and again
    while the imports made them (a young collection every 700 new containers, a full one
    every hundred or so), at each full collection of the run after them, and once more as
    the interpreter exits: 54 M of the 648 M instructions of ``stream-split boundaries`` on a
    one-event trace (callgrind, through the console script). A cycle the imports left is
    kept until the process ends."""
    gc.freeze()
    gc.enable()


#: Batches between two collections of the young generations (a collection walks every
#: object made since the last one that is still alive: the batch just read among them).
COLLECT_EVERY = 32


def collect_young(batches: int) -> None:
    """Collect the cycles among the objects made in the last ``COLLECT_EVERY`` batches (see
    ``young_collections_only``); survivors age as they would."""
    if batches % COLLECT_EVERY == 0:
        gc.collect(1)


def tidy_between_batches(batches: int) -> None:
    """After ``batches`` batches of a run, each at its own pace: the young objects' cycles
    collected (``collect_young``) and the heap's free pages given back to the system
    (``allocator.give_back_free_pages``)."""
    collect_young(batches)
    give_back_free_pages(batches)


#: Events fed to the engine between two looks at a stop request and two hand-outs of its
#: decisions: the input is fed in parts of exactly this many (``_parts``).
FEED_EVENTS = 1024


def _parts(batches, size: int = FEED_EVENTS):
    """The events of ``batches`` in parts of ``size`` (the last may hold fewer), whatever
    the batches: a part may join the end of one batch to the start of the next, and a run of
    frames is cut at a part's edge (``decode.Events.slice``). Where the parts end is where
    the engine hands out its decisions, and the order in which it hands out the events it
    spilled depends on that: so it is the same for a file and ranges decoded apart
    (``parallel.py``), and every piece holds its events in the same order. Live input (a
    pipe, ``--follow``) is not regrouped: holding its events until a part is full would delay
    the boundaries the online promise says are out before the next event."""
    carry = None
    try:
        for batch in batches:
            at, n = 0, len(batch)
            if carry is not None:
                at = min(size - len(carry), n)
                carry.extend(batch.slice(0, at))
                if len(carry) < size:
                    continue
                yield carry
                carry = None
            while n - at >= size:
                yield batch.slice(at, at + size) if (at, n) != (0, size) else batch
                at += size
            if at < n:
                carry = batch.slice(at, n)
    except Exception:  # a read error: what was read before it is fed first, then the error
        if carry is not None:
            yield carry
        raise
    if carry is not None:
        yield carry


def _listen(splitter: Splitter, on_records) -> RecordColumns:
    """Make ``splitter`` tell what this run hands out (boundary records only to
    ``on_records``), and gather what ``stats.finish`` judges as it makes each record final
    (returned: read once, not in a pass of its own over a long trace's records)."""
    splitter.boundary_records = on_records is not None
    columns = RecordColumns()
    splitter.watch_final(columns.add_page)
    return columns


def _drive(reader, splitter, on_pairs, on_records, stop) -> RunOutcome:
    error = None
    interrupted = False
    feed_batch = splitter.feed_batch
    keep = splitter.options.keep_events
    columns = _listen(splitter, on_records)

    def hand_out(final: RecordColumns | None = None) -> IterationStats | None:
        """Hand out what is decided; ``final`` (after ``end_of_input``: what is gathered of
        the records as they are made final): decide the rest, holding the records back until
        ``stats.finish`` has seen every iteration, and return its verdicts."""
        held = []
        while True:
            decided = splitter.decided()
            if on_pairs is not None and decided.pairs:
                on_pairs(decided.pairs)
            if final is not None:
                if on_records is not None:
                    held.extend(decided.records)
            elif on_records is not None and decided.records:
                on_records(decided.records)
            if not decided.more:
                break
        if final is None:
            return None
        stats = finish(splitter.iterations, columns=final)  # final after the last decision
        if isinstance(splitter.iterations, PagedList):
            splitter.iterations.seal()  # final: read from now on
        if on_records is not None:
            if held:
                on_records(held)
            for page in read_pages(splitter.iterations):  # in order, a page at a time
                on_records(page)
        return stats

    splitter.note_header(reader.header_before)  # known once the reader has its form
    try:
        read = reader.batches(raws=keep, slim=True)
        if not getattr(reader, "live", False):  # live input is fed as it comes (online)
            read = _parts(read)
        for fed, batch in enumerate(read, 1):
            feed_batch(batch.events, batch.raws if keep else None, batch.frame_runs, batch.checked)
            hand_out()
            tidy_between_batches(fed)
            if stop is not None and stop.requested:
                break
    except (TraceInputError, TraceEventError) as e:
        error = str(e)
    except ReadInterrupted:  # a stop requested while the reader waited for bytes
        interrupted = True
    hand_out()
    info = reader_info(reader)
    stopped = interrupted or (stop is not None and stop.requested)
    if stopped:
        info.update(complete=False, stop_reason=INTERRUPTED)
    # A cut-short input may have lost any iteration's GPU work (it comes last in Kineto's
    # layout): the core then marks no record complete.
    splitter.end_of_input(complete=error is None and info["complete"])
    return RunOutcome(info, error, stopped, stats=hand_out(final=columns))


def open_reader(source, *, stop: StopRequest | None = None, name: str | None = None,
                follow: float | None = None, idle_timeout: float | None = None,
                max_event_bytes: int = MAX_EVENT_BYTES) -> TraceReader:
    """The reader of ``source`` (a path, ``-`` or a binary stream, shown as ``name``), read
    up to its first event; ``follow``: read a file still being written, until this many
    seconds without new bytes (``follow.FollowedFile``); ``idle_timeout`` (not following):
    end a pipe or FIFO after this many seconds without a byte, the input marked incomplete
    (``read._Source``); ``max_event_bytes``: the longest
    event read (``decode.MAX_EVENT_BYTES``). Raises ``TraceInputError``, or
    ``ReadInterrupted`` when a stop was requested before the first event (a followed file
    that was stopped ends "empty": not an input error)."""
    try:
        if follow is not None:
            followed = FollowedFile(source, idle_timeout=follow)
            if stop is not None:
                stop.watch(followed)
            return TraceReader(followed, name=name or source, max_event_bytes=max_event_bytes)
        return TraceReader(source, stop=stop, name=name, max_event_bytes=max_event_bytes,
                           idle_timeout=idle_timeout)
    except TraceInputError:
        if stop is not None and stop.requested:
            raise ReadInterrupted() from None
        raise


def read_through(source, splitter: Splitter, *, stop: StopRequest | None = None,
                 name: str | None = None, follow: float | None = None,
                 idle_timeout: float | None = None, progress: bool = False, check: bool = False, on_warning=None,
                 on_pairs=None, on_record=None, on_records=None,
                 reader: TraceReader | None = None,
                 max_event_bytes: int = MAX_EVENT_BYTES) -> RunOutcome:
    """Open ``source`` (``open_reader``; ``reader``: opened already) and ``drive`` all of it
    through ``splitter``, with a progress display on stderr when ``progress``. An input that
    cannot be opened, or a stop before its first byte, still closes the splitter, so that a
    manifest can be written; the outcome's ``reader`` is then None. ``check``: after a run to the end, the options
    that could have done nothing are checked (``options.check_honoured``): an
    ``OptionHadNoEffect`` is raised, a warning handed to ``on_warning``."""
    try:
        if reader is None:
            reader = open_reader(source, stop=stop, name=name, follow=follow,
                                 idle_timeout=idle_timeout, max_event_bytes=max_event_bytes)
    except (TraceInputError, ReadInterrupted) as e:
        splitter.close(complete=False)
        # A stop before the first byte (``open_reader`` says so): not an input error.
        if isinstance(e, ReadInterrupted):
            return RunOutcome(dict(reader_info(None), stop_reason=INTERRUPTED), None, True)
        return RunOutcome(reader_info(None), str(e), False)
    shown = (stream_split.progress.ProgressReader(reader, lambda: len(splitter.iterations))
             if progress else reader)  # rich: loaded only to draw
    try:
        with reader:
            outcome = drive(shown, splitter, stop=stop, on_pairs=on_pairs, on_record=on_record,
                            on_records=on_records)
    finally:
        if shown is not reader:
            shown.close()
    outcome.reader = reader
    if check and outcome.error is None and not outcome.stopped:
        warning = check_honoured(splitter.options, splitter)
        if warning is not None and on_warning is not None:
            on_warning(warning)
    return outcome


def scan_records(source, options: SplitOptions) -> list:
    """Boundary and IterationRecord records of one trace (library use; raises on bad input)."""
    records = []
    outcome = read_through(source, new_splitter(replace(options, keep_events=False)),
                           on_record=records.append)
    if outcome.error:
        raise TraceInputError(outcome.error)
    return records
