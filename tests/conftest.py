import importlib
import os
from pathlib import Path

import pytest

from effsearch.config import ConfigError
from tests.guard import sitecustomize as guard
from tests.support.fake_study import fake_storage
from tests.support.helpers import TEST_DATA

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


def pytest_configure(config):
    # The replay's and its recorders' tests (research/): research code beside the product, which a
    # contributor to effsearch itself may deselect with -m "not research".
    config.addinivalue_line("markers", "research: tests of research/ (the search-efficiency replay and its recorders)")
