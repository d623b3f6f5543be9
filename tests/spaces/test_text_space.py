"""The space of a text run: what applies to a transformer, decided by the rules from the probed model
(not by its name), with the reason for the rest in `space show --all`; every gated-in dimension
makes a valid config, and the risky ones train (benchmarks/space_sweep.py --each trains them all)."""

import importlib.util
from pathlib import Path

import pytest
import yaml

from effsearch.config import TrainConfig
from effsearch.config.choices import TEXT_ENCODER
from effsearch.config.machine import Machine
from effsearch.search.study import studyfile
from tests.support.text import tiny_text, write_jsonl

ROOT = Path(__file__).resolve().parents[2]
GPU = Machine("cuda", bf16=True, ffcv=False, compile=True, gpus=1)
BERT = {"name": "hf:BertConfig", "kwargs": {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}}


def sweep_module():
    spec = importlib.util.spec_from_file_location("space_sweep", ROOT / "benchmarks" / "space_sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def study(tmp_path, model=None, **base) -> Path:
    cfg = tiny_text(write_jsonl(tmp_path / "t.jsonl"), **base)
    cfg["device"] = "auto"
    if model is not None:
        cfg["model"] = model
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "text", "base": cfg, "n_trials": 2}))
    return path


def rows(path, machine=None):
    spec = studyfile.load(path, machine=machine or Machine())
    return {r["dimension"]: r for r in spec.space.rows()}


def test_the_text_space_offers_what_a_transformer_takes_and_says_why_not_the_rest(tmp_path):
    r = rows(study(tmp_path))
    searched = {name for name, row in r.items() if row["state"] == "search"}
    assert {"dataset.max_length", "model.depth", "model.dropout", "model.pooling", "algorithms.mixup"} <= searched
    assert {
        "algorithms.seq_length_warmup",
        "algorithms.ema",
        "algorithms.sam",
        "algorithms.label_smoothing",
    } <= searched
    assert {"algorithms.gradient_clipping", "algorithms.layer_freezing", "selection.strategy"} <= searched
    assert r["algorithms.cutmix"]["values"] == "model 'text-encoder' takes token ids (text); cutmix works on images"
    assert r["algorithms.progressive_resizing"]["state"] == "n/a" and r["algorithms.randaugment"]["state"] == "n/a"
    assert "broken on transformers 5" in r["algorithms.alibi"]["values"]
    assert r["channels_last"]["values"].startswith("lays images out NHWC")
    assert "BERT's feed-forward blocks" in r["algorithms.gated_linear_units"]["values"]
    assert "AMP needs a CUDA device" in r["algorithms.low_precision_layernorm"]["values"]


def test_on_a_gpu_layer_norms_in_low_precision_and_bf16_are_offered(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    r = rows(study(tmp_path), GPU)
    assert r["algorithms.low_precision_layernorm"]["state"] == "search"
    assert "precision amp_bf16 or amp_fp16" in r["algorithms.low_precision_layernorm"]["when"]
    assert r["precision"]["state"] == "search" and r["compile"]["state"] == "search"


def test_glu_is_offered_for_a_bert_by_its_probed_blocks(tmp_path):
    pytest.importorskip("transformers")
    r = rows(study(tmp_path, model=BERT))
    assert r["algorithms.gated_linear_units"]["state"] == "search"
    # The encoder's own fields are not a transformers model's (it sizes itself in model.kwargs).
    assert r["model.depth"]["state"] == "n/a" and "sizes itself" in r["model.depth"]["values"]


def test_an_image_space_leaves_the_text_dimensions_out_with_the_reason():
    from effsearch.search.study.studyfile import load

    spec = load(ROOT / "studies" / "quickstart.yaml", machine=Machine())
    r = {row["dimension"]: row for row in spec.space.rows()}
    assert r["dataset.max_length"]["state"] == "n/a" and "text only" in r["dataset.max_length"]["values"]
    assert r["algorithms.seq_length_warmup"]["values"] == (
        "model 'tiny-cnn' takes images; seq_length_warmup works on token ids (text)"
    )


def test_every_gated_in_dimension_of_the_text_space_makes_a_valid_config(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    spec = studyfile.load(study(tmp_path), machine=GPU)
    todo = sweep_module().one_at_a_time(spec.space)
    offered = {label.split("=")[0] for label, _ in todo}
    # Every searched dimension but the fused step (its base value is the GPU's only sensible one).
    assert spec.space.active - offered <= {"optimizer.fused"}, spec.space.active - offered
    for _label, cfg in todo:
        TrainConfig.from_dict(cfg)  # raises on a value the gates let in that the rules refuse
    assert "algorithms.low_precision_layernorm=True" in [label for label, _ in todo]


RISKY = (
    "model.pooling=cls",
    "optimizer.kfac=True",
    "selection.strategy=gradmatch-pb",
    "sparsity=True",
    "algorithms.mixup=True",
    "algorithms.swa=True",
    "algorithms.sam=True",
    "algorithms.layer_freezing=True",
    "algorithms.seq_length_warmup=True",
)


def test_the_risky_dimensions_of_the_text_space_train(tmp_path):
    mod = sweep_module()
    spec = studyfile.load(study(tmp_path), machine=Machine())
    picked = [(label, cfg) for label, cfg in mod.one_at_a_time(spec.space) if label in RISKY]
    assert sorted(label for label, _ in picked) == sorted(RISKY)
    from effsearch.trainer.training import train

    for label, cfg in picked:
        result = train(TrainConfig.from_dict(mod.here(cfg, 1.0, 2.0, 64)), data_root=tmp_path / "d", progress=False)
        assert result.status in ("completed", "diverged"), (label, result.status, result.reason)


@pytest.mark.parametrize(
    "space, field, words",
    [
        ({"ranges": {"algorithms.alibi": {"choices": [True, False]}}}, "space.ranges.algorithms.alibi", "broken"),
        ({"include": ["algorithms.cutmix", "optimizer"]}, "space.include[0]", "cutmix works on images"),
        ({"ranges": {"algorithms.cutout.length": [0.1, 0.3]}}, "space.ranges.algorithms.cutout.length", "images"),
        ({"include": ["channels_last"]}, "space.include[0]", "lays images out NHWC"),
    ],
)
def test_a_study_asking_for_what_the_text_model_cannot_take_is_refused(tmp_path, space, field, words):
    """Named alone or given a range, an image dimension or ALiBi on a text model is refused with the
    reason (it had been searched under a gate that never holds, or left out without a word)."""
    from effsearch.config import ConfigError

    path = study(tmp_path)
    doc = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**doc, "space": space}))
    with pytest.raises(ConfigError) as e:
        studyfile.load(path, machine=Machine())
    assert e.value.field == field and words in e.value.message, (e.value.field, e.value.message)
    # A group that holds them leaves them out quietly, as `space show --all` says.
    path.write_text(yaml.safe_dump({**doc, "space": {"include": ["algorithms"]}}))
    assert "algorithms.cutmix" not in studyfile.load(path, machine=Machine()).space.active


