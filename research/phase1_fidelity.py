"""Which phase-1 target ranks the full data's time to target: Kendall tau per threshold.

A tuning phase scores each configuration by its time to its own target on a data subset, and
phase 2 re-measures the picks on the full data. This reads a finished two-phase study (phase 2
is STUDY, phase 1 STUDY-tune), trains ``--sample`` more of phase 1's completed configurations on
the full data (drawn at random, the config's own seed), and prints, for each threshold, how many
phase-1 curves reach it and Kendall's tau between phase 1's time to it (read on the stored
curve) and the full data's time to the study's target. A miss ranks last on either side. Phase
2's configurations count with their first seed; the baseline counts too.

    uv run python -m research.phase1_fidelity studies/fashion-mnist.yaml --sample 16 --data-dir ../shared/data

On the two-phase Fashion-MNIST study of docs/results.md (29 configurations): tau 0.48 at phase
1's target 0.75 and 0.71 at 0.80.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

LAST = float("inf")


def time_to(history: list, threshold: float) -> float:
    for p in history:
        if p.get("val_accuracy") is not None and p["val_accuracy"] >= threshold:
            return p["train_seconds"]
    return LAST


def kendall(a: list, b: list) -> float:
    from scipy.stats import kendalltau

    big = 1e12  # a miss ranks last: scipy needs finite values
    return float(kendalltau([min(x, big) for x in a], [min(y, big) for y in b]).statistic)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", help="the study file (or phase 2's study name, with --storage)")
    ap.add_argument("--storage")
    ap.add_argument("--sample", type=int, default=0, help="phase-1 configurations to train on the full data")
    ap.add_argument("--seed", type=int, default=0, help="for drawing the sample")
    ap.add_argument("--thresholds", help="comma-separated (default: phase 1's target -0.05 ... +0.07)")
    ap.add_argument("--data-dir")
    ap.add_argument(
        "--out",
        type=Path,
        help="a JSON-lines file: each sampled run is appended, and the runs already there count again without training",
    )
    return ap


def confirmed(confirm, base_tune) -> dict[int, float]:
    """Phase 2's full-data time to target (first seed) by phase-1 trial number; the baseline's
    under phase 1's baseline."""
    from effsearch.search.store.attrs import BASELINE_KEY

    full: dict[int, float] = {}  # tune trial number -> full-data time to target (first seed)
    first_seed: dict[int, int] = {}
    for t in confirm.get_trials(deepcopy=False):
        if t.state.name != "COMPLETE":
            continue
        key = base_tune.number if t.user_attrs.get(BASELINE_KEY) else t.user_attrs.get("tune_trial")
        seed = t.user_attrs.get("confirm_seed", -1)
        if key is not None and seed <= first_seed.get(key, seed):
            first_seed[key] = seed
            full[key] = t.user_attrs.get("time_to_target") or LAST
    return full


def sample(args, tune_trials: list, full: dict[int, float]) -> None:
    """Adds to ``full`` the runs of an earlier sample (``--out``) and ``--sample`` more phase-1
    configurations trained on the full data."""
    from effsearch.search.store import record
    from effsearch.trainer.training import train

    if args.out and args.out.is_file():  # an earlier sample's runs count again, untrained
        for line in args.out.read_text().splitlines():
            row = json.loads(line)
            full[row["tune_trial"]] = row["time_to_target"] if row["time_to_target"] is not None else LAST
    pool = [
        t
        for t in tune_trials
        if t.state.name == "COMPLETE" and t.number not in full and t.user_attrs.get("full_config")
    ]
    for t in random.Random(args.seed).sample(pool, min(args.sample, len(pool))):
        cfg = record.stored_config(t, "full_config")
        r = train(cfg, data_root=args.data_dir, progress=False)
        full[t.number] = r.time_to_target if r.time_to_target is not None else LAST
        row = {
            "tune_trial": t.number,
            "time_to_target": r.time_to_target,
            "val_accuracy": r.final.val_accuracy,
            "test_accuracy": r.final.test_accuracy,
            "train_seconds": r.final.train_seconds,
        }
        print(json.dumps(row), flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")


def main() -> None:
    args = build_parser().parse_args()

    import optuna

    from effsearch.search.results.lookup import open_study
    from effsearch.search.store.attrs import BASELINE_KEY
    from effsearch.search.store.storage import open_url
    from effsearch.search.study.phases import TUNE_SUFFIX

    confirm, url = open_study(args.study, args.storage)
    tune = optuna.load_study(study_name=confirm.study_name + TUNE_SUFFIX, storage=open_url(url))
    tune_trials = tune.get_trials(deepcopy=False)
    base_tune = next(t for t in tune_trials if t.user_attrs.get(BASELINE_KEY) and t.state.is_finished())
    by_number = {t.number: t for t in tune_trials}
    target = confirm.user_attrs.get("target_accuracy")
    full = confirmed(confirm, base_tune)
    sample(args, tune_trials, full)

    keys = sorted(full)
    y = [full[k] for k in keys]
    tune_target = tune.user_attrs.get("target_accuracy") or base_tune.user_attrs.get("target_accuracy")
    if args.thresholds:
        thresholds = [float(x) for x in args.thresholds.split(",")]
    else:
        thresholds = [round(tune_target + d, 3) for d in (-0.05, -0.03, 0.0, 0.03, 0.05, 0.07)]
    misses = sum(v == LAST for v in y)
    print(f"{len(keys)} configurations on the full data ({misses} miss {target}); phase 1's target {tune_target}")
    print("phase-1 threshold  reached  Kendall tau (vs full-data time to target)")
    for thr in thresholds:
        x = [time_to(by_number[k].user_attrs.get("history") or [], thr) for k in keys]
        reached = sum(v != LAST for v in x)
        tau = kendall(x, y) if len(set(x)) > 1 and len(set(y)) > 1 else float("nan")
        print(f"{thr:17.3f}  {reached:3d}/{len(x):<3d}  " + (f"{tau:+.2f}" if tau == tau else "n/a (all tied)"))


if __name__ == "__main__":
    main()
