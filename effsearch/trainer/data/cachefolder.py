"""A cache folder that a refused run leaves no trace of: the way every on-disk cache of a run's data
is made (decoded images, ``imagecache``; tokenized text, ``textcache``).

A cache lives in a folder of the data directory: the entry for a key is the folder ``CACHE/KEY``,
guarded by the lock file ``CACHE/.KEY.lock``, so that processes started together (study workers,
data-parallel ranks) fill it once. A refusal must leave the data directory as it found it, and
input is often found bad only while the entry is being filled (a truncated image shows when it is
decoded), or after (the decoded images do not fit in memory). So :func:`locked` makes the folder
and its missing parents and creates the lock file, and removes them again (the lock file if it
created it, the folders it made if they are left empty) when the block it guards raises::

    try:
        lock = cachefolder.locked(cache, key)
    except OSError:            # no cache here (a read-only folder, a full disk): work without one
        ...
    with lock:                 # held; an exception inside removes what locked() made
        ...                    # read cache / key, or write it aside and rename it into place

and the caller that may still refuse once the entry is written (``training`` around the data's
load) wraps that in :func:`removed_on_refusal`: a ``ConfigError`` raised inside removes every entry
written inside (with its lock and folders), while one read from an earlier run stays.

A process that waited on a lock its holder then removed opens the lock file again before it goes
on, so two processes never both hold the lock to one key.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from effsearch.config import ConfigError

_SCOPES: list[list[Locked]] = []  # the entries written inside each open removed_on_refusal()


class Locked:
    """An exclusive lock on ``cache/.KEY.lock``, taken on ``with``; see the module's docstring."""

    def __init__(self, cache: Path, key: str) -> None:
        self.cache, self.path, self.entry = cache, cache / f".{key}.lock", cache / key
        self.made: list[Path] = []  # folders made here, innermost first (the order to remove them in)
        self.created = False  # whether this process created the lock file
        self.had_entry = True  # whether the entry was there when the lock was taken (set then)
        self.fd = self._open()

    def _open(self) -> int:
        self.made += [p for p in _make(self.cache) if p not in self.made]
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            self.created = True
        except FileExistsError:
            fd = os.open(self.path, os.O_WRONLY)
        except OSError:
            self.undo()
            raise
        return fd

    def __enter__(self) -> Locked:
        while True:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
                    self.had_entry = self.entry.exists()
                    return self
            except FileNotFoundError:
                pass
            os.close(self.fd)  # its holder removed it (its input was refused): lock the file there now
            self.fd = self._open()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if kind is not None:
                self.undo()
            elif _SCOPES and not self.had_entry and self.entry.exists():
                _SCOPES[-1].append(self)  # written here: removed if the run is refused after all
        finally:
            os.close(self.fd)  # releases the lock

    def undo(self, entry: bool = False) -> None:
        """Remove the lock file if this process created it, the folders it made if empty, and with
        ``entry`` the entry itself."""
        if entry:
            shutil.rmtree(self.entry, ignore_errors=True)
        if self.created:
            self.path.unlink(missing_ok=True)
        for folder in self.made:
            try:
                folder.rmdir()  # only an empty one: what another process wrote there stays
            except OSError:
                return


def locked(cache: Path, key: str) -> Locked:
    """Make ``cache`` (and its missing parents) and the lock file of ``key`` there; ``with`` it to
    hold the lock. Raises OSError (nothing left behind) where they cannot be made."""
    return Locked(cache, key)


@contextlib.contextmanager
def removed_on_refusal() -> Iterator[None]:
    """Remove the cache entries written inside the block (with their locks and folders) if it
    raises a ConfigError: a refused run leaves no cache it made."""
    _SCOPES.append([])
    try:
        yield
    except ConfigError:
        for lock in reversed(_SCOPES[-1]):
            lock.undo(entry=True)
        raise
    finally:
        _SCOPES.pop()


def _make(folder: Path) -> list[Path]:
    """Make ``folder`` and its missing parents; the ones made, innermost first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    made: list[Path] = []
    try:
        for p in reversed(missing):
            p.mkdir(exist_ok=True)  # another process may make it at the same moment
            made.insert(0, p)
    except OSError:
        for p in made:
            p.rmdir()
        raise
    return made
