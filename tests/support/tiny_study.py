"""One real tiny study (a few trials of a second or two), built once per test
session and shared read-only by the export, best and dashboard tests."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.helpers import tiny

_built: dict[str, Path] = {}


def study_file(folder: Path, n_trials: int = 3, **changes) -> Path:
    """A tiny study file in ``folder``; ``changes`` replace top-level keys."""
    d = {
        "name": "tiny",
        "base": tiny(**{"dataset.synthetic_size": 256, "epochs": 3}),
        "n_trials": n_trials,
        "seed": 3,
        "space": {
            "include": ["budget", "optimizer", "algorithms.label_smoothing"],
            "ranges": {
                "epochs": {"low": 2, "high": 3},
                "optimizer.lr": {"low": 0.02, "high": 0.2},
                "batch_size": [32, 64],
            },
        },
        "sampler": {"name": "tpe", "n_startup_trials": 2},
        # Off unless a test is about it: these baselines reach the target in a few hundredths of
        # a second, so 4x that is within a loaded machine's timing noise, and a trial stopped as
        # too slow (PRUNED, counted) made tests that expect every trial COMPLETE flaky.
        "max_slowdown": None,
    }
    d.update(changes)
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def built_study(tmp_path_factory) -> Path:
    """The study file of a finished tiny study (journal and artifacts beside it)."""
    if "path" not in _built:
        from effsearch.cli import main

        folder = tmp_path_factory.mktemp("tiny-study")
        path = study_file(folder)
        assert main(["run", str(path), "--data-dir", str(folder / "data")]) == 0
        _built["path"] = path
    return _built["path"]