def test_a_base_at_the_encoders_default_depth_encodes_that_depth(tmp_path):
    """model.depth 0 is the text encoder's default depth: the baseline records it, not no value."""
    spec = studyfile.load(study(tmp_path, model={"name": "text-encoder", "width": 16}), machine=Machine())
    assert spec.base.model.depth == 0 and spec.base.model.name == "text-encoder"
    assert spec.space.encode(spec.base)["model.depth"] == TEXT_ENCODER["depth"]


LENGTH_FACTORY = """
from transformers import BertConfig, BertForSequenceClassification

def build(vocab_size, num_classes, max_length, cap=None):
    config = BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=cap or max_length, num_labels=num_classes)
    return BertForSequenceClassification(config)
"""


def test_a_factory_builds_positions_for_each_trials_length_not_the_first_one(tmp_path, monkeypatch):
    """A factory given max_length builds that many positions: the space keeps double the base
    length, and a trial that checked a shorter build makes no later longer trial invalid (it did,
    from then on). A cap of the factory's own still limits the lengths."""
    pytest.importorskip("transformers")
    from effsearch.config import ModelConfig, rules
    from effsearch.trainer.data.tokenizer import TokenShape
    from effsearch.trainer.models import build_network
    from effsearch.trainer.probe import check_text_network

    (tmp_path / "lengthfactory.py").write_text(LENGTH_FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    model = {"name": "lengthfactory:build"}
    assert rows(study(tmp_path, model=model))["dataset.max_length"]["values"] == "{12, 24, 48}"
    shorter = TokenShape(vocab_size=300, max_length=12)
    check_text_network(
        build_network(ModelConfig(**model), 0, 3, tokens=shorter), ModelConfig(**model), shorter, 3, "cpu"
    )
    base = yaml.safe_load(study(tmp_path, model=model).read_text())["base"]
    rules.check({**base, "dataset": {**base["dataset"], "max_length": 48}})
    capped = {"name": "lengthfactory:build", "kwargs": {"cap": 24}}
    assert rows(study(tmp_path, model=capped))["dataset.max_length"]["values"] == "{12, 24}"


def test_lengths_beyond_the_probed_models_positions_are_left_out_with_the_reason(tmp_path):
    """A BERT of 24 positions at max_length 24: 48 would make every trial that samples it invalid."""
    pytest.importorskip("transformers")
    bert = {"name": "hf:BertConfig", "kwargs": {**BERT["kwargs"], "max_position_embeddings": 24}}
    length = rows(study(tmp_path, model=bert))["dataset.max_length"]
    assert length["values"] == "{12, 24}" and "48 left out: not within the model's positions" in length["when"]
    assert rows(study(tmp_path, model=BERT))["dataset.max_length"]["values"] == "{12, 24, 48}"  # 512 positions
