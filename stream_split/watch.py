"""Wake up as soon as a followed file grows: inotify on Linux, a short sleep elsewhere.

``wait_for_growth(source, timeout)`` returns when the file behind ``source.fileno()`` may
have new bytes (it was written to, closed, renamed, removed or truncated) or when ``timeout``
seconds have passed, whichever comes first. The caller then reads and, finding nothing,
waits again: a spurious wake-up costs one empty read.

On Linux, the first call makes an inotify watch on the file (through ``ctypes`` on libc's
``inotify_init1`` / ``inotify_add_watch``: no dependency) and keeps it for as long as
``source`` lives; a write wakes the reader within the kernel's scheduling latency instead of
at the next poll (20-200 ms). The watch follows the inode, so a file renamed while it is
read (``trace.json.tmp`` -> ``trace.json``) keeps waking it. Where inotify is missing (other
systems, a seccomp sandbox, no watches left) or the source is not a regular file (a pipe
waits in ``read.PipeWait``), it sleeps for ``timeout`` as before.

A stop request (SIGINT/SIGTERM through ``run.StopRequest``) is seen after the wait: the wait
is never longer than ``timeout``, which the caller keeps short.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import stat
import sys
import time
import weakref

__all__ = ["wait_for_growth", "inotify_available"]

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVE_SELF = 0x800
_IN_DELETE_SELF = 0x400
_EVENTS = _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVE_SELF | _IN_DELETE_SELF

_libc = None
_watches: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _load_libc():
    global _libc
    if _libc is None:
        _libc = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                                   use_errno=True)
                libc.inotify_init1.argtypes = [ctypes.c_int]
                libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p,
                                                   ctypes.c_uint32]
                _libc = libc
            except (OSError, AttributeError):
                pass
    return _libc


def inotify_available() -> bool:
    return bool(_load_libc())


class _Watch:
    """One inotify instance watching one open file; closed when its source goes away."""

    def __init__(self, fd: int):
        self.fd = -1
        self._poll = None
        libc = _load_libc()
        if not libc or not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        ino = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if ino < 0:
            return
        # The open descriptor's own path: the watch is on its inode, whatever its name now.
        if libc.inotify_add_watch(ino, f"/proc/self/fd/{fd}".encode(), _EVENTS) < 0:
            os.close(ino)
            return
        self.fd = ino
        self._poll = select.poll()
        self._poll.register(ino, select.POLLIN)
        self._finalizer = weakref.finalize(self, os.close, ino)

    def wait(self, timeout: float) -> None:
        if self.fd < 0:
            time.sleep(timeout)
            return
        if self._poll.poll(max(0, int(timeout * 1000))):
            try:
                while os.read(self.fd, 4096):  # drain: the next wait sees only new events
                    pass
            except BlockingIOError:
                pass


def wait_for_growth(source, timeout: float) -> None:
    """Wait until the file of ``source`` (an object with ``fileno()``) may have grown, at
    most ``timeout`` seconds (see the module docstring)."""
    watch = _watches.get(source)
    if watch is None:
        try:
            watch = _Watch(source.fileno())
        except OSError:  # the file is gone already: no watch, a plain sleep
            time.sleep(timeout)
            return
        _watches[source] = watch
    watch.wait(timeout)
