"""Ctrl-C and SIGTERM put off while a write to the study finishes.

Python raises a signal's exception between any two bytecodes. Inside Optuna's journal lock that
is harmful: its release renames the lock file and then removes the renamed file, and a
KeyboardInterrupt (or Composer's SIGTERM exit) raised between the removal and the end of its
``try`` runs the cleanup again, whose ``FileNotFoundError`` replaces the interrupt; raised while
the lock is awaited, its cleanup removes the lock another process holds. The worker then saw a
storage error instead of the stop (a trial failed as an invalid config, and the worker went on to
the next), so a write is finished first and the signal delivered after it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def handled_by(handler: Any, signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """``handler`` for ``signals`` while the block runs, the handlers before it put back after.
    Signals reach the main thread only: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, previous in before.items():
            signal.signal(s, previous)


@contextlib.contextmanager
def signals_put_off() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive in the block are delivered when it ends, to the handlers
    they had before."""
    pending: list[int] = []
    try:
        with handled_by(lambda signum, frame: pending.append(signum)):
            yield
    finally:
        for signum in dict.fromkeys(pending):
            signal.raise_signal(signum)
