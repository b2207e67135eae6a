"""stream-split: split GPU profiler traces into iterations, as a stream.

The package is layered like a pipeline (see README "Architecture"):

    read   (bytes -> events)           stream_split.read
    core   (events -> owners/records)  stream_split.core   -- no I/O
    write  (pieces, manifest, records) stream_split.write

Library entry points live here (``split`` and ``iterations``: ``stream_split.library``); the
CLI, ``--follow`` and the Beam transform are adapters built on the same three layers. Every
error derives from ``StreamSplitError`` (``stream_split.errors``).

Nothing is imported until it is used (``__getattr__`` below, README "House rules"): ``import
stream_split`` costs next to nothing, ``from stream_split import split`` loads what a split
needs, and ``stream_split.<module>.<name>`` in the package's own code loads a module that only
some commands or options need (rich, protobuf, the plot, the parallel split...) the first time
it is used.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: The public names, each with the module that defines it (loaded on first use).
PUBLIC = {"Splitter": "stream_split.core", "SplitOptions": "stream_split.core",
          "OUTSIDE": "stream_split.core", "METADATA": "stream_split.core",
          "Boundary": "stream_split.core.records",
          "IterationRecord": "stream_split.core.records",
          "iterations": "stream_split.library", "split": "stream_split.library",
          "Manifest": "stream_split.library", "StreamSplitError": "stream_split.errors"}

__all__ = [*PUBLIC, "__version__"]


def __getattr__(name: str):
    """The package's one late import (PEP 562): a public name from the module that defines
    it, or a submodule (``stream_split.plot``), imported the first time it is asked for.
    A name that is neither is an AttributeError, as for any module."""
    if name in PUBLIC:
        value = getattr(importlib.import_module(PUBLIC[name]), name)
        globals()[name] = value  # asked once: later uses are plain lookups
        return value
    module = f"{__name__}.{name}"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:  # a module of ours that failed to import: say so
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *PUBLIC})
