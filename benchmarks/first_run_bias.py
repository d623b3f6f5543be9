"""Is the first training run of a process slower? (Where to time a study's baseline.)

Each repeat starts a fresh Python process (as `effsearch run` does) and trains the
study's baseline config there several times in a row, optionally after the warm-up a
worker runs before its first trial (effsearch.search.run.workers.warm_up). Prints every
run's train seconds and time to target, and the first run's excess over the median of
the later ones.

    uv run python benchmarks/first_run_bias.py studies/quickstart.yaml --repeats 3 --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
from effsearch.search.study.studyfile import load
from effsearch.search.run import workers
from effsearch.trainer.training import train
spec = load(sys.argv[1])
warm = sys.argv[3] == "1"
if warm:
    t = time.perf_counter(); workers.warm_up(spec.baseline, None); w = time.perf_counter() - t
out = []
for _ in range(int(sys.argv[2])):
    r = train(spec.baseline, progress=False)
    out.append([r.final.train_seconds, r.time_to_target])
print(json.dumps({"runs": out, "warm_up_s": w if warm else None}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per mode")
    ap.add_argument("--runs", type=int, default=3, help="baseline runs per process")
    args = ap.parse_args()
    for warm in ("0", "1"):
        excess = []
        for i in range(args.repeats):
            p = subprocess.run(
                [sys.executable, "-c", CHILD, args.study, str(args.runs), warm],
                capture_output=True,
                text=True,
                check=True,
            )
            res = json.loads(p.stdout.strip().splitlines()[-1])
            train_s = [r[0] for r in res["runs"]]
            first, rest = train_s[0], statistics.median(train_s[1:])
            excess.append(first / rest - 1)
            print(
                f"warm_up={warm} process {i}: train s {', '.join(f'{t:.2f}' for t in train_s)}; time to target "
                f"{', '.join('-' if r[1] is None else f'{r[1]:.2f}' for r in res['runs'])}"
                + (f"; warm-up {res['warm_up_s']:.2f} s" if res["warm_up_s"] is not None else ""),
                flush=True,
            )
        print(
            f"warm_up={warm}: first run's excess over the later runs' median: "
            f"{', '.join(f'{e:+.0%}' for e in excess)} (median {statistics.median(excess):+.0%})",
            flush=True,
        )


if __name__ == "__main__":
    main()
