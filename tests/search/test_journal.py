"""A journal file a crash or a full disk left mid-record: the next run cuts the torn record off and
goes on (before, its first append ran on from the cut, and no later read of the file got past that
line: every finished trial was out of reach); a line that is not a record is named by its number."""

import os
import signal
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from effsearch.cli import main
from effsearch.search.store.journal import MendedJournalFile, cut_torn_tail
from effsearch.search.store.storage import open_url
from tests.search.test_resume import start
from tests.support.tiny_study import study_file


def test_cut_torn_tail_cuts_back_to_the_last_whole_line_and_keeps_the_bytes(tmp_path):
    path = tmp_path / "s.journal"
    for text, cut, left in (
        (b'{"a":1}\n{"b":2}\n', 0, b'{"a":1}\n{"b":2}\n'),
        (b'{"a":1}\n{"b":', 5, b'{"a":1}\n'),
        (b'{"a":', 5, b""),
        (b"", 0, b""),
    ):
        path.write_bytes(text)
        (tmp_path / "s.journal.torn").unlink(missing_ok=True)
        with open(path, "ab+") as f:  # as the journal's append opens it
            assert cut_torn_tail(f, path) == cut
        assert path.read_bytes() == left
        assert (tmp_path / "s.journal.torn").exists() == bool(cut)
        if cut:
            assert (tmp_path / "s.journal.torn").read_bytes() == text[len(left) :] + b"\n"


def test_a_journal_line_that_is_no_record_is_named_by_its_number(tmp_path, capsys, scripted):
    path = study_file(tmp_path, 2, max_slowdown=None)
    assert main(["run", str(path)]) == 0
    journal = path.with_suffix(".journal")
    lines = journal.read_bytes().split(b"\n")
    lines[4] = lines[4][:40] + lines[5]  # what an append after a torn record made, before the mend
    del lines[5]
    journal.write_bytes(b"\n".join(lines))
    capsys.readouterr()
    assert main(["status", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"line 5 of {journal} is not a journal record (JSONDecodeError); the 4 lines before it" in err, err


FILLS_UP = """
import errno

from effsearch.search.store.journal import MendedJournalFile

append, calls = MendedJournalFile.append_logs, []


def fills_up(self, logs):
    calls.append(1)
    if len(calls) < 100:  # about a trial's worth of writes each 40: fills up in trial 2
        return append(self, logs)
    with open(self._file_path, "ab") as f:  # the first bytes fit, the rest do not
        f.write(b'{"op_code":6,"worker_id":"x","tri')
    raise OSError(errno.ENOSPC, "No space left on device")


MendedJournalFile.append_logs = fills_up
"""


def test_a_disk_that_fills_mid_run_stops_it_in_one_line_and_a_rerun_resumes(tmp_path, capsys, scripted):
    """A full disk mid-write: one line saying what to do, exit 1, the torn record cut at the rerun
    (before: three chained tracebacks, and the next run lost the study to the torn line)."""
    path = study_file(tmp_path, 4, max_slowdown=None)
    (tmp_path / "fills_up.py").write_text(FILLS_UP)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    proc = start(
        path, "--plugin", "fills_up", env=env, log=tmp_path / "first.log"
    )  # its own process: gone when the rerun looks
    assert proc.wait(timeout=300) == 1
    err = (tmp_path / "first.log").read_text()
    assert "stopped: the study's storage" in err and "cannot be written (No space left on device)" in err, err
    assert "Traceback" not in err and "Should not reach" not in err, err
    journal = str(path.with_suffix(".journal"))
    kept = optuna.load_study(study_name="tiny", storage=open_url(journal)).get_trials()  # past the torn line
    assert sum(t.state == TrialState.COMPLETE for t in kept) >= 1
    assert main(["status", str(path)]) == 0  # the trial it was in: still running, its worker gone
    assert "is gone: the next `effsearch run` of the study queues it again" in capsys.readouterr().out
    assert main(["run", str(path)]) == 0  # space freed: the torn record is cut, the study goes on
    assert "ended in a record cut short" in capsys.readouterr().err
    trials = optuna.load_study(study_name="tiny", storage=open_url(journal)).get_trials()
    assert sum(t.state == TrialState.COMPLETE for t in trials) == 4


def test_a_stale_journal_lock_is_said_once_before_the_wait(tmp_path, capsys, scripted):
    """Optuna takes a lock a killed process left over after 30 s, in silence: the run looked hung."""
    path = study_file(tmp_path, 1, max_slowdown=None)
    assert main(["run", str(path)]) == 0
    lock = tmp_path / "tiny.journal.lock"
    lock.symlink_to(tmp_path / "tiny.journal")
    old = time.time() - 60
    os.utime(lock, (old, old), follow_symlinks=False)
    capsys.readouterr()
    assert main(["run", str(path)]) == 0  # nothing to write: the lock is not waited for
    err = capsys.readouterr().err
    assert err.count(f"the journal's lock {lock} is ") == 1 and "s old, left by a process that stopped" in err, err


def _ctrl_c_inside(monkeypatch, module, name, when):
    """``module.name`` (an ``os`` or ``time`` function Optuna's journal lock calls) wrapped: each call
    runs ``when(n, args)`` after the real one (n counts calls); a true result delivers a Ctrl-C there."""
    real, calls = getattr(module, name), []

    def wrapped(*args):
        out = real(*args)
        calls.append(args)
        if when(len(calls), args):
            signal.raise_signal(signal.SIGINT)
        return out

    monkeypatch.setattr(module, name, wrapped)
    return calls


def test_a_ctrl_c_inside_the_journal_lock_lands_after_the_write_as_a_ctrl_c(tmp_path, monkeypatch):
    """Raised just after the lock's release removed its file, the interrupt had become a
    FileNotFoundError (Optuna's release cleans up again on any exception): a worker read it as a
    failed trial ("invalid config") and went on to the next instead of stopping. Now the write ends,
    then the Ctrl-C arrives as one."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    path = tmp_path / "s.journal"
    backend = MendedJournalFile(str(path))
    _ctrl_c_inside(monkeypatch, os, "unlink", lambda n, args: str(args[0]).endswith(".rename"))
    with pytest.raises(KeyboardInterrupt):
        backend.append_logs([{"a": 1}])
    monkeypatch.undo()
    assert path.read_bytes() == b'{"a":1}\n' and not os.path.exists(f"{path}.lock")


def test_a_ctrl_c_while_the_journal_lock_is_awaited_leaves_the_holders_lock(tmp_path, monkeypatch):
    """Raised while another process held the lock, the interrupt's clean-up released that
    process's lock (its file removed under it). Now the wait goes on to the holder's release, then
    the write, then the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    path = tmp_path / "s.journal"
    backend = MendedJournalFile(str(path))
    lock = Path(f"{path}.lock")
    lock.touch()  # held by another process
    held_on = []

    def holder(n, args):  # the Ctrl-C at the first wait; the holder lets go at the second
        if n == 2:
            held_on.append(lock.exists())
            lock.unlink()
        return n == 1

    _ctrl_c_inside(monkeypatch, time, "sleep", holder)
    with pytest.raises(KeyboardInterrupt):
        backend.append_logs([{"a": 1}])
    monkeypatch.undo()
    assert held_on == [True], "the holder's lock was taken from it"
    assert path.read_bytes() == b'{"a":1}\n' and not lock.exists()
