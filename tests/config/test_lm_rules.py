"""Language models' bad input, refused by validation naming the field (config/rules.py)."""

import pytest

from effsearch.cli import main
from effsearch.config import ConfigError, TrainConfig


def lm(**top) -> dict:
    d = {
        "dataset": {"name": "text", "path": "/corpus.txt", "max_length": 32, "tokenizer": {"name": "bytes"}},
        "model": {"name": "gpt", "kwargs": {"n_layer": 1, "n_head": 2, "n_embd": 32}},
        "optimizer": {"name": "adamw", "lr": 0.003},
        "target": {"metric": "val_loss", "value": 2.0},
    }
    d.update(top)
    return d


@pytest.mark.parametrize(
    "cfg,field,words",
    [
        (lm(selection={"strategy": "random", "fraction": 0.5}), "selection.strategy", "vocabulary x width"),
        (lm(selection={"strategy": "gradmatch-pb", "fraction": 0.5}), "selection.strategy", "subset selection is off"),
        (lm(algorithms={"mixup": {}}), "algorithms.mixup", "does not apply to a language model"),
        (lm(algorithms={"label_smoothing": {}}), "algorithms.label_smoothing", "ema, sam, gradient_clipping"),
        (lm(algorithms={"cutout": {}}), "algorithms.cutout", "works on images"),
        (lm(algorithms={"progressive_resizing": {}}), "algorithms.progressive_resizing", "a language model takes ema"),
        (lm(model={"name": "gpt", "kwargs": {"n_head": 3, "n_embd": 32}}), "model.kwargs", "does not divide"),
        (lm(model={"name": "gpt", "kwargs": {"n_layers": 2}}), "model.kwargs", "takes no 'n_layers'"),
        (lm(model={"name": "gpt", "kwargs": {"activation": "swish"}}), "model.kwargs", "gelu, relu2"),
        (lm(model={"name": "text-encoder"}), "model.name", "is a classifier"),
        (
            lm(dataset={"name": "jsonl", "path": "/rows.jsonl"}),  # rows with labels: no corpus
            "model.name",
            "label_column: null",
        ),
        (lm(model={"name": "resnet9"}), "model.name", "takes images"),
        (  # a CNN's weights are 4-d convolutions and its output layer: nothing for Muon
            {"model": {"name": "tiny-cnn"}, "optimizer": {"name": "muon"}},
            "optimizer.name",
            "has none (convolutions are 4-d)",
        ),
        (lm(optimizer={"name": "muon", "fused": True}), "optimizer.fused", "no fused step"),
        (lm(model={"name": "gpt", "width": 64}), "model.width", "(gpt: n_embd)"),
    ],
)
def test_a_language_model_s_bad_input_names_its_field(cfg, field, words):
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict(cfg)
    assert e.value.field == field and words in str(e.value), str(e.value)


def test_a_language_model_with_the_algorithms_it_takes_passes():
    TrainConfig.from_dict(lm(algorithms={"ema": {}, "gradient_clipping": {}}))
    TrainConfig.from_dict(lm(optimizer={"name": "muon", "lr": 0.01}))
    TrainConfig.from_dict(lm(dataset={"name": "jsonl", "path": "/rows.jsonl", "label_column": None}))
    # A classifier keeps MixUp and subset selection.
    TrainConfig.from_dict(
        lm(
            dataset={"name": "jsonl", "path": "/r.jsonl"},
            model={"name": "text-encoder"},
            algorithms={"mixup": {}},
            target={},
        )
    )


def test_effsearch_train_exits_2_on_one_and_writes_nothing(tmp_path, capsys):
    import yaml

    cfg = tmp_path / "lm.yaml"
    cfg.write_text(yaml.safe_dump(lm(algorithms={"mixup": {}})))
    assert main(["train", str(cfg), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "algorithms.mixup" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_warmup_stable_decay_holds_the_peak_then_cools_down():
    from effsearch.trainer.techniques.schedule import factors

    s = TrainConfig.from_dict(
        lm(schedule={"name": "wsd", "warmup_fraction": 0.1, "cooldown_fraction": 0.4, "final_lr_fraction": 0.0})
    ).schedule
    f = factors(s, 100)
    assert f[5] == pytest.approx(0.5) and f[10] == f[59] == 1.0  # warm-up, then the peak held
    assert f[60] == pytest.approx(1.0) and f[80] == pytest.approx(0.5) and f[99] == pytest.approx(0.025)
    with pytest.raises(ConfigError, match="schedule.cooldown_fraction: applies to schedule wsd only"):
        TrainConfig.from_dict(lm(schedule={"name": "cosine", "cooldown_fraction": 0.5}))
    with pytest.raises(ConfigError, match="overlap"):
        TrainConfig.from_dict(lm(schedule={"name": "wsd", "warmup_fraction": 0.5, "cooldown_fraction": 0.6}))
