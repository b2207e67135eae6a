"""Which native parts this process uses: the one place that decides it.

``stream_split._native`` (``_native.c``, built by setup.py where a C compiler is) holds the
decoder's framing, the manifest's entries and layout, the pieces of tiny iterations and the
runs of events handed to the writer, the detector's op and its name folding, the unit search's
sums and likeness. Each caller has a Python fallback that gives the same result. ``NATIVE`` is
the module where it is built and not turned off by ``STREAM_SPLIT_NO_NATIVE`` (set to anything
but "" or "0": to compare the two, or to rule the native parts out), else None: then every
caller takes its fallback (numpy and msgspec in the decoder, ``skeleton.PyNode`` and
``family``, ``search.ascii_without``, ``write.PieceWriter._assemble`` and ``_grouped_parts``)."""
from __future__ import annotations

import os

try:
    from stream_split import _native as BUILT
except ImportError:  # not built (no C compiler where it was installed)
    BUILT = None

#: The environment variable that turns every native part off.
NO_NATIVE_ENV = "STREAM_SPLIT_NO_NATIVE"
#: ``stream_split._native`` where it is built and not turned off, else None (the fallbacks).
NATIVE = None if os.environ.get(NO_NATIVE_ENV, "") not in ("", "0") else BUILT
