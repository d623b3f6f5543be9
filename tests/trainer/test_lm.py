"""Language models: plain text packed into token streams, split by document, a fixed number of
validation tokens, the built-in gpt trained to a target loss."""

import json
import sys

import numpy as np
import pytest
import torch
import yaml

from effsearch.cli import main
from effsearch.config import ConfigError, ModelConfig, TrainConfig
from effsearch.trainer.data import lmdata, tokenizer
from effsearch.trainer.data.tokenizer import TokenShape
from effsearch.trainer.models import build_network
from effsearch.trainer.models.gpt import gpt
from effsearch.trainer.probe import check_text_network
from effsearch.trainer.result import RunResult
from effsearch.trainer.training import train
from tests.support.text import corpus, lm_config


def test_effsearch_train_times_a_gpt_to_its_target_loss(tmp_path, capsys):
    """The crossing is the first evaluation at or below the target loss (an untrained byte model
    starts near ln 260 = 5.6 nats); the run reports the time, bits per byte and the final loss."""
    cfg = tmp_path / "lm.yaml"
    cfg.write_text(yaml.safe_dump(lm_config(corpus(tmp_path / "c.txt"))))
    out = tmp_path / "out"
    assert main(["train", str(cfg), "--data-dir", str(tmp_path / "data"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    r = RunResult.load(out / "result.json")
    losses = [p.val_loss for p in r.history]
    assert losses[0] > 3.5 and r.final.val_loss <= 3.5, losses
    first = next(p for p in r.history if p.val_loss <= 3.5)
    assert r.time_to_target == first.train_seconds
    assert all(p.val_loss > 3.5 for p in r.history[: r.history.index(first)])
    assert r.target_metric == "val_loss" and r.final.val_bpb > 0
    # Bytes: a token is a byte (a document's end, one), so bits per byte is the loss in bits.
    assert r.final.val_bpb == pytest.approx(r.final.val_loss / np.log(2), rel=1e-6)
    assert "time to val loss <= 3.5" in printed and "bits per byte" in printed and "val loss" in printed
    # the test split's loss, recorded beside the validation figures (never optimised)
    assert 0 < r.final.test_loss < 5.6 and f"test loss {r.final.test_loss:.4f}" in printed


def test_the_held_out_stream_is_split_by_document_and_scores_fixed_tokens(tmp_path):
    path = corpus(tmp_path / "c.txt", n=200, tag=True)
    d = TrainConfig.from_dict(lm_config(path)).dataset
    made = lmdata.tokenized(d, tmp_path)
    a = made.arrays

    def docs(stream):
        text = bytes(int(i) - tokenizer.BYTE_OFFSET for i in stream if i >= tokenizer.BYTE_OFFSET).decode()
        return {int(w.split(":")[0]) for w in text.split("doc ")[1:]}

    train, val, test = docs(a["train"]), docs(a["val"]), docs(a["test"])
    assert val and test and not (train & val) and not (train & test) and not (val & test)
    assert len(train | val | test) == 200
    assert (a["train"] == tokenizer.SEP).sum() == made.facts["documents"]["train"]  # one SEP a document
    # The same validation tokens whatever the window: 256 targets scored, the rest masked.
    for length in (16, 48):
        s = lmdata.load(TrainConfig.from_dict(lm_config(path, **{"dataset.max_length": length})).dataset, tmp_path)
        assert (s.val_y != lmdata.IGNORE).sum() == 256 and s.val_x.shape[1] == length
        assert s.held_out.tokens == 256
        assert np.array_equal(s.val_y[s.val_y != lmdata.IGNORE], a["val"][1:257])


def test_a_language_model_leaves_out_empty_texts_that_a_classifier_refuses(tmp_path):
    """wikitext's rows are a third blank: a language model reads the other rows as its documents;
    a file of blank texts alone is refused naming the path."""
    docs = corpus(tmp_path / "c.txt", n=60).read_text().split("\n\n")
    rows = [t for doc in docs for t in (doc, "", " \n")]
    path = tmp_path / "wiki.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in rows))
    over = {"dataset.name": "jsonl", "dataset.text_column": "text", "dataset.label_column": None}
    made = lmdata.tokenized(TrainConfig.from_dict(lm_config(path, **over)).dataset, tmp_path / "data")
    assert sum(made.facts["documents"].values()) == len([d for d in docs if d.strip()])
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in ["", " "]))
    with pytest.raises(ConfigError, match=r"dataset.path: .*wiki.jsonl holds no text"):
        lmdata.tokenized(TrainConfig.from_dict(lm_config(path, **over)).dataset, tmp_path / "data2")


def test_a_folder_of_documents_skips_hidden_files_and_keeps_its_cache_when_they_change(tmp_path):
    """A corpus folder copied from a Mac or cloned with git holds .DS_Store and .git: not documents
    (bytes that are not UTF-8 were refused), and not part of the cache key."""
    folder = tmp_path / "docs"
    (folder / ".git").mkdir(parents=True)
    for i, doc in enumerate(corpus(tmp_path / "c.txt", n=40).read_text().split("\n\n")):
        (folder / f"{i:02d}.txt").write_text(doc)
    (folder / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1\xff\xfe")
    (folder / ".git" / "index").write_bytes(bytes(range(256)))
    d = TrainConfig.from_dict(lm_config(folder)).dataset
    made = lmdata.tokenized(d, tmp_path / "data")
    assert made.built and sum(made.facts["documents"].values()) == 40
    (folder / ".git" / "index").write_bytes(b"another commit")
    assert not lmdata.tokenized(d, tmp_path / "data").built


def test_a_text_file_written_on_windows_is_its_paragraphs(tmp_path):
    """CRLF line ends (and a blank line holding spaces) part paragraphs as LF's do: a file written on
    Windows had been one document, and a corpus of one is refused."""
    unix = corpus(tmp_path / "c.txt", n=40)
    windows = tmp_path / "w.txt"
    windows.write_bytes(unix.read_bytes().replace(b"\n", b"\r\n").replace(b"\r\n\r\n", b"\r\n  \r\n", 3))
    a, b = (lmdata.tokenized(TrainConfig.from_dict(lm_config(p)).dataset, tmp_path / p.stem) for p in (unix, windows))
    assert b.facts["documents"] == a.facts["documents"] and sum(a.facts["documents"].values()) == 40
    assert all(np.array_equal(a.arrays[k], b.arrays[k]) for k in a.arrays)


def test_a_gpt_predicts_each_next_token_causally():
    net = gpt(260, 16, {"n_layer": 1, "n_head": 2, "n_embd": 16, "qk_norm": True, "activation": "relu2"})
    ids = torch.randint(4, 260, (2, 16))
    out = net(ids)
    assert out.shape == (2, 16, 260)
    changed = ids.clone()
    changed[:, 10] = torch.where(ids[:, 10] == 5, 6, 5)
    again = net(changed)
    assert torch.allclose(out[:, :10], again[:, :10], atol=1e-6)  # the future is masked
    assert not torch.allclose(out[:, 10:], again[:, 10:])
    assert net.head.weight is net.embed.weight
    untied = gpt(260, 16, {"tied": False, "zero_init": True, "n_embd": 16, "n_head": 2, "n_layer": 1})
    assert untied.head.weight is not untied.embed.weight
    assert not untied.blocks[0].mlp.proj.weight.detach().any()


@pytest.mark.parametrize(
    "overrides,n_docs,field,words",
    [
        ({"dataset.max_length": 4096, "dataset.val_tokens": None}, 120, "dataset.max_length", "validation stream"),
        ({"dataset.val_tokens": 10**6}, 120, "dataset.val_tokens", "validation stream holds"),
        (
            {"dataset.max_length": 2048, "dataset.val_fraction": 0.5, "dataset.val_tokens": None},
            8,
            "dataset.path",
            "one window",
        ),
    ],
)
def test_a_corpus_too_short_for_its_windows_names_the_field(tmp_path, overrides, n_docs, field, words):
    path = corpus(tmp_path / "c.txt", n=n_docs)
    with pytest.raises(ConfigError) as e:
        lmdata.load(TrainConfig.from_dict(lm_config(path, **overrides)).dataset, tmp_path)
    assert e.value.field == field and words in str(e.value)


def test_a_corpus_of_too_few_documents_to_hold_out_says_so_in_a_language_models_words(tmp_path):
    """No classes, no strata: a corpus is held out by whole documents, and two are too few."""
    path = corpus(tmp_path / "c.txt", n=2)
    with pytest.raises(ConfigError) as e:
        lmdata.load(TrainConfig.from_dict(lm_config(path, **{"dataset.val_tokens": None})).dataset, tmp_path)
    assert e.value.field in ("dataset.test_fraction", "dataset.val_fraction")
    assert "the corpus has 2 documents: too few to hold out whole documents" in str(e.value), e.value
    assert "give more documents" in str(e.value) and "class" not in str(e.value)


def test_a_refusal_after_the_tokens_are_cached_leaves_no_cache_behind_and_keeps_an_earlier_one(
    tmp_path, capsys, untouched
):
    """The token streams are written to the cache, then the windows are refused (val_tokens beyond the
    held-out stream): the run leaves no cache folder or lock; a cache an earlier run wrote stays."""
    path = corpus(tmp_path / "c.txt")
    cfg = tmp_path / "lm.yaml"
    cfg.write_text(yaml.safe_dump(lm_config(path, **{"dataset.val_tokens": 10**6})))
    assert main(["train", str(cfg)]) == 2
    assert "dataset.val_tokens" in capsys.readouterr().err
    assert not (untouched / "text-cache").exists()
    other = tmp_path / "elsewhere"
    good = lmdata.tokenized(TrainConfig.from_dict(lm_config(path)).dataset, other)
    before = sorted(p.name for p in (other / "text-cache").iterdir())
    assert main(["train", str(cfg), "--data-dir", str(other)]) == 2  # the same streams, read from that cache
    assert sorted(p.name for p in (other / "text-cache").iterdir()) == before and good.folder.is_dir()


GPT2 = {"name": "hf:GPT2Config", "kwargs": {"n_layer": 1, "n_head": 2, "n_embd": 32}}


def test_a_hf_gpt2_config_trains_as_a_causal_lm_to_its_target_loss(tmp_path, capfd):
    """``hf:GPT2Config``: transformers' causal LM with fresh weights, the vocabulary the tokenizer's
    (its token ids in it: no warning), timed to the first evaluation at or below the target loss."""
    pytest.importorskip("transformers")
    cfg = TrainConfig.from_dict(lm_config(corpus(tmp_path / "c.txt"), model=GPT2))
    r = train(cfg, data_root=tmp_path / "data", progress=False)
    assert r.status == "completed" and r.target_metric == "val_loss", r.reason
    losses = [p.val_loss for p in r.history]
    assert losses[0] > 3.5 >= r.final.val_loss, losses
    assert r.time_to_target == next(p.train_seconds for p in r.history if p.val_loss <= 3.5)
    assert "vocabulary" not in capfd.readouterr().err  # transformers' warning: GPT-2's token ids 50256
    net = build_network(cfg.model, 1, 0, TokenShape(260, 16, causal=True)).net
    assert type(net).__name__ == "GPT2LMHeadModel" and net.config.vocab_size == 260
    assert net.config.eos_token_id == tokenizer.SEP  # a document's end, as GPT-2's <|endoftext|>
    short = lm_config(corpus(tmp_path / "c.txt"), model={**GPT2, "kwargs": {**GPT2["kwargs"], "n_positions": 8}})
    with pytest.raises(ConfigError, match="n_positions") as e:
        train(TrainConfig.from_dict(short), data_root=tmp_path / "data", progress=False)
    assert e.value.field == "dataset.max_length"  # 16 tokens a window, 8 positions


LM_FACTORY = """
import torch
import torch.nn as nn

SEEN = {}


class Bigram(nn.Module):
    def __init__(self, vocab_size, max_length, width):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, width)
        self.pos = nn.Embedding(max_length, width)
        self.head = nn.Linear(width, vocab_size)

    def forward(self, ids):
        return self.head(self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device)))


def build(vocab_size, max_length, width=8):
    SEEN.update(vocab_size=vocab_size, max_length=max_length, width=width)
    return Bigram(vocab_size, max_length, width)
"""


def test_a_factory_language_model_gets_the_vocabulary_and_length_and_trains_to_a_loss(tmp_path, monkeypatch):
    """An import path's factory is called with vocab_size and max_length (no num_classes: a corpus has
    none) and model.width; its logits (N, L, vocab) are trained on the next tokens."""
    (tmp_path / "tinylm.py").write_text(LM_FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tinylm", raising=False)
    cfg = lm_config(
        corpus(tmp_path / "c.txt"),
        model={"name": "tinylm:build", "width": 24},
        target={"metric": "val_loss", "value": 4.0},
    )
    r = train(TrainConfig.from_dict(cfg), data_root=tmp_path / "data", progress=False)
    assert sys.modules["tinylm"].SEEN == {"vocab_size": 260, "max_length": 16, "width": 24}
    assert r.status == "completed", r.reason
    losses = [p.val_loss for p in r.history]
    assert losses[0] > 4.0 >= r.final.val_loss and r.time_to_target is not None, losses
    sys.modules.pop("tinylm", None)


def test_muon_updates_the_hidden_matrices_and_adamw_the_rest(tmp_path):
    """optimizer muon: the blocks' 2-d weights in Muon's group, the embeddings (tied output layer)
    and norms in AdamW's; the loop's lr reaches both; a short run learns."""
    from effsearch.trainer.probe import hidden_matrices
    from effsearch.trainer.techniques.muon import MuonAdamW
    from effsearch.trainer.training import train

    net = gpt(260, 16, {"n_layer": 1, "n_head": 2, "n_embd": 16})
    opt = MuonAdamW(net, 0.01, 0.9, True, 0.95, 0.0)
    muon, adamw = ({id(p) for p in g["params"]} for g in opt.param_groups)
    assert muon == {id(p) for p in hidden_matrices(net)} and len(muon) == 4  # qkv, proj, fc, mlp proj
    assert id(net.embed.weight) in adamw and id(net.norm.weight) in adamw and not muon & adamw
    opt.param_groups[0]["lr"] = 0.5
    assert opt.muon.param_groups[0]["lr"] == 0.5
    cfg = TrainConfig.from_dict(
        lm_config(corpus(tmp_path / "c.txt"), **{"optimizer.name": "muon", "optimizer.lr": 0.02})
    )
    r = train(cfg, data_root=tmp_path / "data", progress=False, test=False)
    assert r.status == "completed" and r.history[-1].val_loss < r.history[0].val_loss


SMALL_BERT = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}


def test_an_encoders_config_on_a_corpus_builds_a_causal_lm():
    """BertConfig's model attends both ways unless is_decoder is set: each position would see its target."""
    pytest.importorskip("transformers")
    shape = TokenShape(300, 16, causal=True)
    net = build_network(ModelConfig(name="hf:BertConfig", kwargs=SMALL_BERT), 0, 300, tokens=shape).eval()
    ids = torch.randint(4, 300, (1, 16))
    changed = ids.clone()
    changed[0, 10] = 4 if ids[0, 10] != 4 else 5
    with torch.no_grad():
        assert torch.allclose(net(ids)[:, :10], net(changed)[:, :10], atol=1e-6)


@pytest.fixture
def lm_factories(tmp_path, monkeypatch):
    (tmp_path / "lmfactory.py").write_text(LM_FACTORIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("lmfactory", None)


@pytest.mark.parametrize("name", ["hf:BertConfig", "bidirectional"])
def test_a_language_model_that_sees_later_tokens_is_refused(name, lm_factories):
    """Any language model (hf or an own factory) whose earlier logits change with a later token is
    refused before training, naming model.name; the built-in gpt and a causal factory pass."""
    pytest.importorskip("transformers")
    shape = TokenShape(300, 16, causal=True)
    if name == "bidirectional":
        model = ModelConfig(name="lmfactory:both_ways")
    else:
        model = ModelConfig(name=name, kwargs={**SMALL_BERT, "is_decoder": False})
    net = build_network(model, 0, 300, tokens=shape)
    with pytest.raises(ConfigError) as e:
        check_text_network(net, model, shape, 300, "cpu")
    assert e.value.field == "model.name" and "not causal" in str(e.value)
    for ok in (
        ModelConfig(name="gpt", kwargs={"n_layer": 1, "n_head": 2, "n_embd": 16}),
        ModelConfig(name="hf:BertConfig", kwargs=SMALL_BERT),
    ):
        check_text_network(build_network(ok, 0, 300, tokens=shape), ok, shape, 300, "cpu")
    if name == "bidirectional":
        causal = ModelConfig(name="lmfactory:one_way")
        check_text_network(build_network(causal, 0, 300, tokens=shape), causal, shape, 300, "cpu")


def test_a_nanogpt_style_forward_is_told_to_return_every_positions_logits_alone(lm_factories):
    """nanoGPT's (logits, loss) with the last position's logits was refused as 'it returned tuple'."""
    shape = TokenShape(300, 16, causal=True)
    model = ModelConfig(name="lmfactory:nano_style")
    with pytest.raises(ConfigError) as e:
        check_text_network(build_network(model, 0, 300, tokens=shape), model, shape, 300, "cpu")
    assert "a tuple of 2 (return the logits alone), the first (2, 1, 300), the last position's alone" in str(e.value)


LM_FACTORIES = """
import torch.nn as nn


class GRULM(nn.Module):
    def __init__(self, vocab_size, bidirectional):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, 16)
        self.rnn = nn.GRU(16, 16, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(32 if bidirectional else 16, vocab_size)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids.long()))[0])


def both_ways(vocab_size, max_length):
    return GRULM(vocab_size, True)


class NanoStyle(GRULM):
    # nanoGPT's forward: (logits, loss), the last position's logits alone when no targets are given
    def forward(self, ids, targets=None):
        return super().forward(ids)[:, [-1], :], None


def nano_style(vocab_size, max_length):
    return NanoStyle(vocab_size, False)


def one_way(vocab_size, max_length):
    return GRULM(vocab_size, False)
"""


def test_a_language_models_progress_line_shows_the_loss_it_is_timed_on(tmp_path, monkeypatch):
    import tqdm.auto

    shown: list[dict] = []

    class Bar(tqdm.auto.tqdm):  # the real bar (others subclass it), its postfixes recorded
        def set_postfix(self, ordered_dict=None, refresh=True, **kwargs) -> None:
            shown.append(dict(ordered_dict or {}, **kwargs))
            super().set_postfix(ordered_dict, refresh, **kwargs)

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    cfg = TrainConfig.from_dict(lm_config(corpus(tmp_path / "c.txt"), epochs=0.05, eval_every=0.05))
    r = train(cfg, data_root=tmp_path / "data", progress=True, test=False)
    assert shown and all(set(s) == {"val_loss"} for s in shown)
    assert shown[-1]["val_loss"] == f"{r.history[-1].val_loss:.4f}"


def test_a_config_family_with_no_causal_lm_is_refused_in_one_short_line(tmp_path):
    """transformers' own error lists every config its Auto class knows (hundreds, over lines): the
    refusal names the family and a few that have one instead."""
    pytest.importorskip("transformers")
    model = {"name": "hf:DistilBertConfig", "kwargs": {"dim": 32, "n_layers": 1, "n_heads": 2, "hidden_dim": 64}}
    cfg = TrainConfig.from_dict(lm_config(corpus(tmp_path / "c.txt"), model=model))
    with pytest.raises(ConfigError) as e:
        train(cfg, data_root=tmp_path / "data", progress=False)
    assert e.value.field == "model.name" and "no causal language model for DistilBertConfig" in e.value.message
    assert "\n" not in e.value.message and len(e.value.message) < 200, e.value.message
