"""Output folders as transactions, and ours alone: a split is written into a private staging
folder beside its target and moved into place only when it is finished; what the tool did not
write is never removed.

What it guarantees (README "Output contract"):
- One writer per target. A second run into the same folder, or into a folder inside it, fails
  at once: an advisory lock (``flock``) on a file in the user's runtime folder
  (``$XDG_RUNTIME_DIR``, else the temporary folder), named by a hash of the target's path, is
  held for the whole run and removed at its end; the kernel drops the lock when the process
  dies, even by ``kill -9``, so a crash never leaves a stale lock. Nothing is created beside
  or inside the target before the caller first asks for ``staging`` (so a run that fails
  before it writes, e.g. on a missing input, leaves nothing; parent folders it made are
  removed again).
- The target is never written piecemeal. Pieces, spool and spill files live in a staging
  folder ``.stream-split-<hash>-XXXXXXXX`` beside it (made by ``mkdtemp``: new, mode 0700, so
  no one can plant a link in it; a name of fixed length, so that a target name of NAME_MAX
  bytes still works) and every file in it is created with ``O_EXCL | O_NOFOLLOW``. ``commit``
  replaces the folder's marker (``FOLDER_MARKER``) by the list of the files written and
  renames the finished folder onto the target. A marker is written under a temporary name
  and renamed into place, so a folder holds a whole marker or none. After a crash at any
  point the target holds the previous complete result, or nothing (a replaced result is
  renamed away first).
- A non-empty target is refused unless ``overwrite``; with it, only an earlier output of ours
  is replaced: a target holding anything its marker does not list, or holding the input, is
  refused, naming what it holds. Whatever appears in the target while a run goes on is never
  deleted: the commit then fails instead.
- Leftovers of a crashed run into the same target (its staging folder, a replaced result not
  yet deleted) are removed by the next run, under the lock: a staging folder as a whole, a
  replaced result file by file as its marker lists them. A folder without our marker is
  never touched, but for the start of a staging folder's marker (under its temporary name,
  its text cut short, nothing else beside it: a run killed as it made the folder).

What it must never do: follow a link planted inside the target or the staging folder, delete
a file that a run did not write, or leave a folder holding a manifest of one run beside the
pieces of another.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
from contextlib import suppress
from itertools import groupby, islice
from operator import attrgetter

from stream_split.errors import OutputError
from stream_split.native import NATIVE as _native  # (None: the Python fallbacks)

#: Flags for every file written into a staging folder: a new file, never through a link.
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: In every folder the tool wrote: which files it wrote (``{"format": MARKER_FORMAT,
#: "version": 1, "files": ["manifest.json", ...]}``, paths relative, ``/``-separated, the
#: marker itself aside). In a staging folder, from its creation on: ``"files": null``.
FOLDER_MARKER = ".stream-split"
MARKER_FORMAT = "stream-split/folder"
MARKER_VERSION = 1
#: A marker while it is written (``_write_marker``), renamed onto ``FOLDER_MARKER`` when whole.
MARKER_BEING_WRITTEN = FOLDER_MARKER + ".new"
#: Staging folders and replaced results, beside the target: this, the target's key, ``-`` and
#: ``mkdtemp``'s 8 characters.
TEMP_PREFIX = ".stream-split-"
_TEMP_SUFFIX_LENGTH = 8
#: Hex digits of the SHA-256 of the target's path in the names of its lock and temp folders.
KEY_LENGTH = 16
#: Names shown in a refusal at most (then "and N more").
SHOWN_NAMES = 5
#: Attempts to take a lock whose file its last holder removed as it was opened.
_LOCK_ATTEMPTS = 10


def create_new(path: str, mode: str = "wb", dir_fd: int | None = None, **kwargs):
    """Open a file that must not exist yet (and is no link) for writing; ``dir_fd``: ``path``
    is relative to the folder open as it (``os.open``'s)."""
    fd = os.open(path, CREATE_FLAGS, 0o666, dir_fd=dir_fd)
    return open(fd, mode, **kwargs)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def target_key(target: str) -> str:
    """A short name for the output folder ``target``: a hash of its path, its parent resolved
    (two spellings of one folder share a lock)."""
    parent, name = os.path.split(os.path.abspath(target))
    path = os.path.join(os.path.realpath(parent), name)
    return hashlib.sha256(os.fsencode(path)).hexdigest()[:KEY_LENGTH]


def runtime_dir() -> str:
    """The user's runtime folder (``$XDG_RUNTIME_DIR``), else the temporary folder."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime):
        return runtime
    return tempfile.gettempdir()


def lock_path(target: str) -> str:
    """The lock file of a run into ``target`` (in the runtime folder; the user's id in its name
    keeps users of a shared temporary folder apart)."""
    return os.path.join(runtime_dir(), f"stream-split-{os.getuid()}-{target_key(target)}.lock")


class OutputFolder:
    """``with OutputFolder(target, overwrite=..., inputs=[...]) as folder:`` write into
    ``folder.staging`` (made on first use), then ``folder.commit()``. Leaving the block without
    ``commit`` discards the staging folder and leaves the target as it was. ``inputs``: the
    paths read (a target holding one of them is refused)."""

    def __init__(self, target: str, *, overwrite: bool = False, inputs=()):
        if not target:
            raise OutputError("the output folder is an empty path")
        self.target = os.path.abspath(target)
        self.overwrite = overwrite
        self.inputs = tuple(os.fspath(p) for p in inputs)
        self.parent, self.name = os.path.split(self.target)
        if not self.name:
            raise OutputError(f"cannot write into the root folder: {target}")
        self._temp_prefix = f"{TEMP_PREFIX}{target_key(self.target)}-"
        self._staging: str | None = None
        self._made: list[str] = []  # parent folders this run made (removed if it commits none)
        self._lock_fd: int | None = None
        self._lock_path: str | None = None

    def __enter__(self) -> "OutputFolder":
        try:
            self._lock()
            self._refuse_inside_a_running_target()
            self._check_target()
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None
        for folder in reversed(self._made):  # none after a commit
            with suppress(OSError):
                os.rmdir(folder)  # only when still empty
        self._made = []
        self._release()

    @property
    def staging(self) -> str:
        """The private folder to write into: made on first use, so that a run that stops
        before (an input that is missing or no trace) leaves nothing behind."""
        if self._staging is None:
            self._make_parent()
            self._remove_leftovers()
            staging = self._new_temp_folder()
            _write_marker(staging, None)
            self._staging = staging
        return self._staging

    def _make_parent(self) -> None:
        missing = []
        folder = self.parent
        while not os.path.lexists(folder):
            missing.append(folder)
            folder = os.path.dirname(folder)
        for folder in reversed(missing):
            try:
                os.mkdir(folder)
            except FileExistsError:
                continue
            except OSError as e:
                raise OutputError(f"cannot create {folder}: {e.strerror}") from None
            self._made.append(folder)
        if not os.path.isdir(self.parent):
            raise OutputError(f"not a folder: {self.parent}")

    def _new_temp_folder(self) -> str:
        try:
            return tempfile.mkdtemp(prefix=self._temp_prefix, dir=self.parent)
        except OSError as e:
            raise OutputError(f"cannot write in {self.parent}: {e.strerror}") from None

    def _lock(self) -> None:
        path = lock_path(self.target)
        for _ in range(_LOCK_ATTEMPTS):
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except OSError as e:
                raise OutputError(f"cannot create the lock file {path}: {e.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                break
            if _is_file_at(fd, path):
                self._lock_fd, self._lock_path = fd, path
                return
            os.close(fd)  # its holder removed it as we opened it: take the next one
        raise OutputError(f"another stream-split is writing to {self.target}")

    def _release(self) -> None:
        if self._lock_fd is not None:
            with suppress(OSError):
                os.unlink(self._lock_path)  # while still held: see _lock
            os.close(self._lock_fd)  # drops the flock
            self._lock_fd = None

    def _refuse_inside_a_running_target(self) -> None:
        """A run into a folder that a running split will replace as a whole is refused (its
        result would be in the way of that commit)."""
        folder = os.path.realpath(self.parent)
        while os.path.basename(folder):
            if _locked_by_another(lock_path(folder)):
                raise OutputError(f"another stream-split is writing to {folder}, which holds "
                                  f"{self.target}")
            folder = os.path.dirname(folder)

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
        refusal = self._refusal()
        if refusal:
            raise refusal

    def _refusal(self) -> OutputError | None:
        """Why the target, as it is now, cannot be replaced (None: it is empty, or an earlier
        output of ours and ``overwrite``)."""
        try:
            if not os.listdir(self.target):
                return None
        except OSError as e:
            return OutputError(f"cannot use {self.target}: {e.strerror}")
        held = _inputs_inside(self.target, self.inputs)
        if held:
            return OutputError(f"the output folder holds the input {_shown(held)}: {self.target}")
        if not self.overwrite:
            return OutputError.worded(lambda spell: (
                f"the output folder is not empty: {self.target} ({spell('overwrite')} replaces "
                "an earlier output of stream-split)"))
        foreign = foreign_entries(self.target)
        if foreign:
            return OutputError.worded(lambda spell: (
                f"the output folder holds files stream-split did not write: {_shown(foreign)} "
                f"({spell('overwrite')} replaces only an earlier output of stream-split): "
                f"{self.target}"))
        return None

    def _remove_leftovers(self) -> None:
        """Staging folders of crashed runs into this target and results replaced but not yet
        deleted (under the lock: no run into this target is alive)."""
        for entry in os.scandir(self.parent):
            if (entry.name.startswith(self._temp_prefix)
                    and len(entry.name) == len(self._temp_prefix) + _TEMP_SUFFIX_LENGTH
                    and entry.is_dir(follow_symlinks=False)):
                _remove_leftover(entry.path)

    def commit(self) -> None:
        """Move the finished staging folder onto the target (replacing an earlier output of
        ours); raises ``OutputError``, writing nothing, when the target is no longer ours to
        replace (something appeared in it while the run went on)."""
        staging = self.staging
        _write_marker(staging, _files_under(staging))  # replaces the staging marker
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp's 0700 was for building it
        try:
            os.rename(staging, self.target)  # atomic; replaces an empty folder
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            self._replace_earlier_output()
        self._staging = None
        self._made = []

    def _replace_earlier_output(self) -> None:
        if self._refusal():
            held = foreign_entries(self.target) or sorted(os.listdir(self.target))
            raise OutputError(f"nothing written: {self.target} changed while the split ran "
                              f"(it holds {_shown(held)})")
        # Renamed away first: a crash between the two renames leaves no target at all, never
        # a mix; the next run deletes what the renamed one's marker lists.
        parked = self._new_temp_folder()
        os.rename(self.target, parked)  # onto the empty folder mkdtemp made
        os.rename(self._staging, self.target)
        _remove_listed(parked)
        _move_back(parked, self.target)


def _is_file_at(fd: int, path: str) -> bool:
    """Whether the open file ``fd`` is still the one named ``path``."""
    try:
        named = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _locked_by_another(path: str) -> bool:
    """Whether a running split holds the lock file ``path`` (an existing one: none is made)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _shown(names: list[str]) -> str:
    """Names for a one-line message (a name with a line break or a control character in it
    is shown escaped)."""
    shown = ", ".join(n if n.isprintable() else ascii(n) for n in names[:SHOWN_NAMES])
    more = len(names) - SHOWN_NAMES
    return shown + (f" and {more} more" if more > 0 else "")


# -- the marker: what a folder holds that the tool wrote --------------------------------------

def _write_marker(folder: str, files) -> None:
    """The marker of ``folder``: the text of ``json.dump`` with ``indent=0`` of its format,
    version and ``files`` (an iterable of lists of relative paths, the paths in order:
    ``_files_under``; or None for a staging folder), written as the lists come (a folder of
    a million pieces is listed without holding a million names), as
    ``MARKER_BEING_WRITTEN``, then renamed onto the marker (replacing the one there): a
    crash leaves the folder's marker whole or none."""
    being_written = os.path.join(folder, MARKER_BEING_WRITTEN)
    with create_new(being_written, "w", encoding="utf-8") as f:
        f.write(_MARKER_HEAD)
        if files is None:
            f.write("null")
        else:
            opening = "[\n"
            for batch in filter(None, files):
                f.write(opening + _marker_items(batch))
                opening = ",\n"
            f.write("[]" if opening == "[\n" else "\n]")
        f.write(_MARKER_END)
    os.replace(being_written, os.path.join(folder, FOLDER_MARKER))


#: Entries of a folder listed, and paths of the marker encoded, at once (``_files_under``).
MARKER_BATCH = 4096
#: The marker's items: one per line, as ``json.dump(indent=0)`` lays them out.
_MARKER_ITEMS = json.JSONEncoder(separators=(",\n", ": "))
#: The bytes of an ASCII path that the encoder writes escaped: control characters, quote,
#: backslash, DEL.
_ESCAPED = bytes(range(0x20)) + b'"\\\x7f'


def _marker_items(paths: list) -> str:
    """``paths`` as the marker's items (``_MARKER_ITEMS``' text of the list, without its
    brackets): each path between quotes as it is where none needs an escape (ASCII, no
    ``_ESCAPED`` byte: the pieces' names), else by the encoder (a path at a time: 45 M
    instructions of the commit of 30 k pieces, 3 M so)."""
    joined = "".join(paths)
    if joined.isascii():
        plain = joined.encode("ascii")
        if len(plain.translate(None, _ESCAPED)) == len(plain):
            return '"' + '",\n"'.join(paths) + '"'
    return _MARKER_ITEMS.encode(paths)[1:-1]

#: The marker's text before and after its ``files``.
_MARKER_HEAD = json.dumps({"format": MARKER_FORMAT, "version": MARKER_VERSION},
                          indent=0)[:-2] + ',\n"files": '
_MARKER_END = "\n}\n"
#: The whole marker of a staging folder.
_STAGING_MARKER = (_MARKER_HEAD + "null" + _MARKER_END).encode()


def _is_relative_path(path) -> bool:
    parts = path.split("/") if isinstance(path, str) else [""]
    return all(part not in ("", ".", "..") and "\0" not in part for part in parts)


def read_marker(folder: str) -> dict | None:
    """The marker of ``folder`` (``files``: a list, or None for a staging folder), or None when
    it has none (or one that is not ours: a link, not JSON, a path outside the folder)."""
    try:
        fd = os.open(os.path.join(folder, FOLDER_MARKER),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            marker = json.loads(f.read())
        except (OSError, ValueError):
            return None
    if not isinstance(marker, dict) or marker.get("format") != MARKER_FORMAT:
        return None
    files = marker.get("files")
    if files is not None and not (isinstance(files, list) and all(map(_is_relative_path, files))):
        return None
    return marker


def _files_under(folder: str, prefix: str = ""):
    """Every file under ``folder`` (relative, ``/``-separated), the marker (and the one being
    written) aside, as the file system lists them, in lists of at most ``MARKER_BATCH``
    (some may be empty; a folder of a million pieces is never held whole), links not
    followed: from ``_listed``'s batches, a batch holding no folder as it is (a look-up of
    the markers at the top), else a name at a time, a folder's files where it is."""
    for names, kinds in _listed(folder):
        if kinds is None:
            if prefix:
                yield [prefix + name for name in names]
                continue
            for marker in _MARKERS:
                if marker in names:
                    names.remove(marker)
            yield names
            continue
        files = []
        for name, kind in zip(names, kinds):
            if kind == _FOLDER or kind == _UNSURE and _is_folder(os.path.join(folder, name)):
                yield files
                files = []
                yield from _files_under(os.path.join(folder, name), prefix + name + "/")
            elif prefix or name not in _MARKERS:
                files.append(prefix + name)
        yield files


def _listed(folder: str):
    """The entries of ``folder`` as the file system lists them, in batches of at most
    ``MARKER_BATCH``: ``(names, kinds)``, ``kinds`` None where none is a folder, else a
    bytes of one letter a name (``_FOLDER``, ``_UNSURE``: a link or a type not given, to be
    looked at without following it, ``_is_folder``; any other a file). By
    ``_native.page48_dir_batch`` where built: ``readdir``'s names and types, no ``DirEntry``
    made (callgrind, split of 30 k one-op iterations: 4,706.2 -> 4,646.8 M instructions,
    the commit's listing of its pieces); else from ``os.scandir``'s entries, a look for a
    folder among them first with links followed (``DirEntry.is_dir`` called without a
    keyword: 1,800 against 500 instructions an entry; where one is, maybe a link to a
    folder, they are looked at again, not followed)."""
    if _native is not None:
        opened = _native.page48_dir_open(folder)
        while (batch := _native.page48_dir_batch(opened, MARKER_BATCH))[0]:
            yield batch
        return
    with os.scandir(folder) as entries:
        while listed := list(islice(entries, MARKER_BATCH)):
            yield list(map(_NAME, listed)), None if True not in map(
                _IS_DIR_OR_LINK, listed) else bytes(
                _FOLDER if entry.is_dir(follow_symlinks=False) else _FILE for entry in listed)


def _is_folder(path: str) -> bool:
    """Whether ``path`` is a folder, not a link to one (``DirEntry.is_dir(follow_symlinks=
    False)``: one gone since it was listed is not)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


#: A folder entry's name, and whether it is a folder or a link to one (``_listed``).
_NAME, _IS_DIR_OR_LINK = attrgetter("name"), os.DirEntry.is_dir
#: The kinds of entry of ``_listed``'s batches (``_native.page48_dir_batch``'s letters).
_FOLDER, _UNSURE, _FILE = b"d?f"
#: The names ``_files_under`` leaves out at the top: the marker, and the one being written.
_MARKERS = (FOLDER_MARKER, MARKER_BEING_WRITTEN)


def foreign_entries(folder: str) -> list[str]:
    """What ``folder`` holds that its marker does not list as a file the tool wrote (a folder
    on the way to one is not foreign): relative paths, a foreign folder's ending in ``/``
    (not looked into); a link or anything but a regular file is foreign. Each entry's type
    is the one its folder's listing gives (``os.scandir``: no ``lstat`` per file on the usual
    file systems); a folder that cannot be listed is passed over, as ``os.walk`` does."""
    marker = read_marker(folder)
    listed = set(marker["files"] or ()) if marker is not None else set()
    if marker is not None:
        listed.add(FOLDER_MARKER)
    on_the_way = {path.rsplit("/", 1)[0] + "/" for path in listed if "/" in path}
    on_the_way |= {p[:i + 1] for p in on_the_way for i, c in enumerate(p) if c == "/"}
    foreign = []
    for prefix, entry in _entries(folder, lambda prefix: prefix in on_the_way):
        name = prefix + entry.name
        if entry.is_dir(follow_symlinks=False):
            if name + "/" not in on_the_way:
                foreign.append(name + "/")
        elif name not in listed or not entry.is_file(follow_symlinks=False):
            foreign.append(name)
    return sorted(foreign)


def _entries(folder: str, enter=lambda prefix: True, prefix: str = ""):
    """Every entry under ``folder`` as ``(prefix, os.DirEntry)``, ``prefix`` the relative path
    of its folder (``""``, ``"rank_0/"``), a folder's entries before those of its subfolders,
    as the listing gives them (none held: a folder of a million pieces is not listed in
    memory); links not followed; a subfolder is looked into when ``enter(its prefix)`` says
    so; one that cannot be listed is passed over."""
    inner = []  # the subfolders' names, looked into once this listing is closed
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                yield prefix, entry
                if entry.is_dir(follow_symlinks=False):
                    inner.append(entry.name)
    except OSError:
        return
    for name in inner:
        if enter(sub := prefix + name + "/"):
            yield from _entries(os.path.join(folder, name), enter, sub)


def _inputs_inside(folder: str, inputs) -> list[str]:
    """The inputs that are ``folder``, lie inside it (resolved paths), or are one of its files
    under another name (a hard link)."""
    real = os.path.realpath(folder)
    held, files = [], {}
    for path in inputs:
        if path == "-":
            continue
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            continue
        resolved = os.path.realpath(path)
        if resolved == real or resolved.startswith(real.rstrip(os.sep) + os.sep):
            held.append(path)
        elif stat.S_ISREG(info.st_mode):
            files[(info.st_dev, info.st_ino)] = path
    if files:
        for _, entry in _entries(folder):
            if not entry.is_dir(follow_symlinks=False):
                with suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    if (info.st_dev, info.st_ino) in files:
                        held.append(files.pop((info.st_dev, info.st_ino)))
    return held


# -- removing what the tool wrote, and nothing else ---------------------------------------------

def _open_inside(folder: str, parts: list) -> int:
    """A descriptor of the folder ``parts`` (names, maybe none) under ``folder``, reached
    without following a link."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(folder, flags)
    try:
        for part in parts:
            inner = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _unlink_regular(paths, folder: str) -> None:
    """Remove the regular files ``paths`` (relative, all in one folder) under ``folder``,
    never through a link: the folder opened once, each file looked at where it lies."""
    parts = paths[0].split("/")[:-1]
    fd = _open_inside(folder, parts)
    try:
        for path in paths:
            name = path.rsplit("/", 1)[-1]
            with suppress(OSError):
                if stat.S_ISREG(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def _remove_listed(folder: str) -> None:
    """Remove the files ``folder``'s marker lists, the marker, and the folders left empty;
    anything else stays (and with it the folders holding it)."""
    marker = read_marker(folder)
    listed = (marker["files"] or ()) if marker is not None else ()
    for _, paths in groupby(listed, key=lambda path: path.rpartition("/")[0]):
        with suppress(OSError):
            _unlink_regular(list(paths), folder)
    if marker is not None:
        with suppress(OSError):
            os.unlink(os.path.join(folder, FOLDER_MARKER))
    for top, dirs, _ in os.walk(folder, topdown=False):
        for name in dirs:
            with suppress(OSError):
                os.rmdir(os.path.join(top, name))
    with suppress(OSError):
        os.rmdir(folder)


def _remove_leftover(folder: str) -> None:
    """A temp folder of a crashed run: a staging folder (its marker without a list: every file
    in it was written by that run, in a folder no one else could write to) as a whole; a
    replaced result as its marker lists; a folder without a marker only if empty, or if all
    it holds is the start of a staging folder's marker being written (a run killed as it made
    its staging folder: the file is the tool's by its text, and no one's data is lost)."""
    marker = read_marker(folder)
    if marker is not None and marker["files"] is None:
        shutil.rmtree(folder, ignore_errors=True)
        return
    if marker is None:
        with suppress(OSError):
            _remove_begun_staging_marker(folder)
    _remove_listed(folder)


def _remove_begun_staging_marker(folder: str) -> None:
    """Remove ``MARKER_BEING_WRITTEN`` when it is all ``folder`` holds and a regular file (no
    link) holding the start of a staging folder's marker, maybe none of it."""
    if os.listdir(folder) != [MARKER_BEING_WRITTEN]:
        return
    path = os.path.join(folder, MARKER_BEING_WRITTEN)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        text = f.read(len(_STAGING_MARKER) + 1)
    if _STAGING_MARKER.startswith(text):
        os.unlink(path)


def _move_back(parked: str, target: str) -> None:
    """What appeared in an earlier output between the last look at it and its renaming away
    (not ours): back into the target where its name is free, else left where it is."""
    with suppress(OSError):
        for name in os.listdir(parked):
            if not os.path.lexists(os.path.join(target, name)):
                os.rename(os.path.join(parked, name), os.path.join(target, name))
        os.rmdir(parked)
