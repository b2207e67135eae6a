"""Output folders as transactions: a split is written into a private staging folder beside its
target and moved into place only when it is finished.

What it guarantees (README "Output contract"):
- One writer per target. A second run into the same folder fails at once: an advisory lock
  (``flock``) on ``.<name>.lock`` beside the target is held for the whole run; the kernel drops
  it when the process dies, even by ``kill -9``, so a crash never leaves a stale lock.
- The target is never written piecemeal. Pieces, spool and spill files live in
  ``.<name>.staging-XXXX`` (made by ``mkdtemp``: a new folder, mode 0700, so no one can plant a
  link in it) and every file in it is created with ``O_EXCL | O_NOFOLLOW``. ``commit`` renames
  the finished folder onto the target. After a crash at any point the target holds the
  previous complete result, or nothing (a replaced result is renamed away first).
- A non-empty target is refused unless ``overwrite``; with it, the old result goes as a whole:
  no stale piece of a larger earlier split stays beside a new manifest.
- Leftovers of a crashed run (staging folders, a replaced result not yet deleted) are removed
  by the next run into the same target, under the lock.

What it must never do: follow a link planted inside the target or the staging folder, or
leave a folder holding a manifest of one run beside the pieces of another.
"""
from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import tempfile

from stream_split.errors import OutputError

#: Flags for every file written into a staging folder: a new file, never through a link.
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def create_new(path: str, mode: str = "wb", **kwargs):
    """Open a file that must not exist yet (and is no link) for writing."""
    fd = os.open(path, CREATE_FLAGS, 0o666)
    return open(fd, mode, **kwargs)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class OutputFolder:
    """``with OutputFolder(target, overwrite=...) as folder:`` write into ``folder.staging``,
    then ``folder.commit()``. Leaving the block without ``commit`` discards the staging
    folder and leaves the target as it was."""

    def __init__(self, target: str, *, overwrite: bool = False):
        if not target:
            raise OutputError("the output folder is an empty path")
        self.target = os.path.abspath(target)
        self.overwrite = overwrite
        self.parent, self.name = os.path.split(self.target)
        if not self.name:
            raise OutputError(f"cannot write into the root folder: {target}")
        self.staging: str | None = None
        self._lock_fd: int | None = None

    def __enter__(self) -> "OutputFolder":
        try:
            self._open()
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
            self.staging = None
        self._release()

    def _open(self) -> None:
        try:
            os.makedirs(self.parent, exist_ok=True)
        except OSError as e:
            raise OutputError(f"cannot create {self.parent}: {e.strerror}") from None
        if not os.path.isdir(self.parent):
            raise OutputError(f"not a folder: {self.parent}")
        self._lock()
        self._check_target()
        self._remove_leftovers()
        try:
            self.staging = tempfile.mkdtemp(prefix=f".{self.name}.staging-", dir=self.parent)
        except OSError as e:
            raise OutputError(f"cannot write in {self.parent}: {e.strerror}") from None

    def _lock(self) -> None:
        path = os.path.join(self.parent, f".{self.name}.lock")
        try:
            self._lock_fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                                    0o666)
        except OSError as e:
            raise OutputError(f"cannot create the lock file {path}: {e.strerror}") from None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputError(f"another stream-split is writing to {self.target}") from None

    def _release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # drops the flock
            self._lock_fd = None

    def _check_target(self) -> None:
        try:
            info = os.lstat(self.target)
        except FileNotFoundError:
            return
        except OSError as e:
            raise OutputError(f"cannot use {self.target}: {e.strerror}") from None
        if stat.S_ISLNK(info.st_mode):
            raise OutputError(f"the output folder is a symbolic link: {self.target}")
        if not stat.S_ISDIR(info.st_mode):
            raise OutputError(f"the output is not a folder: {self.target}")
        if os.listdir(self.target) and not self.overwrite:
            raise OutputError.worded(lambda spell: (
                f"the output folder is not empty: {self.target} "
                f"({spell('overwrite')} replaces it)"))

    def _remove_leftovers(self) -> None:
        """Staging folders of crashed runs and results replaced but not yet deleted."""
        for entry in os.scandir(self.parent):
            if self._is_leftover(entry.name) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)

    def _is_leftover(self, name: str) -> bool:
        # Exactly ``.<name>.<kind>-`` and mkdtemp's 8 characters: never the staging folder of
        # another target whose name starts like this one (``out`` and ``out.staging-x``).
        for kind in ("staging", "replaced"):
            prefix = f".{self.name}.{kind}-"
            if name.startswith(prefix):
                suffix = name[len(prefix):]
                return len(suffix) == 8 and "." not in suffix
        return False

    def commit(self) -> None:
        """Move the finished staging folder onto the target (replacing an old result)."""
        staging = self.staging
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp's 0700 was for building it
        try:
            os.rename(staging, self.target)  # atomic; replaces an empty folder
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            # An old result: rename it away first. A crash between the two renames leaves no
            # target at all, never a mix; the next run deletes the renamed one.
            replaced = tempfile.mkdtemp(prefix=f".{self.name}.replaced-", dir=self.parent)
            os.rename(self.target, os.path.join(replaced, "old"))
            os.rename(staging, self.target)
            shutil.rmtree(replaced, ignore_errors=True)
        self.staging = None
