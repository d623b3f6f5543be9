"""The screenshot in docs/dashboard-pareto.png: optuna-dashboard's Pareto-front plot of a
small real study, taken by a headless Chromium over the DevTools protocol.

    uv run python benchmarks/dashboard_screenshot.py --trials 8 -o docs/dashboard-pareto.png

Runs the quickstart study (digits, CPU; target ``--target``) with ``--trials`` trials in a temporary folder,
serves it with `effsearch dashboard`, opens the study page and captures the plot.
"""

from __future__ import annotations

import argparse
import base64
import select
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--target", type=float, default=0.9)
    ap.add_argument("-o", "--out", type=Path, default=ROOT / "docs" / "dashboard-pareto.png")
    args = ap.parse_args()
    from tests.conftest import free_port
    from tests.support import chromium

    folder = Path(tempfile.mkdtemp(prefix="effsearch-shot-"))
    study = folder / "quickstart.yaml"
    # The quickstart with a target most of a few trials reach, so the front has several points.
    text = (ROOT / "studies" / "quickstart.yaml").read_text()
    study.write_text(text.replace("target_accuracy: 0.95", f"target_accuracy: {args.target}"))
    subprocess.run(
        [sys.executable, "-m", "effsearch.cli", "run", str(study), "--n-trials", str(args.trials)], cwd=ROOT, check=True
    )
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "effsearch.cli", "dashboard", str(study), "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    browser = chromium.Browser(chromium.find())
    try:
        ready, _, _ = select.select([server.stdout], [], [], 60)
        page = server.stdout.readline().split(": ", 1)[1].strip()
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/meta", timeout=5).close()
                break
            except OSError:
                time.sleep(0.2)
        # A tall window: the plot is on screen without scrolling under the page's fixed header.
        browser.call("Emulation.setDeviceMetricsOverride", width=1400, height=2400, deviceScaleFactor=1, mobile=False)
        browser.goto(page)
        browser.wait_for("!!document.querySelector('#graph-pareto-front .scatterlayer .point')")
        time.sleep(1.5)  # let plotly finish its transition
        box = browser.js(
            "(() => { const g = document.getElementById('graph-pareto-front');"
            " const e = g.closest('.MuiCard-root') || g; const r = e.getBoundingClientRect();"
            " return {x: r.x, y: r.y, width: r.width, height: r.height}; })()"
        )
        shot = browser.call("Page.captureScreenshot", format="png", clip={**box, "scale": 1})
        args.out.write_bytes(base64.b64decode(shot["data"]))
        print(f"{args.out}: {box['width']:.0f}x{box['height']:.0f} px of {page}")
    finally:
        browser.close()
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
