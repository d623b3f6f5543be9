"""How much compute each search strategy needs to find a good Pareto front, on a replay benchmark.

The learning curves of real runs of effsearch's space on Fashion-MNIST (recorded
by benchmarks/record_curves.py at full fidelity and on a quarter of the data)
answer each configuration a sampler proposes: the nearest recorded
configuration (1-nearest-neighbour table look-up over the normalised
parameters) gives its curve. Every strategy then runs the real code it would
run in a study (Optuna's samplers, effsearch's MO-ASHA pruner and tuning-phase
pick), in seconds and deterministically. Compared, at equal seeds over several
repeats:

    random        random search, full fidelity
    nsga2         NSGA-II, full fidelity, no pruning
    tpe           TPE, no pruning
    tpe+pruner    TPE with effsearch's MO-ASHA pruner
    effsearch     TPE + pruner on the quarter-data curves (phase 1), then the top-K on full data (phase 2)
    nsga2+both    the same pruner and tuning phase with NSGA-II as the sampler

Consumed compute is the train seconds each trial actually trained (a pruned
trial up to its rung). Hypervolume is over (time to target, -final accuracy)
with a fixed reference point; trials that miss the target add nothing. The last
line is ``compute_ratio=X``: the compute effsearch needs to reach NSGA-II's final
hypervolume, divided by the compute NSGA-II needed for it (median over repeats).

    uv run python benchmarks/search_efficiency.py [--repeats 5] [--trials 60]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import warnings
from pathlib import Path

import numpy as np
import optuna

HERE = Path(__file__).parent
CURVES = HERE / "data" / "fashion_curves.jsonl"
STUDY = HERE / "data" / "replay-study.yaml"


class Replay:
    """Recorded curves, looked up by the nearest recorded configuration."""

    def __init__(self, rows: list[dict]):
        from sklearn.neighbors import NearestNeighbors

        self.rows = rows
        names = sorted({k for r in rows for k in r["params"]})
        self.columns = []  # (name, kind, extra): numeric (lo, hi, log) or one-hot value
        for n in names:
            vals = [r["params"][n] for r in rows if n in r["params"]]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
                lo, hi = min(vals), max(vals)
                log = lo > 0 and hi / lo > 20
                self.columns.append((n, "num", (math.log(lo) if log else lo, math.log(hi) if log else hi, log)))
            else:
                for v in sorted({str(v) for v in vals}):
                    self.columns.append((n, "cat", v))
            self.columns.append((n, "absent", None))
        self.nn = NearestNeighbors(n_neighbors=1).fit(np.array([self.encode(r["params"]) for r in rows]))

    def encode(self, params: dict) -> list[float]:
        out = []
        for name, kind, extra in self.columns:
            v = params.get(name)
            if kind == "absent":
                out.append(float(v is None))
            elif v is None:
                out.append(0.0)
            elif kind == "cat":
                out.append(float(str(v) == extra))
            else:
                lo, hi, log = extra
                x = math.log(v) if log and v > 0 else float(v)
                out.append((x - lo) / (hi - lo) if hi > lo else 0.0)
        return out

    def nearest(self, params: dict) -> dict:
        i = int(self.nn.kneighbors([self.encode(params)], return_distance=False)[0, 0])
        return self.rows[i]


def values(curve: dict, target: float):
    """(time to target or the miss penalty, final val accuracy), as the study's objectives score them."""
    from effsearch.objectives import miss_penalty
    from effsearch.trainer.result import time_to_target

    hist = curve["history"]
    hit = time_to_target(hist, target)
    best = max((p["val_accuracy"] for p in hist), default=0.0)
    return (hit if hit is not None else miss_penalty(best)), hist[-1]["val_accuracy"]


def play(study, trial, curve: dict, budget: float, target: float, pruner=None):
    """One trial on a recorded curve: returns (consumed train seconds, values or None)."""
    from effsearch.search.pruner import RungTracker

    if curve["status"] != "completed" or not curve["history"]:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return (curve.get("train_seconds") or 0.0), None
    tracker = RungTracker(pruner, study, trial, budget, target) if pruner else None
    for p in curve["history"]:
        if tracker and tracker(p):
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            return p["train_seconds"], None
    v = values(curve, target)
    study.tell(trial, list(v))
    return curve["history"][-1]["train_seconds"], v


