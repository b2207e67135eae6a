"""The one loop that drives the core: reader batches in, decisions out to the caller's sinks.

Every adapter (CLI commands, the library, ``--follow``, Beam) runs a trace through ``drive``;
none of them repeats its logic. ``drive`` never raises for bad input: the error is returned
(one line) after the splitter has been closed, so whatever was decided before it is written.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass

from stream_split.core import IterationRecord, Splitter, SplitOptions, TraceEventError
from stream_split.read import ReadInterrupted, TraceInputError, TraceReader
from stream_split.spill import TempFileSpill
from stream_split.stats import annotate as annotate_outliers


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

    def watch(self, source) -> None:
        """A source with ``stop()`` (``FollowedFile``) to release when a stop is requested."""
        self._sources.append(source)

    def request(self, signum: int = 0, _frame=None) -> None:
        if self.signal is not None:
            self.repeats += 1
            return
        self.signal = signum
        for source in self._sources:
            source.stop()


@dataclass(slots=True)
class RunOutcome:
    reader_info: dict
    error: str | None


def reader_info(reader: TraceReader | None) -> dict:
    if reader is None:
        return {"complete": False, "stop_reason": None, "form": None, "bytes_read": 0}
    return {"complete": reader.complete, "stop_reason": reader.stop_reason,
            "form": reader.form, "bytes_read": reader.bytes_read}


def new_splitter(options: SplitOptions, spill_dir: str | None = None) -> Splitter:
    return Splitter(options, spill=TempFileSpill(spill_dir))


def drive(reader: TraceReader, splitter: Splitter, *, on_pairs=None, on_record=None,
          stop: StopRequest | None = None) -> RunOutcome:
    """Feed all of ``reader`` to ``splitter``, a batch (one chunk of input) at a time, until
    the end or until ``stop`` is requested; end its input; hand out every decision as it is
    made (``on_pairs(pairs)``, ``on_record(record)``)."""
    with splitter, young_collections_only():  # the spill file is given back on every path
        return _drive(reader, splitter, on_pairs, on_record, stop)


@contextmanager
def young_collections_only():
    """Replace Python's automatic garbage collection, while a trace is read, by a collection
    of the young generations every ``COLLECT_EVERY`` batches (``collect_young``).

    Every event makes a few containers (its dict, a pair, a held item) that refcounting frees
    as soon as the event is decided; the automatic collector still walks them every 700
    allocations and, every hundred walks, everything alive (the interpreter's own objects
    too): it took about a quarter of the run's time. A cycle made while reading is still
    collected when it is young, and everything at the end (automatic collection resumes)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


#: Batches between two collections of the young generations (a collection walks every
#: object made since the last one that is still alive: the batch just read among them).
COLLECT_EVERY = 32


def collect_young(batches: int) -> None:
    """Collect the cycles among the objects made in the last ``COLLECT_EVERY`` batches (see
    ``young_collections_only``); survivors age as they would."""
    if batches % COLLECT_EVERY == 0:
        gc.collect(1)


def _drive(reader, splitter, on_pairs, on_record, stop) -> RunOutcome:
    error = None
    interrupted = False
    feed_batch = splitter.feed_batch
    keep = splitter.options.keep_events

    def emit(record, cut_short: bool = False) -> None:
        # A cut-short input may have lost any iteration's GPU work (it comes last in
        # Kineto's layout): no record of it is complete.
        if cut_short and isinstance(record, IterationRecord):
            record.complete = False
        if on_record is not None:
            on_record(record)

    def hand_out(final: bool = False, cut_short: bool = False) -> None:
        """Hand out what is decided; ``final`` (after ``end_of_input``): decide the rest,
        holding the records back until the end, when every iteration's time is known."""
        held = []
        while True:
            decided = splitter.decided()
            if on_pairs is not None and decided.pairs:
                on_pairs(decided.pairs)
            if final:
                held.extend(decided.records)
            else:
                for record in decided.records:
                    emit(record)
            if not decided.more:
                break
        if final:
            # Outliers need every iteration's time: known only now (the iteration records
            # come with the last decision).
            annotate_outliers(splitter.iterations)
            for record in held:
                emit(record, cut_short)

    splitter.note_header(reader.header_before)  # known once the reader has its form
    try:
        for batches, batch in enumerate(reader.batches(raws=keep, slim=True), 1):
            feed_batch(batch.events, batch.raws if keep else None, batch.frame_runs)
            hand_out()
            collect_young(batches)
            if stop is not None and stop.requested:
                break
    except (TraceInputError, TraceEventError) as e:
        error = str(e)
    except ReadInterrupted:  # a stop requested while the reader waited for bytes
        interrupted = True
    hand_out()
    splitter.end_of_input()
    info = reader_info(reader)
    if interrupted or (stop is not None and stop.requested):
        info.update(complete=False, stop_reason="interrupted before the end of the input")
    hand_out(final=True, cut_short=error is not None or not info["complete"])
    return RunOutcome(info, error)


def split_file(source: str, out_dir: str, options: SplitOptions, *,
               stop: StopRequest | None = None, choice=None, **writer_options):
    """Split the trace at ``source`` into pieces and ``manifest.json`` in ``out_dir`` (an
    existing folder of the caller's, e.g. a staging folder), only the iterations ``choice``
    (an ``options.IterationChoice``) chose. Returns ``(manifest, error or None, header)``:
    ``header`` is the trace's header keys (before and after the events). A choice that
    matched nothing raises ``options.OptionHadNoEffect`` (nothing asked for: no output)."""
    from stream_split.options import IterationChoice
    from stream_split.write import PieceWriter, finish_split
    choice = choice or IterationChoice()
    writer = PieceWriter(out_dir, select=choice.early, **writer_options)
    splitter = new_splitter(options, spill_dir=out_dir)
    reader = None
    try:
        reader = TraceReader(source, stop=stop)
    except (TraceInputError, ReadInterrupted) as e:
        splitter.close()
        error, info = str(e), reader_info(None)
    else:
        with reader:
            outcome = drive(reader, splitter, on_pairs=writer.add_many, stop=stop)
        error, info = outcome.error, outcome.reader_info
    owners = None if error is not None else choice.chosen(splitter.iterations)
    manifest = finish_split(writer, splitter, reader, source=source, reader_info=info,
                            error=error, owners=owners)
    header = {**reader.header_after, **reader.header_before} if reader is not None else {}
    return manifest, error, header


def scan_records(source, options: SplitOptions):
    """Boundary and IterationRecord records of one trace (library use; raises on bad input)."""
    from dataclasses import replace
    splitter = new_splitter(replace(options, keep_events=False))
    records = []
    with TraceReader(source) as reader:
        outcome = drive(reader, splitter, on_record=records.append)
    if outcome.error:
        raise TraceInputError(outcome.error)
    return records
