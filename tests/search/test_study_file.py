"""Bad study files: exit code 2, a message naming the file, the field and what
is allowed, and nothing written. Plus `space show` and `status` without a run."""

from pathlib import Path

import pytest
import yaml

from effsearch.cli import main
from tests.support.helpers import tiny

STUDIES = Path(__file__).resolve().parents[2] / "studies"


def study(tmp_path, **kw) -> Path:
    d = {"name": "t", "base": tiny(), "space": {"include": ["budget", "optimizer"]}, "n_trials": 2}
    d.update(kw)
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(d, sort_keys=False))
    return p


@pytest.mark.parametrize(
    "change, field, words",
    [
        ({"trials": 3}, "trials", "allowed keys in a study file: name, description, storage"),
        (
            {"space": {"ranges": {"optimizer.lr": {"low": 0.3, "high": 0.01}}}},
            "space.ranges.optimizer.lr",
            "empty range",
        ),
        ({"space": {"fixed": {"precision": "amp_bf16"}}}, "space.fixed.precision", "runs fp32"),
        (
            {"space": {"fixed": {"algorithms.stochastic_depth": True}}},
            "space.fixed.algorithms.stochastic_depth",
            "bottleneck",
        ),
        ({"sampler": "cmaes"}, "sampler", "allowed: tpe, nsga2, nsga3, gp, random"),
        ({"sampler": {"name": "nsga2", "populaton_size": 10}}, "sampler.populaton_size", "allowed: population_size"),
        ({"objectives": ["time_to_accuracy", "accuracy"]}, "objectives[1]", "allowed: time_to_accuracy"),
        ({"objectives": ["test_accuracy"]}, "objectives[0]", "never optimised"),
        ({"pruner": "asha"}, "pruner", "allowed: none"),
        ({"n_trials": 0}, "n_trials", ">= 1"),
        ({"base": {**tiny(), "optimizer": {"lr": -1}}}, "base.optimizer.lr", "must be in (0.0, 10.0]"),
        (
            {"baseline": {"algorithms.mixup": {"alpha": 0.2}, "algorithms.cutmix": {}}},
            "baseline.algorithms.",
            "cannot be combined",
        ),
        # What a trial is measured on is the study's: a baseline timed to another target is no yardstick.
        ({"baseline": {"target_accuracy": 0.9}}, "baseline.target_accuracy", "measured on (0.5 in base)"),
        ({"baseline": {"target": {"metric": "val_loss", "value": 5.0}}}, "baseline.target.metric", "set it in base"),
        ({"warm_start": [{"dataset.val_fraction": 0.3}]}, "warm_start[0].dataset.val_fraction", "set it in base"),
        ({"storage": "redis://localhost/0"}, "storage", "allowed: sqlite, postgresql, mysql"),
        ({"storage": "t.db", "workers": 2}, "workers", "database is locked"),
        (
            {"objectives": ["time_to_accuracy", "final_accuracy", "quantized_size"]},
            "objectives[2]",
            "needs quantize: int8 in base",
        ),
        # Options go through the same field machinery as TrainConfig (effsearch.config.options).
        ({"sampler": {"name": "tpe", "multivariate": "yes"}}, "sampler.multivariate", "must be true or false"),
        ({"sampler": {"name": "nsga2", "population_size": 1}}, "sampler.population_size", "must be >= 2"),
        ({"pruner": {"name": "moasha", "eta": 1}}, "pruner.eta", "must be > 1; got 1"),
        ({"pruner": {"name": "moasha", "min_fraction": 1.5}}, "pruner.min_fraction", "must be in (0, 1); got 1.5"),
        ({"tuning": {"name": "subset", "data_fraction": 1.5}}, "tuning.data_fraction", "must be in (0, 1]; got 1.5"),
        ({"tuning": {"name": "subset", "topk": 3}}, "tuning.topk", "not an option of subset; allowed: data_fraction"),
        ({"heartbeat": {"interval": 10, "grace_period": 5}}, "heartbeat.grace_period", "must be >= 10"),
        ({"heartbeat": {"beat": 1}}, "heartbeat.beat", "unknown key; allowed: interval, grace_period, max_retry"),
        ({"n_trials": None, "timeout": 0}, "timeout", "must be > 0; got 0"),
        ({"workers": 1.5}, "workers", "must be an integer"),
        (
            {"space": {"include": ["optimizer"], "ranges": {"optimizer.kfac": ["sgd", True]}}},
            "space.ranges.optimizer.kfac.choices[0]",
            "must be true or false; got 'sgd'",
        ),
    ],
)
def test_bad_study_file_exits_2_and_writes_nothing(tmp_path, capsys, change, field, words):
    path = study(tmp_path, **change)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: {field}" in err, err  # file, then the field
    assert words in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no journal, no artifacts


