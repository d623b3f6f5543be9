"""Trainer overhead: effsearch's trainer vs a plain PyTorch loop, same work, per step.

Both train the same model on the same in-memory Fashion-MNIST tensors with the
same optimizer, per-step lr schedule, batch augmentation (on the device) and
precision; runs alternate (A B A B ...) in one process so drift hits both.
Timed per optimizer step, evaluation excluded: effsearch's ``train_seconds``
against the plain loop's synchronised wall time. Last line: ``ratio=X``, the
median of per-pair ratios effsearch / plain (1.00 means no overhead).

    --device cpu --tiny   tiny CNN at width 4, batch 256, 8,000 images: a step costs a few ms,
                          so the framework's per-step cost shows without a GPU
    --device cpu          tiny CNN at width 32, batch 128, 8,000 images
    --device cuda         tiny CNN at width 32, batch 512, all 54,000 images, amp_bf16
    --text                the text encoder of configs/debian-topics.yaml on a quarter of its texts
                          (--text-config another), AdamW; the plain loop gathers the same batches,
                          each cut to its longest text, and calls the encoder with ids and mask

    EFFSEARCH_DATA_DIR=../shared/data uv run python benchmarks/trainer_overhead.py --device cpu --tiny
    OMP_NUM_THREADS=1 uv run python benchmarks/trainer_overhead.py --device cpu --text --repeats 5 --epochs 1.5
(one thread where the cores are shared: docs/benchmarks.md, "Trainer overhead", says why)
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F

from effsearch.config import TrainConfig
from effsearch.trainer.data.splits import BatchAugment, Splits, load_splits, to_device
from effsearch.trainer.models import build_model
from effsearch.trainer.models.text import TextEncoder
from effsearch.trainer.techniques.schedule import factors
from effsearch.trainer.training import train


def recipe(device: str, tiny: bool, epochs: float) -> dict:
    cuda = device == "cuda"
    return {
        "dataset": {"name": "fashion-mnist", "data_fraction": 1.0 if cuda else 8000 / 54000, "crop_padding": 2},
        "model": {"name": "tiny-cnn", "width": 4 if tiny else 32},
        "epochs": epochs,
        "batch_size": 512 if cuda else (256 if tiny else 128),
        "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 5e-4},
        "schedule": {"name": "cosine"},
        "precision": "amp_bf16" if cuda else "fp32",
        "eval_every": epochs,  # one evaluation, at the end (excluded from both timings)
        "device": device,
        "target_accuracy": 0.0,
    }


def _now(cuda: bool) -> float:
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter()


def plain_loop(cfg: TrainConfig, splits: Splits, device: str) -> tuple[float, int]:
    """A hand-written loop (airbench's habits): data on the device, one gather per batch, fused
    optimizer on CUDA, no host sync until the end. Returns (seconds, steps)."""
    cuda = device == "cuda"
    torch.backends.cudnn.benchmark = cfg.cudnn_benchmark  # as the trainer sets it
    torch.manual_seed(cfg.seed)
    model = build_model("tiny-cnn", splits.channels, splits.num_classes, cfg.model.width).to(device)
    fused = {"fused": True} if cuda else {}
    opt = torch.optim.SGD(
        model.parameters(), lr=cfg.optimizer.lr, momentum=0.9, nesterov=True, weight_decay=5e-4, **fused
    )
    x_all, y_all = splits.train_x, splits.train_y
    n, b = len(y_all), cfg.batch_size
    steps = max(1, round(cfg.epochs * math.ceil(n / b)))
    lrs = factors(cfg.schedule, steps)
    aug = BatchAugment(splits.mean, splits.std, device, flip=False, crop_padding=cfg.dataset.crop_padding, train=True)
    dtype = torch.bfloat16 if cfg.precision == "amp_bf16" else None
    model.train()
    t = _now(cuda)
    step = 0
    while step < steps:
        perm = torch.randperm(n, device=device)
        for i in range(0, n, b):
            idx = perm[i : i + b]
            x, y = aug((x_all[idx], y_all[idx]))
            for g in opt.param_groups:
                g["lr"] = cfg.optimizer.lr * lrs[step]
            with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step >= steps:
                break
    return _now(cuda) - t, steps


def text_recipe(path: str, device: str, epochs: float) -> TrainConfig:
    """The text config at ``path`` for the overhead: a quarter of its texts, one evaluation at the end."""
    changes = [f"device={device}", f"epochs={epochs}", f"eval_every={epochs}", "target_accuracy=0.0"]
    changes += ["dataset.data_fraction=0.25"] + (["precision=amp_bf16"] if device == "cuda" else [])
    return TrainConfig.from_yaml(path, changes)


def plain_text_loop(cfg: TrainConfig, splits: Splits, device: str) -> tuple[float, int]:
    """A hand-written loop over the same batches as the trainer's: a permutation an epoch, one gather
    a batch cut to its longest text (lengths read on the host), the encoder called with ids and mask,
    AdamW (fused on CUDA), no host sync until the end. Returns (seconds, steps)."""
    from effsearch.config import MODEL_WIDTHS
    from effsearch.config.choices import TEXT_ENCODER

    cuda, m, o = device == "cuda", cfg.model, cfg.optimizer
    assert splits.tokens is not None  # a text dataset
    torch.manual_seed(cfg.seed)
    model = TextEncoder(
        splits.tokens.vocab_size,
        splits.num_classes,
        splits.tokens.max_length,
        m.width or MODEL_WIDTHS["text-encoder"],
        m.depth or TEXT_ENCODER["depth"],
        m.heads or TEXT_ENCODER["heads"],
        m.pooling,
        m.dropout,
    ).to(device)
    fused = {"fused": True} if cuda else {}
    opt = torch.optim.AdamW(
        model.parameters(), lr=o.lr, betas=(o.momentum, o.beta2), weight_decay=o.weight_decay, **fused
    )
    x_all, y_all = splits.train_x, splits.train_y
    lengths = (x_all != 0).sum(1).cpu()
    n, b = len(y_all), cfg.batch_size
    steps = max(1, round(cfg.epochs * math.ceil(n / b)))
    lrs = factors(cfg.schedule, steps)
    dtype = torch.bfloat16 if cfg.precision == "amp_bf16" else None
    model.train()
    t, step = _now(cuda), 0
    while step < steps:
        perm = torch.randperm(n)
        for i in range(0, n, b):
            idx = perm[i : i + b]
            x = x_all[idx.to(device), : int(lengths[idx].max())]
            for g in opt.param_groups:
                g["lr"] = o.lr * lrs[step]
            with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
                loss = F.cross_entropy(model(x, x != 0), y_all[idx.to(device)])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step >= steps:
                break
    return _now(cuda) - t, steps


def effsearch_run(cfg: TrainConfig, data_root) -> tuple[float, int, float]:
    """(train seconds, steps, wall seconds outside training and evaluation: set-up)."""
    t = time.perf_counter()
    r = train(cfg, data_root=data_root, progress=False)
    wall = time.perf_counter() - t
    f = r.final
    steps = f.steps
    setup = wall - f.train_seconds - f.eval_seconds - f.final_eval_seconds
    return f.train_seconds, steps, setup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--tiny", action="store_true", help="width-4 CNN, batch 256: per-step cost visible on CPU")
    ap.add_argument("--epochs", type=float, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--text", action="store_true", help="the text encoder (--text-config) instead of the tiny CNN")
    ap.add_argument("--text-config", default="configs/debian-topics.yaml")
    ap.add_argument(
        "--profile",
        metavar="FILE",
        help="also profile one effsearch run (torch.profiler) into FILE and print its host reads per step",
    )
    args = ap.parse_args()
    if args.text:
        cfg = text_recipe(args.text_config, args.device, args.epochs)
    else:
        cfg = TrainConfig.from_dict(recipe(args.device, args.tiny, args.epochs))
    splits = load_splits(cfg, args.data_dir)
    on_device = to_device(splits, args.device)
    plain = plain_text_loop if args.text else plain_loop
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    what = "texts" if args.text else "images"
    print(
        f"device: {name}; {len(splits.train_y)} training {what}, {cfg.epochs:g} epochs, batch {cfg.batch_size}, "
        f"{cfg.model.name} width {cfg.model.width}, {cfg.precision}"
    )
    plain(cfg, on_device, args.device)  # warm-up: first-touch allocations, cuDNN autotuning, lazy imports
    effsearch_run(cfg, args.data_dir)
    ratios, setups = [], []
    for i in range(args.repeats):
        a, steps_a, setup = effsearch_run(cfg, args.data_dir)
        b, steps_b = plain(cfg, on_device, args.device)
        per_a, per_b = a / steps_a, b / steps_b
        ratios.append(per_a / per_b)
        setups.append(setup)
        print(
            f"pair {i + 1}: effsearch {1000 * per_a:.3f} ms/step ({steps_a} steps, set-up {setup:.2f}s)  "
            f"plain {1000 * per_b:.3f} ms/step ({steps_b} steps)  ratio {per_a / per_b:.3f}",
            flush=True,
        )
    print(
        f"range {min(ratios):.3f}-{max(ratios):.3f}; effsearch set-up per run (median): "
        f"{statistics.median(setups):.2f}s"
    )
    print(f"ratio={statistics.median(ratios):.3f}")
    if args.profile:
        profile_run(cfg, args.data_dir, args.profile)


def profile_run(cfg: TrainConfig, data_root, path: str) -> None:
    """One effsearch run under torch.profiler: the op table, and how often the host read a
    tensor back (aten::_local_scalar_dense; each one a stall on a GPU) per training step."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cfg.device == "cuda" else [])
    with profile(activities=acts) as prof:
        r = train(cfg, data_root=data_root, progress=False)
    events = prof.key_averages()
    reads = sum(e.count for e in events if e.key == "aten::_local_scalar_dense")
    syncs = sum(e.count for e in events if e.key in ("cudaStreamSynchronize", "cudaDeviceSynchronize"))
    steps = r.final.steps
    with open(path, "w") as f:
        f.write(events.table(sort_by="self_cpu_time_total", row_limit=40))
    print(
        f"profile: {path}; {steps} steps, host reads {reads} ({reads / steps:.3f} per step, evaluation and "
        f"final test included), CUDA syncs {syncs}"
    )


if __name__ == "__main__":
    main()
