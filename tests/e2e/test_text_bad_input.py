"""Bad text input: each refused before any work, naming the field (a ConfigError from the API, exit
2 and one line from the CLI), with nothing trained, cached or written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from effsearch import api
from effsearch.config import ConfigError
from tests.support.text import corpus, lm_config, texts, tiny_text, write_jsonl

BERT = {"name": "hf:BertConfig", "kwargs": {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}}
HUGE_BERT = {"hidden_size": 65536, "num_hidden_layers": 64, "num_attention_heads": 16, "intermediate_size": 65536}


def rows_file(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def good_rows(n: int = 60) -> list[dict]:
    xs, ys = texts(n)
    return [{"text": x, "label": y} for x, y in zip(xs, ys)]


def bad_file(tmp_path: Path, case: str) -> Path:
    rows = good_rows()
    path = tmp_path / "t.jsonl"
    if case == "no text column":
        rows[7] = {"body": rows[7]["text"], "label": rows[7]["label"]}
    elif case == "no label column":
        del rows[9]["label"]
    elif case == "empty text":
        rows[4]["text"] = "   "
    elif case == "a label once":
        rows[3]["label"] = "law"
    elif case == "an int among strings":  # 1 and "1" are one class to a reader: was two, trained to chance
        rows[5]["label"] = 1
    elif case == "one class":
        rows = [{**r, "label": "music"} for r in rows]
    elif case == "label only in test":
        rows = [{**r, "split": "train"} for r in rows] + [{"text": "a new topic", "label": "law", "split": "test"}]
    elif case == "not utf-8":
        path.write_bytes(rows_file(path, rows).read_bytes() + b'{"text": "caf\xe9", "label": "music"}\n')
        return path
    return rows_file(path, rows)


FILE_CASES = [
    ("no text column", "dataset.text_column", "line 8 of"),
    ("no label column", "dataset.label_column", "line 10 of"),
    ("empty text", "dataset.text_column", "line 5 of"),
    ("one class", "dataset.label_column", "hold one label ('music')"),
    ("an int among strings", "dataset.label_column", "and 1 (int, line 6 of"),
    ("a label once", "dataset.test_fraction", "class 'law' has one member"),
    ("label only in test", "dataset.label_column", "label 'law' (line 61 of"),
    ("not utf-8", "dataset.path", "line 61 of"),
]
CONFIG_CASES = [
    ({"dataset.tokenizer.vocab_size": 100}, "dataset.tokenizer.vocab_size", "at least 260"),
    ({"dataset.max_length": 0}, "dataset.max_length", "must be in [1, 65536]"),
    ({"dataset.max_length": 1}, "dataset.max_length", "no word of a text would reach the model"),
    (
        {"model": {**BERT, "kwargs": {**BERT["kwargs"], "max_position_embeddings": 16}}},
        "dataset.max_length",
        "16 positions",
    ),
    ({"algorithms": {"cutmix": {}}}, "algorithms.cutmix", "works on images; model.name 'text-encoder' takes token ids"),
    ({"algorithms": {"randaugment": {}}}, "algorithms.randaugment", "works on images"),
    ({"algorithms": {"alibi": {}}}, "algorithms.alibi", "broken on transformers 5"),
    ({"dataset.flip": True}, "dataset.flip", "flips images; the run is on text"),
    ({"model": {"name": "tiny-cnn"}}, "model.name", "'tiny-cnn' takes images but dataset.name 'jsonl' holds token ids"),
    ({"algorithms": {"gated_linear_units": {}}}, "algorithms.gated_linear_units", "BERT's feed-forward blocks"),
    (
        {"model": {"name": "hf:BartConfig", "kwargs": {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1}}},
        "model.name",
        "builds an encoder-decoder",
    ),
    (  # transformers keeps a misspelt field unused and builds its default: 12 layers
        {"model": {**BERT, "kwargs": {**BERT["kwargs"], "num_hiden_layers": 1}}},
        "model.kwargs.num_hiden_layers",
        "BertConfig has no field 'num_hiden_layers' (did you mean 'num_hidden_layers'?)",
    ),
    ({"model": {"name": "text-encoder", "kwargs": {"foo": 1}}}, "model.kwargs", "takes none"),
    (  # probed on the meta device: 13 TiB of weights, refused before any text is read
        {"model": {**BERT, "kwargs": {**HUGE_BERT}}},
        "model.kwargs",
        "weights alone take",
    ),
]


def _config(path: Path, change: dict) -> dict:
    cfg = tiny_text(path, **{k: v for k, v in change.items() if k != "model"})
    if "model" in change:
        cfg["model"] = change["model"]
    return cfg


@pytest.mark.parametrize("case, field, words", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_bad_text_files_are_refused_naming_the_field_and_line(tmp_path, case, field, words):
    path = bad_file(tmp_path, case)
    with pytest.raises(ConfigError) as e:
        api.train(tiny_text(path), data_dir=tmp_path / "data", out_dir=tmp_path / "out", progress=False)
    assert e.value.field == field and words in e.value.message, (e.value.field, e.value.message)
    assert not (tmp_path / "data").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("change, field, words", CONFIG_CASES, ids=[c[1] + ":" + c[2][:20] for c in CONFIG_CASES])
def test_bad_text_configs_are_refused_naming_the_field(tmp_path, change, field, words):
    path = write_jsonl(tmp_path / "t.jsonl")
    with pytest.raises(ConfigError) as e:
        api.train(_config(path, change), data_dir=tmp_path / "data", out_dir=tmp_path / "out", progress=False)
    assert e.value.field == field and words in e.value.message, (e.value.field, e.value.message)
    assert not (tmp_path / "data").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "case, change, words",
    [
        ("not utf-8", {}, "dataset.path: line 61 of"),
        (None, {"algorithms": {"cutmix": {}}}, "algorithms.cutmix: works on images"),
        ("label only in test", {}, "dataset.label_column: label 'law'"),
    ],
)
def test_the_cli_refuses_bad_text_with_exit_2_and_one_line(tmp_path, case, change, words):
    path = bad_file(tmp_path, case) if case else write_jsonl(tmp_path / "t.jsonl")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(_config(path, change)))
    p = subprocess.run(
        [sys.executable, "-m", "effsearch.cli", "train", "c.yaml", "--data-dir", "data"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    # One error line, naming the file (the data is read after the file, in set-up).
    errors = p.stderr.strip().splitlines()
    assert len(errors) == 1 and words in errors[0] and "c.yaml: " in errors[0], p.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "runs").exists()


def test_a_text_models_own_error_gets_no_hint_about_positions(tmp_path, monkeypatch):
    """Only an error too long a row raises (an index past the position table) is told to lower
    dataset.max_length: a forward that fails for its own reason is shown as it is."""
    (tmp_path / "picky.py").write_text(
        "import torch.nn as nn\n"
        "class Picky(nn.Module):\n"
        "    def __init__(self, vocab_size, num_classes):\n"
        "        super().__init__()\n"
        "        self.embed, self.head = nn.Embedding(vocab_size, 8), nn.Linear(8, num_classes)\n"
        "    def forward(self, ids, mask):\n"
        "        raise ValueError('every row must end with an end-of-text token')\n"
        "class Short(Picky):\n"
        "    def forward(self, ids, mask):\n"
        "        return self.head(self.embed(ids + 10_000).mean(1))\n"
        "def picky(vocab_size, num_classes):\n"
        "    return Picky(vocab_size, num_classes)\n"
        "def short(vocab_size, num_classes):\n"
        "    return Short(vocab_size, num_classes)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write_jsonl(tmp_path / "t.jsonl")
    for name, hinted in (("picky:picky", False), ("picky:short", True)):
        with pytest.raises(ConfigError) as e:
            api.train(_config(path, {"model": {"name": name}}), data_dir=tmp_path / "data", progress=False)
        assert e.value.field == "model.name", e.value.message
        assert ("give it more positions" in e.value.message) == hinted, e.value.message


@pytest.mark.parametrize(
    "row, words",
    [
        ("great game, we won the match,sports", "has 3 fields, and its header 2: quote a text that holds ','"),
        ("a text and no label", "has 1 field, and its header 2"),
    ],
)
def test_a_csv_row_of_more_or_fewer_fields_than_its_header_is_refused_naming_its_line(tmp_path, row, words):
    """An unquoted comma made the rest of a text its label (a label seen once, blamed on the split),
    or was dropped with the fields past the header."""
    xs, ys = texts(60)
    path = tmp_path / "t.csv"
    path.write_text("text,label\n" + "".join(f"{x},{y}\n" for x, y in zip(xs, ys)) + row + "\n")
    cfg = tiny_text(path, **{"dataset.name": "csv"})
    with pytest.raises(ConfigError) as e:
        api.train(cfg, data_dir=tmp_path / "data", out_dir=tmp_path / "out", progress=False)
    assert e.value.field == "dataset.path" and f"line 62 of {path} {words}" in e.value.message, e.value.message
    assert not (tmp_path / "data").exists() and not (tmp_path / "out").exists()


def test_a_csv_header_with_a_space_after_its_comma_is_named_with_the_fix(tmp_path):
    xs, ys = texts(60)
    path = tmp_path / "t.csv"
    path.write_text("text, label\n" + "".join(f"{x},{y}\n" for x, y in zip(xs, ys)))
    with pytest.raises(ConfigError) as e:
        api.train(tiny_text(path, **{"dataset.name": "csv"}), data_dir=tmp_path / "data", progress=False)
    assert e.value.field == "dataset.label_column", e.value
    assert "' label' holds spaces: set dataset.label_column: ' label'" in e.value.message, e.value.message


def test_a_gpt_too_large_for_memory_is_refused_before_its_text_is_read(tmp_path):
    """Its weights alone (412 billion parameters, 1.5 TiB) exceed any machine's memory: refused naming
    model.kwargs with the sizes, not torch's allocation error after the tokenizing."""
    cfg = lm_config(corpus(tmp_path / "c.txt"), **{"model.kwargs.n_embd": 131072, "model.kwargs.n_layer": 2})
    with pytest.raises(ConfigError) as e:
        api.train(cfg, data_dir=tmp_path / "data", out_dir=tmp_path / "out", progress=False)
    assert e.value.field == "model.kwargs" and re.search(r"has 412,3\d\d,\d{3},\d{3} parameters", e.value.message)
    assert "weights alone take 1,536.1 GiB" in e.value.message, e.value.message
    assert not (tmp_path / "data").exists() and not (tmp_path / "out").exists()


def test_a_study_of_a_gpt_too_large_for_memory_exits_2_writing_nothing(tmp_path):
    base = lm_config(corpus(tmp_path / "c.txt"), **{"model.kwargs.n_embd": 131072})
    study = {"name": "huge", "base": base, "n_trials": 2, "objectives": ["time_to_target", "final_val_loss"]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(study))
    p = subprocess.run(
        [sys.executable, "-m", "effsearch.cli", "run", "s.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "base.model.kwargs: the model ('gpt')" in p.stderr, p.stderr
    assert sorted(f.name for f in tmp_path.iterdir()) == ["c.txt", "s.yaml"]