@pytest.mark.parametrize(
    "change, field",
    [
        ({"n_trials": 0}, "n_trials"),
        ({"pruner": {"name": "moasha", "eta": 1}}, "pruner.eta"),
        ({"sampler": "cmaes"}, "sampler"),
        ({"objectives": ["accuracy"]}, "objectives[0]"),
        ({"tuning": {"name": "subset", "data_fraction": 1.5}}, "tuning.data_fraction"),
        ({"heartbeat": {"beat": 1}}, "heartbeat.beat"),
        ({"workers": 10_000}, "workers"),
        ({"storage": "redis://localhost/0"}, "storage"),
    ],
)
def test_a_study_files_own_values_are_checked_before_the_machine_and_the_space(tmp_path, monkeypatch, change, field):
    """The machine (torch's import) and the space (FFCV's, ~10 s) come after every value the file
    holds by itself: a typo in one is refused in a fraction of a second (it took 7-11 s)."""
    from effsearch.config import ConfigError, machine
    from effsearch.search.study import studyfile

    monkeypatch.setattr(machine, "detect", lambda *a, **k: pytest.fail("the machine was detected first"))
    with pytest.raises(ConfigError) as e:
        studyfile.load(study(tmp_path, **change))
    assert e.value.field == field


def test_bad_command_line_values_exit_2(tmp_path, capsys):
    path = study(tmp_path)
    assert main(["run", str(path), "--n-trials", "0"]) == 2
    assert "--n-trials: must be >= 1" in capsys.readouterr().err  # the flag gave it
    assert main(["run", str(path), "--storage", "ftp://x/y"]) == 2
    assert "--storage: unknown storage scheme 'ftp'" in capsys.readouterr().err
    assert not (tmp_path / "t.journal").exists()


# Every shipped study but the GPU one (base.device: cuda is refused on a machine without one;
# tests/spaces/test_space_sweep.py samples its space as a GPU's).
@pytest.mark.parametrize("name", sorted(p.stem for p in STUDIES.glob("*.yaml") if p.stem != "fashion-mnist-gpu"))
def test_shipped_studies_are_valid(name, capsys):
    assert main(["space", "show", str(STUDIES / f"{name}.yaml")]) == 0
    out = capsys.readouterr().out
    assert "dimension" in out and "search" in out


def test_the_quantized_study_measures_int8_size():
    """studies/fashion-mnist-quantized.yaml: its third objective is the int8 file size, which
    every trial can measure because base (and so the baseline) quantizes."""
    from effsearch.config.machine import Machine
    from effsearch.search.study import studyfile

    spec = studyfile.load(STUDIES / "fashion-mnist-quantized.yaml", machine=Machine())
    assert spec.objectives == ("time_to_accuracy", "final_accuracy", "quantized_size")
    assert spec.directions == ["minimize", "maximize", "minimize"]
    assert spec.base.quantize == "int8" and spec.baseline.quantize == "int8"
    assert "sparsity.target" in spec.space.active and spec.sampler.name == "nsga2"


def test_space_show_lists_conditions(tmp_path, capsys):
    assert main(["space", "show", str(study(tmp_path)), "--all"]) == 0
    out = capsys.readouterr().out
    assert "optimizer.lr@adamw" in out and "optimizer adamw" in out
    assert "n/a" in out  # e.g. precision: AMP needs CUDA
    # The n/a reasons (long) come last and pad no column: the rule line stops short of them, and
    # every row's values start under the header's.
    lines = out.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("dimension "))
    at = lines[head].index("values")
    assert lines[head].endswith("values") and len(lines[head + 1]) < max(map(len, lines))
    precision = next(x for x in lines if x.startswith("precision "))
    assert precision[at:].startswith("AMP needs") and precision[:at].split() == ["precision", "system", "n/a"]


