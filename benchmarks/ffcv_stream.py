"""An image folder through FFCV's stream against the in-memory PyTorch path: time a step and the
memory a run holds.

Writes N RGB PNG images (default 3,000 of 96x96, 10 classes) into a temporary folder, decodes
them once into effsearch's disk cache, then trains the tiny CNN on them with ``loader: torch``
(the training images copied into memory) and ``loader: ffcv`` (left on disk, JPEG-compressed in
a .beton, streamed), each in a fresh process, alternated A B A B. Per run: train seconds per
step (evaluation excluded), set-up seconds (FFCV's first run writes its .beton) and the
process's peak resident memory. Last line: the medians and ``ratio=``, FFCV / torch per step.

    uv run --extra ffcv python benchmarks/ffcv_stream.py [--images 3000] [--side 96] [--pairs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHILD = r"""
import json, resource, sys
from effsearch.config import TrainConfig
from effsearch.trainer.training import train
cfg = TrainConfig.from_dict(json.loads(sys.argv[1]))
r = train(cfg, data_root=sys.argv[2], progress=False, test=False)
print(json.dumps({"per_step": r.final.train_seconds / r.final.steps, "setup": r.final.setup_seconds,
                  "data": r.final.data_seconds, "val": r.final.val_accuracy,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_images(root: Path, n: int, side: int) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    for i in range(n):
        k = i % 10
        folder = root / f"c{k}"
        folder.mkdir(parents=True, exist_ok=True)
        pixels = rng.normal(90, 40, (side, side, 3))
        pixels[..., k % 3] += 60
        pixels[(k * side) // 10 : (k * side) // 10 + side // 8] += 70
        Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(folder / f"{i}.png")


def run(cfg: dict, data: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg), str(data)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=3000)
    p.add_argument("--side", type=int, default=96)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--epochs", type=float, default=2)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="ffcv-stream-") as tmp:
        images, data = Path(tmp) / "images", Path(tmp) / "data"
        write_images(images, args.images, args.side)
        base = {
            "dataset": {"name": "imagefolder", "path": str(images)},
            "model": {"name": "tiny-cnn", "width": 16},
            "epochs": args.epochs,
            "batch_size": 128,
            "eval_every": args.epochs,
            "target_accuracy": 0.0,
            "device": "cpu",
        }
        first = run({**base, "loader": "ffcv"}, data)  # decodes the folder and writes the .beton: not timed
        print(f"first ffcv run (decode + .beton): set-up {first['setup']:.1f} s, data {first['data']:.1f} s")
        cache = sum(f.stat().st_size for f in (data / "imagefolder-cache").rglob("*") if f.is_file())
        beton = sum(f.stat().st_size for f in (data / "ffcv").rglob("train.beton"))
        print(f"decoded cache {cache / 2**20:.0f} MiB, train.beton (JPEG) {beton / 2**20:.0f} MiB")
        rows = {"torch": [], "ffcv": []}
        for i in range(args.pairs):
            for loader in ("torch", "ffcv"):
                r = run({**base, "loader": loader}, data)
                rows[loader].append(r)
                print(
                    f"pair {i} {loader:5s}: {r['per_step'] * 1e3:7.1f} ms/step  peak {r['peak_mib']:6.0f} MiB  "
                    f"val {r['val']:.3f}",
                    flush=True,
                )
        med = {k: statistics.median(x["per_step"] for x in v) for k, v in rows.items()}
        mem = {k: statistics.median(x["peak_mib"] for x in v) for k, v in rows.items()}
        ratios = [f["per_step"] / t["per_step"] for t, f in zip(rows["torch"], rows["ffcv"])]
        print(
            f"torch {med['torch'] * 1e3:.1f} ms/step, peak {mem['torch']:.0f} MiB; ffcv {med['ffcv'] * 1e3:.1f} "
            f"ms/step, peak {mem['ffcv']:.0f} MiB; ratio={statistics.median(ratios):.3f} (ffcv / torch per step)"
        )


if __name__ == "__main__":
    main()
