"""``stream_split.split``: the library call that writes pieces, as ``stream-split split`` does.

It runs the CLI's own ``split`` path (``cli.split_folder``: one implementation), with the
options checked up front: an unknown option or a bad value is a ``ValueError`` naming it.
Returns the manifest as a ``Manifest`` (a dict, with attributes for the common keys).
"""
from __future__ import annotations

import os

from stream_split.core import SplitOptions
from stream_split.options import OptionHadNoEffect, parse_selection, parse_steps
from stream_split.write import NAME_BY

#: The keyword options of ``split`` besides ``SplitOptions``'s ``detector``, ``level`` and
#: ``pending_limit``.
_WRITE_OPTIONS = ("overwrite", "iterations", "steps", "name_by", "compress", "compresslevel",
                  "plot")


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
          compresslevel: int = 1, plot: bool = False) -> Manifest:
    """Split ``trace`` (a path, or ``-`` for stdin) into ``out_dir``: one Chrome trace per
    iteration, ``outside`` and ``manifest.json``. ``iterations``: None (all), a list of
    indices, a string like ``"0,3,10-19"`` or ``"steady"``; ``steps``: ``ProfilerStep``
    numbers like ``"15-17"`` (with ``iterations``: those both choose); ``name_by``: ``"index"``
    or ``"step"`` (pieces named ``step_N``).

    Raises ``ValueError`` for a bad option (also one that would do nothing, e.g.
    ``detector="steps"`` on a trace without ``ProfilerStep#N``), ``TraceInputError`` for
    unreadable input, ``OutputError`` for a bad output folder. A truncated input is not an
    error: the manifest says ``complete`` False and why (``stop_reason``)."""
    from stream_split.cli import build_parser, split_folder
    from stream_split.read import TraceInputError
    from stream_split.run import StopRequest
    options = SplitOptions(detector=detector, level=level,
                           **({} if pending_limit is None else {"pending_limit": pending_limit}))
    if not isinstance(compresslevel, int) or not 0 <= compresslevel <= 9:
        raise ValueError(f"compresslevel must be an integer 0..9, not {compresslevel!r}")
    selection, text = _selection(iterations)
    if name_by not in NAME_BY:
        raise ValueError(f"name_by must be one of {', '.join(NAME_BY)}, not {name_by!r}")
    args = build_parser().parse_args(["split", os.fspath(trace), "-o", os.fspath(out_dir)])
    args.detector, args.level, args.pending_limit = (
        options.detector, options.level, options.pending_limit)
    args.overwrite, args.plain_json, args.compresslevel, args.plot = (
        bool(overwrite), not compress, compresslevel, bool(plot))
    args.trace = os.fspath(trace)  # one trace (split_folder); the CLI's TRACE is a list
    args.iterations, args.iterations_text = selection, text
    args.steps, args.steps_text, args.name_by = parse_steps(steps), steps, name_by
    args.quiet, args.stop = True, StopRequest()
    manifest, error, _ = split_folder(args)
    if error:
        raise TraceInputError(error)
    result = Manifest(manifest)
    result.path = os.path.join(os.fspath(out_dir), "manifest.json")
    return result


def _selection(iterations):
    """(predicate or "steady" or None, its text for messages) of the ``iterations`` option."""
    if iterations is None:
        return None, None
    if isinstance(iterations, str):
        return parse_selection(iterations), iterations
    try:
        chosen = {int(i) for i in iterations}
    except (TypeError, ValueError):
        raise ValueError(f"iterations must be None, a list of indices, a string like "
                         f"'0,3,10-19' or 'steady', not {iterations!r}") from None
    return chosen.__contains__, ",".join(map(str, sorted(chosen)))


__all__ = ["split", "Manifest", "OptionHadNoEffect"]
