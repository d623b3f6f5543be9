"""Small text datasets the tests write: three topics told apart by their words."""

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
