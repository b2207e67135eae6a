"""One path from a source to a folder: ``split_to_folder``, for every front end that writes
pieces (the ``split`` command, ``stream_split.split``, each rank of a multi-rank split, each
trace of a Beam archive).

It reads the source through the core (``run.read_through``), spools the pieces as events are
decided (``write.PieceWriter``), keeps the iterations the configuration chose
(``SplitConfig.choice``), assembles them and writes ``manifest.json`` (``write.finish_split``).

Two kinds of folder:
- a target (the default): made whole at the end through ``output.OutputFolder`` (a staging
  folder, renamed onto the target; ``overwrite`` replaces an earlier output of ours, never a
  file we did not write), with the options that could have done nothing checked first (an
  ``OptionHadNoEffect`` leaves no folder) and the plot drawn when asked. The trace is opened,
  up to its first event, before anything is made on disk: an input that is missing or no
  trace raises ``TraceInputError`` and leaves nothing;
- ``in_place``: an existing folder of the caller's (a rank's folder inside the job's staging
  folder, a Beam worker's scratch folder), written directly; the job it is part of decides
  what a part that found nothing means.

The plot (``stream_split.plot``), the split across processes (``stream_split.parallel``) and
the table (``stream_split.summary``, with rich) are loaded only when the configuration asks
for them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

import stream_split
from stream_split.config import SplitConfig
from stream_split.output import OutputFolder
from stream_split.run import (StopRequest, new_splitter, open_reader, read_through,
                              young_collections_only)
from stream_split.write import PieceWriter, finish_split

__all__ = ["SplitResult", "split_to_folder", "finish_folder", "PLOT_FILE"]

#: The picture ``plot=True`` draws into the folder.
PLOT_FILE = "iterations.png"


@dataclass(slots=True)
class SplitResult:
    """What a split into a folder produced."""
    #: The manifest written (``manifest.json``), as a dict.
    manifest: dict
    #: The input error that cut the run short (one line), or None: what was decided before
    #: it is written all the same.
    error: str | None
    #: The reader's account: ``complete``, ``stop_reason``, ``form``, ``bytes_read``.
    reader_info: dict
    #: The trace's header keys (before and after its events); {} when it could not be opened.
    header: dict
    #: Whether the source could be opened as a trace at all.
    opened: bool
    #: The closed splitter: its iteration records (final) and counts.
    splitter: object
    #: ``summary.build_table``'s table of the manifest, with ``SplitConfig.table_rows`` as
    #: its limit, made as the manifest was written; None without ``table_rows``.
    table: dict | None = None


def split_to_folder(source, out: str, config: SplitConfig, *,
                    stop: StopRequest | None = None, name: str | None = None,
                    follow: float | None = None, idle_timeout: float | None = None,
                    progress: bool = False, on_warning=None,
                    in_place: bool = False) -> SplitResult:
    """Split the trace at ``source`` (a path, ``-`` or a binary stream shown as ``name``)
    into the folder ``out`` as ``config`` says (see the module docstring for ``in_place``).

    ``stop`` ends the run between two batches of events; ``follow``: read a file still
    being written, until this many seconds without new bytes; ``idle_timeout`` (not
    following): end a pipe after this many seconds without a byte; ``progress``: show it on
    stderr; ``on_warning(OptionWarning)``: an option honoured only in part. Raises
    ``OutputError`` (the folder), ``OptionHadNoEffect`` (a choice or an option that matched
    nothing), ``PlotUnavailable``; into a target, ``TraceInputError`` when the source cannot
    be opened as a trace and ``ReadInterrupted`` when ``stop`` came before its first event
    (nothing written); an input error met later is the result's ``error``."""
    reading = {"stop": stop, "name": name, "follow": follow, "idle_timeout": idle_timeout,
               "progress": progress,
               "on_warning": on_warning, "max_event_bytes": config.max_event_bytes}
    if in_place:
        return _split_into(source, out, config, check=False, **reading)
    if config.plot:
        stream_split.plot.require_pyplot()  # no matplotlib: say so before the work, not after it
    inputs = [source] if isinstance(source, (str, os.PathLike)) and source != "-" else []
    with OutputFolder(out, overwrite=config.overwrite, inputs=inputs) as folder, \
            open_reader(source, stop=stop, name=name, follow=follow, idle_timeout=idle_timeout,
                        max_event_bytes=config.max_event_bytes) as reader:
        workers = config.workers or 1  # see SplitConfig.workers for why not more
        result = None
        if workers > 1 and stream_split.parallel.takes_parallel_path(source, reader, workers,
                                                                     follow):
            try:
                result = _split_into(source, folder.staging, config, check=True, reader=reader,
                                     workers=workers, **reading)
            except stream_split.parallel.NotParallel:  # the reader is at its first event still
                pass
        if result is None:
            result = _split_into(source, folder.staging, config, check=True, reader=reader,
                                 **reading)
        if config.plot:
            stream_split.plot.write_plot(result.manifest,
                                         os.path.join(folder.staging, PLOT_FILE))
        folder.commit()
    return result


