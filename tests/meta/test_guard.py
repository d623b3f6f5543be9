"""The test session runs offline and without ../shared (tests/guard/sitecustomize.py), in the
pytest process and in the Python processes tests start; this machine's own sockets still work
(the PostgreSQL, dashboard and data-parallel tests need them)."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.guard import sitecustomize as guard

FAR = ("192.0.2.1", 80)  # TEST-NET-1: an address beyond this machine


def test_a_connection_beyond_this_machine_is_refused_at_once():
    with pytest.raises(guard.NetworkBlocked, match="192.0.2.1:80"):
        socket.create_connection(FAR, timeout=30)


def test_a_python_subprocess_is_guarded_too(tmp_path):
    code = f"import socket\nsocket.create_connection({FAR!r}, timeout=30)\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode != 0 and "NetworkBlocked" in r.stderr and "run offline" in r.stderr, r.stderr
    code = f"open({str(Path(guard.SHARED) / 'data' / 'x')!r})"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "must not read ../shared" in r.stderr, r.stderr


def test_reading_or_listing_shared_fails_whether_or_not_it_exists():
    for attempt in (lambda p: open(p / "data" / "fashion-mnist" / "README.md"), lambda p: list(p.iterdir())):
        with pytest.raises(PermissionError, match="must not read ../shared"):
            attempt(Path(guard.SHARED))


def test_this_machines_sockets_still_connect():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=30) as client:
            peer, _ = server.accept()
            client.sendall(b"ok")
            assert peer.recv(2) == b"ok"
            peer.close()
