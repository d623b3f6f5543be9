"""A headless Chromium driven over the DevTools protocol (a websocket), for the
end-to-end tests: the system's `chromium`, no browser download.

Skipped only outside CI when Chromium is missing; with CI set it is a failure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.support.helpers import missing_system_package

NAMES = ("chromium", "chromium-browser", "google-chrome")


def find() -> str:
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    missing_system_package("Chromium", "chromium")


class Browser:
    """One page of a headless Chromium: navigate, evaluate JavaScript, wait for a condition."""

    def __init__(self, executable: str):
        from websockets.sync.client import connect

        self.profile = tempfile.mkdtemp(prefix="effsearch-chromium-")
        # --no-sandbox: the sandbox refuses to start as root (containers, CI).
        self.proc = subprocess.Popen(
            [
                executable,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                "--window-size=1400,1000",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.time() + 60
        while not (port_file.is_file() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or time.time() > deadline:
                self.close()
                raise RuntimeError(f"Chromium did not start (exit code {self.proc.returncode})")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            page = next(p for p in json.load(r) if p["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        self.n = 0

    def call(self, method: str, **params) -> dict:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == self.n:  # events in between are not needed
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def js(self, expression: str):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(r["exceptionDetails"].get("exception", {}).get("description") or r["exceptionDetails"])
        return r["result"].get("value")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def wait_for(self, expression: str, timeout: float = 60):
        """Poll ``expression`` until it is truthy; fails with the page's text."""
        deadline, last = time.time() + timeout, None
        while time.time() < deadline:
            try:
                last = self.js(expression)
            except RuntimeError as e:  # a page between two documents
                last = e
            if last and not isinstance(last, Exception):
                return last
            time.sleep(0.25)
        try:
            text = self.js("document.body ? document.body.innerText.slice(0, 1500) : ''")
        except RuntimeError:
            text = "?"
        raise AssertionError(f"timed out waiting for {expression} (last: {last!r}); page text:\n{text}")

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)