def _split_into(source, out_dir: str, config: SplitConfig, *, check: bool, reader=None,
                workers: int = 1, **reading) -> SplitResult:
    """The split itself, into the existing folder ``out_dir``; ``check``: the options that
    could have done nothing are checked after a run to the end (``run.read_through``);
    ``reader``: the source opened already; ``workers`` > 1: the file dealt to that many
    processes (``parallel.ParallelSplit``; ``NotParallel`` when it cannot be, with nothing
    written)."""
    writer = PieceWriter(out_dir, **config.writer_options)
    splitter = new_splitter(replace(config.options, keep_events=True), spill_dir=out_dir)
    if workers > 1:
        parallel = stream_split.parallel
        try:
            with parallel.ParallelSplit(source, reader, writer, workers,
                                        max_event_bytes=config.max_event_bytes) as deal:
                outcome = read_through(source, splitter, check=check, on_pairs=deal.add_many,
                                       reader=deal.reader, **reading)
                deal.finish()
        except parallel.NotParallel:
            writer.discard()
            raise
    else:
        outcome = read_through(source, splitter, check=check, on_pairs=writer.add_many,
                               reader=reader, **reading)
    reader = outcome.reader
    shown = reading["name"] or (os.fspath(source) if isinstance(source, (str, os.PathLike))
                                else getattr(source, "name", "<stream>"))
    table = (None if config.table_rows is None
             else stream_split.summary.TableBuilder(config.table_rows))
    with young_collections_only():  # 1 M pieces and entries, made and dropped: no cycles
        manifest = finish_folder(writer, splitter, reader, config, source=shown,
                                 reader_info=outcome.reader_info, error=outcome.error,
                                 on_warning=reading.get("on_warning"),
                                 stop=reading.get("stop"), stats=outcome.stats, table=table)
    header = {**reader.header_after, **reader.header_before} if reader is not None else {}
    return SplitResult(manifest, outcome.error, outcome.reader_info, header,
                       reader is not None, splitter, None if table is None else table.table())


def finish_folder(writer: PieceWriter, splitter, reader, config: SplitConfig, *, source: str,
                  reader_info: dict, error: str | None, on_warning=None, stop=None,
                  stats=None, table=None) -> dict:
    """The end of a split into a folder, after the run: the iterations ``config`` chose
    (``on_warning``: told what the choice left out), their pieces assembled and the manifest
    written (``write.finish_split``); returns the manifest. ``splitter``: the closed
    splitter, or anything with its records and counts (``beam_ranges.SplitterAccount``).
    ``stop``, ``stats``, ``table``: as ``write.finish_split`` takes them."""
    chosen = None if error else config.choice.chosen(splitter.iterations)
    dropped = None if chosen is None else config.choice.dropped(splitter.iterations)
    if dropped is not None and on_warning is not None:
        on_warning(dropped)
    return finish_split(writer, splitter, reader, source=source, reader_info=reader_info,
                        error=error, owners=chosen, chosen_by=config.choice.texts, stop=stop,
                        stats=stats, table=table)
