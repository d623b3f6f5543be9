"""A language model's batch-size ramp and sequence-length warm-up (trainer/techniques/ramps.py):
the shapes grow linearly to the full ones and stay there; the windows served are the same windows,
fewer of them or cut to their first tokens; a run with both trains as many steps as without."""

import torch
import yaml

from effsearch.cli import main
from effsearch.trainer.data.lmdata import LMBatches
from effsearch.trainer.techniques.ramps import shapes
from tests.trainer.test_lm import corpus, lm_config


def test_the_shapes_grow_from_a_quarter_to_the_full_ones_then_hold():
    s = shapes(32, 64, batch_steps=10, length_steps=20)
    assert s.at(0) == (8, 16)
    batches, lengths = zip(*(s.at(i) for i in range(40)))
    assert list(batches) == sorted(batches) and list(lengths) == sorted(lengths)
    assert batches[10] == 32 and batches[9] < 32 and lengths[19] < 64 and lengths[20] == 64
    assert all(n % 8 == 0 for n in lengths)
    assert s.at(10**6) == (32, 64)
    assert shapes(32, 64, 0, 0).ramped == []  # off: nothing to look up
    assert shapes(4, 8, 5, 5).at(0) == (1, 8)  # a window never shorter than 8 tokens, a batch never empty


def test_ramped_batches_are_the_same_windows_fewer_or_cut():
    stream = torch.arange(10_000)
    plain = LMBatches(stream, 16, 32, seed=0)
    ramped = LMBatches(stream, 16, 32, seed=0)
    ramped.ramp(epochs=1.0, batch_ramp=0.5, length_warmup=0.25)
    first = list(plain)
    got = list(ramped)
    assert len(got) == len(first) == len(plain)
    (x0, y0), (rx0, ry0) = first[0], got[0]
    assert rx0.shape == (4, 8) and torch.equal(rx0, x0[:4, :8]) and torch.equal(ry0, y0[:4, :8])
    assert torch.equal(ry0[:, :-1], rx0[:, 1:])  # targets: the inputs moved on by one token
    assert got[-1][0].shape == (16, 32)
    assert [b[0].shape[1] for b in got] == sorted(b[0].shape[1] for b in got)


def test_a_gpt_trains_with_both_ramps_as_many_steps_as_without(tmp_path):
    text = corpus(tmp_path / "c.txt")
    steps = []
    for i, extra in enumerate([{}, {"batch_ramp": 0.5, "length_warmup": 0.5}]):
        cfg = tmp_path / f"c{i}.yaml"
        cfg.write_text(yaml.safe_dump(lm_config(text, **extra)))
        out = tmp_path / f"out{i}"
        assert main(["train", str(cfg), "--out", str(out), "--quiet"]) == 0
        import json

        result = json.loads((out / "result.json").read_text())
        assert result["status"] == "completed"
        steps.append(result["final"]["steps"])
    assert steps[0] == steps[1] > 0


def test_data_prepare_tokenizes_a_language_model_s_corpus_once(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(lm_config(corpus(tmp_path / "c.txt"))))
    data = tmp_path / "data"
    assert main(["data", "prepare", "--config", str(cfg), "--data-dir", str(data)]) == 0
    captured = capsys.readouterr()
    assert "tokenized into" in captured.err and "documents" in captured.out
    assert main(["data", "prepare", "--config", str(cfg), "--data-dir", str(data)]) == 0
    assert "read from" in capsys.readouterr().err


def test_data_prepare_takes_a_corpus_from_flags_alone(tmp_path, capsys):
    """No config, so no model: a corpus is checked with the built-in gpt (it was checked with the
    text classifier, and refused as a classifier on a corpus)."""
    text = corpus(tmp_path / "c.txt")
    args = ["data", "prepare", "text", "--path", str(text), "--tokenizer", "bytes", "--max-length", "16"]
    assert main([*args, "--data-dir", str(tmp_path / "data")]) == 0, capsys.readouterr().err
    assert "documents" in capsys.readouterr().out


def test_data_prepare_applies_the_dataset_flags_given_beside_a_config(tmp_path, capsys):
    """`--config c.yaml --split-seed 7` prepares the split of seed 7 (the flags had been dropped
    without a word, and the config's seed-0 cache read), and `--tokenizer bpe` a BPE's tokens."""
    cfg = tmp_path / "c.yaml"
    d = lm_config(corpus(tmp_path / "c.txt"))
    cfg.write_text(yaml.safe_dump(d))
    data = tmp_path / "data"
    assert main(["data", "prepare", "--config", str(cfg), "--data-dir", str(data)]) == 0
    capsys.readouterr()
    assert main(["data", "prepare", "--config", str(cfg), "--split-seed", "7", "--data-dir", str(data)]) == 0
    assert "tokenized into" in capsys.readouterr().err  # a split of its own, not the seed-0 one read again
    d["dataset"]["split_seed"] = 7
    cfg.write_text(yaml.safe_dump(d))
    assert main(["data", "prepare", "--config", str(cfg), "--data-dir", str(data)]) == 0
    assert "read from" in capsys.readouterr().err  # what the flag prepared is what the config reads
    args = [
        "data",
        "prepare",
        "--config",
        str(cfg),
        "--tokenizer",
        "bpe",
        "--vocab-size",
        "300",
        "--data-dir",
        str(data),
    ]
    assert main(args) == 0, capsys.readouterr().err
    assert "tokenized into" in capsys.readouterr().err


def test_data_prepare_reads_label_column_null_as_a_language_model_s_corpus(tmp_path, capsys):
    """`--label-column null` (as `--set dataset.label_column=null` reads it): the JSONL file's texts
    as a corpus; it had been looked for as a column named 'null'."""
    import json

    path = tmp_path / "c.jsonl"
    path.write_text(
        "".join(json.dumps({"text": line}) + "\n" for line in corpus(tmp_path / "c.txt").read_text().split("\n\n"))
    )
    args = ["data", "prepare", "jsonl", "--path", str(path), "--label-column", "null", "--tokenizer", "bytes"]
    assert main([*args, "--max-length", "16", "--data-dir", str(tmp_path / "data")]) == 0, capsys.readouterr().err
    assert "documents" in capsys.readouterr().out
