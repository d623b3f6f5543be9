"""What an evaluation costs per image, by evaluation batch size, on this machine.

The trainer scores validation and test sets in batches of ``loop.EVAL_BATCH[device]``. On a
CPU a large batch's activations spill out of cache: this prints microseconds per image for
each batch size (sizes alternated within every repetition, median of ``--reps``) and the
ratio of 1,024 to the trainer's CPU size, for the models and inputs the studies use.

    uv run python benchmarks/eval_batch.py            # CPU; --device cuda on a GPU
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from effsearch.trainer.loop import EVAL_BATCH
from effsearch.trainer.models import build_model

CASES = [  # (model, width, input shape, channels_last): the studies' models and inputs
    ("tiny-cnn", 16, (1, 28, 28), False),  # Fashion-MNIST phase 1's usual width
    ("tiny-cnn", 16, (1, 28, 28), True),
    ("tiny-cnn", 32, (1, 28, 28), False),  # the Fashion-MNIST baseline
    ("tiny-cnn", 16, (1, 8, 8), False),  # digits (the quickstart)
    ("resnet9", 16, (3, 32, 32), False),
    ("resnet20", 16, (3, 32, 32), False),
]


def per_image(model, x, y, batch: int, device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.no_grad():
        for i in range(0, len(y), batch):
            F.cross_entropy(model(x[i : i + batch]).float(), y[i : i + batch], reduction="sum")
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / len(y)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--images", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    torch.manual_seed(0)
    mine = EVAL_BATCH[args.device]
    sizes = sorted({1024, 512, 256, 128, 64, mine}, reverse=True)
    print(f"device {args.device}, {torch.get_num_threads()} threads; the trainer's batch here: {mine}")
    for name, width, shape, cl in CASES:
        fmt = torch.channels_last if cl else torch.contiguous_format
        model = build_model(name, shape[0], 10, width).eval().to(args.device, memory_format=fmt)
        x = torch.randn(args.images, *shape, device=args.device).contiguous(memory_format=fmt)
        y = torch.randint(0, 10, (args.images,), device=args.device)
        for b in sizes:  # warm-up: kernels chosen, memory allocated
            per_image(model, x, y, b, args.device)
        times = {b: [] for b in sizes}
        for _ in range(args.reps):
            for b in sizes:
                times[b].append(per_image(model, x, y, b, args.device))
        med = {b: statistics.median(v) for b, v in times.items()}
        cells = "  ".join(f"{b}: {1e6 * med[b]:.0f}" for b in sizes)
        print(
            f"{name} width {width} {shape}{' channels_last' if cl else ''}: us/image {cells}; "
            f"ratio_1024_to_{mine}={med[1024] / med[mine]:.2f}"
        )


if __name__ == "__main__":
    main()
