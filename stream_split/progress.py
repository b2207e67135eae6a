"""Progress of a run on stderr, when stderr is a terminal: bytes read of the total, events/s,
iterations found so far. Silent otherwise (a pipe, a file, ``--quiet``); never on stdout.

An adapter only: it wraps the reader whose batches ``run.drive`` takes (counting events as they
pass) and reads the input's position in one place, ``input_position``.
"""
from __future__ import annotations

import os
import sys
import time

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

#: Events between two updates: often enough for the eye, rare enough to cost nothing.
UPDATE_EVERY = 8192


def input_position(reader) -> tuple[int, int | None]:
    """``(bytes consumed, total bytes or None)`` of the input as stored: the bytes taken from
    the source (``TraceReader.input_bytes``: compressed bytes for a compressed file) and, for
    a regular file, its size. The one place that knows how to ask the reader."""
    return reader.input_bytes, reader.input_size


def wanted(quiet: bool, stream=None) -> bool:
    """Progress is shown only on a terminal, and never with ``--quiet``."""
    stream = stream if stream is not None else sys.stderr
    try:
        return not quiet and stream.isatty()
    except (AttributeError, ValueError):
        return False


class ProgressReader:
    """The reader, as ``drive`` sees it, with a progress display on stderr. ``batches()``
    yields the reader's batches; every other attribute is the reader's."""

    def __init__(self, reader, found=lambda: 0):
        self._reader = reader
        self._found = found  # () -> iterations found so far
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
            TextColumn("{task.fields[rate]:>9,.0f} events/s"),
            TextColumn("{task.fields[found]} iterations"), TimeElapsedColumn(),
            console=Console(stderr=True), transient=False)
        _, total = input_position(reader)
        self._task = self._progress.add_task(
            os.path.basename(getattr(reader, "name", "") or "trace"), total=total,
            rate=0.0, found=0)

    def __getattr__(self, name):
        return getattr(self._reader, name)

    def batches(self, raws: bool = True, slim: bool = False):
        progress = self._progress
        started = time.monotonic()
        events = shown = 0
        progress.start()
        try:
            for batch in self._reader.batches(raws, slim):
                yield batch
                events += len(batch.events)
                if events - shown >= UPDATE_EVERY:
                    shown = events
                    self._update(events, started)
        finally:
            self._update(events, started)
            progress.stop()

    def close(self) -> None:
        """Stop the display (idempotent): also after a run that stopped early."""
        self._progress.stop()

    def _update(self, events: int, started: float) -> None:
        done, total = input_position(self._reader)
        elapsed = max(time.monotonic() - started, 1e-9)
        self._progress.update(self._task, completed=done, total=total, rate=events / elapsed,
                              found=self._found())
