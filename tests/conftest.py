import os

import pytest

from effsearch.config import ConfigError
from tests.fake_study import fake_storage
from tests.helpers import SHARED


@pytest.fixture
def fashion_dir():
    """The offline Fashion-MNIST copy beside the checkout."""
    if not (SHARED / "fashion-mnist").is_dir():
        pytest.fail(f"offline Fashion-MNIST missing at {SHARED}/fashion-mnist")
    return SHARED


@pytest.fixture(autouse=True)
def _no_network_data_dir(tmp_path, monkeypatch):
    # Tests never read a user's cache; datasets they need come from SHARED explicitly.
    monkeypatch.setenv("EFFSEARCH_DATA_DIR", str(tmp_path / "data"))
    os.environ.setdefault("TQDM_DISABLE", "1")


@pytest.fixture(scope="module")
def storage_path(tmp_path_factory):
    """A journal with the given-values studies of tests/fake_study.py."""
    path = tmp_path_factory.mktemp("fake") / "fake.journal"
    fake_storage(path)
    return path


@pytest.fixture(scope="session")
def F():
    """effsearch.trainer.ffcv_loader: the FFCV tests skip without ffcv, except where
    EFFSEARCH_REQUIRE_FFCV=1 (CI), where a missing ffcv fails them."""
    try:
        from effsearch.trainer import ffcv_loader
    except ConfigError as e:
        if os.environ.get("EFFSEARCH_REQUIRE_FFCV"):
            pytest.fail(f"EFFSEARCH_REQUIRE_FFCV is set but {e}")
        pytest.skip(str(e))
    return ffcv_loader
