"""`effsearch train` and `effsearch.train` on text a test writes: the built-in encoder, an
hf:BertConfig model and a user's importable text module with a CORDS strategy (the last in a
process of its own, as a user runs it: it imports the module from its current folder)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import yaml

import effsearch
from effsearch.cli import main
from tests.support.text import texts, tiny_text, write_jsonl

MODULE = """
import json
import torch.nn as nn


def load():
    rows = [json.loads(line) for line in open(__file__.replace("mytext.py", "t.jsonl"))]
    xs, ys = [r["text"] for r in rows], [r["label"] for r in rows]
    return {"x_train": xs[:200], "y_train": ys[:200], "x_test": xs[200:], "y_test": ys[200:]}


class Bag(nn.Module):
    def __init__(self, vocab_size, num_classes, max_length):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, 16)
        self.head = nn.Linear(16, num_classes)

    def forward(self, ids, mask):
        m = mask.unsqueeze(-1).float()
        return self.head((self.embed(ids) * m).sum(1) / m.sum(1))


def model(vocab_size, num_classes, max_length):
    return Bag(vocab_size, num_classes, max_length)
"""

BERT = {"name": "hf:BertConfig", "kwargs": {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}}


def run_train(cwd, config: dict, name: str, monkeypatch=None) -> dict:
    """`effsearch train` in ``cwd``: a process of its own as a user starts it, or with
    ``monkeypatch`` this one's (the same command, without Python's and Composer's start-up)."""
    (cwd / f"{name}.yaml").write_text(yaml.safe_dump(config))
    args = ["train", f"{name}.yaml", "--out", name, "--data-dir", "data", "--quiet"]
    if monkeypatch is not None:
        monkeypatch.chdir(cwd)
        assert main(args) == 0
    else:
        p = subprocess.run(
            [sys.executable, "-m", "effsearch.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=600
        )
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    return json.loads((cwd / name / "result.json").read_text())


def test_effsearch_train_trains_the_encoder_bert_and_a_text_module(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    path = write_jsonl(tmp_path / "t.jsonl")
    encoder = run_train(tmp_path, tiny_text(path, epochs=4), "encoder", monkeypatch)
    assert encoder["status"] == "completed" and encoder["final"]["val_accuracy"] > 0.6
    bert = run_train(tmp_path, {**tiny_text(path), "model": BERT}, "bert", monkeypatch)
    assert bert["status"] == "completed" and len(bert["history"]) == 2
    (tmp_path / "mytext.py").write_text(textwrap.dedent(MODULE))
    own = tiny_text(path, epochs=3, **{"selection.strategy": "gradmatch-pb", "selection.fraction": 0.5})
    own["dataset"] = {**own["dataset"], "name": "mytext:load", "path": None}
    own["model"] = {"name": "mytext:model"}
    own["selection"]["select_every"] = 1
    result = run_train(tmp_path, own, "own")
    assert result["status"] == "completed" and result["history"][-1]["subset_size"] < 160


def test_the_python_api_trains_on_a_jsonl_file(tmp_path):
    xs, ys = texts(240)
    path = tmp_path / "topics.jsonl"
    path.write_text("".join(json.dumps({"text": x, "label": y}) + "\n" for x, y in zip(xs, ys)))
    result = effsearch.train(
        {
            "dataset": {"name": "jsonl", "path": str(path), "max_length": 24, "tokenizer": {"vocab_size": 300}},
            "model": {"name": "text-encoder", "width": 32},
            "optimizer": {"name": "adamw", "lr": 0.003},
            "epochs": 3,
            "batch_size": 32,
            "target_accuracy": 0.6,
            "device": "cpu",
        },
        data_dir=tmp_path / "data",
        progress=False,
    )
    assert result.status == "completed" and result.final.val_accuracy > 0.6 and result.time_to_target is not None
