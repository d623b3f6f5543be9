"""The language model's space: decided by the rules from the probed model (never its name), its own
dimensions (Muon, the cool-down, the ramps, the gpt's switches), the rest left out with the reason,
and every configuration it samples valid."""

from pathlib import Path

import optuna
import pytest
import torch.nn as nn
import yaml

from effsearch.config import ConfigError, TrainConfig
from effsearch.config.machine import Machine
from effsearch.search.study import studyfile
from tests.trainer.test_lm import corpus, lm_config

GPU = Machine("cuda", bf16=True, ffcv=False, compile=True, gpus=1)


class Bigram(nn.Module):
    """A language model with no hidden 2-d weights: an embedding and its output layer only."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, 16)
        self.head = nn.Linear(16, vocab_size)

    def forward(self, x):
        return self.head(self.embed(x))


def bigram(vocab_size: int, max_length: int, **_) -> nn.Module:
    return Bigram(vocab_size)


def study(tmp_path, space=None, **overrides) -> Path:
    cfg = lm_config(corpus(tmp_path / "c.txt"), **overrides)
    cfg["device"] = "auto"
    body = {"name": "lm", "base": cfg, "n_trials": 2, "objectives": ["time_to_target", "final_val_loss"]}
    if space is not None:
        body["space"] = space
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def rows(path, machine=None):
    spec = studyfile.load(path, machine=machine or Machine())
    return {r["dimension"]: r for r in spec.space.rows()}


def test_the_lm_space_searches_what_a_language_model_trains_with(tmp_path):
    r = rows(study(tmp_path))
    searched = {name for name, row in r.items() if row["state"] == "search"}
    assert {
        "optimizer.muon",
        "optimizer.lr@adamw",
        "optimizer.lr@muon",
        "schedule.cooldown_fraction",
        "batch_size",
        "batch_ramp",
        "dataset.max_length",
        "length_warmup",
        "algorithms.gradient_clipping",
        "algorithms.ema",
        "model.kwargs.qk_norm",
        "model.kwargs.activation",
        "model.kwargs.tied",
        "model.kwargs.zero_init",
    } <= searched
    assert r["schedule.name"]["values"] == "{cosine, wsd, onecycle}"
    assert "a model with hidden 2-d weights" in r["optimizer.muon"]["when"]
    assert "compile off" in r["batch_ramp"]["when"] and "compile off" in r["length_warmup"]["when"]
    # CORDS and the per-label and image algorithms are out, each with the reason.
    assert r["selection.strategy"]["state"] == "n/a" and "vocabulary x width" in r["selection.strategy"]["values"]
    assert r["selection.fraction"]["state"] == "n/a"
    assert "does not apply to a language model" in r["algorithms.mixup"]["values"]
    assert "length_warmup" in r["algorithms.seq_length_warmup"]["values"]
    assert "works on images" in r["algorithms.cutout"]["values"]
    assert r["optimizer.kfac"]["state"] == "n/a" and r["sparsity"]["state"] == "n/a"
    # bf16 and compile on a GPU only.
    assert r["precision"]["state"] == "n/a" and r["compile"]["state"] == "n/a"


def test_on_a_gpu_bf16_and_compile_are_offered(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    r = rows(study(tmp_path), GPU)
    assert r["precision"]["state"] == "search" and r["compile"]["state"] == "search"


@pytest.mark.parametrize("schedule", [{"name": "cosine"}, {"name": "wsd", "cooldown_fraction": 0.4}])
def test_every_configuration_the_lm_space_samples_is_valid_and_it_tries_each_part(tmp_path, schedule):
    spec = studyfile.load(study(tmp_path, schedule=schedule), machine=Machine())
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    s = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = {"muon": 0, "wsd": 0, "ramp": 0, "warmup": 0, "qk_norm": 0, "relu2": 0, "untied": 0}
    for _ in range(200):
        cfg = spec.space.config(s.ask())  # TrainConfig.from_dict: every rule holds
        seen["muon"] += cfg.optimizer.name == "muon"
        seen["wsd"] += cfg.schedule.name == "wsd"
        seen["ramp"] += cfg.batch_ramp > 0
        seen["warmup"] += cfg.length_warmup > 0
        seen["qk_norm"] += cfg.model.kwargs["qk_norm"] is True
        seen["relu2"] += cfg.model.kwargs["activation"] == "relu2"
        seen["untied"] += cfg.model.kwargs["tied"] is False
        assert cfg.optimizer.name in ("adamw", "muon") and cfg.selection.strategy == "full"
        assert cfg.schedule.name == "wsd" or cfg.schedule.cooldown_fraction == 0.2
    assert all(n > 10 for n in seen.values()), seen


def test_muon_is_left_out_for_a_language_model_with_no_hidden_2d_weights(tmp_path):
    model = {"name": "tests.spaces.test_lm_space:bigram"}
    r = rows(study(tmp_path, model=model))
    assert r["optimizer.muon"]["state"] == "n/a" and "has none" in r["optimizer.muon"]["values"]
    # Its builder takes none of the gpt's switches: known from its facts, not its name.
    assert r["model.kwargs.qk_norm"]["state"] == "n/a" and "takes no such switch" in r["model.kwargs.qk_norm"]["values"]
    with pytest.raises(ConfigError) as e:
        studyfile.load(study(tmp_path, space={"include": ["optimizer.muon"]}, model=model), machine=Machine())
    assert e.value.field == "space.include[0]" and "has none" in str(e.value)
    with pytest.raises(ConfigError) as e:
        studyfile.load(study(tmp_path, space={"fixed": {"optimizer.muon": True}}, model=model), machine=Machine())
    assert e.value.field == "space.fixed.optimizer.muon"


@pytest.mark.parametrize(
    "overrides,field,words",
    [
        ({"batch_ramp": 0.2}, "batch_ramp", "only a language model trains on"),
        ({"length_warmup": 0.3}, "length_warmup", "only a language model trains on"),
        ({"model": {"name": "text-encoder"}, "length_warmup": 0.3}, "length_warmup", "set it to 0"),
        ({"model": {"name": "tiny-cnn"}, "optimizer": {"name": "muon"}}, "optimizer.name", "has none"),
    ],
)
def test_a_ramp_on_a_run_that_is_no_language_model_names_its_field(overrides, field, words):
    cfg = {"dataset": {"name": "jsonl", "path": "/rows.jsonl"}, "model": {"name": "text-encoder"}}
    if overrides.get("model", {}).get("name") == "tiny-cnn":
        cfg = {}
    cfg.update(overrides)
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict(cfg)
    assert e.value.field == field and words in str(e.value), str(e.value)


def test_a_ramp_with_compile_names_its_field(tmp_path):
    cfg = lm_config(tmp_path / "c.txt", batch_ramp=0.2, compile=True)
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict(cfg)
    assert e.value.field == "batch_ramp" and "recompiles" in str(e.value)


def test_a_gpt_switch_given_a_value_it_does_not_take_names_the_dimension(tmp_path):
    path = study(tmp_path, space={"ranges": {"model.kwargs.activation": {"choices": ["gelu", "swish"]}}})
    with pytest.raises(ConfigError) as e:
        studyfile.load(path, machine=Machine())
    assert e.value.field == "space.ranges.model.kwargs.activation.choices[1]" and "gelu, relu2" in str(e.value)


def test_a_language_models_lengths_stay_within_its_positions(tmp_path):
    pytest.importorskip("transformers")
    gpt2 = {"name": "hf:GPT2Config", "kwargs": {"n_layer": 1, "n_head": 2, "n_embd": 16, "n_positions": 16}}
    r = rows(study(tmp_path, model=gpt2))
    assert r["dataset.max_length"]["values"] == "{8, 16}" and "32 left out" in r["dataset.max_length"]["when"]


def test_swa_and_layer_freezing_are_left_out_of_a_language_model_for_their_own_reason(tmp_path):
    r = rows(study(tmp_path))
    for name in ("algorithms.swa", "algorithms.layer_freezing"):
        assert r[name]["state"] == "n/a" and "epoch ends" in r[name]["values"] and "label" not in r[name]["values"]
    assert "one label per text" in r["algorithms.mixup"]["values"]  # MixUp is about labels
