"""stream-split: split GPU profiler traces into iterations, as a stream.

The package is layered like a pipeline (see README "Architecture"):

    read   (bytes -> events)           stream_split.read
    core   (events -> owners/records)  stream_split.core   -- no I/O
    write  (pieces, manifest, records) stream_split.write

Library entry points live here (``split``: ``stream_split.library``; ``iterations``); the
CLI, ``--follow`` and the Beam transform are adapters built on the same three layers. Every
error derives from ``StreamSplitError`` (``stream_split.errors``).
"""
from stream_split.core import Splitter, SplitOptions, OUTSIDE, METADATA
from stream_split.core.records import Boundary, IterationRecord
from stream_split.errors import StreamSplitError
from stream_split.library import Manifest, split
from stream_split.run import scan_records

__version__ = "0.1.0"

__all__ = ["Splitter", "SplitOptions", "OUTSIDE", "METADATA", "Boundary", "IterationRecord",
           "iterations", "split", "Manifest", "StreamSplitError", "__version__"]


def iterations(source, options=None):
    """Yield one IterationRecord per iteration of the trace at ``source`` (a path or ``-``).

    Records come in order once the whole trace has been read (GPU work of Kineto traces is
    written at the end of the file, so an iteration's numbers are final only then).
    """
    for record in scan_records(source, options or SplitOptions()):
        if isinstance(record, IterationRecord):
            yield record
