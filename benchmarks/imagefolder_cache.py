"""An imagefolder's first load (decode + cache write) against its second (cache read).

Writes N PNG images (default 10,000) of 32x32 RGB in 10 class folders into a temporary
folder, then times ``effsearch.trainer.data.splits.load_splits`` on ``dataset: {name: imagefolder}``
in fresh subprocesses (so effsearch's per-process cache does not count), as a run's
``result.final.data_seconds`` does: the call alone, imports done before the clock starts.

* first load: the disk cache removed beforehand, so the images are decoded (PIL) and the
  cache written (``DATA/imagefolder-cache/KEY/*.npy``);
* second load: the cache as the first load left it, read back (memory-mapped).

Rounds alternate first, second, first, second, ... so that drift in the machine's load hits
both; medians are reported. The image files stay in the OS page cache throughout (nothing
here drops it), so the first load measures decoding rather than the disk.

    uv run python benchmarks/imagefolder_cache.py [--images 10000] [--rounds 3]

Prints one JSON object per load, then a summary with the machine's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys, time
import PIL.Image, sklearn.model_selection  # imported by load_splits: not what is timed
from effsearch.config import TrainConfig
from effsearch.trainer.data.splits import load_splits
cfg = TrainConfig.from_dict({"dataset": {"name": "imagefolder", "path": sys.argv[1]}})
t = time.perf_counter()
s = load_splits(cfg, sys.argv[2])
print(json.dumps({"seconds": time.perf_counter() - t, "train": len(s.train_y), "val": len(s.val_y),
                  "test": len(s.test_y), "shape": list(s.train_x.shape[1:])}))
"""


def write_folder(root: Path, images: int, classes: int = 10, seed: int = 0) -> None:
    """``images`` 32x32 RGB PNGs, a class colour plus noise, spread over ``classes`` folders."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for k in range(classes):
        (root / f"class{k:02d}").mkdir(parents=True, exist_ok=True)
    for i in range(images):
        k = i % classes
        pixels = np.clip(rng.normal(25 * k, 40, (32, 32, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(root / f"class{k:02d}" / f"{i:06d}.png")


def load_once(folder: Path, data: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), str(data)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3, help="first/second pairs, alternated")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="imagefolder-bench-"))
    folder, data = tmp / "images", tmp / "data"
    try:
        t = time.perf_counter()
        write_folder(folder, args.images)
        print(f"wrote {args.images} PNGs in {time.perf_counter() - t:.1f}s to {folder}", file=sys.stderr)
        loads = {"first": [], "second": []}
        load_before = os.getloadavg()
        for r in range(args.rounds):
            for kind in ("first", "second"):
                if kind == "first":
                    shutil.rmtree(data / "imagefolder-cache", ignore_errors=True)
                rec = {"round": r, "load": kind, **load_once(folder, data), "loadavg": round(os.getloadavg()[0], 2)}
                loads[kind].append(rec["seconds"])
                print(json.dumps(rec), flush=True)
        first, second = statistics.median(loads["first"]), statistics.median(loads["second"])
        cache = sum(p.stat().st_size for p in (data / "imagefolder-cache").rglob("*.npy"))
        print(
            json.dumps(
                {
                    "images": args.images,
                    "first_s": round(first, 3),
                    "second_s": round(second, 3),
                    "ratio": round(first / second, 1),
                    "first_all": [round(s, 3) for s in loads["first"]],
                    "second_all": [round(s, 3) for s in loads["second"]],
                    "cache_mib": round(cache / 2**20, 1),
                    "cores": os.cpu_count(),
                    "loadavg_before": [round(x, 2) for x in load_before],
                    "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                }
            )
        )
        print(
            f"first load (decode + cache write) {first:.2f}s, second load (cache read) {second:.3f}s: "
            f"{first / second:.0f}x; load average {load_before[0]:.2f} -> {os.getloadavg()[0]:.2f} "
            f"on {os.cpu_count()} cores",
            file=sys.stderr,
        )
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
