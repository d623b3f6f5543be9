"""Plain helpers the tests import (fixtures stay in conftest.py)."""

import os
import socket
import subprocess
from pathlib import Path

import pytest

from effsearch.config.fields import set_path

# A stratified part of Fashion-MNIST the repository carries (tests/data/make_fashion_mnist.py).
TEST_DATA = Path(__file__).resolve().parents[1] / "data"
ROOT = Path(__file__).resolve().parents[2]


def tiny(**overrides) -> dict:
    """A raw TrainConfig dict that trains in about a second on CPU."""
    d = {
        "dataset": {"name": "synthetic", "synthetic_size": 160, "val_fraction": 0.2, "crop_padding": 0},
        "model": {"name": "tiny-cnn", "width": 8},
        "epochs": 2,
        "batch_size": 32,
        "optimizer": {"name": "sgd", "lr": 0.05},
        "schedule": {"name": "constant"},
        "device": "cpu",
        "target_accuracy": 0.5,
    }
    for key, value in overrides.items():
        set_path(d, key, value)
    return d


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def missing_system_package(what: str, package: str):
    """A test needing a system package: skipped on a developer's machine without it, failed in CI."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{what} not found (CI must `apt-get install -y {package}`)")
    pytest.skip(f"{what} not found (apt-get install -y {package})")


def logged_warnings(caplog) -> str:
    """What effsearch logged as warnings (its ``effsearch`` logger), one a line: the command prints
    each as ``warning: ...``; a library call (no command) leaves them to logging."""
    return "\n".join(
        r.getMessage() for r in caplog.records if r.name.startswith("effsearch") and r.levelname == "WARNING"
    )


def folder_state(folder: Path) -> list[tuple] | None:
    """Every entry under ``folder`` (path, size, mtime; links not followed); None if it is not there."""
    if not folder.exists():
        return None
    out = []
    for here, dirs, files in os.walk(folder):
        for name in sorted(dirs + files):
            st = os.lstat(os.path.join(here, name))
            out.append((os.path.relpath(os.path.join(here, name), folder), st.st_mode, st.st_size, st.st_mtime_ns))
    return sorted(out)


def git_status() -> str:
    """`git status` of the repository the tests run from, untracked files listed one by one."""
    done = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


def ran(trials: list) -> list:
    """The trials a worker ran: without those ended unrun by design (attrs.NOT_RUN: two workers that
    ask at the same moment may queue a second baseline or one trial past n_trials; a loaded machine
    widens that moment)."""
    from effsearch.search.store.attrs import NOT_RUN, STATUS_KEY

    return [t for t in trials if t.user_attrs.get(STATUS_KEY) not in NOT_RUN]
