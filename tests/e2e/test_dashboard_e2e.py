"""`effsearch dashboard` end to end: a real tiny study, the real command in a
subprocess, and a headless Chromium reading the pages as a user would. Also the
exported HTML front, opened from disk (it must carry plotly itself)."""

import select
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from effsearch.cli import main
from effsearch.search.store.storage import open_url
from tests.support import chromium
from tests.support.helpers import free_port
from tests.support.tiny_study import built_study

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def browser():
    b = chromium.Browser(chromium.find())
    yield b
    b.close()


@pytest.fixture(scope="module")
def study_path(tmp_path_factory):
    return built_study(tmp_path_factory)


@pytest.fixture(scope="module")
def study(study_path):
    storage = open_url(str(study_path.with_suffix(".journal")))
    return optuna.load_study(study_name="tiny", storage=storage)


@pytest.fixture(scope="module")
def served(study_path, tmp_path_factory):
    """(the study page URL it printed, the server's root URL)"""
    port = free_port()
    log = tmp_path_factory.mktemp("dashboard") / "dashboard.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "effsearch.cli", "dashboard", str(study_path), "--port", str(port)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if ready else ""
        assert line.startswith(f"effsearch dashboard: http://127.0.0.1:{port}/dashboard/studies/"), (
            line,
            log.read_text()[-2000:],
        )
        root = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"{root}/api/meta", timeout=5).close()
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, log.read_text()[-2000:]
                time.sleep(0.2)
        yield line.split(": ", 1)[1].strip(), root
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_study_is_listed(browser, served):
    page, root = served
    browser.goto(f"{root}/dashboard/")
    browser.wait_for("document.body.innerText.includes('tiny')")
    links = browser.js("[...document.querySelectorAll('a')].map(a => a.href)")
    assert page in links


def test_the_pareto_front_plot_shows_every_trial(browser, served, study):
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    browser.goto(served[0])
    # Every complete trial is a drawn point; a miss is an infeasible (grey) one at its real train seconds.
    n = browser.wait_for(
        f"(document.querySelectorAll('#graph-pareto-front .scatterlayer .point').length"
        f" === {len(complete)}) && {len(complete)}"
    )
    assert n == len(complete) >= 3
    best = browser.js(
        "document.getElementById('graph-pareto-front').data"
        ".filter(d => (d.hovertemplate || '').includes('Best Trial'))"
        ".reduce((n, d) => n + d.x.length, 0)"
    )
    assert best == len(study.best_trials) >= 1
    # Named axes (study.metric_names), and seconds a trial really trained: no 1e6 penalty on the axis.
    card = browser.js(
        "(document.getElementById('graph-pareto-front').closest('.MuiCard-root') || document.body).innerText"
    )
    assert "Objective X:\ntime to target accuracy (train seconds)" in card, card
    assert "Objective Y:\nfinal val accuracy" in card and "Objective 0" not in card
    xs = browser.js("document.getElementById('graph-pareto-front').data.flatMap(d => d.x || [])")
    assert len(xs) >= len(complete) and max(xs) == max(t.values[0] for t in complete) < 1000
    misses = [t for t in complete if not t.user_attrs["reached_target"]]
    infeasible = browser.js(
        "document.getElementById('graph-pareto-front').data"
        ".filter(d => (d.hovertemplate || '').includes('Infeasible'))"
        ".reduce((n, d) => n + d.x.length, 0)"
    )
    assert infeasible == len(misses)


def test_a_trial_page_shows_its_artifacts(browser, served, study):
    trial = study.best_trials[0]
    browser.goto(f"{served[0]}/trials?numbers={trial.number}")
    text = browser.wait_for("document.body.innerText.includes('learning_curve.png') && document.body.innerText")
    assert "config.yaml" in text and "result.json" in text
    assert f"Trial {trial.number}" in text and "test accuracy" in text  # the note the runner saved
    # The learning curve is an image the browser loaded from the artifact store.
    width = browser.wait_for(
        "[...document.querySelectorAll('img')].filter(i => i.src.includes('/artifacts/'))"
        ".map(i => i.complete && i.naturalWidth)[0]"
    )
    assert width > 100
    meta = {m.filename: m for m in optuna.artifacts.get_all_artifact_meta(trial, storage=study._storage)}
    url = f"{served[1]}/artifacts/{study._study_id}/{trial._trial_id}/{meta['config.yaml'].artifact_id}"
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.read().decode() == trial.user_attrs["config"]


def test_the_exported_html_works_offline(browser, study_path, study, tmp_path):
    out = tmp_path / "front.html"
    assert main(["export", str(study_path), "--all", "-o", str(out)]) == 0
    assert 'src="http' not in out.read_text()  # plotly is inside the file
    browser.goto(out.as_uri())
    browser.wait_for("!!document.querySelector('#pareto-front .scatterlayer .point')")
    counts = browser.js(
        "Object.fromEntries(document.getElementById('pareto-front').data.map(d => [d.name.split(' ')[0], d.x.length]))"
    )
    hits = [t for t in study.get_trials(states=(TrialState.COMPLETE,)) if t.user_attrs["reached_target"]]
    front = {t.number for t in study.best_trials}
    assert counts["Pareto"] == sum(t.number in front for t in hits)
    assert counts.get("dominated", 0) == sum(t.number not in front for t in hits)
    base = sum(t.user_attrs.get("baseline", False) for t in hits)
    assert counts.get("baseline", 0) == base == 1  # the baseline config reaches this target
    drawn = browser.js("document.querySelectorAll('#pareto-front .scatterlayer .point').length")
    assert drawn == len(hits) + base  # the baseline's star is drawn over its own point
    misses = len(study.get_trials(states=(TrialState.COMPLETE,))) - len(hits)
    title = browser.js("document.querySelector('#pareto-front .gtitle').textContent")
    assert (f"{misses} trial" in title and "missed the target" in title) if misses else "missed" not in title
