"""Exit codes of the commands that read a stored study: a name the storage does not hold is bad
input (2), answered with the names it does hold; so is a storage not made yet (no studies there)."""

import pytest

from effsearch.cli import main


@pytest.fixture
def served(monkeypatch):
    """optuna-dashboard's server, replaced: a test never listens on a port."""
    import optuna_dashboard

    calls = []
    monkeypatch.setattr(optuna_dashboard, "run_server", lambda storage, **kw: calls.append(kw))
    return calls


def command(name: str, study: str, storage, out) -> list[str]:
    extra = {"export": ["-o", str(out / "front.csv")], "best": ["--pick", "knee", "-o", str(out / "best.yaml")]}
    return [name, study, "--storage", str(storage), *extra.get(name, [])]


@pytest.mark.parametrize("name", ["export", "status", "best", "dashboard"])
def test_an_unknown_study_name_exits_2_listing_the_studies_there(storage_path, tmp_path, served, capsys, name):
    assert main(command(name, "nope", storage_path, tmp_path)) == 2
    err = capsys.readouterr().err
    assert "no study 'nope'" in err and "(studies there: fake, misses)" in err, err
    assert "Traceback" not in err and not list(tmp_path.iterdir()) and not served  # nothing written or served


@pytest.mark.parametrize("name", ["export", "status", "best", "dashboard"])
def test_a_storage_not_made_yet_exits_2(tmp_path, served, capsys, name):
    missing = tmp_path / "none.journal"
    assert main(command(name, "fake", missing, tmp_path)) == 2
    err = capsys.readouterr().err
    assert "--storage: no study storage at" in err and "(no studies there)" in err, err
    assert not list(tmp_path.iterdir()) and not served  # opening it did not create the journal


@pytest.mark.parametrize("name", ["export", "status", "best", "dashboard"])
def test_an_empty_storage_flag_exits_2_naming_it(tmp_path, served, capsys, monkeypatch, name):
    monkeypatch.chdir(tmp_path)  # it had been read as the current folder, a journal file it cannot write
    assert main(command(name, "fake", "", tmp_path)) == 2
    assert "--storage: is empty: give a journal file" in capsys.readouterr().err
    assert not list(tmp_path.iterdir()) and not served
