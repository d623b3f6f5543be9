"""Record learning curves and real per-trial costs of random configurations of the quickstart space.

The table behind the replay (research/replay): configurations drawn by a
seeded RandomSampler from studies/quickstart.yaml's space (digits, tiny CNN,
CPU), each trained

    full     at full fidelity, evaluated at every 1/9 of its epoch budget
    tune20   on 20% of the training data (the tuning phase's default), same epochs and evaluations
    tune50   on 50% of the data (every 4th configuration): phase 1's data fraction
    seed1    at full fidelity again with seed 1 (every 10th): the noise floor

With ``--study FILE --phase1`` the configurations are another study's, each trained once, as
that study's phase 1 trains it (its tuning phase's data subset, validation subset and target,
no test set), evaluated at every 1/9 of its budget: the study's phase 1 as a task of its own
(``full`` in the table is then that fidelity).

plus the study's base configuration (the baseline) with seeds 0-4, and again
(seed 100 + i) after every 20th configuration i, so that the baseline's costs
are measured under the same load as the table's. Per run it
keeps the curve (epoch, train seconds, val accuracy), the final val and test
accuracy and the real costs: the wall time around ``train()``, set-up,
evaluation, final evaluation and compile seconds, and steps.

One JSON line per configuration, appended under a file lock, so several workers
(``--worker K --workers W`` take every W-th index) can record at once and a
stopped recording resumes where it stopped. One torch thread per worker.

    EFFSEARCH_DATA_DIR=/work/shared/data nohup nice -n 10 uv run python -m research.record_quickstart \\
        --n 600 --worker 0 --workers 2 > /tmp/rec0.log 2>&1 &
"""

from __future__ import annotations

import argparse
import fcntl
import json
import time
from pathlib import Path

import optuna
import torch

HERE = Path(__file__).parent
ROOT = HERE.parent
STUDY = ROOT / "studies" / "quickstart.yaml"
OUT = HERE / "data" / "quickstart_curves.jsonl"
EVALS = 9  # evaluations per run: every 1/9 of the budget (MO-ASHA's default first rung is 1/9)
BASELINE_SEEDS = 5


def run(cfg, test: bool = True) -> dict:
    from effsearch.trainer.training import train

    cfg = cfg.replace(eval_every=cfg.epochs / EVALS)
    t = time.perf_counter()
    try:
        r = train(cfg, progress=False, test=test)
    except Exception as e:  # a failing config is data too
        return {
            "status": "failed",
            "reason": f"{type(e).__name__}: {e}",
            "history": [],
            "wall_seconds": time.perf_counter() - t,
        }
    wall = time.perf_counter() - t
    f = r.final
    return {
        "status": r.status,
        "reason": r.reason,
        "history": [[round(p.epoch, 5), round(p.train_seconds, 4), p.val_accuracy] for p in r.history],
        "wall_seconds": round(wall, 4),
        **{
            k: getattr(f, k)
            for k in (
                "train_seconds",
                "setup_seconds",
                "eval_seconds",
                "final_eval_seconds",
                "compile_seconds",
                "steps",
                "val_accuracy",
                "test_accuracy",
            )
        },
    }


def subset(cfg, share: float):
    return cfg.replace(**{"dataset.data_fraction": cfg.dataset.data_fraction * share})


def fidelities(cfg, phase1: bool, tune50: bool) -> dict:
    """The runs of one configuration: full, 20% (and 50%) of the data; with ``phase1`` the study's
    phase-1 fidelity is the task: one run, no test set (as phase 1)."""
    if phase1:
        return {"full": run(cfg, test=False)}
    row = {"full": run(cfg), "tune20": run(subset(cfg, 0.2))}
    if tune50:
        row["tune50"] = run(subset(cfg, 0.5))
    return row


def record(cfg, index: int, phase1: bool = False) -> dict:
    row = fidelities(cfg, phase1, index % 4 == 0)
    if not phase1 and index % 10 == 0:
        row["seed1"] = run(cfg.replace(seed=1))
    return row


def load_study(ap: argparse.ArgumentParser, path: Path, phase1: bool):
    """The study file at ``path``; a bad file, or ``phase1`` for a study without a tuning phase,
    is a usage error (exit 2, the message naming the file)."""
    from effsearch.config import ConfigError
    from effsearch.search.study import phases, studyfile

    try:
        spec = studyfile.load(path)
    except ConfigError as e:
        ap.error(str(e))
    if phase1 and not phases.enabled(spec):
        ap.error(f"{path}: --phase1 needs a study with a tuning phase (tuning: name: subset)")
    return spec


def append(path: Path, row: dict) -> None:
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(row) + "\n")
        f.flush()
        fcntl.flock(f, fcntl.LOCK_UN)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worker", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="record configurations from this index on")
    ap.add_argument("--study", type=Path, default=STUDY, help="the study whose space is sampled")
    ap.add_argument(
        "--phase1",
        action="store_true",
        help="train each configuration as the study's phase 1 does (its tuning phase), once",
    )
    args = ap.parse_args()
    if not 0 <= args.worker < args.workers:
        ap.error(f"--worker must be in 0..{args.workers - 1} (--workers {args.workers}); got {args.worker}")
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    from effsearch.search.study import phases

    spec = load_study(ap, args.study, args.phase1)
    fidelity = (lambda c: phases.shrink(c, spec.tuning)) if args.phase1 else (lambda c: c)

    def baseline_row(cfg, tune50: bool) -> dict:
        cfg = fidelity(cfg)
        return {"config": cfg.to_dict(), **fidelities(cfg, args.phase1, tune50)}

    done = set()
    if args.out.exists():
        done = {(r["kind"], r["index"]) for r in map(json.loads, args.out.read_text().splitlines())}
    mine = lambda i: i % args.workers == args.worker  # noqa: E731
    t0 = time.perf_counter()
    for s in range(BASELINE_SEEDS):
        if mine(s) and ("baseline", s) not in done:
            append(
                args.out,
                {"kind": "baseline", "index": s, "params": {}, **baseline_row(spec.base.replace(seed=s), True)},
            )
            print(f"baseline seed {s} done", flush=True)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=args.seed), directions=spec.directions)
    for i in range(args.n):
        trial = study.ask()
        cfg = fidelity(spec.space.config(trial))
        params = dict(trial.params)
        study.tell(trial, [0.0] * len(spec.directions))
        if i < args.start or not mine(i) or ("random", i) in done:
            continue
        t = time.perf_counter()
        row = {"kind": "random", "index": i, "params": params, "config": cfg.to_dict(), **record(cfg, i, args.phase1)}
        append(args.out, row)
        if i % 20 == 0 and ("baseline", 100 + i) not in done:
            # The baseline again, under the load of the moment: costs measured on a shared machine
            # drift with the load, and the benchmark's reference point and budget come from these.
            append(
                args.out,
                {
                    "kind": "baseline",
                    "index": 100 + i,
                    "params": {},
                    **baseline_row(spec.base.replace(seed=100 + i), False),
                },
            )
        full = row["full"]
        print(
            f"[{i}] {time.perf_counter() - t:5.1f}s (total {time.perf_counter() - t0:6.0f}s) {full['status']:9s} "
            f"val {full.get('val_accuracy') or 0:.3f} train {full.get('train_seconds') or 0:.1f}s",
            flush=True,
        )


if __name__ == "__main__":
    main()
