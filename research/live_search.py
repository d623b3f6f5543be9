"""The replay benchmark's comparison, live: NSGA-II at full fidelity against effsearch's
pruner plus tuning phase, as real studies on Fashion-MNIST (the replay space: 3% of the
training images, 2-5 epochs), to check the replay's direction.

Both studies run in one process, one after the other, on fresh journal storages in
--out. Consumed compute is the train seconds of every trial (pruned ones up to their
rung; phase 1 and phase 2 for effsearch). Hypervolume is over (time to target,
-final validation accuracy) of full-data trials, reference point fixed from both.

    EFFSEARCH_DATA_DIR=../shared/data uv run python -m research.live_search --trials 20
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import optuna
import yaml

from research.replay.report import compute_to_reach, hv_curve

HERE = Path(__file__).parent
STUDY = HERE / "data" / "replay-study.yaml"


def study_file(out: Path, name: str, trials: int, **changes) -> Path:
    raw = yaml.safe_load(STUDY.read_text())
    raw.update(name=name, n_trials=trials, **changes)
    path = out / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def consumed(study) -> list[tuple[float, tuple | None]]:
    """(cumulative train seconds, (time, accuracy) of a complete trial that reached the target or
    None), in trial order. A miss is stored with its train seconds and marked infeasible: no time."""
    out, used = [], 0.0
    for t in study.get_trials(deepcopy=False):
        used += t.user_attrs.get("train_seconds") or 0.0
        hit = t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("reached_target")
        v = tuple(t.values) if hit else None
        out.append((used, v))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20, help="trials per search (phase 1 for effsearch)")
    ap.add_argument("--top-k", type=int, default=4)
    ap.add_argument("--tune-target", type=float, default=0.4)
    ap.add_argument("--out", type=Path, default=Path("runs/live-search"))
    args = ap.parse_args()
    from effsearch.search.run.errors import StudyFailed
    from effsearch.search.run.runner import run
    from effsearch.search.store.storage import open_url
    from effsearch.search.study import studyfile

    args.out.mkdir(parents=True, exist_ok=True)
    nsga = study_file(
        args.out, "live-nsga2", args.trials, sampler={"name": "nsga2", "population_size": max(4, args.trials // 4)}
    )
    eff = study_file(
        args.out,
        "live-effsearch",
        args.trials,
        sampler={"name": "tpe", "multivariate": True, "n_startup_trials": max(4, args.trials // 4)},
        pruner={"name": "moasha", "eta": 3, "min_fraction": 1 / 9, "min_trials": 4},
        tuning={"name": "subset", "data_fraction": 0.25, "target_accuracy": args.tune_target, "top_k": args.top_k},
    )
    wall = {}
    for path in (nsga, eff):
        t = time.perf_counter()
        with open(args.out / f"{path.stem}.log", "w") as log:
            try:
                run(studyfile.load(path), out=log)
            except StudyFailed as e:
                sys.exit(f"{path}: {e}; see {args.out / (path.stem + '.log')}")
        wall[path.stem] = time.perf_counter() - t

    def load(name, path):
        return optuna.load_study(study_name=name, storage=open_url(str(path.with_suffix(".journal"))))

    a = consumed(load("live-nsga2", nsga))
    tune = consumed(load("live-effsearch-tune", eff))
    confirm = consumed(load("live-effsearch", eff))
    spent = tune[-1][0]
    b = [(c, None) for c, _ in tune] + [(spent + c, v) for c, v in confirm]
    hits = [v[0] for _, v in a + b if v is not None]
    if not hits:
        sys.exit("no trial reached the target; nothing to compare")
    ref = (1.1 * max(hits), -0.5)
    ha, hb = hv_curve(a, ref), hv_curve(b, ref)
    final = ha[-1][1]
    need_a, need_b = compute_to_reach(ha, final), compute_to_reach(hb, final)
    print(
        f"NSGA-II: {len(a)} trials, {a[-1][0]:.0f} train-s ({wall['live-nsga2']:.0f} s wall), "
        f"final hypervolume {final:.2f} first reached after {need_a:.0f} train-s"
    )
    print(
        f"effsearch: {len(tune)} phase-1 + {len(confirm)} phase-2 trials, {b[-1][0]:.0f} train-s "
        f"({wall['live-effsearch']:.0f} s wall), final hypervolume {hb[-1][1]:.2f}; "
        f"NSGA-II's reached after {need_b:.0f} train-s"
    )
    print(
        f"live_compute_ratio={need_b / need_a:.3f}  total_compute_ratio={b[-1][0] / a[-1][0]:.3f}  "
        f"hypervolume_ratio={hb[-1][1] / final:.3f}"
    )


if __name__ == "__main__":
    main()
