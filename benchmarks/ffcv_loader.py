"""FFCV vs the in-memory PyTorch path on Fashion-MNIST (CPU): loader alone, end to end, selections.

1. Loader alone: images/s over whole epochs of the 54,000 training images, batch
   128, uint8 batches as the trainer receives them, then with the augmentation
   (flip, pad-crop 2, normalise to float) the trainer applies:
   ``torch``        DataLoader over the in-memory uint8 tensor (the PyTorch path)
   ``ffcv``         FFCVTrainLoader (one compiled ffcv Loader, NDArray decode)
   ``+aug``         the same, then effsearch's BatchAugment (what runs use)
   ``ffcv-native``  FFCV's own RandomHorizontalFlip + RandomTranslate(2) in the
                    compiled pipeline, then ToTorchImage and normalisation
   Variants alternate (A B C ... A B C ...) so that load drift hits all; medians.
2. End to end: ``effsearch train`` on configs/fashion-mnist-baseline.yaml (tiny CNN
   width 32, batch 128, flip + crop) with ``epochs`` overridden, loader torch vs
   ffcv, alternated; train seconds per epoch (evaluation excluded) and set-up.
3. Selections: what changing the subset costs with FFCVTrainLoader.set_subset
   (kept Loader) against building a new ffcv Loader for it, per subset size.

    EFFSEARCH_DATA_DIR=../shared/data uv run --extra ffcv python benchmarks/ffcv_loader.py [--epochs 2]

Prints one JSON object per measurement, then a summary; the machine's load
average is printed too (other work on the machine slows both sides).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def emit(**record):
    record["load"] = round(os.getloadavg()[0], 2)
    print(json.dumps(record), flush=True)
    return record


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="epochs per loader variant (alternated)")
    ap.add_argument("--epochs", type=float, default=2, help="epochs of each end-to-end run")
    ap.add_argument("--runs", type=int, default=1, help="end-to-end runs per loader (alternated)")
    ap.add_argument("--skip-train", action="store_true", help="loader and selection parts only")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    t = time.perf_counter()
    from effsearch.trainer.data import betons as B
    from effsearch.trainer.data import ffcv_loader as F

    import_s = time.perf_counter() - t
    from ffcv.fields import NDArrayField  # noqa: F401
    from ffcv.fields.decoders import IntDecoder, NDArrayDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import RandomHorizontalFlip, RandomTranslate, ToTensor, ToTorchImage

    from effsearch.config import TrainConfig
    from effsearch.trainer.data.splits import BatchAugment, load_splits, make_loader

    emit(what="import", seconds=import_s, torch_threads=torch.get_num_threads(), cpus=os.cpu_count())
    cfg = TrainConfig.from_yaml(ROOT / "configs" / "fashion-mnist-baseline.yaml", ["device=cpu"])
    splits = load_splits(cfg, args.data_dir)
    n, bs = len(splits.train_y), cfg.batch_size
    tmp = Path(tempfile.mkdtemp(prefix="ffcv-bench-"))
    prep = B.ensure_betons(cfg, splits, folder=tmp / "betons", force=True)
    emit(what="prepare", seconds=prep.seconds, bytes={s: prep.path(s).stat().st_size for s in B.SPLITS})

    # an HWC copy for FFCV's own augmentations (they flip and translate H,W,C arrays)
    hwc = tmp / "train_hwc.beton"
    B.write_beton(hwc, splits.train_x.permute(0, 2, 3, 1).contiguous(), splits.train_y)
    # A first Loader in a process pays numba's own start-up too: measure first and second.
    compile_s = []
    for _ in range(2):
        loader = F.FFCVTrainLoader(prep.path("train"), n, bs, seed=0)
        compile_s.append(loader.compile_seconds)
    emit(what="new Loader (construct + compile)", first=compile_s[0], second=compile_s[1])

    mean, std = splits.mean, splits.std
    aug = BatchAugment(mean, std, "cpu", flip=True, crop_padding=2, train=True)
    norm = BatchAugment(mean, std, "cpu", flip=False, crop_padding=0, train=True)
    torch_loader = make_loader(splits.train_x, splits.train_y, bs, shuffle=True, seed=0)
    t = time.perf_counter()
    native = Loader(
        str(hwc),
        batch_size=bs,
        num_workers=torch.get_num_threads(),
        order=OrderOption.RANDOM,
        seed=0,
        drop_last=False,
        pipelines={
            "image": [
                NDArrayDecoder(),
                RandomHorizontalFlip(),
                RandomTranslate(padding=2, fill=(0,) * splits.channels),
                ToTensor(),
                ToTorchImage(channels_last=False),
            ],
            "label": [IntDecoder(), ToTensor()],
            "index": None,
        },
    )
    next(iter(native))
    emit(what="new Loader (ffcv-native aug pipeline)", seconds=time.perf_counter() - t)

    def epoch(it, transform=None):
        c0, t0 = time.process_time(), time.perf_counter()
        count = 0
        for batch in it:
            if transform is not None:
                batch = transform(batch)
            count += len(batch[0])
        assert count == n, count
        # images/s of wall time, and images per CPU second (all threads of this process: ffcv's too)
        return n / (time.perf_counter() - t0), n / (time.process_time() - c0)

    variants = {
        "torch": lambda: epoch(torch_loader),
        "ffcv": lambda: epoch(loader),
        "torch+aug": lambda: epoch(torch_loader, aug),
        "ffcv+aug": lambda: epoch(loader, aug),
        "ffcv-native aug": lambda: epoch(native, lambda b: norm((b[0], b[1].view(-1)))),
    }
    for fn in variants.values():  # one warm epoch each
        fn()
    rates = {k: [] for k in variants}
    for _ in range(args.repeats):
        for k, fn in variants.items():
            rates[k].append(fn())
    loader_rates, best_rates, cpu_rates = {}, {}, {}
    for k, v in rates.items():
        wall, cpu = [r[0] for r in v], [r[1] for r in v]
        loader_rates[k], best_rates[k], cpu_rates[k] = statistics.median(wall), max(wall), statistics.median(cpu)
        emit(
            what="loader images/s",
            variant=k,
            median=loader_rates[k],
            best=best_rates[k],
            per_cpu_second=cpu_rates[k],
            all=[round(r) for r in wall],
        )

    # -- selections: set_subset on the kept Loader vs a new Loader per subset -------------------
    rng = np.random.default_rng(0)
    sel_rows = []
    for frac in (0.1, 0.3, 0.5):
        k = int(frac * n)
        idx = rng.choice(n, k, replace=False)
        w = rng.uniform(0.5, 2.0, k).astype(np.float32)
        t0 = time.perf_counter()
        loader.set_subset(idx, w)
        set_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        it = iter(loader)
        next(it)
        first_s = time.perf_counter() - t0
        for _ in it:
            pass
        ep_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        fresh = F.FFCVTrainLoader(prep.path("train"), n, bs, seed=1, sampler=F.EpochOrder(n, 1), weights=torch.ones(n))
        fresh.set_subset(idx, w)
        next(iter(fresh))
        fresh.close()
        new_s = time.perf_counter() - t0
        sel_rows.append(
            emit(
                what="selection",
                fraction=frac,
                samples=k,
                set_subset_s=set_s,
                first_batch_s=first_s,
                subset_epoch_s=ep_s,
                new_loader_s=new_s,
            )
        )
    loader.close()

    # -- end to end ------------------------------------------------------------------------------
    e2e = {"torch": [], "ffcv": []}
    if not args.skip_train:
        from effsearch.trainer.training import train

        os.environ.setdefault("TQDM_DISABLE", "1")
        for _ in range(args.runs):
            for name in ("torch", "ffcv"):
                run_cfg = cfg.replace(loader=name, epochs=args.epochs)
                res = train(run_cfg, data_root=args.data_dir, progress=False)
                f = res.final
                row = emit(
                    what="train",
                    loader=name,
                    status=res.status,
                    epochs=args.epochs,
                    train_seconds=f.train_seconds,
                    s_per_epoch=f.train_seconds / args.epochs,
                    setup_seconds=f.setup_seconds,
                    val_accuracy=f.val_accuracy,
                    history=[round(p.val_accuracy, 4) for p in res.history],
                )
                e2e[name].append(row)

    print("\nsummary (ratio = ffcv / torch images/s, or torch / ffcv seconds: >1 means FFCV is faster)")
    print(f"  {'loader':>22} {'median img/s':>13} {'best img/s':>11} {'img/CPU-s':>10}")
    for k, rate in loader_rates.items():
        print(f"  {k:>22} {rate:>13,.0f} {best_rates[k]:>11,.0f} {cpu_rates[k]:>10,.0f}")
    for label, a, b in (
        ("ffcv / torch, loader alone", "ffcv", "torch"),
        ("ffcv / torch, loader + aug", "ffcv+aug", "torch+aug"),
        ("ffcv-native / ffcv+aug", "ffcv-native aug", "ffcv+aug"),
    ):
        print(
            f"  {label:<28} median {loader_rates[a] / loader_rates[b]:.2f}  best {best_rates[a] / best_rates[b]:.2f}"
            f"  per CPU-s {cpu_rates[a] / cpu_rates[b]:.2f}"
        )
    for row in sel_rows:
        print(
            f"  selection {row['fraction']:.0%}: set_subset {row['set_subset_s'] * 1e3:.1f} ms, first batch "
            f"{row['first_batch_s'] * 1e3:.1f} ms, new Loader instead {row['new_loader_s']:.2f} s"
        )
    if e2e["torch"] and e2e["ffcv"]:
        tt = statistics.median(r["s_per_epoch"] for r in e2e["torch"])
        ff = statistics.median(r["s_per_epoch"] for r in e2e["ffcv"])
        print(f"  s/epoch torch {tt:.2f}, ffcv {ff:.2f}; ratio torch/ffcv {tt / ff:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
