"""The C allocator of a command-line run, told to keep the memory it frees for reuse.

The decoder works a chunk of about 1 MB at a time, and numpy arrays of that size (and the
inflated text, and the events' columns) are made and freed for every chunk. glibc's ``malloc``
serves such sizes with ``mmap`` and gives them back with ``munmap`` as soon as they are freed
(its dynamic threshold only rises as far as the largest block freed so far), and trims the top
of its heap at 128 KB: the next chunk's arrays are fresh pages, and the kernel zeroes every page
on first touch. On the 10x stripped resnet tile, ``stream-split boundaries`` took 136 k page
faults and 0.45-0.53 s of system time; with the two limits below, 12.8 k faults and 0.08 s,
the same peak RSS (69.6 vs 69.7 MB) (README "Performance").

The memory kept is not all memory that was in use a moment before, though: a chunk's freed
buffers (0.4-0.7 MB each) leave holes in the heap, small blocks that live on take pieces of
them (numpy keeps freed arrays under 1 KB for reuse, the events' objects), and the next
buffer, no longer fitting, goes to the top: the heap grows with the input read. On the 40x
stripped resnet tile, ``boundaries`` ended with a 20.6 MB heap of which at most 13.4 MB was
ever in use. So every ``GIVE_BACK_EVERY`` batches a run gives the heap's free pages back to
the system (``give_back_free_pages``: glibc's ``malloc_trim``, which also returns whole free
pages inside the heap): on that tile, peak RSS 61.5-62.3 MiB instead of 65.8, for 33.8 k page
faults instead of 13.2 k; on the 10x tile 55.5 instead of 56.4, 15.3 k faults instead of 10.8 k.
The faults cost little: a trim and the faults that follow it took 0.8-2 ms of system time
(a trim every batch added 0.45 s to a 10x ``split``), so about 10 ms a 10x run; 8 alternating
runs of ``split`` and ``tag`` on the 10x tile could not tell the trims from none (task-clock
medians 2.10 against 2.08 s and 1.84 against 1.88 s). Most pages given back are taken again
within a few batches: the trims lower the 40x ``split``'s peak by 1.5-2.6 MB, and trims
every 8 or 32 batches lower it no further.

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
#: Batches of a run (``run.FEED_EVENTS`` events each) between two ``give_back_free_pages``.
GIVE_BACK_EVERY = 128
#: glibc's ``malloc_trim``, once ``keep_freed_memory`` has taken effect (else None: nothing is
#: kept beyond the allocator's defaults, nothing to give back).
_malloc_trim = None


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
    took = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) & bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if took:
        global _malloc_trim
        _malloc_trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
        if _malloc_trim is not None:
            _malloc_trim.argtypes = (ctypes.c_size_t,)
    return took


def give_back_free_pages(batches: int) -> None:
    """After ``batches`` batches of a run: every ``GIVE_BACK_EVERY``, the heap's free pages
    given back to the system (see the module), where ``keep_freed_memory`` kept them."""
    if _malloc_trim is not None and batches % GIVE_BACK_EVERY == 0:
        _malloc_trim(0)
