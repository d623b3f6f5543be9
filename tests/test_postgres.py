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
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from effsearch.search import report
from effsearch.search.storage import open_url
from tests.conftest import free_port, missing_system_package, tiny

ROOT = Path(__file__).resolve().parents[1]


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@pytest.fixture(scope="module")
def postgres_url():
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
    subprocess.run(as_user + [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "effsearch",
                              "--no-sync"], check=True, capture_output=True)
    opts = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
    subprocess.run(as_user + [str(bin_dir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(folder / "log"),
                              "-w", "start"], check=True, capture_output=True)
    try:
        yield f"postgresql://effsearch@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(as_user + [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def _study_file(tmp_path) -> Path:
    d = {"name": "pg", "n_trials": 3, "seed": 1,
         # Trials of a few seconds, so the kill lands mid-trial.
         "base": tiny(**{"dataset.synthetic_size": 512, "epochs": 6}),
         "space": {"include": ["optimizer"], "ranges": {"optimizer.lr": {"low": 0.02, "high": 0.1}},
                   "fixed": {"optimizer.name": "sgd"}},
         "heartbeat": {"interval": 1, "grace_period": 3, "max_retry": 2}}
    path = tmp_path / "pg.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def _worker(path, url, n_trials, log):
    env = {**os.environ, "TQDM_DISABLE": "1"}
    return subprocess.Popen([sys.executable, "-m", "effsearch.cli", "run", str(path), "--storage", url,
                             "--n-trials", str(n_trials)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


@pytest.mark.slow
def test_killed_worker_trial_is_retried_and_nothing_is_lost(tmp_path, postgres_url):
    path = _study_file(tmp_path)
    log = open(tmp_path / "worker-a.log", "w")
    a = _worker(path, postgres_url, 10, log)
    storage = open_url(postgres_url)
    deadline = time.time() + 300
    victim = None
    try:
        while time.time() < deadline and a.poll() is None:  # one trial done, the next one running
            names = optuna.get_all_study_names(storage)
            if "pg" in names:
                trials = optuna.load_study(study_name="pg", storage=storage).get_trials()
                done = [t for t in trials if t.state == TrialState.COMPLETE]
                running = [t for t in trials if t.state == TrialState.RUNNING and "config" in t.user_attrs]
                if done and running:
                    victim = running[0].number
                    break
            time.sleep(0.2)
        assert victim is not None, (tmp_path / "worker-a.log").read_text()[-3000:]
        os.killpg(a.pid, signal.SIGKILL)
        a.wait()
    finally:
        if a.poll() is None:
            os.killpg(a.pid, signal.SIGKILL)
    study = optuna.load_study(study_name="pg", storage=storage)
    before = {t.number: t.values for t in study.get_trials() if t.state == TrialState.COMPLETE}
    assert study.get_trials()[victim].state == TrialState.RUNNING  # nobody has noticed yet

    # A second worker (another machine, as far as Optuna knows) joins the same study.
    total = len(before) + 1  # just the retried trial
    b = subprocess.run([sys.executable, "-m", "effsearch.cli", "run", str(path), "--storage", postgres_url,
                        "--n-trials", str(total)], cwd=ROOT, env={**os.environ, "TQDM_DISABLE": "1"},
                       capture_output=True, text=True, timeout=400)
    assert b.returncode == 0, b.stderr[-3000:]
    trials = optuna.load_study(study_name="pg", storage=storage).get_trials()
    assert trials[victim].state == TrialState.FAIL  # failed by the heartbeat check
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == victim]
    assert len(retries) == 1 and retries[0].state == TrialState.COMPLETE
    assert retries[0].params == trials[victim].params
    for number, values in before.items():  # no finished trial lost
        assert trials[number].state == TrialState.COMPLETE and trials[number].values == values
    assert report.counts(trials)["done"] == total
