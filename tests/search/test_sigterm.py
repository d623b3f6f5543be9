"""SIGTERM to `effsearch run --workers 2` (what a scheduler or `kill` sends the main process only),
SIGINT to the main process only (`kill -INT`, a notebook's interrupt) and Ctrl-C at a terminal (SIGINT
to the whole process group) each stop the study: the workers are told once, their running trials
are queued again, and the command exits 130. With a signal to the main process only, the workers,
never told, had run the whole study."""

import gc
import os
import signal
import sys
import time
import weakref

import optuna
import pytest
from optuna.trial import TrialState

from effsearch.search.run import workers
from effsearch.search.run.objective import TRAIN_FN_ENV
from effsearch.search.store.heartbeat import worker_id
from effsearch.search.store.storage import open_url
from tests.search.test_resume import start
from tests.support.scripted import SLOW_TRAIN_FN
from tests.support.tiny_study import study_file


@pytest.fixture(autouse=True)
def pythons_own_handlers():
    """Python's SIGINT and SIGTERM handlers, whatever ran before: a test module that imports Composer
    when it is collected installs Composer's (sys.exit(128 + signal)), and Ctrl-C is then SystemExit."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, handler in before.items():
        signal.signal(s, handler)


def both_workers_mid_trial(proc, journal: str, deadline: float = 300.0) -> None:
    """Wait until the baseline is done and both workers are mid-trial (or ``proc`` ended)."""
    end = time.time() + deadline
    while time.time() < end and proc.poll() is None:
        try:
            trials = optuna.load_study(study_name="tiny", storage=open_url(journal)).get_trials()
        except Exception:  # noqa: BLE001 - the journal is not written yet
            trials = []
        done = sum(t.state == TrialState.COMPLETE for t in trials)
        if done >= 1 and sum(t.state == TrialState.RUNNING for t in trials) == 2:
            return
        time.sleep(0.3)


# SIGTERM to the main process takes the path of SIGINT to it alone, less the wait: its watch
# terminates the workers at once (the in-process test below), so two whole runs cover the three.
@pytest.mark.parametrize("sig,group", [(signal.SIGINT, False), (signal.SIGINT, True)], ids=["int", "ctrl-c"])
def test_a_signal_to_the_main_process_or_its_group_stops_the_workers_and_queues_their_trials(tmp_path, sig, group):
    n = 12
    path = study_file(tmp_path, n, workers=2)
    proc = start(path, env={TRAIN_FN_ENV: SLOW_TRAIN_FN}, log=tmp_path / "run.log")
    journal = str(path.with_suffix(".journal"))
    try:
        both_workers_mid_trial(proc, journal)
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    log = (tmp_path / "run.log").read_text()
    assert code == 130, log[-2000:]
    assert "stopping: waiting for the workers" in log
    trials = optuna.load_study(study_name="tiny", storage=open_url(journal)).get_trials()
    assert not any(t.state == TrialState.RUNNING for t in trials)
    assert sum(t.state == TrialState.COMPLETE for t in trials) < n  # stopped, not run to the end
    stopped = [t for t in trials if t.user_attrs.get("status") == "interrupted"]
    assert stopped  # and each queued again, once
    assert sorted(t.user_attrs.get("retry_of") for t in trials if t.state == TrialState.WAITING) == sorted(
        t.number for t in stopped
    )


class FakeWorker:
    """A worker process that runs until it is terminated."""

    def __init__(self):
        self.exitcode = None
        self.terminated_at = None

    def is_alive(self):
        return self.exitcode is None

    def join(self, timeout=None):
        if self.is_alive() and timeout:
            time.sleep(timeout)

    def terminate(self):
        self.terminated_at = time.monotonic()
        self.exitcode = 130  # a worker queues its trial again and exits 130 on SIGTERM (work)


class FakeProgress:
    def __init__(self):
        self.lines = []
        self.report = self
        self.polls = 0

    def line(self, text, flush=False):
        self.lines.append(text)

    def poll(self, study):
        self.polls += 1


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["term", "int"])
def test_watch_tells_its_workers_at_once_on_sigterm_and_after_their_grace_on_sigint(sig):
    """SIGTERM to the main process (a scheduler, `kill`) ends its watch with SystemExit and the
    workers, never told, are terminated at once; SIGINT to it alone gives them TOLD_WITHIN seconds
    to stop by themselves (a Ctrl-C at a terminal reached them too) before they are told."""
    import threading

    procs = [FakeWorker(), FakeWorker()]
    progress = FakeProgress()
    before = signal.getsignal(signal.SIGTERM)
    threading.Timer(0.3, os.kill, (os.getpid(), sig)).start()
    start = time.monotonic()
    assert workers.watch(procs, None, progress) == "interrupted"
    waited = min(p.terminated_at for p in procs) - start
    assert all(p.exitcode == 130 for p in procs)
    assert "stopping: waiting for the workers" in progress.lines[0]
    if sig == signal.SIGTERM:
        assert waited < workers.TOLD_WITHIN
    else:
        assert waited >= workers.TOLD_WITHIN
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is this watch's only


def test_a_second_ctrl_c_while_the_workers_stop_tells_them_at_once_and_the_run_still_ends_interrupted():
    """It cut the wait short with a KeyboardInterrupt: no word on resuming, and a third, during the
    interpreter's own join of the workers, printed a traceback from multiprocessing's atexit."""
    import threading

    procs = [FakeWorker(), FakeWorker()]
    progress = FakeProgress()
    before = signal.getsignal(signal.SIGINT)
    for delay in (0.3, 1.0, 1.2):
        threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    assert workers.watch(procs, None, progress) == "interrupted"
    assert all(p.exitcode == 130 for p in procs)
    assert min(p.terminated_at for p in procs) - start < workers.TOLD_WITHIN  # told at the second
    assert progress.lines[1].startswith("stopping now: telling the workers"), progress.lines
    assert signal.getsignal(signal.SIGINT) is before


class SignalInAsk(optuna.samplers.RandomSampler):
    """Ctrl-C while Optuna's ask sets a trial up: the trial exists (RUNNING), its worker not yet named."""

    def before_trial(self, study, trial):
        signal.raise_signal(signal.SIGINT)


