"""Text models: the built-in encoder (its mask and pooling), hf:CONFIG_CLASS models from a config,
a user's factory given vocab_size, num_classes and max_length, the probe's text facts, and the
algorithms' text versions (MixUp on embeddings, GatedLinearUnits on BERT, sequence-length warm-up,
LowPrecisionLayerNorm's surgery)."""

import sys
import textwrap

import pytest
import torch

from effsearch.config import ConfigError, ModelConfig, TrainConfig
from effsearch.config.sources import facts
from effsearch.trainer.data.splits import load_splits
from effsearch.trainer.data.tokenizer import TokenShape
from effsearch.trainer.models import TokenInput, build_network
from effsearch.trainer.models.text import TextEncoder
from effsearch.trainer.probe import check_text_network, probe
from effsearch.trainer.result import RunResult
from effsearch.trainer.training import prepare, train
from tests.support.text import tiny_text, write_jsonl

BERT = {"name": "hf:BertConfig", "kwargs": {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}}
SHAPE = TokenShape(vocab_size=300, max_length=24)


def ids(rows: list[list[int]], width: int) -> torch.Tensor:
    out = torch.zeros(len(rows), width, dtype=torch.int32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_the_encoder_ignores_padding(pooling):
    torch.manual_seed(0)
    net = TokenInput(TextEncoder(300, 3, 24, width=16, depth=2, heads=2, pooling=pooling), "ids_mask").eval()
    short = ids([[1, 5, 6, 7]], 4)
    padded = ids([[1, 5, 6, 7]], 12)
    with torch.no_grad():
        assert torch.allclose(net(short), net(padded), atol=1e-5)
        assert not torch.allclose(net(short), net(ids([[1, 5, 6, 8]], 4)))


def test_a_hf_config_builds_a_sequence_classifier_with_fresh_weights():
    pytest.importorskip("transformers")
    net = build_network(ModelConfig(**BERT), 0, 3, tokens=SHAPE)
    inner = net.net
    assert type(inner).__name__ == "BertForSequenceClassification" and inner.config.vocab_size == 300
    assert inner.config.num_labels == 3 and inner.config.pad_token_id == 0
    with torch.no_grad():
        assert net.eval()(ids([[1, 5, 6], [1, 7]], 3)).shape == (2, 3)


HF_FACTORIES = """
from transformers import BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel

def classifier(vocab_size, num_classes, max_length):
    config = BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=max_length, num_labels=num_classes)
    return BertForSequenceClassification(config)

def causal(vocab_size, max_length):
    return GPT2LMHeadModel(GPT2Config(vocab_size=vocab_size, n_positions=max_length, n_embd=16, n_layer=1, n_head=2))
"""


def test_a_factory_returning_a_transformers_model_is_called_as_one(tmp_path, monkeypatch):
    """Its forward takes input_ids and attention_mask and returns an output whose logits are asked
    for: it was refused as returning a SequenceClassifierOutput."""
    pytest.importorskip("transformers")
    (tmp_path / "hffactories.py").write_text(HF_FACTORIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    net = build_network(ModelConfig(name="hffactories:classifier"), 0, 3, tokens=SHAPE)
    check_text_network(net, ModelConfig(name="hffactories:classifier"), SHAPE, 3, "cpu")
    with torch.no_grad():
        assert net.eval()(ids([[1, 5, 6], [1, 7]], 3)).shape == (2, 3)
    causal = TokenShape(vocab_size=300, max_length=24, causal=True)
    lm = build_network(ModelConfig(name="hffactories:causal"), 0, 0, tokens=causal)
    check_text_network(lm, ModelConfig(name="hffactories:causal"), causal, 300, "cpu")  # causal: it passes
    with torch.no_grad():
        assert lm.eval()(ids([[5, 6, 7], [8, 9, 10]], 3)).shape == (2, 3, 300)
    sys.modules.pop("hffactories", None)


def test_the_probe_reads_text_facts_from_the_model_as_built():
    pytest.importorskip("transformers")
    found = probe(ModelConfig(**BERT), tokens=SHAPE)
    assert found.tokens and found.layernorm and found.attention and found.bert and found.final_linear
    assert found.positions == 512 and not found.batchnorm and not found.downsamples
    encoder = facts({"name": "text-encoder"})
    assert encoder.tokens and encoder.layernorm and not encoder.bert and encoder.positions is None
    assert facts({"name": "tiny-cnn"}).images


FACTORY = """
import torch.nn as nn

SEEN = {}

class Bag(nn.Module):
    def __init__(self, vocab_size, num_classes, max_length, width=8):
        super().__init__()
        SEEN.update(vocab_size=vocab_size, num_classes=num_classes, max_length=max_length, width=width)
        self.embed = nn.Embedding(vocab_size, width)
        self.head = nn.Linear(width, num_classes)

    def forward(self, ids, mask):
        m = mask.unsqueeze(-1).float()
        return self.head((self.embed(ids) * m).sum(1) / m.sum(1))

def build(vocab_size, num_classes, max_length, width=8):
    return Bag(vocab_size, num_classes, max_length, width)
"""


@pytest.fixture
def factory_module(tmp_path, monkeypatch):
    (tmp_path / "textbag.py").write_text(textwrap.dedent(FACTORY))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "textbag:build"
    sys.modules.pop("textbag", None)


def test_a_factory_gets_the_vocabulary_classes_and_length_and_trains_with_gradmatch(tmp_path, factory_module):
    path = write_jsonl(tmp_path / "t.jsonl")
    cfg = tiny_text(path, **{"model.width": 12, "epochs": 3, "selection.strategy": "gradmatch-pb"})
    cfg["model"] = {"name": factory_module, "width": 12}
    cfg["selection"].update(fraction=0.5, select_every=1)
    result = train(TrainConfig.from_dict(cfg), data_root=tmp_path / "data", progress=False)
    seen = sys.modules["textbag"].SEEN
    assert seen["num_classes"] == 3 and seen["max_length"] == 24 and seen["width"] == 12
    assert 260 <= seen["vocab_size"] <= 300
    assert result.status == "completed" and result.history[-1].subset_size is not None
    assert facts({"name": factory_module, "kwargs": {}}).tokens


DECODERS = {
    "hf:GPT2Config": {"n_layer": 1, "n_head": 2, "n_embd": 16},
    "hf:LlamaConfig": {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32},
}


@pytest.mark.parametrize("name", list(DECODERS))
def test_a_decoder_classifier_s_embedding_is_its_last_token_s_input_to_the_head(name):
    """transformers' decoder classifiers run their head on every position and keep each text's last
    token's logits: CORDS's embedding is that position's input to the head, a row of the model's
    width (every position flattened made gradmatch fail on the shapes). Texts of different lengths:
    a fixed position would not give the model's logits back."""
    pytest.importorskip("transformers")
    from effsearch.trainer.data.selection import ModelView

    torch.manual_seed(0)
    net = build_network(ModelConfig(name=name, kwargs=DECODERS[name]), 0, 3, tokens=SHAPE).eval()
    ids = torch.randint(4, 300, (5, 24))
    for row, length in enumerate((24, 20, 9, 3, 15)):
        ids[row, length:] = 0  # padding
    view = ModelView(net, ids[:2])
    out, emb = view(ids, last=True)
    assert emb.shape == (5, 16) == (5, view.get_embedding_dim())
    assert torch.allclose(view.linear(emb), out, atol=1e-6)


def test_a_decoder_classifier_trains_with_gradmatch(tmp_path):
    pytest.importorskip("transformers")
    path = write_jsonl(tmp_path / "t.jsonl")
    cfg = tiny_text(path, **{"epochs": 2, "selection.strategy": "gradmatch-pb"})
    cfg["model"] = {"name": "hf:GPT2Config", "kwargs": DECODERS["hf:GPT2Config"]}
    cfg["selection"].update(fraction=0.5, select_every=1)
    result = train(TrainConfig.from_dict(cfg), data_root=tmp_path / "data", progress=False)
    assert result.status == "completed", result.reason
    assert result.history[-1].subset_size is not None


def test_the_encoder_and_bert_train_on_a_jsonl_file(tmp_path):
    pytest.importorskip("transformers")
    path = write_jsonl(tmp_path / "t.jsonl")
    enc = train(TrainConfig.from_dict(tiny_text(path, epochs=6)), data_root=tmp_path / "data", progress=False)
    assert enc.status == "completed" and enc.final.val_accuracy > 0.6
    cfg = tiny_text(path, epochs=6, **{"optimizer.lr": 0.01})
    cfg["model"] = BERT
    bert = train(TrainConfig.from_dict(cfg), data_root=tmp_path / "data", progress=False)
    assert bert.status == "completed" and bert.final.val_accuracy > 0.45


def prepared(path, root, callbacks=(), **overrides):
    model = overrides.pop("model", None)
    raw = tiny_text(path, **overrides)
    if model is not None:
        raw["model"] = model
    cfg = TrainConfig.from_dict(raw)
    splits = load_splits(cfg, root)
    result = RunResult(status="running", config=cfg.to_dict())
    return prepare(cfg, splits, "cpu", result, callbacks=callbacks, data_root=root)


def test_mixup_on_text_mixes_the_input_embeddings():
    torch.manual_seed(0)
    net = TokenInput(TextEncoder(300, 3, 8, width=16, depth=1, heads=2), "ids_mask").eval()
    x = ids([[1, 5, 6, 7], [1, 9, 10, 11], [1, 12, 13, 14]], 4)
    perm = torch.tensor([2, 0, 1])
    with torch.no_grad():
        net.mixing = (torch.tensor(1.0), perm)  # all of the permuted text: the permuted batch's logits
        assert torch.allclose(net(x), net(x[perm]), atol=1e-5)
        assert net.mixing is None  # used once
        net.mixing = (torch.tensor(0.5), perm)
        assert not torch.allclose(net(x), net(x), atol=1e-3)


def test_the_text_mixup_runs_in_training_with_soft_targets(tmp_path):
    from composer.core import Callback, Event

    from effsearch.trainer.composer.textalgorithms import EmbeddingMixUp

    seen = []

    class Targets(Callback):
        def run_event(self, event, state, logger):
            if event == Event.BEFORE_LOSS:
                seen.append((state.batch[1].dim(), state.model.module.mixing))

    run = prepared(write_jsonl(tmp_path / "t.jsonl"), tmp_path / "d", [Targets()], algorithms={"mixup": {"alpha": 0.4}})
    assert any(isinstance(a, EmbeddingMixUp) for a in run.state.algorithms)
    run.fit()
    # Targets mixed (soft) at every step; the forward used its mixing and cleared it.
    assert seen and all(dim == 2 and mixing is None for dim, mixing in seen)


def test_gated_linear_units_replace_berts_feed_forward_blocks(tmp_path):
    pytest.importorskip("transformers")
    run = prepared(write_jsonl(tmp_path / "t.jsonl"), tmp_path / "d", model=BERT, algorithms={"gated_linear_units": {}})
    names = {type(m).__name__ for m in run.state.model.modules()}
    assert "BERTGatedFFOutput" in names and "BertOutput" not in names and "BertIntermediate" not in names
    run.fit()
    assert run.loop.step > 0


def test_sequence_length_warmup_grows_the_batches(tmp_path):
    from effsearch.trainer.composer.textalgorithms import SeqLengthWarmup

    warm = SeqLengthWarmup(duration=0.5, min_seq_length=4, max_seq_length=24, step_size=4)
    lengths = [warm.length(b, 100) for b in range(0, 100, 10)]
    assert lengths[0] == 4 and lengths == sorted(lengths) and lengths[-1] == 24
    assert SeqLengthWarmup(duration=0.0, min_seq_length=4, max_seq_length=24).length(0, 10) == 24
    widths = []
    run = prepared(
        write_jsonl(tmp_path / "t.jsonl"),
        tmp_path / "d",
        epochs=3,
        algorithms={"seq_length_warmup": {"duration": 0.6, "min_seq_length": 4, "step_size": 4}},
    )
    forward = run.loop.model.forward
    run.loop.model.forward = lambda batch: (widths.append(batch[0].shape[1]), forward(batch))[1]
    run.fit()
    assert widths[0] == 4 and max(widths) > 8


def test_low_precision_layernorm_replaces_the_encoders_layer_norms():
    from composer.algorithms.low_precision_layernorm.low_precision_layernorm import (
        LPLayerNorm,
        apply_low_precision_layernorm,
    )
    from composer.core import Precision

    net = TokenInput(TextEncoder(300, 3, 8, width=16, depth=2, heads=2), "ids_mask")
    apply_low_precision_layernorm(net, Precision.AMP_BF16, optimizers=None)
    norms = [m for m in net.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms and all(isinstance(m, LPLayerNorm) for m in norms)


def test_a_hf_classifier_gets_bos_and_eos_ids_inside_its_vocabulary(capfd):
    """GPT-2's own bos and eos (50256) lie outside a small tokenizer's vocabulary: transformers warns."""
    pytest.importorskip("transformers")
    net = build_network(
        ModelConfig(name="hf:GPT2Config", kwargs={"n_layer": 1, "n_head": 2, "n_embd": 16}), 0, 3, SHAPE
    )
    config = net.net.config
    assert (config.bos_token_id, config.eos_token_id) == (1, 2)  # CLS starts a text, SEP ends a document
    assert "50256" not in capfd.readouterr().err
    given = build_network(ModelConfig(name="hf:BertConfig", kwargs={**BERT["kwargs"], "eos_token_id": 3}), 0, 3, SHAPE)
    assert given.net.config.eos_token_id == 3  # model.kwargs may set them


def test_a_hf_classifier_gets_cls_and_sep_ids_inside_its_vocabulary_where_its_config_has_them(capfd):
    """ModernBERT's config carries cls and sep ids of its pretrained vocabulary (50281, 50282)."""
    pytest.importorskip("transformers")
    kwargs = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}
    net = build_network(ModelConfig(name="hf:ModernBertConfig", kwargs=kwargs), 0, 3, SHAPE)
    config = net.net.config
    assert (config.cls_token_id, config.sep_token_id) == (1, 2)
    assert "50281" not in capfd.readouterr().err
    given = build_network(ModelConfig(name="hf:ModernBertConfig", kwargs={**kwargs, "sep_token_id": 3}), 0, 3, SHAPE)
    assert given.net.config.sep_token_id == 3


def test_a_text_model_is_run_on_the_full_max_length_before_training(tmp_path):
    """RoBERTa numbers its positions from the padding id + 1: 24 positions take 23 tokens. The
    forward at dataset.max_length refuses it before training, naming the length; nothing is written."""
    pytest.importorskip("transformers")
    roberta = {"name": "hf:RobertaConfig", "kwargs": {**BERT["kwargs"], "max_position_embeddings": 24}}
    cfg = tiny_text(write_jsonl(tmp_path / "t.jsonl"))
    cfg["model"] = roberta
    with pytest.raises(ConfigError) as e:
        train(TrainConfig.from_dict(cfg), data_root=tmp_path / "data", out_dir=tmp_path / "out", progress=False)
    assert e.value.field == "model.name" and "dataset.max_length 24" in str(e.value) and "positions" in str(e.value)
    assert not (tmp_path / "out").exists()
    roberta["kwargs"]["max_position_embeddings"] = 25
    net = build_network(ModelConfig(**roberta), 0, 3, tokens=SHAPE)
    check_text_network(net, ModelConfig(**roberta), SHAPE, 3, "cpu")  # 25 positions: 24 tokens


BAGS = """
import torch.nn as nn

class FastText(nn.Module):
    def __init__(self, vocab_size, num_classes, width):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab_size, width, mode="sum")
        self.head = nn.Linear(width, num_classes)

    def forward(self, ids, mask):
        return self.head(self.bag(ids, per_sample_weights=mask.float()) / mask.sum(1, keepdim=True))

class Softmax(FastText):
    def forward(self, ids, mask):
        return super().forward(ids, mask).softmax(-1)

class IdsOnly(FastText):
    def forward(self, ids):
        return self.head(self.bag(ids))

def fasttext(vocab_size, num_classes, max_length, width=8):
    return FastText(vocab_size, num_classes, width)

def softmax(vocab_size, num_classes, max_length, width=8):
    return Softmax(vocab_size, num_classes, width)

def ids_only(vocab_size, num_classes, max_length, width=8):
    return IdsOnly(vocab_size, num_classes, width)
"""


def test_an_embedding_bag_model_takes_text_and_a_forward_of_ids_alone_is_told_the_call(tmp_path, monkeypatch, caplog):
    """nn.EmbeddingBag (fastText's bag of words) is no nn.Embedding: its model takes token ids all the
    same (it was taken for an image model and refused as one), and Muon leaves its table to AdamW.
    A forward of another signature is refused saying how a text model is called; a softmax at the end
    is warned of, as on an image model."""
    import logging

    from effsearch.trainer.probe import hidden_matrices

    (tmp_path / "bags.py").write_text(textwrap.dedent(BAGS))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        path = write_jsonl(tmp_path / "t.jsonl")
        cfg = tiny_text(path, epochs=3)
        cfg["model"] = {"name": "bags:fasttext", "width": 12}
        result = train(TrainConfig.from_dict(cfg), data_root=tmp_path / "data", progress=False)
        assert result.status == "completed" and facts({"name": "bags:fasttext", "kwargs": {}}).tokens
        net = build_network(ModelConfig(name="bags:fasttext", width=12), 0, 3, tokens=SHAPE)
        assert hidden_matrices(net) == []  # the bag's table and the head: nothing for Muon
        with caplog.at_level(logging.WARNING, logger="effsearch"):
            check_text_network(net, ModelConfig(name="bags:fasttext"), SHAPE, 3, "cpu")
            assert "probabilities" not in caplog.text
            soft = build_network(ModelConfig(name="bags:softmax", width=12), 0, 3, tokens=SHAPE)
            check_text_network(soft, ModelConfig(name="bags:softmax"), SHAPE, 3, "cpu")
            assert "'bags:softmax' returns rows that are non-negative and sum to 1" in caplog.text
        cfg["model"] = {"name": "bags:ids_only", "width": 12}
        with pytest.raises(ConfigError) as e:
            train(TrainConfig.from_dict(cfg), data_root=tmp_path / "data", progress=False)
        assert e.value.field == "model.name" and "called as module(ids, mask)" in str(e.value), str(e.value)
    finally:
        sys.modules.pop("bags", None)
