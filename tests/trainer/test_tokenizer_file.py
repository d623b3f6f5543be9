"""A user's own tokenizer.json (dataset.tokenizer.name file): read, not trained; its ids moved past
effsearch's special tokens; its padding and truncation not used, its template's ends as CLS and
SEP; its content in the token cache's key; refused naming dataset.tokenizer.path when missing, not
a tokenizer, or (for a language model) a WordPiece."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

import effsearch
from effsearch.cli import main
from effsearch.config import ConfigError, TrainConfig
from effsearch.trainer.data import lmdata, text, tokenizer
from effsearch.trainer.data.splits import load_splits
from tests.support.text import byte_bpe_tokenizer, corpus, lm_config, texts, tiny_text, write_jsonl

tokenizers = pytest.importorskip("tokenizers")


def bert_like(path, vocab=200):
    """A WordPiece tokenizer.json as a BERT's is saved: [CLS] ... [SEP] added by its post-processor,
    padding to 64 and truncation at 4 on: none of which a row may show."""
    t = tokenizers
    tok = t.Tokenizer(t.models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = t.normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = t.pre_tokenizers.BertPreTokenizer()
    trainer = t.trainers.WordPieceTrainer(vocab_size=vocab, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    tok.train_from_iterator(texts(120)[0], trainer)
    tok.post_processor = t.processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    tok.enable_padding(pad_id=0, pad_token="[PAD]", length=64)
    tok.enable_truncation(max_length=4)
    tok.save(str(path))
    return path


def byte_bpe(path, docs):
    byte_bpe_tokenizer(docs).save(str(path))
    return path


def file_cfg(data, tok, **overrides):
    return TrainConfig.from_dict(
        tiny_text(data, **{"dataset.tokenizer": {"name": "file", "path": str(tok)}, **overrides})
    )


def test_a_bert_tokenizer_file_gives_rows_of_its_ids_moved_past_the_special_tokens(tmp_path):
    data, tok_file = write_jsonl(tmp_path / "t.jsonl"), bert_like(tmp_path / "tokenizer.json")
    cfg = file_cfg(data, tok_file)
    theirs = tokenizers.Tokenizer.from_file(str(tok_file))
    assert text.token_shape(cfg.dataset).vocab_size == theirs.get_vocab_size() + 4
    s = load_splits(cfg, tmp_path / "data")
    assert s.tokens.vocab_size == theirs.get_vocab_size() + 4
    made = text.tokenized(cfg.dataset, tmp_path / "data")
    rows = made.arrays["train_x"]
    assert (rows[:, 0] == tokenizer.CLS).all()
    # The file's truncation at 4 and padding are not applied, and its template's [CLS] and [SEP] are
    # effsearch's: a row is CLS, the text's word pieces (each the file's id + 4, cut to max_length),
    # SEP (the template closes a text with one), then effsearch's padding.
    theirs.no_truncation()
    theirs.no_padding()
    assert (rows != tokenizer.PAD).sum(1).max() > 5
    expected = set()
    for e in theirs.encode_batch(texts(240)[0], add_special_tokens=False):
        ids = [tokenizer.CLS, *(np.asarray(e.ids[:22]) + 4), tokenizer.SEP]
        expected.add(tuple(ids + [tokenizer.PAD] * (24 - len(ids))))
    assert all(tuple(int(i) for i in row) in expected for row in rows)
    # And it trains, from the Python API.
    result = effsearch.train(file_cfg(data, tok_file, epochs=1), data_dir=tmp_path / "data", progress=False)
    assert result.status == "completed" and result.final.val_accuracy > 0.34


def test_the_folder_save_pretrained_wrote_stands_for_its_tokenizer_json(tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl")
    (tmp_path / "my-tokenizer").mkdir()
    tok_file = bert_like(tmp_path / "my-tokenizer" / "tokenizer.json")
    (tmp_path / "my-tokenizer" / "tokenizer_config.json").write_text("{}")
    by_folder = text.tokenized(file_cfg(data, tmp_path / "my-tokenizer").dataset, tmp_path / "data")
    by_file = text.tokenized(file_cfg(data, tok_file).dataset, tmp_path / "data")
    assert np.array_equal(by_folder.arrays["train_x"], by_file.arrays["train_x"])


def test_an_edited_tokenizer_file_makes_a_new_cache(tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl")
    tok_file = bert_like(tmp_path / "tokenizer.json", vocab=200)
    first = text.tokenized(file_cfg(data, tok_file).dataset, tmp_path / "data")
    again = text.tokenized(file_cfg(data, tok_file).dataset, tmp_path / "data")
    assert again.facts == first.facts and np.array_equal(again.arrays["train_x"], first.arrays["train_x"])
    bert_like(tok_file, vocab=120)
    edited = text.tokenized(file_cfg(data, tok_file).dataset, tmp_path / "data")
    assert edited.facts["vocab_size"] < first.facts["vocab_size"]
    assert len(list((tmp_path / "data" / "text-cache").glob("[!.]*"))) == 2


def test_a_byte_level_bpe_file_counts_each_tokens_bytes_for_a_language_model(tmp_path):
    path = corpus(tmp_path / "c.txt", n=60)
    docs = path.read_text().split("\n\n")
    tok_file = byte_bpe(tmp_path / "tokenizer.json", docs)
    cfg = TrainConfig.from_dict(lm_config(path, **{"dataset.tokenizer": {"name": "file", "path": str(tok_file)}}))
    made = lmdata.tokenized(cfg.dataset, tmp_path / "data")
    a = made.arrays
    # Bits per byte divide by the text's bytes: every document's bytes and one for its end.
    tok = tokenizer.load(made.tokenizer)
    for split in ("train", "val", "test"):
        stream = a[split]
        text_bytes = sum(
            len(tok.decode(d).encode()) + 1 for d in np.split(stream, np.flatnonzero(stream == 2) + 1)[:-1]
        )
        assert a["token_bytes"][stream].sum() == text_bytes
    # The file's own special token counts no bytes.
    assert a["token_bytes"][4 + tokenizers.Tokenizer.from_file(str(tok_file)).token_to_id("<|endoftext|>")] == 0


def test_sentencepiece_pieces_count_the_space_they_stand_for_and_a_byte_piece_one():
    t = tokenizers
    tok = t.Tokenizer(t.models.Unigram([("<unk>", 0.0), ("\u2581the", -1.0), ("<0x0A>", -2.0), ("é", -3.0)], 0))
    got = tokenizer.FileTokenizer(tok).token_bytes()
    assert list(got[4:]) == [len("<unk>"), 4, 1, 2]


def test_a_wordpiece_file_is_refused_as_a_language_models_tokenizer(tmp_path):
    path = corpus(tmp_path / "c.txt", n=60)
    tok_file = bert_like(tmp_path / "tokenizer.json")
    cfg = TrainConfig.from_dict(lm_config(path, **{"dataset.tokenizer": {"name": "file", "path": str(tok_file)}}))
    with pytest.raises(ConfigError, match="WordPiece") as e:
        lmdata.tokenized(cfg.dataset, tmp_path / "data")
    assert e.value.field == "dataset.tokenizer.path"


@pytest.mark.parametrize(
    "tok, words",
    [
        ({"name": "file"}, "set it"),
        ({"name": "bpe", "path": "tokenizer.json"}, "only applies to dataset.tokenizer.name 'file'"),
    ],
)
def test_a_file_tokenizer_without_its_path_or_a_path_without_it_is_refused(tok, words, tmp_path):
    with pytest.raises(ConfigError, match=words) as e:
        TrainConfig.from_dict(tiny_text(tmp_path / "t.jsonl", **{"dataset.tokenizer": tok}))
    assert e.value.field == "dataset.tokenizer.path"


@pytest.mark.parametrize("content", [None, "{}", "not json at all", "unreadable"])
def test_a_missing_or_broken_tokenizer_file_exits_2_naming_the_field_and_writes_nothing(
    content, tmp_path, capsys, monkeypatch
):
    data = write_jsonl(tmp_path / "t.jsonl")
    tok_file = tmp_path / "tokenizer.json"
    if content is not None:
        tok_file.write_text(content)
    if content == "unreadable":  # as chmod 000 makes it for anyone but root, who reads everything
        read = Path.read_bytes

        def refuse(self):
            if self == tok_file:
                raise PermissionError(13, "Permission denied", str(self))
            return read(self)

        monkeypatch.setattr(Path, "read_bytes", refuse)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(tiny_text(data, **{"dataset.tokenizer": {"name": "file", "path": str(tok_file)}})))
    out, cache = tmp_path / "out", tmp_path / "data"
    assert main(["train", str(cfg), "--data-dir", str(cache), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "dataset.tokenizer.path" in err and "Traceback" not in err, err
    words = {None: "is not a file", "unreadable": f"cannot read {tok_file}: Permission denied"}
    assert words.get(content, "is not a tokenizer JSON file") in err, err
    assert not out.exists() and not (cache / "text-cache").exists()


def test_data_prepare_takes_the_tokenizer_path(tmp_path, capsys):
    data, tok_file = write_jsonl(tmp_path / "t.jsonl"), bert_like(tmp_path / "tokenizer.json")
    args = ["data", "prepare", "jsonl", "--path", str(data), "--tokenizer", "file", "--tokenizer-path", str(tok_file)]
    assert main([*args, "--data-dir", str(tmp_path / "data")]) == 0
    cached = list((tmp_path / "data" / "text-cache").glob("[!.]*"))
    assert len(cached) == 1
    saved = json.loads((cached[0] / "tokenizer.json").read_text())
    assert saved["effsearch"] == "file"


@pytest.mark.parametrize("given", ["file", "folder"])
def test_a_sentencepiece_model_is_refused_with_how_to_write_its_tokenizer_json(given, tmp_path, capsys):
    """Llama's and T5's tokenizer.model (SentencePiece protobuf): the refusal says how to get the
    tokenizer.json effsearch reads, whether the file itself or its folder was given."""
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "tokenizer.model").write_bytes(b"\n\x0e\n\x05<unk>\x15\x00\x00\x00\x00\x18\x02\xff\xfe")
    path = folder / "tokenizer.model" if given == "file" else folder
    cfg = tmp_path / "c.yaml"
    data = write_jsonl(tmp_path / "t.jsonl")
    cfg.write_text(yaml.safe_dump(tiny_text(data, **{"dataset.tokenizer": {"name": "file", "path": str(path)}})))
    assert main(["train", str(cfg), "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "dataset.tokenizer.path" in err and "Traceback" not in err, err
    assert "tokenizer.model looks like a SentencePiece model" in err and "save_pretrained" in err, err
    assert not (tmp_path / "out").exists()