def test_status_without_a_run(tmp_path, capsys):
    path = study(tmp_path)
    assert main(["status", str(path)]) == 2  # bad input: no storage there yet, so no studies
    assert "storage: no study storage at" in capsys.readouterr().err
    assert main(["status", "nope"]) == 2


def test_gpu_study_space_expresses_the_fast_recipe(monkeypatch):
    """studies/fashion-mnist-gpu.yaml on a GPU machine can sample configs/fashion-mnist-fast.yaml:
    every value of the fast recipe that the space searches lies inside it."""
    import optuna
    import torch

    from effsearch.config import TrainConfig
    from effsearch.config.machine import Machine
    from effsearch.search.study import studyfile

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    root = Path(__file__).resolve().parents[2]
    spec = studyfile.load(
        root / "studies" / "fashion-mnist-gpu.yaml", machine=Machine("cuda", bf16=True, ffcv=False, compile=True)
    )
    fast = TrainConfig.from_yaml(root / "configs" / "fashion-mnist-fast.yaml")
    params = spec.space.encode(fast)
    got = spec.space.config(optuna.trial.FixedTrial(params))
    for field in ("epochs", "batch_size", "precision", "model", "schedule", "algorithms", "dataset"):
        assert getattr(got, field) == getattr(fast, field), field
    lr = lambda c: c.optimizer.lr * (c.batch_size / 128 if c.optimizer.scale_lr_with_batch else 1)  # noqa: E731
    assert lr(got) == pytest.approx(lr(fast)) and got.optimizer.nesterov and got.optimizer.name == "sgd"


@pytest.mark.parametrize(
    "change, field",
    [
        ({"space": {"ranges": {"optimizer.lr": {"low": float("nan"), "high": 0.1}}}}, "space.ranges.optimizer.lr.low"),
        (
            {"space": {"ranges": {"optimizer.lr": {"low": 0.01, "high": float("inf")}}}},
            "space.ranges.optimizer.lr.high",
        ),
        ({"space": {"fixed": {"optimizer.weight_decay": float("nan")}}}, "space.fixed.optimizer.weight_decay"),
        (
            {"base": {**tiny(), "selection": {"strategy": "random", "fraction": float("nan")}}},
            "base.selection.fraction",
        ),
        ({"timeout": float("inf")}, "timeout"),
        ({"pruner": {"name": "moasha", "eta": float("nan")}}, "pruner.eta"),
        ({"tuning": {"name": "subset", "data_fraction": float("nan")}}, "tuning.data_fraction"),
    ],
)
def test_nan_and_infinity_in_a_study_file_name_the_field(tmp_path, capsys, change, field):
    assert main(["space", "show", str(study(tmp_path, **change))]) == 2
    assert f"{field}: must be a finite number" in capsys.readouterr().err


def test_scientific_notation_in_a_study_file(tmp_path, capsys):
    path = tmp_path / "t.yaml"
    path.write_text(
        "base: {dataset: {name: digits}, optimizer: {lr: 1e-2}, device: cpu}\n"
        "space:\n  include: [optimizer]\n  ranges:\n    optimizer.lr: {low: 5e-3, high: 1e-1}\n"
    )
    assert main(["space", "show", str(path)]) == 0
    assert "[0.005, 0.1]" in capsys.readouterr().out


