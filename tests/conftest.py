import importlib
import os
from pathlib import Path

import pytest
import torch

from effsearch.config import ConfigError
from tests.guard import sitecustomize as guard
from tests.support.fake_study import fake_storage
from tests.support.helpers import TEST_DATA, folder_state, git_status

# No test reaches the network or ../shared, in this process or in a Python one it starts:
# tests/guard/sitecustomize.py says how.
guard.install()
os.environ["EFFSEARCH_TEST_GUARD"] = "1"
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(Path(guard.__file__).parent), *filter(None, [os.environ.get("PYTHONPATH")])]
)


@pytest.fixture
def fashion_dir():
    """A data root holding 4,000 training and 1,000 test images of Fashion-MNIST (tests/data)."""
    return TEST_DATA


@pytest.fixture(autouse=True)
def _no_network_data_dir(tmp_path, monkeypatch):
    # Tests never read a user's cache; datasets they need come from TEST_DATA explicitly.
    monkeypatch.setenv("EFFSEARCH_DATA_DIR", str(tmp_path / "data"))
    os.environ.setdefault("TQDM_DISABLE", "1")
    # A run hands its workers what it imported through the environment (config/imports.py: the
    # current folder on PYTHONPATH, the plugins in EFFSEARCH_PLUGINS): undone after each test, or a
    # later test's subprocess imports the checkout where it means the installed wheel
    # (tests/e2e/test_install.py), or a plugin from a folder gone from its path.
    # Likewise torch's thread count: a worker run in this process takes its share of the cores
    # (workers.quiet_and_share_cores), and a later test comparing this process's training with a
    # subprocess's would compare 1 thread's sums with 2's.
    before, threads = dict(os.environ), torch.get_num_threads()
    yield
    os.environ.clear()
    os.environ.update(before)
    torch.set_num_threads(threads)


@pytest.fixture
def scripted(monkeypatch):
    """Trials train with tests/support/scripted.py's ``scripted_train`` (EFFSEARCH_TRAIN_FN names it,
    here and in the worker processes a run starts); ``scripted(fn)`` makes this process's trials
    train with ``fn`` instead. The warm-up calls it too (once per process, a few batches' config)."""
    from tests.support import scripted as support

    monkeypatch.setenv(support.TRAIN_FN_ENV, support.TRAIN_FN)

    def use(fn):
        support.Scripted.fn = fn
        return fn

    yield use
    support.Scripted.fn = support.scripted_train


@pytest.fixture
def untouched(_no_network_data_dir):
    """For a test of refused input: after it, `git status` and the data folder ($EFFSEARCH_DATA_DIR,
    where caches go) are as they were before it (a refusal writes nothing). Yields the folder."""
    data = Path(os.environ["EFFSEARCH_DATA_DIR"])
    status, folder = git_status(), folder_state(data)
    yield data
    status_after, folder_after = git_status(), folder_state(data)
    assert status_after == status, f"git status changed: {set(status_after.splitlines()) ^ set(status.splitlines())}"
    assert folder_after == folder, f"the data folder {data} changed: {folder} -> {folder_after}"


@pytest.fixture(scope="module")
def storage_path(tmp_path_factory):
    """A journal with the given-values studies of tests/support/fake_study.py."""
    path = tmp_path_factory.mktemp("fake") / "fake.journal"
    fake_storage(path)
    return path


def _needs_ffcv(name):
    """effsearch.trainer.data.NAME, a module that needs FFCV: its tests skip without ffcv, except where
    EFFSEARCH_REQUIRE_FFCV=1 (CI), where a missing ffcv fails them."""
    try:
        return importlib.import_module(f"effsearch.trainer.data.{name}")
    except ConfigError as e:
        if os.environ.get("EFFSEARCH_REQUIRE_FFCV"):
            pytest.fail(f"EFFSEARCH_REQUIRE_FFCV is set but {e}")
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def F():
    """effsearch.trainer.data.ffcv_loader (FFCV's training loader)."""
    return _needs_ffcv("ffcv_loader")


@pytest.fixture(scope="session")
def B():
    """effsearch.trainer.data.betons (FFCV's files: writing and checking them)."""
    return _needs_ffcv("betons")


# The rooms of tests/, one marker each, so a contributor runs one room: `pytest -m trainer` (or the
# folder, `pytest tests/trainer`); -m "not research" leaves out the replay's tests.
ROOMS = {
    "config": "config/: TrainConfig, its fields and rules",
    "spaces": "spaces/: the search space",
    "objectives": "objectives/: a RunResult's values",
    "trainer": "trainer/: one training run (data, models, algorithms, parallel, techniques)",
    "search": "search/: studies (store, study files, pruners, the run loop, results)",
    "e2e": "end to end: the commands and documents as a user runs them",
    "meta": "the project itself: architecture, docs, install, the test guard",
    "research": "research/: the search-efficiency replay and its recorders",
}


def pytest_configure(config):
    for room, what in ROOMS.items():
        config.addinivalue_line("markers", f"{room}: tests of {what}")


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        room = Path(item.fspath).relative_to(here).parts[0]
        if room in ROOMS:
            item.add_marker(getattr(pytest.mark, room))
