"""Trainer overhead on a language model: effsearch's trainer vs a plain PyTorch loop, per step.

Both train the built-in ``gpt`` on the same windows of the same packed token stream (effsearch's
``LMBatches``, one seed), with AdamW, a cosine lr per step and the same precision and compile;
runs alternate (A B A B ...) in one process so drift hits both. Timed per optimizer step,
evaluation excluded; with compile, the first (compiling) step is left out of both. Last line:
``ratio=X``, the median of per-pair ratios effsearch / plain (1.00: no overhead).

    --device cpu --tiny   gpt 2 x 64 wide, windows of 64, batch 16: a step costs a few ms
    --device cpu          gpt 2 x 128 wide, windows of 128, batch 16
    --device cuda         gpt 6 x 384 wide, windows of 256, batch 64, amp_bf16 and compile

``--ramps``: both runs grow the batch from a quarter and the windows from a quarter of their length
(at least 8 tokens, steps of 8) over the first half of the run: effsearch through ``batch_ramp`` and
``length_warmup`` (trainer/techniques/ramps.py), the plain loop by slicing each full batch by hand.

The corpus: ``--corpus`` (a text file or folder, or a JSONL file, .gz too, with a ``text`` column),
else a synthetic one written to a temporary folder (sentences of a small grammar).

    uv run python benchmarks/lm_overhead.py --device cpu --tiny
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from effsearch.config import TrainConfig
from effsearch.trainer.data.lmdata import LMBatches
from effsearch.trainer.data.splits import Splits, load_splits
from effsearch.trainer.models.gpt import gpt
from effsearch.trainer.techniques.schedule import factors
from effsearch.trainer.training import train

SIZES = {
    "tiny": ({"n_layer": 2, "n_head": 2, "n_embd": 64}, 64, 16),
    "cpu": ({"n_layer": 2, "n_head": 4, "n_embd": 128}, 128, 16),
    "cuda": ({"n_layer": 6, "n_head": 6, "n_embd": 384}, 256, 64),
}


def synthetic_corpus(folder: Path, docs: int = 3000, seed: int = 0) -> Path:
    rng = random.Random(seed)
    names = "alice bob carol dave erin frank grace heidi".split()
    verbs = "sees likes helps calls meets finds asks tells".split()
    lines = []
    for _ in range(docs):
        n = rng.randint(2, 8)
        lines.append(" ".join(f"{rng.choice(names)} {rng.choice(verbs)} {rng.choice(names)}." for _ in range(n)))
    path = folder / "corpus.txt"
    path.write_text("\n\n".join(lines) + "\n", encoding="utf-8")
    return path


def hand_shape(step: int, steps: int, batch: int, length: int) -> tuple[int, int]:
    """The ramps' shape at ``step`` of a half-run ramp, written out by hand for the plain loop."""
    if step >= steps // 2:
        return batch, length
    n0, l0 = max(1, batch // 4), min(length, max(8, length // 4))
    n = n0 + (batch - n0) * step // (steps // 2)
    size = l0 + (length - l0) * step // (steps // 2)
    return n, max(l0, size - size % 8)


def recipe(device: str, size: str, corpus: Path, steps_hint: float, compile_: bool, ramps: bool = False) -> dict:
    kwargs, length, batch = SIZES[size]
    jsonl = corpus.name.endswith((".jsonl", ".jsonl.gz"))
    return {
        **({"batch_ramp": 0.5, "length_warmup": 0.5} if ramps else {}),
        "dataset": {
            "name": "jsonl" if jsonl else "text",
            "path": str(corpus),
            "label_column": None,
            **({"split_column": "split"} if jsonl else {}),
            "tokenizer": {"name": "bytes"},
            "max_length": length,
            "val_fraction": 0.05,
            "val_tokens": 8 * length,  # one small evaluation: excluded from both timings anyway
        },
        "model": {"name": "gpt", "kwargs": kwargs},
        "epochs": steps_hint,  # replaced by the epochs that make --steps steps (main)
        "batch_size": batch,
        "optimizer": {"name": "adamw", "lr": 1e-3, "momentum": 0.9, "beta2": 0.95, "weight_decay": 0.1},
        "schedule": {"name": "cosine"},
        "precision": "amp_bf16" if device == "cuda" else "fp32",
        "compile": compile_,
        "device": device,
        "target": {"metric": "val_loss", "value": 0.01},  # never reached: every run trains its steps
    }


def _now(cuda: bool) -> float:
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter()


def plain_loop(cfg: TrainConfig, splits: Splits, device: str, steps: int) -> tuple[float, int]:
    """The same model, optimizer, lr per step, precision and windows, written by hand. Returns
    (seconds, steps timed): with compile, the first step (it compiles) is not timed."""
    cuda = device == "cuda"
    torch.manual_seed(cfg.seed)
    tokens = splits.tokens
    assert tokens is not None
    model: torch.nn.Module = gpt(tokens.vocab_size, cfg.dataset.max_length, cfg.model.kwargs).to(device)
    if cfg.compile:
        model = torch.compile(model)  # type: ignore[assignment]
    o = cfg.optimizer
    fused = {"fused": True} if cuda else {}
    opt = torch.optim.AdamW(
        model.parameters(), lr=o.lr, betas=(o.momentum, o.beta2), weight_decay=o.weight_decay, **fused
    )
    stream = torch.as_tensor(splits.train_x).to(device)
    batches = LMBatches(stream, cfg.batch_size, cfg.dataset.max_length, cfg.seed)
    lrs = factors(cfg.schedule, steps)
    dtype = torch.bfloat16 if cfg.precision == "amp_bf16" else None
    ramped = bool(cfg.batch_ramp or cfg.length_warmup)
    model.train()
    step, t = 0, _now(cuda)
    while step < steps:
        for x, y in batches:
            if ramped:
                n, length = hand_shape(step, steps, cfg.batch_size, cfg.dataset.max_length)
                x, y = x[:n, :length], y[:n, :length]
            for g in opt.param_groups:
                g["lr"] = o.lr * lrs[step]
            with torch.autocast(device, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step == 1 and cfg.compile:
                t = _now(cuda)  # the compiling step, as effsearch's compile_seconds, left out
            if step >= steps:
                break
    timed = steps - 1 if cfg.compile else steps
    return _now(cuda) - t, timed


def effsearch_run(cfg: TrainConfig, data_root: str) -> tuple[float, int, float]:
    """(train seconds, steps timed, wall seconds outside training and evaluation: set-up)."""
    t = time.perf_counter()
    r = train(cfg, data_root=data_root, progress=False, test=False)
    wall = time.perf_counter() - t
    f = r.final
    if r.status != "completed" or not f.steps:
        raise SystemExit(f"effsearch's run ended {r.status}: {r.reason}")
    compiling = (f.compile_seconds or 0.0) if cfg.compile else 0.0
    timed = f.steps - 1 if cfg.compile else f.steps
    setup = wall - (f.train_seconds or 0.0) - (f.eval_seconds or 0.0) - (f.final_eval_seconds or 0.0)
    return (f.train_seconds or 0.0) - compiling, timed, setup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--tiny", action="store_true", help="a 2 x 64 gpt on windows of 64: per-step cost visible on CPU")
    ap.add_argument("--corpus", type=Path, default=None, help="text file or folder, or JSONL (text column)")
    ap.add_argument("--steps", type=int, default=60, help="optimizer steps a run (about)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None, help="default: on cuda")
    ap.add_argument("--data-dir", default=None, help="where the token cache goes (default: a temporary folder)")
    ap.add_argument("--ramps", action="store_true", help="a batch-size ramp and a sequence-length warm-up in both")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lm-overhead-"))
    corpus = args.corpus or synthetic_corpus(tmp)
    data_root = args.data_dir or str(tmp)
    size = "tiny" if args.tiny else args.device
    compile_ = args.compile if args.compile is not None else args.device == "cuda"
    cfg = TrainConfig.from_dict(recipe(args.device, size, corpus, 1.0, compile_ and not args.ramps, args.ramps))
    splits = load_splits(cfg, data_root)
    per_epoch = len(LMBatches(torch.as_tensor(splits.train_x), cfg.batch_size, cfg.dataset.max_length, 0))
    epochs = args.steps / per_epoch
    cfg = TrainConfig.from_dict({**cfg.to_dict(), "epochs": epochs, "eval_every": epochs})
    steps = max(1, round(epochs * per_epoch))
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    print(
        f"device: {name}; corpus {corpus.name}, {len(splits.train_x):,} training tokens; gpt {cfg.model.kwargs}, "
        f"windows of {cfg.dataset.max_length}, batch {cfg.batch_size}, {steps} steps a run, {cfg.precision}, "
        f"compile {cfg.compile}, ramps {args.ramps}",
        flush=True,
    )
    plain_loop(cfg, splits, args.device, steps)  # warm-up: allocations, kernels, compile caches
    effsearch_run(cfg, data_root)
    ratios, setups = [], []
    for i in range(args.repeats):
        a, steps_a, setup = effsearch_run(cfg, data_root)
        b, steps_b = plain_loop(cfg, splits, args.device, steps)
        per_a, per_b = a / max(steps_a, 1), b / max(steps_b, 1)
        ratios.append(per_a / per_b)
        setups.append(setup)
        print(
            f"pair {i + 1}: effsearch {1000 * per_a:.3f} ms/step ({steps_a} steps timed, set-up {setup:.2f}s)  "
            f"plain {1000 * per_b:.3f} ms/step ({steps_b} steps timed)  ratio {per_a / per_b:.3f}",
            flush=True,
        )
    print(
        f"range {min(ratios):.3f}-{max(ratios):.3f}; effsearch set-up per run (median): {statistics.median(setups):.2f}s"
    )
    print(f"ratio={statistics.median(ratios):.3f}")
    if not all(math.isfinite(r) for r in ratios):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
