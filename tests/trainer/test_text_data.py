"""Text data: JSONL, CSV, hf and an import path read into splits of token rows; labels mapped in a
stable order; the tokenizer trained on the training split only; the token cache read on the second
load, rebuilt (with one warning) when damaged, and never written by input it refuses."""

import json
import sys
import types
import warnings

import numpy as np
import pytest
import torch

from effsearch.config import ConfigError, TrainConfig
from effsearch.trainer.data import text, textcache, tokenizer
from effsearch.trainer.data.splits import load_splits
from effsearch.trainer.data.textbatches import TokenBatch, TokenBatches
from tests.support.text import texts, tiny_text, write_jsonl


def cfg_of(path, **overrides):
    return TrainConfig.from_dict(tiny_text(path, **overrides))


def splits_of(path, root, **overrides):
    return load_splits(cfg_of(path, **overrides), root)


def test_jsonl_loads_into_token_rows_with_a_cls_first_and_padding(tmp_path):
    s = splits_of(write_jsonl(tmp_path / "t.jsonl"), tmp_path / "data")
    assert s.tokens is not None and s.tokens.max_length == 24 and s.tokens.vocab_size <= 300
    assert s.train_x.dtype == torch.int32 and s.train_x.shape[1] == 24
    assert (s.train_x[:, 0] == tokenizer.CLS).all()
    # 240 rows: a test split of 0.2 carved, then validation 0.2 of the rest; three classes, sorted.
    assert (len(s.train_y), len(s.val_y), len(s.test_y)) == (153, 39, 48)
    assert s.num_classes == 3 and sorted(set(s.train_y.tolist())) == [0, 1, 2]
    # Each row is [CLS], tokens, then padding only: no padding inside a text.
    lengths = (s.train_x != tokenizer.PAD).sum(1)
    assert all((row[:n] != tokenizer.PAD).all() for row, n in zip(s.train_x, lengths))