def test_an_empty_study_file_is_refused_with_a_minimal_example(tmp_path, capsys):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert main(["run", str(path)]) == 2
    assert (
        f"{path}: the file is empty; a minimal study file is `base: {{dataset: {{name: digits}}}}`"
        in capsys.readouterr().err
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.yaml"]  # nothing written, nothing trained


@pytest.mark.parametrize(
    "storage, words",
    [
        (
            "postgresql://effsearch@127.0.0.1:{port}/x",
            "cannot open postgresql://effsearch@127.0.0.1:{port}/x: OperationalError",
        ),
        ("{tmp}/missing/x.db", "cannot create x.db: no such folder: {tmp}/missing"),
        ("{tmp}/missing/x.journal", "cannot create x.journal: no such folder: {tmp}/missing"),
        ("{tmp}/t.yaml/x.journal", "cannot create x.journal: not a folder: {tmp}/t.yaml"),
        ("/proc/effsearch-test.journal", "cannot write the journal file /proc/effsearch-test.journal"),
        ("mysql://u@127.0.0.1/db", "no driver for mysql://"),
        ("sqlite:/nope", "malformed storage URL 'sqlite:/nope': a URL is sqlite://..."),
        ("sqlite:nope.db", "malformed storage URL"),
        ("sqlite://", "in-memory database"),
    ],
)
def test_storage_that_cannot_work_is_one_line_naming_storage_exit_2(tmp_path, capsys, storage, words):
    from tests.support.helpers import free_port

    path = study(tmp_path)
    port = free_port()  # nothing listens there
    storage, words = (s.format(tmp=tmp_path, port=port) for s in (storage, words))
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["run", str(path), "--storage", storage]) == 2
    err = capsys.readouterr().err
    assert "--storage: " in err and words in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no `sqlite:` folder, no journal
    # Reading commands say the same (a missing file there is "no study storage", exit 2 too).
    if "://" in storage and "malformed" not in words:
        assert main(["status", "t", "--storage", storage]) == 2
        assert "--storage: " in capsys.readouterr().err


def test_a_journal_on_a_full_file_system_is_refused_before_the_warm_up_and_leaves_nothing(
    tmp_path, capsys, monkeypatch
):
    import shutil

    from effsearch.search.run import workers

    path = study(tmp_path)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=40 * 1024))
    monkeypatch.setattr(workers, "warm_up", lambda *a, **k: pytest.fail("warmed up on a full disk"))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "storage: the file system of the journal file" in err and "has 40 KB free" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.yaml"]


def test_a_storage_that_refuses_the_study_s_first_write_is_one_line_exit_1_and_no_empty_journal(
    tmp_path, capsys, monkeypatch
):
    # A disk that fills between the check and the study's creation (Optuna's journal append).
    from effsearch.search.run import runner

    def full(spec, storage):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner, "ensure_study", full)
    path = study(tmp_path)
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert "effsearch run: cannot write study 't' to" in err and "No space left on device" in err
    assert "Traceback" not in err
    assert not (tmp_path / "t.journal").exists()


def test_a_checked_study_holds_typed_options(tmp_path):
    """The options a study file names arrive as their dataclasses, defaults filled; no tuning phase is None."""
    from effsearch.config.machine import Machine
    from effsearch.config.options import Heartbeat, MOASHAOptions, SubsetTuning, TPEOptions
    from effsearch.search.study import phases, studyfile

    base = {"dataset": {"name": "digits"}}
    plain = studyfile.from_mapping({"base": base}, tmp_path / "plain.yaml", machine=Machine())
    assert plain.tuning is None and not phases.enabled(plain)
    assert plain.sampler.name == "tpe" and plain.sampler.options == TPEOptions()
    assert plain.pruner.name == "none" and plain.heartbeat == Heartbeat(interval=30, grace_period=90, max_retry=3)
    given = {
        "pruner": {"name": "moasha", "eta": 3},
        "tuning": {"name": "subset", "top_k": 2},
        "heartbeat": {"interval": 5},
    }
    spec = studyfile.from_mapping({"base": base, **given}, tmp_path / "typed.yaml", machine=Machine())
    assert spec.pruner.options == MOASHAOptions(eta=3.0)
    assert spec.tuning == SubsetTuning(top_k=2) and phases.enabled(spec)
    assert spec.heartbeat.grace_period == 15
    # Phase 2's study keeps the options in the format studies written before have (export reads it).
    stored = phases.stored_tuning(spec.tuning)
    assert list(stored) == ["data_fraction", "epochs_fraction", "val_subset", "top_k", "seeds", "name"]
    assert stored["top_k"] == 2 and stored["name"] == "subset"
    assert phases.stored_tuning(SubsetTuning(target_accuracy=0.5))["target_accuracy"] == 0.5


def test_a_switch_that_writes_another_field_takes_true_and_false_as_its_range(tmp_path, capsys):
    """K-FAC is a switch on SGD that writes optimizer.name: its choices are switches, not names."""
    path = study(tmp_path, space={"include": ["optimizer"], "ranges": {"optimizer.kfac": [False, True]}})
    assert main(["space", "show", str(path)]) == 0
    assert "optimizer.kfac" in capsys.readouterr().out
