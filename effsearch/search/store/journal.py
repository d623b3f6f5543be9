"""A study's journal file: Optuna's, mended where a crash tore its last record.

Optuna appends each write as one JSON line under the file's lock, and reads past a last line cut
short (another process may be writing it). A process killed in that write, or a disk that filled
in it, leaves the cut line for good, and Optuna's next append runs on from it: the torn record and
the new one become one corrupt line in the middle, which no later read gets past, so every
finished trial in the file was out of reach. Here an append first cuts a torn last line off (under
the same lock: no writer is inside its write), keeping its bytes beside the journal
(``NAME.journal.torn``); the trial it was about reads as running, and is re-queued when its worker
is gone (``heartbeat.requeue_dead_local``).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, BinaryIO

from optuna.storages.journal import JournalFileBackend

from effsearch.search.store.signals import signals_put_off

log = logging.getLogger(__name__)

TORN_SUFFIX = ".torn"


class MendedJournalFile(JournalFileBackend):
    """Optuna's ``JournalFileBackend`` whose appends first cut a torn last record (``cut_torn_tail``)."""

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        # Upstream's append, with the cut inside its lock (its lock is not re-entrant: super() would
        # take it again), and Ctrl-C or SIGTERM delivered once the lock is released: raised inside
        # the lock's own code, either became another error or freed another process's lock
        # (store/signals.py). A stale lock's wait (Optuna's 30 s grace) puts them off as long.
        with signals_put_off():
            self._lock.acquire()
            try:
                text = "\n".join(json.dumps(entry, separators=(",", ":")) for entry in logs) + "\n"
                with open(self._file_path, "ab+") as f:  # appends wherever it seeks; reads and cuts too
                    cut_torn_tail(f, Path(self._file_path))
                    f.write(text.encode("utf-8"))
                    f.flush()
                    os.fsync(f.fileno())  # the cut with it
            finally:
                self._lock.release()


def cut_torn_tail(f: BinaryIO, path: Path) -> int:
    """Cut the journal ``f`` (``path``, open to read and write) back to its last whole line when it
    ends inside one (a write cut short); the cut bytes are appended to ``path.torn``. Returns how
    many bytes were cut (0: none)."""
    size = f.seek(0, os.SEEK_END)
    if size == 0:
        return 0
    f.seek(size - 1)
    if f.read(1) == b"\n":
        return 0
    end = _last_line_end(f, size)
    f.seek(end)
    torn = f.read()
    with open(path.with_name(path.name + TORN_SUFFIX), "ab") as kept:
        kept.write(torn + b"\n")
    f.truncate(end)
    log.warning(
        "the journal %s ended in a record cut short (a process killed while writing it, or a full disk): "
        "its %d bytes were moved to %s%s, and the study goes on from the records before it",
        path,
        len(torn),
        path.name,
        TORN_SUFFIX,
    )
    return len(torn)


def _last_line_end(f: Any, size: int, chunk: int = 1 << 16) -> int:
    """The offset just past the last newline of the open file ``f`` of ``size`` bytes (0: none)."""
    pos = size
    while pos > 0:
        start = max(0, pos - chunk)
        f.seek(start)
        block = f.read(pos - start)
        at = block.rfind(b"\n")
        if at >= 0:
            return start + at + 1
        pos = start
    return 0


def first_bad_line(path: Path) -> str | None:
    """Where a journal file cannot be read: its first line (after a whole one) that is not a JSON
    record, said with its number and what a user can do; None when every line reads."""
    try:
        with open(path, "rb") as f:
            for n, line in enumerate(f, 1):
                if not line.endswith(b"\n"):
                    return None  # a torn last line: read past, and cut at the next write
                try:
                    json.loads(line)
                except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
                    return (
                        f"line {n} of {path} is not a journal record ({type(e).__name__}); the {n - 1} lines "
                        f"before it are whole: a copy of them (head -n {n - 1}) opens as the study up to there"
                    )
    except OSError:
        return None
    return None