class Search:
    """One strategy, one seed: a sequence of (cumulative compute, full-fidelity values or None)."""

    def __init__(self, replay, space, target, tune_target):
        self.replay, self.space, self.target, self.tune_target = replay, space, target, tune_target

    def sampler(self, name: str, seed: int, n: int):
        s = optuna.samplers
        return {"random": lambda: s.RandomSampler(seed=seed),
                "nsga2": lambda: s.NSGAIISampler(seed=seed, population_size=max(4, n // 4)),
                "tpe": lambda: s.TPESampler(seed=seed, multivariate=True, n_startup_trials=10)}[name]()

    def run(self, sampler: str, seed: int, n: int, pruner=None, fidelity="full", target=None):
        study = optuna.create_study(directions=["minimize", "maximize"], sampler=self.sampler(sampler, seed, n))
        trace, used = [], 0.0
        for _ in range(n):
            trial = study.ask()
            self.space.sample(trial)
            row = self.replay.nearest(trial.params)
            trial.set_user_attr("row", row["index"])
            cost, v = play(study, trial, row[fidelity], row["config"]["epochs"], target or self.target, pruner)
            used += cost
            trace.append((used, v))
        return study, trace

    def effsearch(self, seed: int, n: int, pruner, top_k: int, sampler: str = "tpe"):
        from effsearch.search.phases import top_k as pick

        study, trace = self.run(sampler, seed, n, pruner, fidelity="tune", target=self.tune_target)
        trials = study.trials
        for t in trials:  # phase 1's trials stand for their full-data config
            t.user_attrs["full_config"] = "replay"
        used = trace[-1][0]
        trace = [(c, None) for c, _ in trace]  # phase-1 values are not on the full-data front
        for t in pick(trials, ["minimize", "maximize"], top_k):
            curve = self.replay.rows[t.user_attrs["row"]]["full"]
            used += curve["history"][-1]["train_seconds"]
            trace.append((used, values(curve, self.target)))
        return trace


def hv_curve(trace, ref) -> list[tuple[float, float]]:
    from effsearch.search.pareto import hypervolume_2d

    pts, out = [], []
    for used, v in trace:
        if v is not None:
            pts.append((v[0], -v[1]))
        out.append((used, hypervolume_2d(pts, ref)))
    return out


def compute_to_reach(curve, level: float) -> float:
    return next((c for c, h in curve if h >= level - 1e-12), math.inf)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--curves", type=Path, default=CURVES)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--trials", type=int, default=60, help="trials per search (phase 1 for effsearch)")
    ap.add_argument("--top-k", type=int, default=8, help="configurations effsearch confirms in phase 2")
    ap.add_argument("--target", type=float, default=None, help="full-data target (default: the study's)")
    ap.add_argument("--tune-target", type=float, default=None,
                    help="phase-1 target (default: reached by the same share of quarter-data curves as the "
                         "target is of full-data curves)")
    ap.add_argument("--eta", type=float, default=3.0)
    ap.add_argument("--min-fraction", type=float, default=1 / 9)
    ap.add_argument("--min-trials", type=int, default=4)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    from effsearch.objectives import MISS_PENALTY_SECONDS
    from effsearch.search import studyfile
    from effsearch.search.pruner import MOASHAPruner

    rows = [json.loads(line) for line in args.curves.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "full" in r and "tune" in r]
    for i, r in enumerate(rows):
        r["index"] = i
    spec = studyfile.load(STUDY)
    target = args.target or spec.base.target_accuracy
    ok = [r for r in rows if r["full"]["status"] == "completed" and r["full"]["history"]]
    tune_best = [max(p["val_accuracy"] for p in r["tune"]["history"]) for r in rows
                 if r["tune"]["status"] == "completed" and r["tune"]["history"]]
    hits = [values(r["full"], target)[0] for r in ok]
    hits = [h for h in hits if h < MISS_PENALTY_SECONDS]
    # The phase-1 target as hard on the quarter data as the target is on the full data: the
    # same share of configurations reach it (a target nobody reaches makes phase 1's time
    # objective a miss penalty for all, as docs/results.md's first run showed).
    share = len(hits) / len(ok)
    tune_target = args.tune_target or round(float(np.quantile(tune_best, 1 - share)), 3)
    if not hits:
        raise SystemExit(f"no recorded curve reaches the target {target}; lower --target")
    ref = (1.1 * max(hits), -0.5)  # fixed: slower than any hit, and 50% accuracy
    replay = Replay(rows)
    full_cost = [r["full"]["history"][-1]["train_seconds"] for r in ok]
    print(f"replay: {len(rows)} recorded configurations ({len(ok)} completed, {len(hits)} reach {target:g} "
          f"val accuracy); a full-fidelity trial trains {statistics.median(full_cost):.1f} s (median)")
    print(f"reference point: time {ref[0]:.1f} s, accuracy {-ref[1]:.2f}; phase-1 target {tune_target:g}; "
          f"{args.trials} trials per search, {args.repeats} repeats, effsearch confirms top {args.top_k}")

    search = Search(replay, spec.space, target, tune_target)
    pruner = MOASHAPruner(args.eta, args.min_fraction, args.min_trials)
    methods = {
        "random": lambda s: search.run("random", s, args.trials)[1],
        "nsga2": lambda s: search.run("nsga2", s, args.trials)[1],
        "tpe": lambda s: search.run("tpe", s, args.trials)[1],
        "tpe+pruner": lambda s: search.run("tpe", s, args.trials, pruner)[1],
        "effsearch": lambda s: search.effsearch(s, args.trials, pruner, args.top_k),
        # The same two levers under NSGA-II: is the sampler or the levers the limit?
        "nsga2+both": lambda s: search.effsearch(s, args.trials, pruner, args.top_k, sampler="nsga2"),
    }
    curves = {m: [hv_curve(f(seed), ref) for seed in range(args.repeats)] for m, f in methods.items()}
    best_hv = hv_curve([(0, values(r["full"], target)) for r in ok], ref)[-1][1]

    print(f"\nhypervolume (fraction of the best any recorded configurations give, {best_hv:.1f}), "
          "median over repeats, by consumed train-seconds:")
    budgets = [0.1, 0.25, 0.5, 1.0]
    nsga_total = statistics.median(c[-1][0] for c in curves["nsga2"])
    head = f"{'method':12s} {'total s':>8s} {'final HV':>9s}  " + "  ".join(
        f"@{b:g}x NSGA-II's s" for b in budgets)
    print(head)
    for m, cs in curves.items():
        at = []
        for b in budgets:
            hv = [max((h for c, h in curve if c <= b * nsga_total), default=0.0) for curve in cs]
            at.append(f"{statistics.median(hv) / best_hv:>17.3f}")
        print(f"{m:12s} {statistics.median(c[-1][0] for c in cs):8.0f} "
              f"{statistics.median(c[-1][1] for c in cs) / best_hv:9.3f}  " + "  ".join(at))

    ratios = []
    print("\nper repeat: compute to reach NSGA-II's final hypervolume")
    for seed in range(args.repeats):
        level = curves["nsga2"][seed][-1][1]
        nsga = compute_to_reach(curves["nsga2"][seed], level)
        eff = compute_to_reach(curves["effsearch"][seed], level)
        both = compute_to_reach(curves["nsga2+both"][seed], level)
        ratios.append(eff / nsga if nsga > 0 else math.inf)
        print(f"  seed {seed}: NSGA-II HV {level / best_hv:.3f} after {nsga:5.0f} s; effsearch {eff:5.0f} s "
              f"(ratio {ratios[-1]:.3f}); NSGA-II + pruner + tuning {both:5.0f} s (ratio {both / nsga:.3f})")
    print(f"compute_ratio={statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
