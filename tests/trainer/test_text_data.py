"""Text data: JSONL, CSV, hf and an import path read into splits of token rows; labels mapped in a
stable order; the tokenizer trained on the training split only; the token cache read on the second
load, rebuilt (with one warning) when damaged, and never written by input it refuses."""

import json
import sys
import types

import numpy as np
import pytest
import torch

from effsearch.config import ConfigError, TrainConfig
from effsearch.trainer.data import text, textcache, textsources, tokenizer
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
def test_a_damaged_cache_is_rebuilt_with_one_warning(tmp_path, damage, caplog):
    path = write_jsonl(tmp_path / "t.jsonl")
    d = cfg_of(path).dataset
    folder = text.tokenized(d, tmp_path / "data").folder
    if damage == "truncate":
        (folder / "train_x.npy").write_bytes((folder / "train_x.npy").read_bytes()[:100])
    elif damage == "meta":
        (folder / "meta.json").write_text("{not json")
    else:
        (folder / "tokenizer.json").write_text('{"effsearch": "bytes"}')
    with caplog.at_level("WARNING", logger="effsearch"):
        again = text.tokenized(d, tmp_path / "data")
    said = [r.getMessage() for r in caplog.records if "token cache" in r.getMessage()]
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


# -- users' own files: what an audit found ---------------------------------------------------------

COLS = textsources.Columns("text", "label", "split")


def test_jsonl_keeps_unicode_line_separators_inside_strings(tmp_path):
    """U+2028, U+2029 and U+0085 are left raw inside strings by json.dumps(ensure_ascii=False) and
    JSON.stringify: only "\\n" (or "\\r\\n") ends a line, and line numbers count those alone."""
    path = tmp_path / "t.jsonl"
    rows = [{"text": f"one{c}two", "label": "a"} for c in ("\u2028", "\u2029", "\u0085")]
    path.write_bytes("".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows).encode())
    read = textsources.read_jsonl(path, COLS)
    assert read.texts == [r["text"] for r in rows] and read.lines == [1, 2, 3]
    with path.open("a", encoding="utf-8") as f:
        f.write("{not json\n")
    with pytest.raises(ConfigError, match="line 4 of .* is not JSON"):
        textsources.read_jsonl(path, COLS)
    path.write_bytes("".join(json.dumps(r, ensure_ascii=False) + "\r" for r in rows).encode())  # an old Mac's
    assert textsources.read_jsonl(path, COLS).texts == [r["text"] for r in rows]


