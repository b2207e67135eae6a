"""``stream_split.split``: the library call that writes pieces, as ``stream-split split`` does
(and ``stream_split.iterations``: the iteration records of a trace, no pieces written).

It takes typed keywords, checks them strictly (``config.SplitConfig.from_keywords``: a bad value
is an ``OptionError`` naming it; a string is never taken for a bool), and runs the one path
from a source to a folder (``folder.split_to_folder``) that the command line runs too. It never
reads command-line arguments: a trace named ``-h`` is a file like any other. Returns the
manifest as a ``Manifest`` (a dict, with attributes for the common keys). Errors derive from
``StreamSplitError`` and speak in keywords (``overwrite=True``), not flags.
"""
from __future__ import annotations

import os
import warnings

from stream_split.config import SplitConfig
from stream_split.core import SplitOptions
from stream_split.core.records import IterationRecord
from stream_split.decode import MAX_EVENT_BYTES
from stream_split.errors import (
    OptionError, OptionHadNoEffect, OptionWarning, OutputError, StreamSplitError,
    TraceInputError)
from stream_split.folder import split_to_folder
from stream_split.run import scan_records


class Manifest(dict):
    """``manifest.json`` as a dict; ``complete``, ``stop_reason``, ``iterations``,
    ``steady_state`` and ``path`` (the manifest file) as attributes too."""

    @property
    def complete(self) -> bool:
        return bool(self.get("complete"))

    @property
    def stop_reason(self) -> str | None:
        return self.get("stop_reason")

    @property
    def iterations(self) -> list[dict]:
        return self.get("iterations") or []

    @property
    def steady_state(self) -> dict | None:
        return self.get("steady_state")

    path: str = ""


def split(trace, out_dir, *, detector: str = "auto", level: int | None = None,
          pending_limit: int | None = None, overwrite: bool = False, iterations=None,
          steps: str | None = None, name_by: str = "index", compress: bool = True,
          compresslevel: int = 1, plot: bool = False, layout: str = "flat",
          max_event_bytes: int = MAX_EVENT_BYTES, phase: str | None = None,
          steady: int | None = None, workers: int | None = None) -> Manifest:
    """Split ``trace`` (a path, or ``-`` for stdin) into ``out_dir``: one Chrome trace per
    iteration, ``outside`` and ``manifest.json``. ``iterations``: None (all), a list of
    indices, a string like ``"0,3,10-19"`` or ``"steady"``; ``steps``: ``ProfilerStep``
    numbers like ``"15-17"`` (with ``iterations``: those both choose); ``name_by``: ``"index"``
    or ``"step"`` (pieces named ``step_N``); ``overwrite``, ``compress``, ``plot``: True or
    False; ``layout``: ``"flat"`` or ``"hta"`` (``iteration_<k>/rank<r>.json.gz``, for
    Holistic Trace Analysis); ``max_event_bytes``: the longest event read (64 MiB), a longer
    one is an error; ``phase``: only the iterations of this serving phase; ``steady``: N,
    only the N steady iterations nearest their median (``--steady N``); ``workers``:
    processes that split one large trace file (None: 1, one stream; the output is the same
    with any number).

    Raises ``OptionError`` (a ``ValueError``) for a bad option, ``OptionHadNoEffect`` (one
    too) for an option that would do nothing (e.g. ``detector="steps"`` on a trace without
    ``ProfilerStep#N``), ``TraceInputError`` for unreadable input, ``OutputError`` for a bad
    output folder: all ``StreamSplitError``. An option honoured only in part (a ``level``
    that is not there) is an ``OptionWarning``. A truncated input is not an error: the
    manifest says ``complete`` False and why (``stop_reason``)."""
    config = SplitConfig.from_keywords(
        detector=detector, level=level, pending_limit=pending_limit, overwrite=overwrite,
        iterations=iterations, steps=steps, name_by=name_by, compress=compress,
        compresslevel=compresslevel, plot=plot, layout=layout, max_event_bytes=max_event_bytes,
        phase=phase, steady=steady, workers=workers)
    trace, out_dir = _path("trace", trace), _path("out_dir", out_dir)
    result = split_to_folder(trace, out_dir, config, on_warning=_warn)
    if result.error:
        raise TraceInputError(result.error)
    manifest = Manifest(result.manifest)
    # the caller's dict holds every entry (made from the records while the folder was written)
    manifest["iterations"] = list(manifest["iterations"])
    manifest.path = os.path.join(out_dir, "manifest.json")
    return manifest


def _path(name: str, value) -> str:
    """A path argument as a string (``str`` or ``os.PathLike``), else an ``OptionError``."""
    try:
        path = os.fspath(value)
    except TypeError:
        raise OptionError(f"{name} must be a path (str or os.PathLike), not {value!r}") \
            from None
    if not isinstance(path, str):
        raise OptionError(f"{name} must be a path as a str, not {value!r}")
    return path


def iterations(source, options=None):
    """Yield one IterationRecord per iteration of the trace at ``source`` (a path or ``-``).

    Records come in order once the whole trace has been read (GPU work of Kineto traces is
    written at the end of the file, so an iteration's numbers are final only then).
    """
    for record in scan_records(source, options or SplitOptions()):
        if isinstance(record, IterationRecord):
            yield record


def _warn(warning: OptionWarning) -> None:
    warnings.warn(warning, stacklevel=4)


__all__ = ["split", "iterations", "Manifest", "StreamSplitError", "OptionError",
           "OptionHadNoEffect", "OptionWarning", "TraceInputError", "OutputError"]
