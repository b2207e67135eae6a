"""Progress of a run on stderr, when stderr is a terminal: bytes read of the total, events/s,
iterations found so far. Silent otherwise (a pipe, a file, ``--quiet``:
``cli.progress_wanted``); never on stdout. Loaded only when it draws (``run.read_through`` with
``progress``): rich costs some 40 ms to import.

An adapter only: it wraps the reader whose batches ``run.drive`` takes (counting events as they
pass) and reads the input's position in one place, ``input_position``.
"""
from __future__ import annotations

import os
import time

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column

#: Events between two updates: often enough for the eye, rare enough to cost nothing.
UPDATE_EVERY = 8192
#: The widest the line may be: it never wraps on an 80-column terminal (the file's name is
#: cut to ``NAME_WIDTH``, the rate written as ``1.2M``).
LINE_WIDTH = 80
NAME_WIDTH = 15
BAR_WIDTH = 8


def rate_text(per_second: float) -> str:
    """``950``, ``12.3k``, ``1.2M``: events per second in at most 6 characters."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_second >= scale:
            return f"{per_second / scale:.1f}{unit}"
    return f"{per_second:.0f}"


def short_name(name: str) -> str:
    """The file's name as the line shows it: its end kept when too long (``…trace.json.gz``)."""
    return name if len(name) <= NAME_WIDTH else "…" + name[-(NAME_WIDTH - 1):]


def display(console: Console) -> Progress:
    """The progress line: name, bar, bytes read of the total, events/s, iterations found,
    time elapsed; no column wraps, and the whole fits ``LINE_WIDTH`` columns."""
    def fixed():
        return Column(no_wrap=True)
    return Progress(
        TextColumn("[bold]{task.description}", table_column=fixed()),
        BarColumn(bar_width=BAR_WIDTH, table_column=fixed()),
        DownloadColumn(table_column=fixed()),
        TextColumn("{task.fields[rate]:>6} events/s", table_column=fixed()),
        TextColumn("{task.fields[found]} iterations", table_column=fixed()),
        TimeElapsedColumn(table_column=fixed()), console=console, transient=False)


def input_position(reader) -> tuple[int, int | None]:
    """``(bytes consumed, total bytes or None)`` of the input as stored: the bytes taken from
    the source (``TraceReader.input_bytes``: compressed bytes for a compressed file) and, for
    a regular file, its size. The one place that knows how to ask the reader."""
    return reader.input_bytes, reader.input_size


class ProgressReader:
    """The reader, as ``drive`` sees it, with a progress display on stderr. ``batches()``
    yields the reader's batches; every other attribute is the reader's."""

    def __init__(self, reader, found=lambda: 0):
        self._reader = reader
        self._found = found  # () -> iterations found so far
        self._progress = display(Console(stderr=True))
        _, total = input_position(reader)
        self._task = self._progress.add_task(
            short_name(os.path.basename(getattr(reader, "name", "") or "trace")), total=total,
            rate=rate_text(0.0), found=0)

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
        self._progress.update(self._task, completed=done, total=total,
                              rate=rate_text(events / elapsed), found=self._found())
