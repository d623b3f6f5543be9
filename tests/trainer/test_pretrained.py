"""A pretrained transformers model (``model.name: hf:FOLDER``, the folder ``save_pretrained``
wrote) fine-tuned with its own tokenizer file: it sees the ids and the layout its own tokenizer
gives ([CLS] text [SEP] for BERT, <s> text </s> for RoBERTa, GPT-2's last token), its weights
as saved; refused, naming the field, without its tokenizer or without the folder."""

import json

import pytest
import torch
import yaml

import effsearch
from effsearch.cli import main
from effsearch.config import ConfigError, ModelConfig, TrainConfig
from effsearch.trainer.data import text, tokenizer
from effsearch.trainer.models import build_network
from tests.support.text import byte_bpe_tokenizer, texts, tiny_text, write_jsonl

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

SIZE = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}


def wordpiece(specials):
    t = tokenizers
    tok = t.Tokenizer(t.models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = t.normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = t.pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts(120)[0], t.trainers.WordPieceTrainer(vocab_size=150, special_tokens=specials))
    return tok


def save_bert(folder):
    """BERT's layout: [PAD] 0, [CLS] ... [SEP] by the template, padding on (as HF saves it)."""
    t = tokenizers
    tok = wordpiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.post_processor = t.processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    config = transformers.BertConfig(vocab_size=tok.get_vocab_size(), max_position_embeddings=64, num_labels=3, **SIZE)
    return tok, transformers.BertForSequenceClassification(config)


def save_roberta(folder):
    """RoBERTa's: <s> 0, <pad> 1, </s> 2; positions counted past the padding id."""
    t = tokenizers
    tok = wordpiece(["<s>", "<pad>", "</s>", "[UNK]"])
    tok.post_processor = t.processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    config = transformers.RobertaConfig(
        vocab_size=tok.get_vocab_size(), max_position_embeddings=66, num_labels=3, pad_token_id=1, **SIZE
    )
    return tok, transformers.RobertaForSequenceClassification(config)


def save_gpt2(folder):
    """GPT-2's: byte-level BPE, no template, no padding id; the classifier reads the last token."""
    tok = byte_bpe_tokenizer(texts(120)[0])
    config = transformers.GPT2Config(
        vocab_size=tok.get_vocab_size(),
        n_positions=64,
        n_embd=16,
        n_layer=1,
        n_head=2,
        num_labels=3,
        bos_token_id=0,
        eos_token_id=0,
    )
    return tok, transformers.GPT2ForSequenceClassification(config)


FAMILIES = {"bert": save_bert, "roberta": save_roberta, "gpt2": save_gpt2}


def saved(folder, family):
    torch.manual_seed(0)
    tok, model = FAMILIES[family](folder)
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    return tok, model.eval()


def cfg_for(data, folder, **overrides):
    return TrainConfig.from_dict(
        tiny_text(
            data,
            **{
                "model": {"name": f"hf:{folder}"},
                "dataset.tokenizer": {"name": "file", "path": str(folder)},
                **overrides,
            },
        )
    )


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_pretrained_model_gives_what_it_gives_on_its_own_tokenizers_ids(family, tmp_path):
    """effsearch's rows (its ids, its padding, batches of texts of many lengths) through the model
    it built from the folder give the logits the saved model gives each text encoded by its own
    tokenizer, alone: the weights as saved, the ids its own, its [CLS] and [SEP] in place."""
    folder = tmp_path / family
    tok, model = saved(folder, family)
    cfg = cfg_for(tmp_path / "t.jsonl", folder)
    shape = text.token_shape(cfg.dataset)
    net = build_network(ModelConfig(name=f"hf:{folder}"), 0, 3, tokens=shape).eval()
    sample = texts(12, seed=1)[0]
    rows = torch.from_numpy(tokenizer.rows_of(tokenizer.from_file(str(folder)), sample, 60)).long()
    with torch.no_grad():
        ours = net(rows)
        for i, t in enumerate(sample):
            ids = tok.encode(t, add_special_tokens=True).ids
            if family == "gpt2":
                ids = [0, *ids]  # effsearch starts a text with GPT-2's start of text, its <|endoftext|>
            assert len(ids) < 60  # none cut short
            theirs = model(input_ids=torch.tensor([ids])).logits[0]
            assert torch.allclose(ours[i], theirs, atol=1e-5), (i, t)


