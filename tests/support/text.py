"""Small text datasets the tests write: three topics told apart by their words, and a corpus of
short sentences a byte-level language model learns in a few steps."""

import json
import random
from pathlib import Path

from effsearch.config.fields import set_path

TOPICS = {
    "sports": "game team score player win match goal coach season league",
    "science": "atom energy cell theory physics lab experiment data gene star",
    "music": "song band guitar album concert sing melody drum piano tune",
}
FILLER = "the a of and to in is on for with".split()


def texts(n: int = 240, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n`` texts and their topics (each topic a third): topic words among filler words."""
    rng = random.Random(seed)
    out, labels = [], []
    for i in range(n):
        topic = list(TOPICS)[i % len(TOPICS)]
        words = [rng.choice(TOPICS[topic].split()) for _ in range(rng.randint(3, 12))]
        words += [rng.choice(FILLER) for _ in range(rng.randint(2, 8))]
        rng.shuffle(words)
        out.append(" ".join(words))
        labels.append(topic)
    return out, labels


def write_jsonl(path: Path, n: int = 240, split: bool = False, **extra) -> Path:
    """A JSONL file of ``n`` rows {text, label} (and a split column: every fifth row test)."""
    xs, ys = texts(n)
    with open(path, "w", encoding="utf-8") as f:
        for i, (x, y) in enumerate(zip(xs, ys)):
            row = {"text": x, "label": y, **extra}
            if split:
                row["split"] = "test" if i % 5 == 0 else "train"
            f.write(json.dumps(row) + "\n")
    return path


def tiny_text(path: Path, **overrides) -> dict:
    """A raw TrainConfig dict of a small text encoder on ``path`` (a JSONL file), seconds on a CPU."""
    d = {
        "dataset": {
            "name": "jsonl",
            "path": str(path),
            "max_length": 24,
            "tokenizer": {"name": "bpe", "vocab_size": 300},
            "val_fraction": 0.2,
        },
        "model": {"name": "text-encoder", "width": 16, "depth": 1, "heads": 2},
        "epochs": 2,
        "batch_size": 32,
        "optimizer": {"name": "adamw", "lr": 0.005, "weight_decay": 0.01},
        "schedule": {"name": "constant"},
        "device": "cpu",
        "target_accuracy": 0.6,
    }
    for key, value in overrides.items():
        set_path(d, key, value)
    return d


NAMES = "alice bob carol dave erin frank".split()
VERBS = "sees likes helps calls meets finds".split()


def corpus(path, n=120, seed=0, tag=False):
    """``n`` documents (paragraphs) of short sentences: a byte-level model learns them in steps.
    ``tag``: each document starts with its number (``doc 7:``), to tell where a document went."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        sentences = [f"{rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(NAMES)}." for _ in range(rng.randint(2, 5))]
        docs.append((f"doc {i}: " if tag else "") + " ".join(sentences))
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


def lm_config(path, **overrides) -> dict:
    """A raw TrainConfig dict of a tiny gpt on ``path`` (a text file) to val loss 3.5, seconds on a CPU."""
    d = {
        "dataset": {
            "name": "text",
            "path": str(path),
            "max_length": 16,
            "tokenizer": {"name": "bytes"},
            "val_fraction": 0.1,
            "test_fraction": 0.1,
            "val_tokens": 256,
        },
        "model": {"name": "gpt", "kwargs": {"n_layer": 1, "n_head": 2, "n_embd": 32}},
        "epochs": 0.25,
        "eval_every": 0.02,
        "batch_size": 8,
        "optimizer": {"name": "adamw", "lr": 0.01, "weight_decay": 0.0},
        "schedule": {"name": "constant"},
        "device": "cpu",
        "target": {"metric": "val_loss", "value": 3.5},
    }
    for key, value in overrides.items():
        set_path(d, key, value)
    return d


def byte_bpe_tokenizer(docs: list[str]):  # noqa: ANN201 - a tokenizers.Tokenizer (the text extra)
    """GPT-2's scheme, trained on ``docs``: byte-level BPE of 300 tokens, one special token
    (``<|endoftext|>``), no template, no padding."""
    import tokenizers as t

    tok = t.Tokenizer(t.models.BPE())
    tok.pre_tokenizer = t.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = t.decoders.ByteLevel()
    trainer = t.trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=t.pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(docs, trainer)
    return tok
