"""Fine-tuning a pretrained model (``model.name: hf:FOLDER``) against the same model from fresh
weights, on the Debian topic task, side by side.

No checkpoint can be downloaded here, so this makes one: a small BERT pretrained on the
descriptions of the packages *outside* the task's 13 sections (the task's texts are never seen),
with a WordPiece tokenizer trained on them, saved with ``save_pretrained``: by default trained to
tell those packages' own 45 sections apart (``--pretrain sections``: a related labelled task, its
head dropped when fine-tuned on the 13), or by masked language modelling (``--pretrain mlm``). Then ``benchmarks/compare_configs.py`` times the two configs it writes
(the same BERT from its config, fresh, and from the folder, fine-tuned; each with its own lr),
alternating A B A B:

    uv run python benchmarks/pretrained_finetune.py prepare /tmp/ft --minutes 5
    uv run python benchmarks/compare_configs.py /tmp/ft/fresh.yaml /tmp/ft/pretrained.yaml --seeds 0,1 --rounds 1
    uv run effsearch run /tmp/ft/study.yaml      # the Debian study's settings on the pretrained model
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import torch
import yaml

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "debian-packages" / "debian-packages.jsonl.gz"
TOPICS = ["admin", "database", "editors", "games", "graphics", "mail", "math", "net", "science", "sound", "text"]
TOPICS += ["video", "web"]
BERT = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 512}
MAX_LENGTH = 64


def corpus() -> tuple[list[str], list[str]]:
    """Texts of the packages outside the task's sections (its training split: no test text), and
    their sections."""
    rows = [json.loads(line) for line in gzip.open(DATA, "rt", encoding="utf-8")]
    kept = [r for r in rows if r["section"] not in TOPICS and r["split"] == "train"]
    return [r["text"] for r in kept], [r["section"] for r in kept]


def tokenizer(texts: list[str], folder: Path):  # noqa: ANN201 - tokenizers' Tokenizer
    import tokenizers as t

    tok = t.Tokenizer(t.models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = t.normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = t.pre_tokenizers.BertPreTokenizer()
    tok.decoder = t.decoders.WordPiece()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(texts, t.trainers.WordPieceTrainer(vocab_size=8192, special_tokens=specials))
    tok.post_processor = t.processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.enable_truncation(MAX_LENGTH)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    tok.save(str(folder / "tokenizer.json"))
    return tok


def pretrain(texts: list[str], sections: list[str], folder: Path, minutes: float, how: str, seed: int = 0) -> None:
    """``how``: ``mlm``, masked language modelling (BERT's: 15% of the tokens, 80% [MASK], 10%
    random, 10% kept), or ``sections``, classifying the texts by their own (other) sections."""
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    tok = tokenizer(texts, folder)
    torch.manual_seed(seed)
    names = sorted(set(sections))
    config = transformers.BertConfig(
        vocab_size=tok.get_vocab_size(), max_position_embeddings=MAX_LENGTH, num_labels=len(names), **BERT
    )
    if how == "sections":
        model = transformers.BertForSequenceClassification(config)
        y = torch.tensor([names.index(n) for n in sections])
    else:
        model = transformers.BertForMaskedLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    ids = [torch.tensor(e.ids) for e in tok.encode_batch(texts)]  # padded to each batch's longest below
    g = torch.Generator().manual_seed(seed)
    start, step, batch = time.perf_counter(), 0, 64
    model.train()
    while time.perf_counter() - start < minutes * 60:
        pick = torch.randint(len(ids), (batch,), generator=g)
        x = torch.nn.utils.rnn.pad_sequence([ids[i] for i in pick], batch_first=True)
        if how == "sections":
            loss = model(input_ids=x, attention_mask=(x != 0).long(), labels=y[pick]).loss
        else:
            loss = _masked_lm_loss(model, x, config.vocab_size, g)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % 200 == 0:
            print(f"step {step} {how} loss {loss.item():.3f} ({time.perf_counter() - start:.0f} s)", flush=True)
    model.save_pretrained(folder)
    print(f"pretrained {step} steps in {time.perf_counter() - start:.0f} s: {folder}")


def _masked_lm_loss(model, x: torch.Tensor, vocab: int, g: torch.Generator) -> torch.Tensor:  # noqa: ANN001
    special = x < 5
    chosen = (torch.rand(x.shape, generator=g) < 0.15) & ~special
    labels = torch.where(chosen, x, torch.full_like(x, -100))
    roll = torch.rand(x.shape, generator=g)
    x = torch.where(chosen & (roll < 0.8), torch.full_like(x, 4), x)
    x = torch.where(chosen & (roll >= 0.8) & (roll < 0.9), torch.randint(5, vocab, x.shape, generator=g), x)
    # The vocabulary's logits at the masked positions only (BERT's own head computes them at every
    # position: most of a small model's step).
    hidden = model.bert(input_ids=x, attention_mask=(x != 0).long()).last_hidden_state
    picked = labels != -100
    return torch.nn.functional.cross_entropy(model.cls(hidden[picked]), labels[picked])


def configs(out: Path, folder: Path) -> None:
    base = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / "debian-topics.yaml").read_text())
    base["dataset"]["path"] = str(DATA.resolve())
    base["dataset"]["tokenizer"] = {"name": "file", "path": str(folder)}
    base["dataset"]["max_length"] = MAX_LENGTH
    base["eval_every"] = 0.25
    fresh = {**base, "model": {"name": "hf:BertConfig", "kwargs": {**BERT, "max_position_embeddings": MAX_LENGTH}}}
    fresh["optimizer"] = {**base["optimizer"], "lr": 0.001}
    tuned = {**base, "model": {"name": f"hf:{folder}"}}
    tuned["optimizer"] = {**base["optimizer"], "lr": 0.0003}
    (out / "fresh.yaml").write_text(yaml.safe_dump(fresh, sort_keys=False))
    (out / "pretrained.yaml").write_text(yaml.safe_dump(tuned, sort_keys=False))
    # The shipped Debian study's settings, on the pretrained model: its space is the probed model's
    # (fine-tuning lrs, no GatedLinearUnits).
    study = yaml.safe_load((Path(__file__).resolve().parents[1] / "studies" / "debian-topics.yaml").read_text())
    study.update(
        name="debian-topics-pretrained", base=str(out.resolve() / "pretrained.yaml"), budget={"baseline_runs": 8}
    )
    (out / "study.yaml").write_text(yaml.safe_dump(study, sort_keys=False))
    print(f"wrote {out / 'fresh.yaml'}, {out / 'pretrained.yaml'} and {out / 'study.yaml'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["prepare"])
    ap.add_argument("out", type=Path)
    ap.add_argument("--minutes", type=float, default=5.0, help="pretraining time")
    ap.add_argument("--pretrain", choices=["mlm", "sections"], default="sections", help="what the checkpoint learns")
    a = ap.parse_args()
    texts, sections = corpus()
    print(f"{len(texts)} texts outside the task's sections, {len(set(sections))} sections")
    pretrain(texts, sections, a.out / "bert-debian", a.minutes, a.pretrain)
    configs(a.out, (a.out / "bert-debian").resolve())


if __name__ == "__main__":
    main()
