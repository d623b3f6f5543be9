"""`effsearch dashboard`: optuna-dashboard on a study's storage, with its artifacts.

The artifact folder is the one `effsearch run` uploads each trial's learning
curve, config and result to, so the dashboard shows them on the trial's page.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from effsearch.config import ConfigError, read_yaml
from effsearch.config.fields import quote
from effsearch.search.results import lookup
from effsearch.search.store import urls
from effsearch.search.store.urls import redact
from effsearch.search.study.studyfile import MINIMAL_STUDY, locate


@dataclass
class Target:
    storage: str  # an RDB URL or a journal file
    study: str | None  # None: the whole storage
    artifacts: Path | None


def study_artifacts(path: Path, storage: str) -> Path | None:
    """The artifact folder of a study file (urls.artifact_dir, as the runner's)."""
    return urls.artifact_dir(path, read_yaml(path, MINIMAL_STUDY).get("artifacts"), storage)


def resolve(arg: str, storage_flag: str | None, artifact_dir: str | None) -> Target:
    """What to serve: a study file, a study name with --storage, or a storage by itself."""
    given = Path(artifact_dir).expanduser().resolve() if artifact_dir else None
    if given is not None and not given.is_dir():
        raise ConfigError("--artifact-dir", f"no such folder: {given}")
    if lookup.is_storage(arg):
        if storage_flag:
            raise ConfigError(
                "--storage", f"{arg!r} is already a storage; give a study name with --storage, or the storage alone"
            )
        url = urls.storage_url(arg)
        return Target(url, None, given or urls.artifact_dir(None, None, url))
    name, url = locate(arg, storage_flag)
    path = _study_path(arg)
    if given is None:
        given = study_artifacts(path, url) if path else urls.artifact_dir(None, None, url)
    return Target(url, name, given)


def _study_path(arg: str) -> Path | None:
    for p in (Path(arg), Path("studies") / f"{arg}.yaml"):
        if p.is_file():
            return p
    return None


def check_port(port: int) -> None:
    if not 1 <= port <= 65535:
        raise ConfigError("--port", f"must be in [1, 65535]; got {port}")


def check_host(host: str, port: int) -> None:
    """A --host that names no address is the flag's error, before anything is printed (the server
    would print its own "Listening on" first, then fail)."""
    import socket

    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise ConfigError(
            "--host",
            f"cannot resolve {quote(host)} ({getattr(e, 'strerror', None) or e}); give "
            "an address of this machine: 127.0.0.1 (this machine only, the default) or "
            "0.0.0.0 (every interface)",
        ) from None


def url_of(host: str, port: int, path: str = "") -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/dashboard/{path}"


def serve(target: Target, host: str, port: int, out: TextIO | None = None) -> int:
    """Open the storage, listen, then print where to look, and serve until Ctrl-C."""
    import optuna_dashboard
    from optuna.artifacts import FileSystemArtifactStore

    out = out or sys.stdout
    storage = lookup.open_existing(target.storage)
    page = ""
    if target.study is not None:
        lookup.check_name(storage, target.study, target.storage)
        page = f"studies/{storage.get_study_id_from_name(target.study)}"
    store = None
    if target.artifacts is not None and target.artifacts.is_dir():
        store = FileSystemArtifactStore(str(target.artifacts))
    try:  # bound before a word is printed: a taken port is said once, as what it is
        server = listen(optuna_dashboard.wsgi(storage, artifact_store=store), host, port)
    except OSError as e:  # the port is taken, the address is not this machine's
        print(f"effsearch dashboard: cannot listen on {host}:{port}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"effsearch dashboard: {url_of(host, port, page)}", file=out)
    print(f"  storage    {redact(target.storage)}", file=out)
    print(f"  artifacts  {target.artifacts if store else 'none (trials show no files; give --artifact-dir)'}", file=out)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"  listening on {host}: anyone who reaches this port can read and change the study", file=out)
    print("  Ctrl-C stops it", file=out, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def listen(app: Any, host: str, port: int) -> Any:
    """A WSGI server of ``app`` bound to ``host``:``port`` (wsgiref's, as optuna-dashboard's own
    ``run_server`` uses, which prints "Listening on" before it binds)."""
    import socket
    from wsgiref.simple_server import WSGIServer, make_server

    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]

    class Server(WSGIServer):
        address_family = family

    return make_server(host, port, app, server_class=Server)
