"""What each efficiency method costs per training step, alone on one recipe, beside the plain recipe.

On a GPU a small network's step is a few milliseconds of kernel launches, so a method that adds
many small kernels or a host sync can cost more per step than it saves in steps; the search
only learns that trial by trial. This measures it once: the trainer_overhead recipe (tiny CNN,
Fashion-MNIST, batch 512, amp_bf16 on CUDA) with one method switched on at its default
parameters, every variant once per round in a shuffled order, rounds repeated. Printed per
variant: median ms/step over rounds and its ratio to the plain recipe's median in the same
rounds (``x1.00`` = free). Compile variants: ms/step excludes compile time, printed apart.

    python benchmarks/algorithm_cost.py --device cuda --rounds 3
    EFFSEARCH_DATA_DIR=../shared/data uv run python benchmarks/algorithm_cost.py --device cpu --tiny --rounds 1
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trainer_overhead import recipe  # noqa: E402

from effsearch.config import TrainConfig  # noqa: E402
from effsearch.config.algorithms import ALGORITHMS  # noqa: E402
from effsearch.trainer.training import train  # noqa: E402


def variants(device: str) -> dict[str, dict]:
    """name -> the recipe's changes, dotted keys for ``TrainConfig.replace``. Algorithms that
    need a ResNet bottleneck or host-side PIL transforms are left out (the GPU study excludes
    the latter)."""
    out: dict[str, dict] = {"plain": {}}
    for name, spec in ALGORITHMS.items():
        if spec.needs_structure == "bottleneck" or spec.needs_torch_loader or name == "channels_last":
            continue
        out[name] = {f"algorithms.{name}": {}}
    out["ghost_batchnorm/128"] = {"algorithms.ghost_batchnorm": {"ghost_batch_size": 128}}
    out["sam/interval 10"] = {"algorithms.sam": {"interval": 10}}
    out["ema/every 10ba"] = {"algorithms.ema": {"update_interval": "10ba"}}
    out["channels_last"] = {"channels_last": True}
    out["fp32"] = {"precision": "fp32"}
    out["kfac-sgd"] = {"optimizer.name": "kfac-sgd"}
    out["accumulate 2"] = {"accumulate": 2}
    if device == "cuda":
        out["amp_fp16"] = {"precision": "amp_fp16"}
        # cuDNN's autotuning (off by default since 2026-11-26) against its heuristics, per layout/dtype;
        # the first round pays the tuning, so read the rounds after it (docs/benchmarks.md)
        for name in ("plain", "channels_last", "fp32", "amp_fp16"):
            out[f"{name}/cudnn on"] = {**out[name], "cudnn_benchmark": True}
        out["fp32 unfused"] = {"precision": "fp32", "optimizer.fused": False}
        out["compile"] = {"compile": True}
    return out


def run(cfg: TrainConfig, data_root) -> tuple[float, float]:
    """(ms per step without compile time, compile seconds)."""
    f = train(cfg, data_root=data_root, progress=False).final
    return 1000 * (f.train_seconds - f.compile_seconds) / f.steps, f.compile_seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--tiny", action="store_true", help="width-4 CNN on 8,000 images: a quick CPU check")
    ap.add_argument("--epochs", type=float, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="variant names (default: all)")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    base = recipe(args.device, args.tiny, args.epochs)
    table = variants(args.device)
    if args.only:
        unknown = sorted(set(args.only) - set(table))
        if unknown:
            ap.error(f"--only: unknown variant(s) {unknown}; known: {sorted(table)}")
        table = {k: v for k, v in table.items() if k in args.only or k == "plain"}
    plain = TrainConfig.from_dict(base)
    cfgs = {name: plain.replace(**changes) for name, changes in table.items()}
    print(
        f"device: {args.device}; {base['dataset']} batch {base['batch_size']}, {args.epochs} epochs, "
        f"tiny-cnn width {base['model']['width']}, {base['precision']}; {args.rounds} round(s)",
        flush=True,
    )
    run(cfgs["plain"], args.data_dir)  # warm-up: CUDA context, cuDNN autotuning, caches
    ms: dict[str, list[float]] = {k: [] for k in cfgs}
    comp: dict[str, list[float]] = {k: [] for k in cfgs}
    rng = random.Random(0)
    for r in range(args.rounds):
        order = list(cfgs)
        rng.shuffle(order)
        for name in order:
            m, c = run(cfgs[name], args.data_dir)
            ms[name].append(m)
            comp[name].append(c)
        print(f"round {r + 1}: plain {ms['plain'][-1]:.3f} ms/step", flush=True)
        report(ms, comp)  # after every round: a run cut short still leaves its table


def report(ms: dict[str, list[float]], comp: dict[str, list[float]]) -> None:
    plain = statistics.median(ms["plain"])
    print(f"\n{'variant':24s} {'ms/step':>8s} {'x plain':>8s}  compile s")
    for name in sorted(ms, key=lambda k: statistics.median(ms[k])):
        m = statistics.median(ms[name])
        c = statistics.median(comp[name])
        print(f"{name:24s} {m:8.3f} {m / plain:8.2f}  {c:.1f}" if c else f"{name:24s} {m:8.3f} {m / plain:8.2f}")
    print(f"plain_ms={plain:.3f}", flush=True)


if __name__ == "__main__":
    main()
