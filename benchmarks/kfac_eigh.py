"""How long one K-FAC factor's eigendecomposition takes on this machine, by its size: the bound
``config/sources.py`` (KFAC_CPU_FACTOR) holds K-FAC to on the CPU, so that no single step outlasts a
study's max_slowdown limit (checked only between steps).

    flock /work/locks/measure uv run --frozen python benchmarks/kfac_eigh.py [--sizes 1024,2048,4609] [--device cpu]

Prints one line a size: n, the median seconds of ``torch.linalg.eigh`` on an n x n float32
symmetric positive definite matrix (a factor's shape; 3 repeats), and the threads torch used.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def seconds(n: int, device: str, repeats: int) -> float:
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(n, n, generator=g).to(device)
    m = x @ x.T / n + 1e-3 * torch.eye(n, device=device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.linalg.eigh(m)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="512,1024,1537,2048,2305,3072,4609")
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    print(f"device {args.device}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    for n in (int(s) for s in args.sizes.split(",")):
        print(f"n {n:5d}  eigh {seconds(n, args.device, args.repeats):8.3f} s", flush=True)


if __name__ == "__main__":
    main()
