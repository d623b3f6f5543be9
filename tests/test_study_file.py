"""Bad study files: exit code 2, a message naming the file, the field and what
is allowed, and nothing written. Plus `space show` and `status` without a run."""

from pathlib import Path

import pytest
import yaml

from effsearch.cli import main
from tests.conftest import tiny

STUDIES = Path(__file__).resolve().parents[1] / "studies"


def study(tmp_path, **kw) -> Path:
    d = {"name": "t", "base": tiny(), "space": {"include": ["budget", "optimizer"]}, "n_trials": 2}
    d.update(kw)
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(d, sort_keys=False))
    return p


@pytest.mark.parametrize("change, field, words", [
    ({"trials": 3}, "trials", "allowed keys in a study file: name, description, storage"),
    ({"space": {"ranges": {"optimizer.lr": {"low": 0.3, "high": 0.01}}}}, "space.ranges.optimizer.lr", "empty range"),
    ({"space": {"fixed": {"precision": "amp_bf16"}}}, "space.fixed.precision", "runs fp32"),
    ({"space": {"fixed": {"algorithms.stochastic_depth": True}}}, "space.fixed.algorithms.stochastic_depth",
     "bottleneck"),
    ({"sampler": "cmaes"}, "sampler", "allowed: tpe, nsga2, nsga3, gp, random"),
    ({"sampler": {"name": "nsga2", "populaton_size": 10}}, "sampler.populaton_size", "allowed: population_size"),
    ({"objectives": ["time_to_accuracy", "accuracy"]}, "objectives[1]", "allowed: time_to_accuracy"),
    ({"objectives": ["test_accuracy"]}, "objectives[0]", "never optimised"),
    ({"pruner": "asha"}, "pruner", "allowed: none"),
    ({"n_trials": 0}, "n_trials", ">= 1"),
    ({"base": {**tiny(), "optimizer": {"lr": -1}}}, "base.optimizer.lr", "must be in (0.0, 10.0]"),
    ({"baseline": {"algorithms.mixup": {"alpha": 0.2}, "algorithms.cutmix": {}}}, "baseline.algorithms.",
     "cannot be combined"),
    ({"storage": "redis://localhost/0"}, "storage", "allowed: sqlite, postgresql, mysql"),
    ({"storage": "t.db", "workers": 2}, "workers", "database is locked"),
    ({"objectives": ["time_to_accuracy", "final_accuracy", "quantized_size"]}, "objectives[2]",
     "needs quantize: int8 in base"),
])
def test_bad_study_file_exits_2_and_writes_nothing(tmp_path, capsys, change, field, words):
    path = study(tmp_path, **change)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: {field}" in err, err  # file, then the field
    assert words in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no journal, no artifacts


def test_bad_command_line_values_exit_2(tmp_path, capsys):
    path = study(tmp_path)
    assert main(["run", str(path), "--n-trials", "0"]) == 2
    assert "n_trials: must be >= 1" in capsys.readouterr().err
    assert main(["run", str(path), "--storage", "ftp://x/y"]) == 2
    assert "--storage: unknown storage scheme 'ftp'" in capsys.readouterr().err
    assert not (tmp_path / "t.journal").exists()


@pytest.mark.parametrize("name", ["quickstart", "fashion-mnist", "cifar10-resnet9"])
def test_shipped_studies_are_valid(name, capsys):
    assert main(["space", "show", str(STUDIES / f"{name}.yaml")]) == 0
    out = capsys.readouterr().out
    assert "dimension" in out and "search" in out


def test_space_show_lists_conditions(tmp_path, capsys):
    assert main(["space", "show", str(study(tmp_path)), "--all"]) == 0
    out = capsys.readouterr().out
    assert "optimizer.lr@adamw" in out and "optimizer adamw" in out
    assert "n/a" in out  # e.g. precision: AMP needs CUDA


def test_status_without_a_run(tmp_path, capsys):
    path = study(tmp_path)
    assert main(["status", str(path)]) == 1
    assert "no study storage" in capsys.readouterr().err
    assert main(["status", "nope"]) == 2


def test_gpu_study_space_expresses_the_fast_recipe(monkeypatch):
    """studies/fashion-mnist-gpu.yaml on a GPU machine can sample configs/fashion-mnist-fast.yaml:
    every value of the fast recipe that the space searches lies inside it."""
    import optuna
    import torch

    from effsearch.config import TrainConfig
    from effsearch.search import studyfile
    from effsearch.spaces.machine import Machine

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    root = Path(__file__).resolve().parents[1]
    spec = studyfile.load(root / "studies" / "fashion-mnist-gpu.yaml",
                          machine=Machine("cuda", bf16=True, ffcv=False, compile=True))
    fast = TrainConfig.from_yaml(root / "configs" / "fashion-mnist-fast.yaml")
    params = spec.space.encode(fast)
    got = spec.space.config(optuna.trial.FixedTrial(params))
    for field in ("epochs", "batch_size", "precision", "model", "schedule", "algorithms", "dataset"):
        assert getattr(got, field) == getattr(fast, field), field
    lr = lambda c: c.optimizer.lr * (c.batch_size / 128 if c.optimizer.scale_lr_with_batch else 1)  # noqa: E731
    assert lr(got) == pytest.approx(lr(fast)) and got.optimizer.nesterov and got.optimizer.name == "sgd"
