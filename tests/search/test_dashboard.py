"""`effsearch dashboard`: its arguments (tests/e2e/test_dashboard_e2e.py serves it for real)."""

import optuna
import pytest
import yaml

from effsearch.cli import main
from effsearch.config.machine import Machine
from effsearch.search.results import dashboard
from effsearch.search.study.studyfile import load as load_study_file
from tests.support.helpers import tiny
from tests.support.tiny_study import built_study

# -- dashboard arguments ----------------------------------------------------------


class Listening:
    """A bound server that serves nothing (the real one: tests/e2e/test_dashboard_e2e.py)."""

    def serve_forever(self):
        pass

    def server_close(self):
        pass


@pytest.fixture
def served(monkeypatch):
    """(storage, {host, port, artifact_store}) of each server the command started."""
    import optuna_dashboard

    calls = []

    def listen(app, host, port):
        storage, store = app
        calls.append((storage, {"host": host, "port": port, "artifact_store": store}))
        return Listening()

    monkeypatch.setattr(optuna_dashboard, "wsgi", lambda storage, artifact_store=None: (storage, artifact_store))
    monkeypatch.setattr(dashboard, "listen", listen)
    return calls


def test_dashboard_on_a_study_file_uses_its_storage_and_artifacts(tmp_path_factory, served, capsys):
    path = built_study(tmp_path_factory)
    assert main(["dashboard", str(path)]) == 0
    ((storage, kw),) = served
    assert kw["host"] == "127.0.0.1" and kw["port"] == 8080
    assert kw["artifact_store"]._base_path == path.with_suffix(".artifacts")
    assert optuna.get_all_study_names(storage) == ["tiny"]
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8080/dashboard/studies/0" in out and str(path.with_suffix(".artifacts")) in out


def test_dashboard_on_a_name_or_a_storage(storage_path, tmp_path, served, capsys):
    art = tmp_path / "art"
    art.mkdir()
    assert (
        main(
            [
                "dashboard",
                "misses",
                "--storage",
                str(storage_path),
                "--artifact-dir",
                str(art),
                "--host",
                "0.0.0.0",
                "--port",
                "9000",
            ]
        )
        == 0
    )
    assert served[-1][1]["artifact_store"]._base_path == art and served[-1][1]["host"] == "0.0.0.0"
    out = capsys.readouterr().out
    assert "http://0.0.0.0:9000/dashboard/studies/1" in out and "anyone who reaches this port" in out
    assert main(["dashboard", str(storage_path)]) == 0  # every study in it; no artifact folder there
    assert served[-1][1]["artifact_store"] is None
    assert "http://127.0.0.1:8080/dashboard/\n" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args,code,message",
    [
        (["nope", "--storage", "{s}"], 2, "studies there: fake, misses"),
        (["nope"], 2, "neither a study file nor a study name"),
        (["fake", "--storage", "{s}", "--port", "0"], 2, "--port: must be in [1, 65535]"),
        (["{s}", "--storage", "{s}"], 2, "is already a storage"),
        (["fake", "--storage", "{s}", "--artifact-dir", "/no/such/dir"], 2, "--artifact-dir: no such folder"),
        (["fake", "--storage", "{d}/none.journal"], 2, "no study storage"),
    ],
)
def test_dashboard_bad_arguments(storage_path, served, capsys, args, code, message):
    assert main(["dashboard"] + [a.format(s=storage_path, d=storage_path.parent) for a in args]) == code
    assert message in capsys.readouterr().err and not served


def test_dashboard_host_is_checked_with_the_port_before_the_study_is_read(monkeypatch, capsys):
    """--host, like --port, is the flag's error at once (it came after the study was read: 29 s)."""
    monkeypatch.setattr(dashboard, "resolve", lambda *a: pytest.fail("the study was read first"))
    assert main(["dashboard", "any", "--host", "no-such-host.invalid"]) == 2
    err = capsys.readouterr().err
    assert "--host: cannot resolve" in err and "no-such-host.invalid" in err


@pytest.mark.timeout(60)
def test_dashboard_on_a_taken_port_exits_1_saying_so_once(storage_path, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["dashboard", "fake", "--storage", str(storage_path), "--port", str(port)]) == 1
    out, err = capsys.readouterr()
    # Said once, as what it is: no "Listening on" or address printed before the bind failed.
    assert out == "" and "Listening" not in err and len(err.strip().splitlines()) == 1, (out, err)
    assert f"effsearch dashboard: cannot listen on 127.0.0.1:{port}: " in err


def test_dashboard_finds_the_artifacts_where_the_runner_puts_them(tmp_path):
    cases = [({}, None), ({"artifacts": "elsewhere"}, None), ({}, "sqlite:///{d}/s.db"), ({}, "{d}/j.journal")]
    for extra, storage in cases:
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump({"name": "s", "base": tiny(), "n_trials": 1, **extra}))
        storage = storage.format(d=tmp_path) if storage else None
        spec = load_study_file(path, storage=storage, machine=Machine())  # a CPU: no detection (seconds)
        assert dashboard.study_artifacts(path, spec.storage) == spec.artifacts, (extra, storage)