def test_labels_are_mapped_in_sorted_order_and_classes_keeps_and_orders(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl")
    made = text.tokenized(cfg_of(path).dataset, tmp_path / "data")
    assert made.facts["classes"] == ["music", "science", "sports"]
    kept = cfg_of(path, **{"dataset.classes": ["sports", "music"]})
    made = text.tokenized(kept.dataset, tmp_path / "data")
    assert made.facts["classes"] == ["sports", "music"]
    assert sum(len(made.arrays[f"{s}_y"]) for s in text.SPLITS) == 160  # science's 80 rows left out


def test_a_given_split_column_is_used_as_it_is(tmp_path):
    s = splits_of(write_jsonl(tmp_path / "t.jsonl", split=True), tmp_path / "data")
    assert len(s.test_y) == 48  # every fifth row, as the file says
    assert len(s.train_y) + len(s.val_y) == 192


def test_the_tokenizer_learns_from_the_training_split_only(tmp_path):
    path = tmp_path / "t.jsonl"
    xs, ys = texts(120)
    rows = [{"text": x, "label": y, "split": "train"} for x, y in zip(xs, ys)]
    rows += [{"text": "zyzzyva quokka " * 3, "label": ys[0], "split": "test"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    made = text.tokenized(cfg_of(path, **{"dataset.tokenizer.name": "wordpiece"}).dataset, tmp_path / "data")
    tok = tokenizer.load(made.tokenizer)
    vocab = tok.tok.get_vocab()
    assert "zyzzyva" not in vocab and "quokka" not in vocab  # a test word: never learnt
    assert "guitar" in vocab  # a training word


@pytest.mark.parametrize("name", ["bytes", "bpe", "wordpiece"])
def test_each_tokenizer_saves_and_loads_the_same(name, tmp_path):
    xs, _ = texts(60)
    tok = tokenizer.train(name, 300, xs)
    again = tokenizer.load(tok.to_json())
    assert [list(a) for a in tok.encode(xs[:5])] == [list(b) for b in again.encode(xs[:5])]
    if name != "wordpiece":  # wordpiece lower-cases: bytes and bpe round-trip exactly
        assert tok.decode(tok.encode(["Héllo, wörld!"])[0]) == "Héllo, wörld!"
    assert tok.vocab_size == (260 if name == "bytes" else tok.vocab_size) and min(tok.encode(xs)[0]) >= 3


def test_a_text_spelling_a_special_token_gets_no_padding_inside_it():
    tok = tokenizer.train("bpe", 300, ["a text [PAD] with [CLS] in it"] * 10)
    ids = tok.encode(["x [PAD] y [CLS]"])[0]
    assert tokenizer.PAD not in ids and tokenizer.CLS not in ids


def test_csv_reads_a_header_and_integer_labels_sort_as_numbers(tmp_path):
    xs, ys = texts(90)
    code = {"music": 10, "science": 2, "sports": 1}
    path = tmp_path / "t.csv"
    path.write_text("label,text\n" + "".join(f'{code[y]},"{x}, and more"\n' for x, y in zip(xs, ys)))
    made = text.tokenized(cfg_of(path, **{"dataset.name": "csv"}).dataset, tmp_path / "data")
    assert made.facts["classes"] == [1, 2, 10]
    tsv = tmp_path / "t.tsv"  # tab-separated: the same rows, commas inside the texts
    tsv.write_text("label\ttext\n" + "".join(f"{code[y]}\t{x}, and more\n" for x, y in zip(xs, ys)))
    made = text.tokenized(cfg_of(tsv, **{"dataset.name": "csv"}).dataset, tmp_path / "data")
    assert made.facts["classes"] == [1, 2, 10]
    # A spreadsheet's export where the comma is the decimal mark: semicolons, commas in the texts.
    semi = tmp_path / "excel.csv"
    semi.write_text("label;text\n" + "".join(f'{code[y]};"{x}; 2,5 and more"\n' for x, y in zip(xs, ys)))
    made = text.tokenized(cfg_of(semi, **{"dataset.name": "csv"}).dataset, tmp_path / "data")
    assert made.facts["classes"] == [1, 2, 10] and sum(len(made.arrays[f"{s}_y"]) for s in text.SPLITS) == 90


def test_an_import_path_returning_texts_is_text(tmp_path, monkeypatch):
    xs, ys = texts(120)
    mod = types.ModuleType("tests_text_source")
    mod.load = lambda: {"x_train": xs[:90], "y_train": ys[:90], "x_test": xs[90:], "y_test": ys[90:]}
    monkeypatch.setitem(sys.modules, "tests_text_source", mod)
    s = splits_of(
        tmp_path / "unused", tmp_path / "data", **{"dataset.name": "tests_text_source:load", "dataset.path": None}
    )
    assert s.tokens is not None and len(s.test_y) == 30 and s.num_classes == 3


def test_an_import_path_returning_pandas_columns_is_text(tmp_path, monkeypatch):
    """A DataFrame's columns (``df.text``, ``df.label``) are read as their numpy arrays."""
    pd = pytest.importorskip("pandas")
    xs, ys = texts(120)
    df = pd.DataFrame({"text": xs, "label": ys})
    mod = types.ModuleType("tests_pandas_source")
    mod.load = lambda: (df.text[:90], df.label[:90], df.text[90:], df.label[90:])
    monkeypatch.setitem(sys.modules, "tests_pandas_source", mod)
    s = splits_of(
        tmp_path / "unused", tmp_path / "data", **{"dataset.name": "tests_pandas_source:load", "dataset.path": None}
    )
    assert s.tokens is not None and len(s.test_y) == 30 and s.num_classes == 3


def test_hf_text_on_disk_is_text(tmp_path):
    datasets = pytest.importorskip("datasets")
    xs, ys = texts(90)
    ds = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"text": xs[:60], "label": ys[:60]}),
            "test": datasets.Dataset.from_dict({"text": xs[60:], "label": ys[60:]}),
        }
    )
    ds.save_to_disk(str(tmp_path / "hf"))
    s = splits_of(tmp_path / "hf", tmp_path / "data", **{"dataset.name": "hf"})
    assert s.tokens is not None and len(s.test_y) == 30 and s.num_classes == 3


def _glue_like(tmp_path, datasets, test_labels):
    """A saved DatasetDict whose label column is a ClassLabel, as GLUE's are."""
    xs, ys = texts(90)
    names = sorted(set(ys))
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=names)})

    def split(x, y):
        return datasets.Dataset.from_dict({"text": x, "label": y}, features=features)

    ds = datasets.DatasetDict(
        {"train": split(xs[:60], [names.index(v) for v in ys[:60]]), "test": split(xs[60:], test_labels)}
    )
    ds.save_to_disk(str(tmp_path / "hf"))
    return tmp_path / "hf"


