"""Where a search's compute goes before it reaches the level: the replay of research/replay
(same table, surrogate, costs, budget and level), with every trial's cost sorted into the
baseline, pruned trials, completed trials that hit the target and ones that missed, and the
sampler's own seconds.

    python -m research.search_anatomy                      # the default, its oracle, the yardstick; 20 seeds
    python -m research.search_anatomy --only NAME,NAME --seeds 40

The default is measured against a third of the yardstick's compute (docs/benchmarks.md, search
efficiency); this says which part of its compute a better rung rule could still save (the
misses it lets finish) and which only a better sampler could (the pruned trials before the
front-raisers come).
"""

from __future__ import annotations

import argparse
import statistics
import warnings

import optuna

from research.replay import methods, report, rules, run, surrogate, table, world

KINDS = ("baseline", "pruned", "hit", "miss")


def default_world():
    """The replay's default world (its table, surrogate, budget of 80 baseline trials)."""
    from effsearch.search.study import studyfile

    spec = studyfile.load(table.STUDY)
    tab = table.Table(table.TABLE, spec.space, table.LOADED)
    target = table.study_target(spec)
    *_, budget, ref = table.baseline_marks(tab, target, 80)
    w = world.World(
        spec.space,
        tab,
        {"full": surrogate.Surrogate(tab, "full")},
        target,
        {},
        budget,
        spec.base,
        world.product_settle(spec),
    )
    return w, ref, report.table_hv(tab, target, ref)


def anatomy(m, seed: int, w, ref, best: float) -> dict:
    """One search: compute to 0.9 of the table's front, and what it was spent on until then."""
    from effsearch.search.pareto import hypervolume_2d

    log, real = [], run.Run.cost

    def cost(r, k, pruned=False, extra=0, evals=None):
        c = real(r, k, pruned=pruned, extra=extra, evals=evals)
        log.append(("pruned" if pruned else "hit" if r.ttt(w.target) is not None else "miss", c))
        return c

    run.Run.cost = cost
    try:
        res = world.search(m, seed, w)
    finally:
        run.Run.cost = real
    pts, level = [], w.budget
    for spent, h, final in res["hits"]:
        pts.append((h, -final))
        if hypervolume_2d(pts, ref) / best >= 0.9:
            level = spent
            break
    return split(log, level, m.warm)


def split(log: list, level: float, warm: bool) -> dict:
    """The trials' costs (kind, seconds), in the order they were spent, summed by kind up to
    ``level`` (the compute at which the search reached the level, sampler seconds included);
    the first is the baseline when the search starts from it."""
    out = dict.fromkeys(KINDS, 0.0) | {"n_pruned": 0, "n_full": 0, "level": level}
    used = 0.0
    for i, (kind, c) in enumerate(log):
        if used + c > level + 1e-6:
            break
        used += c
        kind = "baseline" if i == 0 and warm else kind
        out[kind] += c
        out["n_pruned" if kind == "pruned" else "n_full"] += kind != "baseline"
    out["sampler"] = level - used  # what is left is the sampler's own CPU seconds
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=f"{methods.PRODUCT},tpe+oracle@1/9+baseline,tpe+baseline")
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")
    w, ref, best = default_world()
    every = {m.name: m for m in methods.methods(False, full=True)}
    print(
        f"{'method':36s} {'to level':>8s}  mean s before it: {'baseline':>8s} {'pruned (n)':>12s} "
        f"{'hits':>6s} {'misses':>6s} {'(full n)':>8s} {'sampler':>7s}"
    )
    for name in args.only.split(","):
        m = every[name]
        if isinstance(m.rule, rules.OracleRule):
            m.rule.ref = ref
        rows = [anatomy(m, s, w, ref, best) for s in range(args.seeds)]
        mean = {k: statistics.mean(r[k] for r in rows) for k in rows[0]}
        print(
            f"{name:36s} {statistics.median(r['level'] for r in rows):7.1f}s  {'':17s} {mean['baseline']:8.1f} "
            f"{mean['pruned']:6.1f} ({mean['n_pruned']:4.1f}) {mean['hit']:6.1f} {mean['miss']:6.1f} "
            f"({mean['n_full']:5.1f}) {mean['sampler']:7.1f}"
        )


if __name__ == "__main__":
    main()
