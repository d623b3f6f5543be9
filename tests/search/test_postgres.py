"""Several machines = several `effsearch run` on one PostgreSQL URL. A worker
killed with SIGKILL mid-trial: heartbeats mark its trial failed, it is queued
again and finished by another worker, and no finished trial is lost.

Starts its own server on 127.0.0.1 from Debian's `postgresql` package (initdb
refuses root: as root it runs as the `postgres` user). Skipped only outside CI
when the binaries are missing; with CI=true a missing server is a failure.
"""

import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from effsearch.search.store import queries
from effsearch.search.store.attrs import NOT_RUN
from effsearch.search.store.storage import open_url, retry_history
from tests.support.helpers import free_port, missing_system_package, tiny
from tests.support.scripted import SLOW_TRAIN_FN, TRAIN_FN_ENV

ROOT = Path(__file__).resolve().parents[2]


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class Server:
    """The test's own PostgreSQL server: its URL, and a restart as an operator would do it."""

    def __init__(self, bin_dir: Path, folder: Path, as_user: list[str], opts: str, url: str):
        self.bin_dir, self.folder, self.as_user, self.opts, self.url = bin_dir, folder, as_user, opts, url

    def pg_ctl(self, *args: str) -> subprocess.CompletedProcess:
        # Output to a file: a server pg_ctl starts keeps its stdout, and a pipe would never close.
        with open(self.folder / "pg_ctl.out", "a") as out:
            return subprocess.run(
                self.as_user + [str(self.bin_dir / "pg_ctl"), "-D", str(self.folder / "data"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=60,
            )

    def restart(self, met: Callable[[], bool], longest: float = 10.0) -> None:
        """`pg_ctl restart -m fast` (every client's connection cut, open transactions rolled back),
        with the server held down until ``met()`` says every client has met the outage (at most
        ``longest`` seconds), then started and waited for until it answers. A bare restart is over
        in a fraction of a second here, and a fixed pause was a race: on a busy machine a worker
        could sleep through it, and then had no outage to report."""
        done = self.pg_ctl("-m", "fast", "-w", "stop")
        assert done.returncode == 0, (self.folder / "pg_ctl.out").read_text()[-2000:]
        deadline = time.monotonic() + longest
        while not met() and time.monotonic() < deadline:
            time.sleep(0.1)
        done = self.pg_ctl("-o", self.opts, "-l", str(self.folder / "log"), "-w", "start")  # stop forgot them
        assert done.returncode == 0, (self.folder / "pg_ctl.out").read_text()[-2000:]
        self.wait_ready()

    def wait_ready(self, longest: float = 60.0) -> None:
        """Until the server accepts connections (`pg_isready`), at most ``longest`` seconds."""
        deadline = time.monotonic() + longest
        port = self.url.rsplit(":", 1)[1].split("/")[0]
        while True:
            ready = subprocess.run(
                [str(self.bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", port, "-t", "5"], capture_output=True
            )
            if ready.returncode == 0:
                return
            assert time.monotonic() < deadline, ready.stdout.decode() + (self.folder / "log").read_text()[-2000:]
            time.sleep(0.2)


@pytest.fixture(scope="module")
def postgres_server():
    bin_dir = _pg_bin()
    if bin_dir is None:
        missing_system_package("PostgreSQL binaries", "postgresql")
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="effsearch-pg-"))
    if os.geteuid() == 0:  # initdb refuses to run as root
        pg = pwd.getpwnam("postgres")
        os.chown(folder, pg.pw_uid, pg.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    data = folder / "data"
    subprocess.run(
        as_user + [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "effsearch", "--no-sync"],
        check=True,
        capture_output=True,
    )
    opts = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
    subprocess.run(
        as_user + [str(bin_dir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(folder / "log"), "-w", "start"],
        check=True,
        capture_output=True,
    )
    server = Server(bin_dir, folder, as_user, opts, f"postgresql://effsearch@127.0.0.1:{port}/postgres")
    server.wait_ready()
    try:
        yield server
    finally:
        server.pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres_url(postgres_server):
    return postgres_server.url


def _study_file(tmp_path, name: str = "pg", **changes) -> Path:
    d = {
        "name": name,
        "n_trials": 3,
        "seed": 1,
        "base": tiny(**{"dataset.synthetic_size": 512, "epochs": 20}),
        "space": {
            "include": ["optimizer"],
            "ranges": {"optimizer.lr": {"low": 0.02, "high": 0.1}},
            "fixed": {"optimizer.name": "sgd"},
        },
        "heartbeat": {"interval": 1, "grace_period": 3, "max_retry": 2},
        # The baseline reaches the target in ~0.05 s: 4x that is timing noise on a loaded machine, and
        # one trial stopped as too slow (PRUNED, counted toward n_trials) failed this test in CI.
        "max_slowdown": None,
        **changes,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def _worker(path, url, n_trials, log):
    # Scripted trials of three seconds, so a kill or a restart lands mid-trial: what is under test is
    # the storage's bookkeeping, and a real trial's Composer import and training made each worker 6 s
    # slower to start. One thread each: two workers of two threads on two cores made each trial 5-20x
    # slower (threads spinning on cores the other process holds), and this file took 4 minutes of CI.
    env = {**os.environ, "TQDM_DISABLE": "1", "OMP_NUM_THREADS": "1", TRAIN_FN_ENV: SLOW_TRAIN_FN}
    return subprocess.Popen(
        [sys.executable, "-m", "effsearch.cli", "run", str(path), "--storage", url, "--n-trials", str(n_trials)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


@pytest.mark.slow
def test_two_workers_sample_different_configs_and_survive_a_kill(tmp_path, postgres_url):
    """Two `effsearch run` on one study (two machines, as far as Optuna knows); one is SIGKILLed
    mid-trial. The other fails that trial by heartbeat, runs it again and completes n_trials."""
    path = _study_file(tmp_path)
    n = 6
    logs = [open(tmp_path / f"worker-{w}.log", "w") for w in "ab"]
    a, b = (_worker(path, postgres_url, n, log) for log in logs)
    storage = open_url(postgres_url)
    deadline = time.time() + 300
    victim = None
    try:
        while time.time() < deadline and a.poll() is None:  # a finished a trial and runs the next one
            if "pg" in optuna.get_all_study_names(storage):
                trials = optuna.load_study(study_name="pg", storage=storage).get_trials()
                mine = [t for t in trials if (t.user_attrs.get("worker") or {}).get("pid") == a.pid]
                running = [t for t in mine if t.state == TrialState.RUNNING and "config" in t.user_attrs]
                if running and any(t.state == TrialState.COMPLETE for t in mine):
                    victim = running[0].number
                    break
            time.sleep(0.2)
        assert victim is not None, (tmp_path / "worker-a.log").read_text()[-3000:]
        os.killpg(a.pid, signal.SIGKILL)
        a.wait()
        assert b.wait(timeout=400) == 0, (tmp_path / "worker-b.log").read_text()[-3000:]
    finally:
        for p in (a, b):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    trials = optuna.load_study(study_name="pg", storage=storage).get_trials()
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    # Short, so that pytest does not cut it: number, state, status, worker pid, retry of.
    states = [
        (
            t.number,
            t.state.name[:4],
            t.user_attrs.get("status"),
            (t.user_attrs.get("worker") or {}).get("pid"),
            t.system_attrs.get("failed_trial"),
        )
        for t in trials
    ]
    log_b = (tmp_path / "worker-b.log").read_text()[-3000:]
    # the survivor did not stop one short
    assert len(complete) == n and queries.counts(trials)["done"] == n, (victim, a.pid, b.pid, states, log_b)
    # No two trials proposed the same configuration (the retry re-runs the killed one's, by design).
    assert len({tuple(sorted(t.params.items())) for t in complete}) == n
    assert trials[victim].state == TrialState.FAIL
    retries = [t for t in trials if victim in retry_history(t)]  # the victim may be a retry itself
    assert len(retries) == 1 and retries[0].state == TrialState.COMPLETE
    assert retries[0].params == trials[victim].params
    assert retries[0].user_attrs["worker"]["pid"] == b.pid  # run by the survivor
    notes = storage.get_study_system_attrs(optuna.load_study(study_name="pg", storage=storage)._study_id)
    note = "".join(
        v for k, v in sorted(notes.items()) if k.startswith(f"dashboard:{trials[victim]._trial_id}:note_str")
    )
    assert f"Trial {victim}: lost" in note and "stopped sending heartbeats for 3 s; queued again as trial" in note


CUT = "warning: lost the storage's connection"  # what a worker says once it meets the outage


@pytest.mark.slow
def test_two_workers_survive_a_server_restart_mid_trial(tmp_path, postgres_server):
    """`pg_ctl restart -m fast` while both workers train: every connection is cut and the server
    is gone for a moment. The workers reconnect (pooled connections checked before use, new ones
    waiting for the server, a call cut mid-flight made again) and the study ends at n_trials with
    every trial complete: none lost, none left RUNNING, no configuration trained twice."""
    url, n = postgres_server.url, 6
    # A grace period longer than the restart: a worker's heartbeats pause while the server is down.
    path = _study_file(tmp_path, "pg-restart", heartbeat={"interval": 1, "grace_period": 20, "max_retry": 2})
    logs = [open(tmp_path / f"worker-{w}.log", "w") for w in "ab"]
    workers = [_worker(path, url, n, log) for log in logs]
    storage = open_url(url)
    restarted_during = None
    try:
        deadline = time.time() + 300  # a first trial on a busy machine: minutes
        while time.time() < deadline and all(p.poll() is None for p in workers):
            if "pg-restart" in optuna.get_all_study_names(storage):
                trials = optuna.load_study(study_name="pg-restart", storage=storage).get_trials()
                running = [t.number for t in trials if t.state == TrialState.RUNNING and "config" in t.user_attrs]
                # Both workers on the study (one still starting meets a server that is down and is
                # refused, as a bad URL is), and one of them mid-trial.
                pids = {(t.user_attrs.get("worker") or {}).get("pid") for t in trials}
                both = {p.pid for p in workers} <= pids
                if running and both and any(t.state == TrialState.COMPLETE for t in trials):
                    restarted_during = running
                    break
            time.sleep(0.2)
        assert restarted_during, [(tmp_path / f"worker-{w}.log").read_text()[-2000:] for w in "ab"]
        postgres_server.restart(met=lambda: all(CUT in (tmp_path / f"worker-{w}.log").read_text() for w in "ab"))
        codes = [p.wait(timeout=400) for p in workers]
    finally:
        for p in workers:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    logs = [(tmp_path / f"worker-{w}.log").read_text() for w in "ab"]
    tails = [log[-3000:] for log in logs]
    assert codes == [0, 0], tails
    # Each worker met the outage and said so once; no thread (heartbeats) died of it.
    assert not any("Traceback" in log for log in logs), tails
    assert all(log.count(CUT) == 1 for log in logs), tails
    storage = open_url(url)  # the test's own connections were cut too
    trials = optuna.load_study(study_name="pg-restart", storage=storage).get_trials()
    states = [(t.number, t.state.name, t.user_attrs.get("status"), t.user_attrs.get("reason")) for t in trials]
    # Nothing lost, failed or left RUNNING; the FAILs allowed are unrun by design (NOT_RUN): a second
    # baseline, queued by both workers starting on the new study at once, and a trial both asked
    # for at n_trials - 1.
    unfinished = [s for s in states if s[1] != "COMPLETE" and s[2] not in NOT_RUN]
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert not unfinished and len(complete) == n == queries.counts(trials)["done"], (restarted_during, states, tails)
    assert not any("failed_trial" in t.system_attrs for t in trials)  # no retry: no trial was lost
    assert len({tuple(sorted(t.params.items())) for t in complete}) == n  # no configuration twice
    assert len({t.user_attrs["worker"]["pid"] for t in complete}) == 2  # both workers went on


@pytest.mark.slow
def test_a_trial_killed_mid_way_resumes_from_its_checkpoint_on_postgres(tmp_path, postgres_url):
    """tests/search/test_resume.py on PostgreSQL: Optuna's heartbeats find the killed worker's trial,
    its retry (which inherits the trial's attributes there) resumes from the last checkpoint and
    goes on as the uninterrupted run of the same config did."""
    from tests.search.test_resume import EPOCHS, check_resumed, kill_at_checkpoint, resume_study, start

    path = resume_study(tmp_path, "pg-resume")
    first = start(path, "--storage", postgres_url, log=tmp_path / "a.log")
    lost = kill_at_checkpoint(first, "pg-resume", postgres_url, EPOCHS * 2 / 3, tmp_path / "a.log")
    assert lost["trial"] == 0
    began = time.monotonic()
    second = start(path, "--storage", postgres_url, log=tmp_path / "b.log")
    assert second.wait(timeout=400) == 0, (tmp_path / "b.log").read_text()[-3000:]
    study = optuna.load_study(study_name="pg-resume", storage=open_url(postgres_url))
    check_resumed(study, lost, tmp_path / "pg-resume.artifacts", time.monotonic() - began)


@pytest.mark.slow
def test_two_nodes_pin_their_own_gpus_and_one_takes_over_the_other_s_trial(tmp_path, postgres_url):
    """Two "nodes" on one PostgreSQL study: node-a shows 2 GPUs (two workers, each its own), node-b
    one (one worker), each its own host name. node-a is killed (its whole process group, mid-trial,
    while the study still needs that trial) and node-b, started then, takes over its trial and
    resumes it from its checkpoint. Every trial records its node and GPU and no configuration is
    proposed twice. (node-b starts after the kill: started together, on an idle machine node-b's
    worker could finish the study before node-a had a trial to be killed in.)"""
    from tests.search.test_resume import start

    path = _study_file(
        tmp_path,
        "pg-nodes",
        n_trials=6,
        base=tiny(**{"dataset.synthetic_size": 640, "epochs": 24}),  # trials of seconds: the kill lands mid-trial
        checkpoint_every=0.25,  # a checkpoint each step (0.05) made a 48-epoch trial 90 s under load
        space={  # K-FAC trials take no checkpoint (docs/guide.md): every trial here must take one
            "include": ["optimizer"],
            "ranges": {"optimizer.lr": {"low": 0.02, "high": 0.1}},
            "exclude": ["optimizer.kfac"],
            "fixed": {"optimizer.name": "sgd"},
        },
    )
    n = 6
    nodes = {"node-a": "2", "node-b": "1"}

    def node(host: str, log: str) -> subprocess.Popen:  # `effsearch run --workers auto` on that "machine"
        env = {"EFFSEARCH_FAKE_GPUS": nodes[host], "EFFSEARCH_FAKE_HOST": host}
        return start(
            path, "--storage", postgres_url, "--n-trials", str(n), "--workers", "auto", log=tmp_path / log, env=env
        )

    a = node("node-a", "a.log")
    b = None
    try:
        lost = kill_at_checkpoint_on(
            a, "node-a", "pg-nodes", postgres_url, tmp_path / "a.log", needed_of=n, before_epoch=16
        )
        b = node("node-b", "b.log")
        assert b.wait(timeout=500) == 0, (tmp_path / "b.log").read_text()[-3000:]
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    trials = optuna.load_study(study_name="pg-nodes", storage=open_url(postgres_url)).get_trials()
    placed = [
        (t.user_attrs["placement"]["host"], t.user_attrs["placement"]["index"])
        for t in trials
        if "placement" in t.user_attrs
    ]
    assert {i for h, i in placed if h == "node-a"} <= {"0", "1"} and {i for h, i in placed if h == "node-b"} == {"0"}
    pinned = {
        (t.user_attrs["worker"]["host"], t.user_attrs["worker"]["pid"], t.user_attrs["placement"]["index"])
        for t in trials
        if "placement" in t.user_attrs
    }
    pairs = [(h, i) for h, _, i in pinned]
    assert len(pairs) == len(set(pairs))  # each worker process one GPU of its own, never two on one
    assert {
        (t.user_attrs["worker"]["host"], t.user_attrs["placement"]["host"])
        for t in trials
        if "placement" in t.user_attrs
    } <= {("node-a", "node-a"), ("node-b", "node-b")}
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == n == queries.counts(trials)["done"]
    fresh = [t for t in complete if "failed_trial" not in t.system_attrs]
    assert len({tuple(sorted(t.params.items())) for t in fresh}) == len(fresh)  # no configuration twice
    # The trial that retries the killed one: its retry history names it (under load a trial can be
    # failed by heartbeat while its worker lives, so the killed one may be a retry itself, and its
    # retry's `failed_trial` then names the first of the chain).
    history = [(t.number, t.state.name, retry_history(t), t.user_attrs.get("worker")) for t in trials]
    retry = next((t for t in trials if lost["trial"] in retry_history(t)), None)
    assert retry is not None, (lost, history)
    assert retry.state == TrialState.COMPLETE and retry.user_attrs["placement"]["host"] == "node-b", history
    assert retry.user_attrs["resumed_from"]["trial"] == lost["trial"], (retry.user_attrs.get("warnings"), history)
    assert trials[lost["trial"]].user_attrs["placement"]["host"] == "node-a"


def kill_at_checkpoint_on(proc, host, study_name, url, log, needed_of, before_epoch=40, deadline=400.0):
    """Kill ``proc`` once a trial of ``host`` has a checkpoint at most at ``before_epoch`` (not about to
    end before the kill lands) and the study still needs the killed one (at most ``needed_of`` - 2
    trials counted or running: the others cannot reach ``needed_of`` with fresh trials before its
    retry is queued); that checkpoint's record and trial."""
    from tests.search.test_resume import kill_when

    counted = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)

    def chosen(t, ckpt, trials):
        return (
            (t.user_attrs.get("worker") or {}).get("host") == host
            and ckpt["epoch"] <= before_epoch
            and sum(x.state in counted for x in trials) <= needed_of - 2
        )

    return kill_when(proc, study_name, url, log, chosen, deadline)


OPEN_AT_ONCE = """
import pathlib, sys, time
from effsearch.search.store.storage import _connect
pathlib.Path(sys.argv[3]).touch()
go = pathlib.Path(sys.argv[2])
while not go.exists():
    time.sleep(0.005)
_connect(sys.argv[1])
"""


@pytest.mark.slow
def test_workers_opening_a_fresh_database_at_once_all_open_it(tmp_path, postgres_url):
    """Nodes started together on an empty database each create Optuna's tables: the loser of that race
    meets the winner's tables (a unique violation on PostgreSQL's catalogue) and opens them instead of
    refusing --storage."""
    from sqlalchemy import create_engine, text

    from effsearch.search.store.urls import rdb_url

    admin = create_engine(rdb_url(postgres_url), isolation_level="AUTOCOMMIT")
    failed = []
    for round_ in range(2):
        name = f"fresh{round_}"
        with admin.connect() as c:
            c.execute(text(f"DROP DATABASE IF EXISTS {name}"))
            c.execute(text(f"CREATE DATABASE {name}"))
        url = postgres_url.rsplit("/", 1)[0] + f"/{name}"
        go, ready = tmp_path / f"go{round_}", [tmp_path / f"ready{round_}-{i}" for i in range(6)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN_AT_ONCE, url, str(go), str(r)], cwd=ROOT, stderr=subprocess.PIPE, text=True
            )
            for r in ready
        ]
        deadline = time.monotonic() + 120
        while not all(r.exists() for r in ready) and time.monotonic() < deadline:
            time.sleep(0.05)  # every one imported and waiting
        go.touch()
        for p in procs:
            _, err = p.communicate(timeout=120)
            if p.returncode != 0:
                failed.append(err.strip().splitlines()[-2:])
    admin.dispose()
    assert not failed, failed