def test_a_pretrained_bert_fine_tunes_from_the_cli_and_keeps_a_changed_label_count(tmp_path, capsys):
    """Trained end to end by `effsearch train`; the saved head had 3 labels, the data has 2: the
    head is the data's (fresh), the rest the checkpoint's."""
    folder = tmp_path / "bert"
    saved(folder, "bert")
    data = tmp_path / "t.jsonl"
    with open(data, "w") as f:
        for x, y in zip(*texts(160)):
            f.write(json.dumps({"text": x, "label": "sports" if y == "sports" else "other"}) + "\n")
    c = tmp_path / "c.yaml"
    c.write_text(yaml.safe_dump(cfg_for(data, folder, epochs=1).to_dict()))
    assert main(["train", str(c), "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["status"] == "completed"


def test_a_pretrained_model_without_its_tokenizer_or_folder_is_refused_naming_the_field(tmp_path, capsys):
    folder = tmp_path / "bert"
    saved(folder, "bert")
    data = write_jsonl(tmp_path / "t.jsonl")
    bpe = TrainConfig.from_dict(tiny_text(data, **{"model": {"name": f"hf:{folder}"}}))
    with pytest.raises(ConfigError, match="reads its own tokenizer's ids") as e:
        effsearch.train(bpe, data_dir=tmp_path / "data", progress=False)
    assert e.value.field == "dataset.tokenizer.name"
    c = tmp_path / "c.yaml"
    c.write_text(yaml.safe_dump(cfg_for(data, tmp_path / "no-such-model").to_dict()))
    assert main(["train", str(c), "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "model.name" in err and "config.json" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "data" / "text-cache").exists()


def test_a_pretrained_folder_without_weights_a_misspelt_field_or_an_unknown_family_is_refused(tmp_path, capsys):
    """Each exits 2 in one line naming the field, before any text is read: transformers would keep
    a misspelt field unused, and says an unknown model_type in two paragraphs."""
    folder = tmp_path / "bert"
    saved(folder, "bert")
    capsys.readouterr()  # save_pretrained's progress bar
    data = write_jsonl(tmp_path / "t.jsonl")
    c = tmp_path / "c.yaml"

    def refused(cfg, words):
        c.write_text(yaml.safe_dump(cfg.to_dict()))
        assert main(["train", str(c), "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "out").exists() and not (tmp_path / "data").exists()

    refused(
        cfg_for(data, folder, **{"model.kwargs": {"hiden_dropout_prob": 0.2}}),
        "model.kwargs.hiden_dropout_prob: hf:" + str(folder) + " (BertConfig) has no field 'hiden_dropout_prob' "
        "(did you mean 'hidden_dropout_prob'?)",
    )
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "bertx"}))
    refused(cfg_for(data, folder), "model.name: hf:" + str(folder) + ": transformers cannot read its config.json: ")
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").unlink()
    refused(cfg_for(data, folder), "holds a config.json and no weights")


FACTORY = """
import transformers

def pretrained(vocab_size, num_classes, max_length, folder):
    return transformers.AutoModelForSequenceClassification.from_pretrained(folder, num_labels=num_classes)
"""


def test_a_factory_returning_a_pretrained_model_reads_its_own_ids_or_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "bert"
    _, model = saved(folder, "bert")
    (tmp_path / "myfactory.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = ModelConfig(name="myfactory:pretrained", kwargs={"folder": str(folder)})
    shape = text.token_shape(cfg_for(tmp_path / "t.jsonl", folder).dataset)
    net = build_network(spec, 0, 3, tokens=shape).eval()
    sample = texts(4, seed=2)[0]
    rows = torch.from_numpy(tokenizer.rows_of(tokenizer.from_file(str(folder)), sample, 60)).long()
    own = tokenizer.from_file(str(folder)).tok
    with torch.no_grad():
        theirs = [model(input_ids=torch.tensor([own.encode(t).ids])).logits[0] for t in sample]
        assert torch.allclose(net(rows), torch.stack(theirs), atol=1e-5)
    trained_bpe = text.token_shape(TrainConfig.from_dict(tiny_text(tmp_path / "t.jsonl")).dataset)
    with pytest.raises(ConfigError, match="returned a pretrained model") as e:
        build_network(spec, 0, 3, tokens=trained_bpe)
    assert e.value.field == "dataset.tokenizer.name"


def test_a_pretrained_language_model_scores_each_effsearch_id_as_its_own(tmp_path):
    """A causal LM from its folder on a language model's corpus: logits one per effsearch id, each
    the model's for that id's own token (a document's end its <|endoftext|>)."""
    folder = tmp_path / "gpt2"
    tok, classifier = saved(folder, "gpt2")
    lm = transformers.GPT2LMHeadModel(classifier.config).eval()
    lm.save_pretrained(folder)
    shape = tokenizer.TokenShape(tok.get_vocab_size() + 4, 32, causal=True, own=tokenizer.from_file(str(folder)).own())
    net = build_network(ModelConfig(name=f"hf:{folder}"), 0, 0, tokens=shape).eval()
    ids = torch.tensor([[tokenizer.SEP, *(4 + torch.tensor(tok.encode("team score goal").ids)).tolist()]])
    with torch.no_grad():
        ours = net(ids)
        theirs = lm(input_ids=torch.tensor([[0, *tok.encode("team score goal").ids]])).logits
    assert ours.shape == (1, ids.shape[1], shape.vocab_size)
    assert torch.allclose(ours[..., 4:], theirs[..., : shape.vocab_size - 4], atol=1e-5)
    assert torch.allclose(ours[..., tokenizer.SEP], theirs[..., 0], atol=1e-5)


def test_gated_linear_units_are_refused_on_a_pretrained_bert_and_left_to_a_fresh_one(tmp_path):
    """GatedLinearUnits builds BERT's feed-forward blocks afresh: on a pretrained BERT it would throw
    the checkpoint's away. Decided from the probed model (weights loaded), not from its name."""
    from effsearch.trainer.probe import check_config

    folder = tmp_path / "bert"
    saved(folder, "bert")
    data = write_jsonl(tmp_path / "t.jsonl")
    glu = {"algorithms": {"gated_linear_units": {}}}
    with pytest.raises(ConfigError, match="is pretrained and would lose its own") as e:
        check_config(cfg_for(data, folder, **glu))
    assert e.value.field == "algorithms.gated_linear_units"
    fresh = {"name": "hf:BertConfig", "kwargs": {**SIZE, "max_position_embeddings": 64}}
    check_config(cfg_for(data, folder, model=fresh, **glu))  # the same family with fresh weights takes it


def test_a_pretrained_models_space_searches_fine_tuning_learning_rates(tmp_path):
    """The probed model says it is pretrained: AdamW's lr from 1e-5, a decade under a fresh model's."""
    from effsearch.spaces import Machine, Space
    from effsearch.trainer.probe import check_config

    folder = tmp_path / "bert"
    saved(folder, "bert")
    data = write_jsonl(tmp_path / "t.jsonl")
    fresh = {"name": "hf:BertConfig", "kwargs": {**SIZE, "max_position_embeddings": 64}}
    ranges = {}
    for which, overrides in (("pretrained", {}), ("fresh", {"model": fresh})):
        base = cfg_for(data, folder, **{"optimizer.lr": 3e-5, **overrides})  # inside both: the range holds the base
        check_config(base)  # the probe, as a study's set-up runs it
        dim = next(d for d in Space.build(base, {}, Machine()).dims if d.name == "optimizer.lr@adamw")
        ranges[which] = (dim.low, dim.high)
    assert ranges == {"pretrained": (1e-5, 1e-3), "fresh": (1e-4, 1e-2)}