def test_a_hf_split_with_no_labels_is_left_out_and_carved_instead(tmp_path, caplog):
    """GLUE's test splits are -1 throughout (datasets' mark for no label): such a split is left out,
    with a warning, and the test split carved from the training rows; -1 in a split that has labels
    is refused naming the row."""
    datasets = pytest.importorskip("datasets")
    root = _glue_like(tmp_path, datasets, [-1] * 30)
    with caplog.at_level("WARNING", logger="effsearch"):
        s = splits_of(root, tmp_path / "data", **{"dataset.name": "hf"})
    assert s.num_classes == 3 and len(s.test_y) == 12  # 0.2 of the 60 training rows, not the 30 unlabelled
    assert "test split" in caplog.text and "no labels" in caplog.text
    root = _glue_like(tmp_path / "partly", datasets, [0] * 29 + [-1])
    with pytest.raises(ConfigError, match=r"dataset.label_column.*row 29 of the test split .* no label"):
        splits_of(root, tmp_path / "data2", **{"dataset.name": "hf"})


def test_hf_splits_are_read_by_their_names_and_others_left_out_with_a_warning(tmp_path, caplog):
    """dev is a validation split; IMDB's unsupervised (or MNLI's validation_matched) is not read, and
    says so; two validation splits are refused naming both."""
    datasets = pytest.importorskip("datasets")
    xs, ys = texts(120)

    def split(a, b):
        return datasets.Dataset.from_dict({"text": xs[a:b], "label": ys[a:b]})

    parts = {"train": split(0, 60), "dev": split(60, 90), "unsupervised": split(90, 120)}
    datasets.DatasetDict(parts).save_to_disk(str(tmp_path / "hf"))
    with caplog.at_level("WARNING", logger="effsearch"):
        s = splits_of(tmp_path / "hf", tmp_path / "data", **{"dataset.name": "hf"})
    assert len(s.val_y) == 30 and len(s.train_y) + len(s.test_y) == 60  # dev given; test carved from train
    assert "the unsupervised split of" in caplog.text and "is not read" in caplog.text
    datasets.DatasetDict({**parts, "validation": split(90, 120)}).save_to_disk(str(tmp_path / "two"))
    with pytest.raises(ConfigError, match="has the splits dev and validation: both are val; keep one"):
        splits_of(tmp_path / "two", tmp_path / "data2", **{"dataset.name": "hf"})


def test_the_second_load_reads_the_cache(tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "t.jsonl")
    d = cfg_of(path).dataset
    first = text.tokenized(d, tmp_path / "data")
    assert first.built and first.folder is not None

    def no_training(*_a, **_k):
        raise AssertionError("tokenized again")

    monkeypatch.setattr(tokenizer, "train", no_training)
    second = text.tokenized(d, tmp_path / "data")
    assert not second.built and second.folder == first.folder
    assert all(np.array_equal(first.arrays[k], second.arrays[k]) for k in first.arrays)