def test_ctrl_c_while_a_trial_is_asked_for_leaves_it_named_and_queued_again():
    study = optuna.create_study(sampler=SignalInAsk())
    workers.signed_asks(study)
    with pytest.raises(KeyboardInterrupt):  # put off until the trial names its worker, then raised
        study.ask()
    (asked,) = study.get_trials()
    assert asked.state == TrialState.RUNNING and asked.user_attrs["worker"] == worker_id()
    workers.requeue_interrupted(study)  # what a stopped worker does: its trials go back to the queue
    old, new = study.get_trials()
    assert old.state == TrialState.FAIL and new.state == TrialState.WAITING and new.user_attrs["retry_of"] == 0


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


def where(pid: int) -> str:
    """What a live process waits in (its state and kernel wait channel), and its threads' count."""
    try:
        status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":" in line)
        return f"{status['State'].strip()} in {open(f'/proc/{pid}/wchan').read()}, {status['Threads'].strip()} threads"
    except OSError as e:
        return str(e)


def alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="the workers' parent-death signal is Linux's")
def test_workers_stop_and_queue_their_trials_again_when_the_main_process_is_killed(tmp_path):
    """SIGKILL (or the OOM killer) to the main process alone: its workers had run the rest of the
    study, unseen, and timed a new run's trials against their own."""
    n = 12
    path = study_file(tmp_path, n, workers=2)
    proc = start(path, env={TRAIN_FN_ENV: SLOW_TRAIN_FN}, log=tmp_path / "run.log")
    journal = str(path.with_suffix(".journal"))
    workers_seen: list[int] = []
    try:
        both_workers_mid_trial(proc, journal)
        workers_seen = [p for p in children(proc.pid) if "spawn_main" in open(f"/proc/{p}/cmdline").read()]
        assert len(workers_seen) == 2, (tmp_path / "run.log").read_text()[-2000:]
        proc.kill()  # the main process only
        proc.wait(timeout=30)
        end = time.time() + 30  # they stop in a second or two; before, they ran on to the study's end
        while time.time() < end and any(alive(p) for p in workers_seen):
            time.sleep(0.2)
        assert not any(alive(p) for p in workers_seen), (
            "the workers outlived the main process",
            [(p, where(p)) for p in workers_seen if alive(p)],
            (tmp_path / "run.log").read_text()[-2000:],
        )
    finally:
        for p in workers_seen:
            if alive(p):
                os.kill(p, signal.SIGKILL)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    trials = optuna.load_study(study_name="tiny", storage=open_url(journal)).get_trials()
    assert not any(t.state == TrialState.RUNNING for t in trials)  # each queued again by its worker
    assert sum(t.state == TrialState.COMPLETE for t in trials) < n  # stopped, not run to the end


def test_a_trial_whose_line_a_ctrl_c_cut_short_is_shown_at_the_next_poll(tmp_path, monkeypatch):
    """Its line reads the storage: a Ctrl-C there had marked the trial seen, and its line was never shown."""
    import io

    from effsearch.search.results import report
    from effsearch.search.run.progress import Progress, Report
    from effsearch.search.study import studyfile

    spec = studyfile.load(study_file(tmp_path, 2))
    study = optuna.create_study(directions=["minimize", "maximize"])
    progress = Progress(spec, study, Report(out := io.StringIO()))
    study.add_trial(optuna.trial.create_trial(values=[1.0, 0.5]))
    calls = []

    def line(t, *args, **kwargs):
        calls.append(t.number)
        if len(calls) == 1:
            raise KeyboardInterrupt  # Ctrl-C while the line is made
        return f"line of trial {t.number}"

    monkeypatch.setattr(report, "trial_line", line)
    with pytest.raises(KeyboardInterrupt):
        progress.poll(study)
    progress.poll(study)  # the summary's poll after the stop
    assert out.getvalue().count("line of trial 0") == 1


def test_a_signal_dropped_in_a_garbage_collector_callback_still_stops_the_worker_before_its_next_trial(monkeypatch):
    """Python drops an exception raised in a weakref or ``__del__`` callback ("Exception ignored
    in ..."): a worker whose SIGTERM landed there (a killed main process sends one, and no second)
    had gone on to run the rest of the study. Its next ask raises it again."""
    study = optuna.create_study()
    signals = workers.StopSignals()
    with signals.installed():
        workers.signed_asks(study, signals.again)

        class Resource:
            pass

        held = Resource()
        weakref.finalize(held, signal.raise_signal, signal.SIGTERM)
        dropped = []
        monkeypatch.setattr(sys, "unraisablehook", lambda u: dropped.append(u.exc_type))
        del held  # the SystemExit the handler raises inside the finalizer is dropped there
        gc.collect()
        assert dropped == [SystemExit]
        with pytest.raises(SystemExit) as stopped:
            study.ask()
    assert stopped.value.code == 128 + signal.SIGTERM and study.get_trials() == []