@pytest.mark.parametrize("name", ["bytes", "bpe"])
def test_a_lone_surrogate_is_read_as_u_fffd_with_one_warning_and_trains(name, tmp_path, caplog, capsys):
    """ "\\ud83d" (half an emoji, cut by a scraper) had crashed the tokenizer with UnicodeEncodeError."""
    import yaml

    from effsearch.cli import main

    xs, ys = texts(120)
    lines = [json.dumps({"text": x, "label": y}) for x, y in zip(xs, ys)]
    for i in (3, 7):
        lines[i] = json.dumps({"text": "cut \ud83d emoji " + xs[i], "label": ys[i]})
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    read = textsources.read_jsonl(path, COLS)
    assert read.texts[3] == "cut \ufffd emoji " + xs[3]
    said = [r.getMessage() for r in caplog.records if "surrogate" in r.getMessage()]
    assert len(said) == 1 and "2 texts of" in said[0] and "line 4 of" in said[0] and str(path) in said[0]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(tiny_text(path, **{"dataset.tokenizer.name": name, "epochs": 1})))
    assert main(["train", str(cfg), "--data-dir", str(tmp_path / "d"), "--out", str(tmp_path / "o")]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_csv_labels_that_only_look_like_digits_stay_strings(tmp_path):
    """'²' and '--1' pass str.isdigit() but int() refuses them: labels are integers only when each is
    an ASCII integer."""
    path = tmp_path / "t.csv"
    path.write_text("text,label\nfirst words,²\nsecond words,--1\nthird words,1\n")
    assert textsources.read_csv(path, COLS).labels == ["²", "--1", "1"]
    path.write_text("text,label\nfirst words, -3 \nsecond words,12\n")
    assert textsources.read_csv(path, COLS).labels == [-3, 12]


@pytest.mark.parametrize("column", ["text", "label", "split"])
def test_a_csv_header_naming_a_column_twice_is_refused(column, tmp_path):
    path = tmp_path / "t.csv"
    header = ["text", "label", "split", column]
    path.write_text(",".join(header) + "\nsome words,a,train,other\n")
    with pytest.raises(ConfigError, match=f"dataset.path: the header of .*t.csv names the column '{column}' more"):
        textsources.read_csv(path, COLS)


def test_a_tsv_field_running_over_rows_is_refused_naming_where_it_starts(tmp_path):
    """Written unquoted, a text opening with '"' ran on to the next quote: 444 rows of 600 read."""
    xs, ys = texts(600)
    xs[100] = '"Quoted" at the start, ' + xs[100]
    xs[300] = "a quote in the middle " + xs[300] + '"'
    path = tmp_path / "t.tsv"
    path.write_text("text\tlabel\n" + "".join(f"{x}\t{y}\n" for x, y in zip(xs, ys)))
    assert len(textsources.read_csv(path, COLS).texts) == 600  # a closed quote is read as it is
    xs[100] = '"Unclosed at the start, ' + xs[101]
    path.write_text("text\tlabel\n" + "".join(f"{x}\t{y}\n" for x, y in zip(xs, ys)))
    with pytest.raises(ConfigError, match=r"line 102 of .*t.tsv has a field .*\(it runs on to line 302\).*quote"):
        textsources.read_csv(path, COLS)
    import csv

    with path.open("w", newline="") as f:  # a CSV writer's file: a text with a line break, quoted
        w = csv.writer(f, delimiter="\t")
        w.writerows(
            [
                ("text", "label"),
                *(((x + "\nsecond line") if i == 5 else x, y) for i, (x, y) in enumerate(zip(xs[200:], ys[200:]))),
            ]
        )
    assert textsources.read_csv(path, COLS).texts[5] == xs[205] + "\nsecond line"


@pytest.mark.parametrize("kind", ["gzip", "xz", "bzip2", "zstd"])
def test_a_compressed_file_not_named_gz_is_said_to_be_compressed(kind, tmp_path):
    import bz2
    import gzip
    import lzma

    data = write_jsonl(tmp_path / "t.jsonl").read_bytes()
    packed = {
        "gzip": gzip.compress,
        "xz": lzma.compress,
        "bzip2": bz2.compress,
        "zstd": lambda b: b"\x28\xb5\x2f\xfd" + bytes(range(128, 256)),
    }[kind](data)
    (tmp_path / "t.jsonl").write_bytes(packed)
    said = "name it t.jsonl.gz" if kind == "gzip" else "only gzip .* is read: decompress it"
    with pytest.raises(ConfigError, match=f"dataset.path: .*t.jsonl looks {kind}-compressed.*{said}"):
        textsources.read_jsonl(tmp_path / "t.jsonl", COLS)
    (tmp_path / "t.jsonl.gz").write_bytes(packed)  # named .gz, but not gzip
    if kind != "gzip":
        with pytest.raises(ConfigError, match=f"looks {kind}-compressed"):
            textsources.read_jsonl(tmp_path / "t.jsonl.gz", COLS)


def test_a_tab_separated_csv_is_said_to_be_tab_separated(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("text\tlabel\nsome words\ta\n")
    with pytest.raises(ConfigError, match="has no column 'text'.*looks tab-separated, so name it t.tsv"):
        textsources.read_csv(path, COLS)


def test_split_names_are_read_whatever_their_case_and_spaces(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("text,label,split\nwords one,a,TEST\nwords two,b, Valid \nwords three,a,Train\n")
    assert textsources.read_csv(path, COLS).splits == ["test", "val", "train"]


def test_csv_integer_labels_spelt_two_ways_are_refused(tmp_path):
    """ "1" and "01" had been merged into one class without a word."""
    xs, _ = texts(40)
    path = tmp_path / "t.csv"
    path.write_text("text,label\n" + "".join(f"{x},{['1', '2', '01'][i % 3]}\n" for i, x in enumerate(xs)))
    with pytest.raises(ConfigError, match=r"dataset.label_column: labels '1' \(line 2 of .*\) and '01' \(line 4 of"):
        textsources.read_csv(path, COLS)
    path.write_text("text,label\n" + "".join(f"{x},{['01', '02'][i % 2]}\n" for i, x in enumerate(xs)))
    assert sorted(set(textsources.read_csv(path, COLS).labels)) == [1, 2]  # one spelling each: integers
