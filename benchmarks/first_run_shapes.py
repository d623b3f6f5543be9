"""What a worker's first run of a new layout, dtype or batch shape pays, and what removes it.

A study's worker trains many configurations in one process. With ``cudnn_benchmark`` on, cuDNN
times its kernels the first time it meets a shape (layout, dtype, batch size, image size) and
caches the choice for the process: the first trial of such a config pays it inside its train
seconds, later ones do not (docs/benchmarks.md: channels_last 13.5 against 2.65 ms a step on an
H200 in its first run). This measures it in fresh processes, as a worker meets it: the worker's
warm-up on the plain recipe, then each variant trained twice in a row, optionally after an
untimed warm-up of the variant's own config (the rule a study could apply per trial).

Modes, one fresh process each, alternated: cudnn_benchmark on/off x per-variant warm-up on/off.
Printed per variant and mode: first and second run's ms a step (compile excluded), the first
run's excess seconds, and the warm-up's own seconds.

    python benchmarks/first_run_shapes.py --device cuda --repeats 1
    EFFSEARCH_DATA_DIR=../shared/data uv run python benchmarks/first_run_shapes.py --device cpu --tiny --epochs 0.2
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

VARIANTS = {  # name -> dotted changes to the trainer_overhead recipe
    "plain": {},
    "channels_last": {"channels_last": True},
    "batch 256": {"batch_size": 256},
    "batch 1024": {"batch_size": 1024},
    "fp32": {"precision": "fp32"},
    "amp_fp16": {"precision": "amp_fp16"},
    "progressive_resizing": {"algorithms.progressive_resizing": {}},
}

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from trainer_overhead import recipe
from effsearch.config import TrainConfig
from effsearch.search.run.workers import warm_up
from effsearch.trainer.training import train
device, tiny, epochs, bench, warm = sys.argv[2], sys.argv[3] == "1", float(sys.argv[4]), sys.argv[5] == "1", sys.argv[6] == "1"
variants = json.loads(sys.argv[7])
plain = TrainConfig.from_dict(recipe(device, tiny, epochs)).replace(cudnn_benchmark=bench)
warm_up(plain)  # what a worker does before its first trial
out = {}
for name, changes in variants.items():
    cfg = plain.replace(**changes)
    w = warm_up(cfg) if warm else None
    runs = []
    for _ in range(2):
        f = train(cfg, progress=False).final
        runs.append([f.train_seconds - f.compile_seconds, f.steps])
    out[name] = {"runs": runs, "warm_up_s": w}
print("RESULT " + json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--tiny", action="store_true", help="width-4 CNN on 8,000 images: a quick CPU check")
    ap.add_argument("--epochs", type=float, default=1)
    ap.add_argument("--repeats", type=int, default=1, help="fresh processes per mode")
    ap.add_argument("--only", nargs="*", help=f"variants (default all): {', '.join(VARIANTS)}")
    args = ap.parse_args()
    variants = {k: v for k, v in VARIANTS.items() if not args.only or k in args.only or k == "plain"}
    modes = [(b, w) for b in ("1", "0") for w in ("0", "1")]
    res: dict[tuple, list[dict]] = {m: [] for m in modes}
    for i in range(args.repeats):
        for bench, warm in modes:
            p = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    CHILD,
                    str(HERE),
                    args.device,
                    "1" if args.tiny else "0",
                    str(args.epochs),
                    bench,
                    warm,
                    json.dumps(variants),
                ],
                capture_output=True,
                text=True,
            )
            line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
            if p.returncode or line is None:
                print(p.stderr[-3000:], file=sys.stderr)
                sys.exit(f"child (cudnn_benchmark={bench}, warm-up={warm}) failed with rc {p.returncode}")
            res[(bench, warm)].append(json.loads(line[len("RESULT ") :]))
            print(f"process {i + 1}: cudnn_benchmark={bench} per-variant warm-up={warm} done", flush=True)
    print(f"\ndevice {args.device}; {args.epochs} epoch(s); medians over {args.repeats} process(es) a mode")
    print(
        f"{'variant':22s} {'bench':>5s} {'warm':>4s} {'run 1 ms':>9s} {'run 2 ms':>9s} {'excess s':>9s} {'warm-up s':>9s}"
    )
    for name in variants:
        for bench, warm in modes:
            rows = [r[name] for r in res[(bench, warm)]]
            ms = [statistics.median(1000 * r["runs"][j][0] / r["runs"][j][1] for r in rows) for j in (0, 1)]
            ex = statistics.median(r["runs"][0][0] - r["runs"][1][0] for r in rows)
            w = statistics.median(r["warm_up_s"] for r in rows) if warm == "1" else None
            print(
                f"{name:22s} {bench:>5s} {warm:>4s} {ms[0]:9.3f} {ms[1]:9.3f} {ex:9.3f} "
                + ("" if w is None else f"{w:9.3f}")
            )
    steady = {
        b: statistics.median(
            r["plain"]["runs"][1][0] / r["plain"]["runs"][1][1] for w in ("0", "1") for r in res[(b, w)]
        )
        for b in ("1", "0")
    }
    print(f"steady_plain_bench_off_over_on={steady['0'] / steady['1']:.3f}")


if __name__ == "__main__":
    main()
