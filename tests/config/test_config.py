"""TrainConfig: YAML round trip, overrides and messages that name the field."""

import re
import subprocess
import sys

import pytest
import yaml

from effsearch.config import ConfigError, TrainConfig
from tests.support.helpers import tiny


def test_yaml_round_trip_is_exact(tmp_path):
    cfg = TrainConfig.from_dict(
        tiny(
            **{
                "algorithms": {"mixup": {"alpha": 0.4}, "blurpool": {}},
                "sparsity.target": 0.5,
                "schedule.name": "multistep",
            }
        )
    )
    path = tmp_path / "c.yaml"
    cfg.dump(path, header="made by a test")
    again = TrainConfig.from_yaml(path)
    assert again == cfg
    assert again.hash() == cfg.hash()
    assert again.to_yaml() == cfg.to_yaml()
    assert path.read_text().startswith("# made by a test")


def test_overrides_are_dotted_yaml_values_and_validated(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(tiny()))
    cfg = TrainConfig.from_yaml(path, ["optimizer.lr=0.2", "algorithms={ema: {half_life: 10ba}}", "epochs=3"])
    assert cfg.optimizer.lr == 0.2 and cfg.epochs == 3
    assert cfg.algorithms == {"ema": {"half_life": "10ba"}}
    # A value --set gave is the flag's error; the file's own values stay the file's.
    with pytest.raises(ConfigError, match=r"^--set: optimizer.lr: must be in \(0.0, 10.0\]; got -1"):
        TrainConfig.from_yaml(path, ["optimizer.lr=-1"])
    path.write_text(yaml.safe_dump(tiny(epochs=0)))
    with pytest.raises(ConfigError, match=r"c.yaml: epochs: must be in"):
        TrainConfig.from_yaml(path, ["optimizer.lr=0.2"])


@pytest.mark.parametrize(
    "change, message",
    [
        ({"epoch": 3}, "epoch: unknown key; allowed keys here: dataset, model, epochs"),
        ({"batch_size": "big"}, "batch_size: must be an integer, got 'big'"),
        ({"dataset.val_fraction": 0.9}, r"dataset.val_fraction: must be in \(0.0, 0.5\]"),
        ({"dataset.name": "imagenet"}, r"dataset.name: must be a built-in dataset \(digits, fashion-mnist"),
        ({"model.name": "resnet 18"}, r"model.name: must be a built-in model \(tiny-cnn, .*torchvision:NAME"),
        ({"model.name": "torchvision:"}, "model.name: torchvision: needs a model name after the colon"),
        ({"model.layers": 3}, "model.layers: unknown key; allowed keys here: name, width, depth, heads"),
        ({"model.depth": 3}, "model.depth: applies to the built-in text-encoder only; 'tiny-cnn' has no such"),
        ({"algorithms": {"blurpol": {}}}, "algorithms.blurpol: unknown algorithm; known: alibi, augmix, blurpool"),
        ({"algorithms": {"mixup": {"alfa": 1}}}, "algorithms.mixup.alfa: unknown parameter of MixUp; allowed: alpha"),
        (
            {"algorithms": {"label_smoothing": {"smoothing": 2}}},
            r"algorithms.label_smoothing.smoothing: must be in \[0.0, 0.99\]; got 2",
        ),
        ({"algorithms": {"stochastic_depth": {}}}, "algorithms.stochastic_depth: needs a model with bottleneck"),
        ({"algorithms": {"mixup": {}, "cutmix": {}}}, "algorithms.mixup: cannot be combined with cutmix"),
        ({"sparsity.target": 0.5, "sparsity.start": 0.6, "sparsity.end": 0.5}, "sparsity.end: must be after"),
        ({"selection.fraction": 0.5}, "selection.fraction: only applies with a selection strategy"),
        ({"precision": "fp8"}, "precision: must be one of fp32, amp_fp16, amp_bf16"),
    ],
)
def test_bad_values_name_the_field(change, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig.from_dict(tiny(**change), source="x.yaml")


def test_cli_bad_input_exits_2_without_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("dataset: {name: digits}\nbatch_size: -4\n")
    p = subprocess.run([sys.executable, "-m", "effsearch.cli", "train", str(bad)], capture_output=True, text=True)
    assert p.returncode == 2
    assert "bad.yaml: batch_size: must be in [1, 65536]; got -4" in p.stderr
    assert "Traceback" not in p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "effsearch.cli", "train", str(tmp_path / "nope.yaml")], capture_output=True, text=True
    )
    assert p.returncode == 2 and "no such file" in p.stderr and "Traceback" not in p.stderr
    bad.write_text("epochs: [1, 2\n")
    p = subprocess.run([sys.executable, "-m", "effsearch.cli", "train", str(bad)], capture_output=True, text=True)
    assert p.returncode == 2 and "not valid YAML" in p.stderr


