"""A text study run as a user runs it, with two worker processes on one journal: every trial of the
small text space completes (none failed: no algorithm met a model it cannot change), both workers
train, and each tokenization (one a max_length) is cached once for both."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from effsearch.search.store.storage import open_url
from tests.support.helpers import ran
from tests.support.text import tiny_text, write_jsonl

ROOT = Path(__file__).resolve().parents[2]
# What a transformer takes that changes its batches, its inputs or its blocks; the base trains in seconds.
SPACE = {
    "include": [
        "optimizer.lr@adamw",
        "dataset.max_length",
        "model.pooling",
        "algorithms.mixup",
        "algorithms.label_smoothing",
    ],
    "fixed": {"algorithms.seq_length_warmup": True},  # every trial's batches grow in length
}


@pytest.mark.slow
def test_two_workers_run_a_text_study_with_none_failed(tmp_path):
    # Trials of about two seconds (240 rows took 0.3 s: one worker ran all four before the other had
    # warmed up, on an idle 2-core machine), so both workers must run some.
    base = tiny_text(write_jsonl(tmp_path / "t.jsonl", n=2400), epochs=6, target_accuracy=0.5)
    study = {"name": "text2", "base": base, "n_trials": 4, "seed": 0, "space": SPACE, "pruner": {"name": "none"}}
    path = tmp_path / "text2.yaml"
    path.write_text(yaml.safe_dump(study))
    proc = subprocess.run(
        [sys.executable, "-m", "effsearch.cli", "run", str(path), "--workers", "2", "--data-dir", "data"],
        cwd=tmp_path,
        env={**os.environ, "TQDM_DISABLE": "1"},
        capture_output=True,
        text=True,
        timeout=1200,  # two worker processes starting on a loaded machine
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    storage = open_url(str(tmp_path / "text2.journal"))
    trials = ran(optuna.load_study(study_name="text2", storage=storage).get_trials())
    assert len(trials) >= 4
    assert all(t.state == TrialState.COMPLETE for t in trials), [t.user_attrs.get("reason") for t in trials]
    assert len({t.user_attrs["worker"]["pid"] for t in trials}) == 2  # both workers trained
    configs = [yaml.safe_load(t.user_attrs["config"]) for t in trials]
    searched = [c for c, t in zip(configs, trials) if not t.user_attrs.get("baseline")]
    assert searched and all("seq_length_warmup" in (c.get("algorithms") or {}) for c in searched), configs
    # One cache a tokenization (max_length is in its key), shared by both workers: none made twice.
    caches = [p for p in (tmp_path / "data" / "text-cache").iterdir() if not p.name.startswith(".")]
    assert len(caches) == len({c["dataset"]["max_length"] for c in configs}), (caches, configs)
