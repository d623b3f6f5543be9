"""The test session's guard: no network, no ../shared.

A fresh clone must pass its tests alone and offline, so no test may depend on the network
(present or absent) or on the data folder that sits beside the checkout on our machines.
This module enforces both, in the pytest process (tests/conftest.py calls ``install``) and in
every Python subprocess a test starts (conftest.py puts this folder first on PYTHONPATH, and
Python imports ``sitecustomize`` at start-up):

- a connection to any address that is not this machine's raises ``NetworkBlocked``, so a
  download fails at once, loudly, with the host it tried;
- opening or listing anything under ``<checkout>/../shared`` raises ``PermissionError``.
"""

import ipaddress
import os
import socket
import sys

SHARED = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), "shared"
)


class NetworkBlocked(OSError):
    """Raised for a connection beyond this machine during the tests."""


def _local_addresses() -> set[str]:
    names = {"localhost", socket.gethostname()}
    found = set()
    for name in names:
        try:
            found.update(info[4][0] for info in socket.getaddrinfo(name, None))
        except OSError:
            pass
    return found


def _is_local(host, local: set[str]) -> bool:
    if host in local or host in ("", "localhost"):
        return True
    try:
        ip = ipaddress.ip_address(str(host).split("%")[0])
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


def _block_network() -> None:
    local = _local_addresses()
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0], local):
            raise NetworkBlocked(
                f"the tests run offline: a connection to {address[0]}:{address[1]} "
                "was refused (tests/guard/sitecustomize.py)"
            )

    def connect(self, address):
        check(self, address)
        return real_connect(self, address)

    def connect_ex(self, address):
        check(self, address)
        return real_connect_ex(self, address)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
    # Libraries with an offline switch take it, rather than retrying a refused connection.
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(key, "1")


def _guard_shared() -> None:
    shared = SHARED + os.sep

    def hook(event, args):
        if event in ("open", "os.listdir", "os.scandir") and args and args[0] is not None:
            path = args[0]
            if isinstance(path, int):
                return
            try:
                path = os.fsdecode(path)
            except TypeError:
                return
            if "shared" in path and (os.path.abspath(path) + os.sep).startswith(shared):
                raise PermissionError(
                    f"a test read {path}: tests must not read ../shared "
                    "(a fresh clone has no such folder; make the data in the test "
                    "or carry it under tests/data)"
                )

    sys.addaudithook(hook)


def install() -> None:
    """Block the network and ../shared in this process (once)."""
    if getattr(socket, "_effsearch_guarded", False):
        return
    socket._effsearch_guarded = True
    _block_network()
    _guard_shared()


if os.environ.get("EFFSEARCH_TEST_GUARD"):
    install()
