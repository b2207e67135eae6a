"""The C allocator of a command-line run, told to keep the memory it frees for reuse.

The decoder works a chunk of about 1 MB at a time, and numpy arrays of that size (and the
inflated text, and the events' columns) are made and freed for every chunk. glibc's ``malloc``
serves such sizes with ``mmap`` and gives them back with ``munmap`` as soon as they are freed
(its dynamic threshold only rises as far as the largest block freed so far), and trims the top
of its heap at 128 KB: the next chunk's arrays are fresh pages, and the kernel zeroes every page
on first touch. On the 10x stripped resnet tile, ``stream-split boundaries`` took 136 k page
faults and 0.45-0.53 s of system time; with the two limits below, 12.8 k faults and 0.08 s,
the same peak RSS (69.6 vs 69.7 MB): the memory kept is memory that was in use a moment before,
so it only bounds what the run holds at its peak (README "Performance").

Only the CLI asks for this (``cli.main``), once, before any work: it changes the whole process,
which a library must not do to its caller. A limit the user set (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``) is left as set. Where ``mallopt`` is missing (macOS, Windows) nothing
changes. Processes forked later (``split --workers``, several ranks) inherit the setting.
"""
from __future__ import annotations

import ctypes
import os

#: ``mallopt`` parameters (glibc's ``malloc.h``).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Blocks up to this size come from the heap, and are reused there once freed (32 MiB: the
#: largest glibc accepts on 64-bit systems; a chunk's arrays are a few MB).
MMAP_THRESHOLD = 32 << 20
#: Free memory at the top of the heap is given back only beyond this much.
TRIM_THRESHOLD = 128 << 20
#: The environment variables by which a user sets these limits himself.
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def keep_freed_memory() -> bool:
    """Tell the C allocator to keep freed blocks for reuse (see the module); True if it took
    both limits, False where it has no ``mallopt`` or the user set a limit himself."""
    if any(name in os.environ for name in USER_SETTINGS):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) & bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