def test_algorithm_table_matches_composer_signatures():
    """The fast validation table must agree with Composer's constructors."""
    import inspect

    import composer.algorithms as ca

    from effsearch.config.algorithms import ALGORITHMS

    for name, spec in ALGORITHMS.items():
        sig = inspect.signature(getattr(ca, spec.composer_name)).parameters
        internal = {"input_key", "target_key"}
        assert set(spec.params) | set(spec.fixed) == set(sig) - internal, name
        for key, default in spec.params.items():
            composer_default = sig[key].default
            if composer_default is not inspect.Parameter.empty:
                assert default == composer_default, (name, key)


@pytest.mark.parametrize(
    "item, field",
    [
        ("optimizer.lr=.nan", "optimizer.lr"),
        ("optimizer.weight_decay=.nan", "optimizer.weight_decay"),
        ("selection.fraction=.nan", "selection.fraction"),
        ("optimizer.lr=.inf", "optimizer.lr"),
        ("target_accuracy=-.inf", "target_accuracy"),
        ("algorithms={mixup: {alpha: .nan}}", "algorithms.mixup.alpha"),
        ("schedule.milestones=[0.5, .nan]", "schedule.milestones[1]"),
    ],
)
def test_nan_and_infinity_are_refused_with_the_field_named(tmp_path, item, field):
    # NaN compares false with every bound, so a range check alone lets it through.
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(tiny()))
    with pytest.raises(ConfigError, match=rf"--set: {re.escape(field)}: must be a finite number"):
        TrainConfig.from_yaml(path, [item])


def test_scientific_notation_is_a_number_in_files_and_overrides(tmp_path):
    # YAML 1.1 (PyYAML) reads 5e-3 as a string; effsearch's loader reads it as YAML 1.2 does.
    path = tmp_path / "c.yaml"
    path.write_text("dataset: {name: digits}\noptimizer: {lr: 5e-3, weight_decay: 1E-4}\nepochs: 2e0\n")
    cfg = TrainConfig.from_yaml(path, ["schedule.gamma=2.5e-1"])
    assert (cfg.optimizer.lr, cfg.optimizer.weight_decay, cfg.epochs, cfg.schedule.gamma) == (0.005, 1e-4, 2, 0.25)
    assert TrainConfig.from_yaml(path, ["optimizer.lr=1e-3"]).optimizer.lr == 0.001
    with pytest.raises(ConfigError, match=r"optimizer.lr: must be in \(0.0, 10.0\]; got -0.001"):
        TrainConfig.from_yaml(path, ["optimizer.lr=-1e-3"])


def test_an_empty_file_is_refused_with_a_minimal_example(tmp_path):
    path = tmp_path / "empty.yaml"
    for text in ("", "# only a comment\n"):
        path.write_text(text)
        p = subprocess.run([sys.executable, "-m", "effsearch.cli", "train", str(path)], capture_output=True, text=True)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert f"{path}: the file is empty; a minimal TrainConfig is `dataset: {{name: digits}}`" in p.stderr
