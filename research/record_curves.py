"""Record learning curves of random configurations from the replay space.

Each configuration is trained twice: at the recording fidelity (the replay
study's base data fraction) and at the tuning phase's fidelity (a quarter of
that data, same epochs). Test accuracy is measured on the first 1,000 test
images only: the replay never uses it, and the full test set would triple the
recording time on CPU. One JSON line per configuration is appended to the
output, so the recording resumes where it stopped and loses nothing on a crash.

    EFFSEARCH_DATA_DIR=../shared/data uv run python -m research.record_curves --n 200

Rows are in the order they were recorded; ``index`` is the configuration's place
in the seeded sequence.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import optuna

HERE = Path(__file__).parent
STUDY = HERE / "data" / "replay-study.yaml"
OUT = HERE / "data" / "fashion_curves.jsonl"
TUNE_SHARE = 0.25


def slim(result) -> dict:
    return {
        "status": result.status,
        "reason": result.reason,
        "history": [{k: getattr(p, k) for k in ("epoch", "train_seconds", "val_accuracy")} for p in result.history],
        "train_seconds": result.final.train_seconds,
        "val_accuracy": result.final.val_accuracy,
        "test_accuracy": result.final.test_accuracy,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from effsearch.search.study import studyfile
    from effsearch.trainer import training
    from effsearch.trainer.data.splits import load_splits
    from effsearch.trainer.training import train

    def small_test(cfg, root=None):
        s = load_splits(cfg, root)
        return dataclasses.replace(s, test_x=s.test_x[:1000], test_y=s.test_y[:1000])

    training.load_splits = small_test  # the trainer looks it up in its module at each run

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    spec = studyfile.load(STUDY)
    done = set()  # indices already recorded (delete a line to record it again)
    if args.out.exists():
        done = {json.loads(line)["index"] for line in args.out.read_text().splitlines() if line.strip()}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=args.seed), directions=spec.directions)
    for i in range(args.n):
        trial = study.ask()
        cfg = spec.space.config(trial)
        params = dict(trial.params)
        study.tell(trial, [0.0] * len(spec.directions))
        if i in done:  # same seed, same sequence: skip what is recorded
            continue
        row = {"index": i, "params": params, "config": cfg.to_dict()}
        t = time.perf_counter()
        for name, c in (
            ("full", cfg),
            ("tune", cfg.replace(**{"dataset.data_fraction": cfg.dataset.data_fraction * TUNE_SHARE})),
        ):
            try:
                row[name] = slim(train(c, progress=False))
            except Exception as e:  # a failing config is data too
                row[name] = {"status": "failed", "reason": f"{type(e).__name__}: {e}", "history": []}
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        full = row["full"]
        print(
            f"[{i + 1}/{args.n}] {time.perf_counter() - t:5.1f}s {full['status']:9s} "
            f"val {full.get('val_accuracy') or 0:.3f} train {full.get('train_seconds') or 0:.1f}s",
            flush=True,
        )


if __name__ == "__main__":
    main()