def test_other_settings_or_a_changed_file_make_another_cache(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl")
    root = tmp_path / "data"
    a = text.tokenized(cfg_of(path).dataset, root).folder
    b = text.tokenized(cfg_of(path, **{"dataset.max_length": 16}).dataset, root).folder
    c = text.tokenized(cfg_of(path, **{"dataset.val_fraction": 0.1}).dataset, root).folder
    write_jsonl(path, n=210)
    d = text.tokenized(cfg_of(path).dataset, root)
    assert len({a, b, c, d.folder}) == 4 and d.built


@pytest.mark.parametrize("damage", ["truncate", "meta", "tokenizer"])
def test_a_damaged_cache_is_rebuilt_with_one_warning(tmp_path, damage):
    path = write_jsonl(tmp_path / "t.jsonl")
    d = cfg_of(path).dataset
    folder = text.tokenized(d, tmp_path / "data").folder
    if damage == "truncate":
        (folder / "train_x.npy").write_bytes((folder / "train_x.npy").read_bytes()[:100])
    elif damage == "meta":
        (folder / "meta.json").write_text("{not json")
    else:
        (folder / "tokenizer.json").write_text('{"effsearch": "bytes"}')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = text.tokenized(d, tmp_path / "data")
    said = [str(w.message) for w in caught if "token cache" in str(w.message)]
    assert again.built and len(said) == 1 and "rebuilding it" in said[0]
    assert textcache.read(folder, json.loads((folder / "meta.json").read_text())["key"])[0] is not None


def test_batches_are_cut_to_their_longest_text_and_keep_the_mask_columns(tmp_path):
    s = splits_of(write_jsonl(tmp_path / "t.jsonl"), tmp_path / "data")
    lengths = (s.train_x != 0).sum(1)
    batches = TokenBatches(s.train_x, s.train_y, 16, 0, "cpu")
    seen = 0
    for x, y in batches:
        assert x.shape[1] == int((x != 0).sum(1).max()) and x.shape[1] <= 24
        seen += len(y)
    assert seen == len(s.train_y) and int(lengths.max()) <= 24
    full = next(iter(TokenBatches(s.train_x, s.train_y, 16, 0, "cpu", full=True)))[0]
    assert full.shape[1] == 24
    x = TokenBatch("cpu", train=False)((s.val_x, s.val_y))[0]
    assert x.shape[1] == int((s.val_x != 0).sum(1).max())


def test_data_prepare_tokenizes_ahead_and_then_reads(tmp_path, capsys):
    from effsearch.cli import main

    path = write_jsonl(tmp_path / "t.jsonl")
    args = ["data", "prepare", "jsonl", "--path", str(path), "--vocab-size", "300", "--data-dir", str(tmp_path / "d")]
    assert main(args) == 0
    assert "tokenized into" in capsys.readouterr().err
    assert main(args) == 0
    out = capsys.readouterr()
    assert "read from" in out.err and "3 classes" in out.out


def test_data_prepare_refuses_an_ffcv_flag_on_text(tmp_path, capsys):
    from effsearch.cli import main

    path = write_jsonl(tmp_path / "t.jsonl")
    assert main(["data", "prepare", "jsonl", "--path", str(path), "--force", "--data-dir", str(tmp_path / "d")]) == 2
    assert "--force: applies to FFCV" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_boolean_labels_are_the_classes_false_and_true(tmp_path):
    """``"spam": true`` (jsonl, or an hf column of bools) is a label: it had been refused."""
    xs, ys = texts(120)
    path = tmp_path / "spam.jsonl"
    path.write_text("".join(json.dumps({"text": x, "spam": y == ys[0]}) + "\n" for x, y in zip(xs, ys)))
    made = text.tokenized(cfg_of(path, **{"dataset.label_column": "spam"}).dataset, tmp_path / "data")
    assert made.facts["classes"] == [False, True]
    held = sum(int(made.arrays[f"{split}_y"].sum()) for split in text.SPLITS)
    assert held == sum(y == ys[0] for y in ys)  # true is class 1, on the rows that said so


def test_a_refused_file_writes_no_cache(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"text": "fine words", "label": "a"}\n{"text": "", "label": "b"}\n')
    with pytest.raises(ConfigError, match="line 2 of .* has an empty text"):
        load_splits(cfg_of(path), tmp_path / "data")
    assert not (tmp_path / "data").exists()


def test_a_group_column_keeps_each_group_on_one_side(tmp_path):
    xs, ys = texts(300)
    path = tmp_path / "t.jsonl"
    # Groups of nine rows of one topic (a source package and its -data and -doc packages); each text
    # starts with its group's name, which the bytes tokenizer keeps readable in the token rows.
    rows = [{"text": f"g{i // 9}: {x}", "label": y, "source": f"g{i // 9}"} for i, (x, y) in enumerate(zip(xs, ys))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    change = {"dataset.group_column": "source", "dataset.tokenizer.name": "bytes", "dataset.val_fraction": 0.25}
    made = text.tokenized(cfg_of(path, **change).dataset, tmp_path / "data")
    tok = tokenizer.load(made.tokenizer)
    sides = [{tok.decode(r[1:]).split(":")[0] for r in made.arrays[f"{s}_x"]} for s in text.SPLITS]
    assert all(sides) and not (sides[0] & sides[1]) and not (sides[0] & sides[2]) and not (sides[1] & sides[2])
    assert sorted(set(made.arrays["val_y"].tolist())) == [0, 1, 2]  # stratified: every class held out


def test_a_group_column_missing_from_a_row_is_refused(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl")
    with pytest.raises(ConfigError, match="dataset.group_column: line 1 of .* has no 'source'"):
        load_splits(cfg_of(path, **{"dataset.group_column": "source"}), tmp_path / "data")
