"""The replay's command line: load the table, fit the surrogates, run every method over the seeds,
print the comparison (research/replay/report.py) ending in ``compute_ratio=``.

    python -m research.replay [--seeds 40] [--first-seed 0] [--budget-trials 80] [--quick] [--all] [--gp] [--jobs 2]

Another table: ``--table T --study S [--phase1]``, for a table recorded with
``python -m research.record_quickstart --study S [--phase1]`` (``--phase1``: S's phase 1 is the
task, its data subset, validation subset and target). The first recording and the early and loss
points belong to the quickstart table and are left out; ``--plot`` another file.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import optuna

from research.record_quickstart import load_study
from research.replay.methods import methods
from research.replay.report import Results, report
from research.replay.rules import OracleRule
from research.replay.run import FIDELITIES, MAX_SLOWDOWN, N_GRID
from research.replay.surrogate import CondSurrogate, RowFull, Surrogate, tail_check, tau_table, validate
from research.replay.table import (
    EARLY_TABLE,
    LOADED,
    LOSS_TABLE,
    ROOT,
    STUDY,
    TABLE,
    Table,
    baseline_marks,
    study_target,
)
from research.replay.world import World, product_settle, search

PLOT = ROOT / "docs" / "search-efficiency.png"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m research.replay",
        description="Which search strategy finds a good Pareto front with the least compute: a replay benchmark.",
    )
    ap.add_argument("--table", type=Path, default=TABLE)
    ap.add_argument("--study", type=Path, default=STUDY, help="the study whose space the table holds")
    ap.add_argument(
        "--phase1",
        action="store_true",
        help="the table holds the study's phase 1 (research/record_quickstart.py --phase1): its "
        "data subset, validation subset and target are the task",
    )
    # 40: on 20 seeds the default's ratio read 0.317 on seeds 0-19 and 0.392 on 20-39 (the rule was
    # picked on the first twenty); a verdict that holds needs both halves. 819 s on 2 idle cores.
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument(
        "--budget-trials",
        type=float,
        default=80,
        help="the compute budget, in baseline full-fidelity trials (their median real cost)",
    )
    ap.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="run seeds FIRST..FIRST+seeds-1 (another sample than the documented 0-39)",
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-loaded", action="store_true", help="leave out the first recording (load 3-6)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 3 seeds, a few methods")
    ap.add_argument("--plot", type=Path, default=PLOT)
    ap.add_argument(
        "--dump",
        type=Path,
        help="write each method's compute to the level per seed (JSON), to pool runs over disjoint --first-seed blocks",
    )
    ap.add_argument("--gp", action="store_true", help="also GPSampler (slow: its own seconds count as compute)")
    ap.add_argument(
        "--all",
        action="store_true",
        help="every method, the losing ones too (rank spent, 20%%-tuning, rungs at 1/27; over an hour on 2 cores)",
    )
    ap.add_argument(
        "--only",
        default="",
        help="comma-separated method names, from every method (--all's list; default: the default run's)",
    )
    ap.add_argument(
        "--cond",
        action="store_true",
        help="answer full-fidelity proposals with CondSurrogate (the first ninth, then the rest given it)",
    )
    ap.add_argument(
        "--max-slowdown",
        type=float,
        default=MAX_SLOWDOWN,
        help="the product's max_slowdown: a trial short of the target at this many times the "
        "search's baseline time to target stops there (0: never)",
    )
    ap.add_argument(
        "--whole-evals",
        action="store_true",
        help="score every evaluation point on the whole validation set (the default models the "
        "product's points settled on their first batch)",
    )
    return ap


@dataclass
class Marks:
    """What every search is measured against, from the recorded baseline runs alone."""

    target: float
    base_ttt: float
    base_acc: float
    base_cost: float
    budget: float
    ref: tuple
    base_tune: dict  # the baseline's median final accuracy on each subset fidelity
    tune_target: dict  # the phase-1 targets: the study's scaled by the baseline's subset/full accuracy

    @classmethod
    def of(cls, table: Table, target: float, budget_trials: float) -> Marks:
        base_ttt, base_acc, base_cost, budget, ref = baseline_marks(table, target, budget_trials)
        base_tune = {
            f: statistics.median(r[f + "_run"].final for r in table.baseline if f + "_run" in r)
            for f in ("tune20", "tune50")
            if any(f + "_run" in r for r in table.baseline)
        }
        tune_target = {f: round(target * base_tune[f] / base_acc, 3) for f in base_tune}
        return cls(target, base_ttt, base_acc, base_cost, budget, ref, base_tune, tune_target)


def load(ap: argparse.ArgumentParser, args):
    """The study and its table, after the usage checks that need no table (exit 2 on a bad one)."""
    if args.quick:
        args.seeds = min(args.seeds, 3)
        if args.plot == PLOT:  # a smoke run does not overwrite the documented figure
            args.plot = None
    for flag, out in (("--plot", args.plot), ("--dump", args.dump)):  # written after the run: check first
        if out is not None and not out.resolve().parent.is_dir():
            ap.error(f"{flag}: no such folder: {out.parent}")
    spec = load_study(ap, args.study, args.phase1)
    if not args.table.is_file():
        ap.error(f"--table: no such file: {args.table}")
    if args.phase1:
        from effsearch.search.study import phases

        spec = dataclasses.replace(spec, base=phases.shrink(spec.base, spec.tuning))
    # The first recording and the early and loss points belong to the quickstart table only.
    own = args.table == TABLE
    table = Table(
        args.table,
        spec.space,
        LOADED if own and not args.no_loaded else None,
        EARLY_TABLE if own else None,
        LOSS_TABLE if own else None,
    )
    return spec, table


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def print_marks(args, table: Table, k: Marks, budget_trials: float) -> None:
    target = k.target
    n = len(table.rows)
    full_ok = [r["full_run"] for r in table.rows if r["full_run"].ok]
    cost_full = [r.cost(N_GRID - 1) for r in full_ok]
    print(
        f"table: {_shown(args.table)}: {n} random "
        f"configurations of {_shown(args.study)}'s space + {len(table.baseline)} baseline seeds; "
        f"{sum(1 for r in full_ok if r.ttt(target) is not None)} reach {target:g}; a full trial costs "
        f"{statistics.median(cost_full):.1f} s median "
        f"(overhead {statistics.median(r.overhead for r in full_ok):.2f}, "
        f"train {statistics.median(r.t[-1] for r in full_ok):.1f}, evaluations "
        f"{statistics.median(r.eval_s * N_GRID + r.final_eval for r in full_ok):.2f})"
    )
    print(
        f"baseline ({len(table.baseline)} seeds): time to target {k.base_ttt:.2f} s, final accuracy "
        f"{k.base_acc:.4f}, trial cost {k.base_cost:.1f} s"
        + "".join(f"; on {f[4:]}% of the data {a:.4f}" for f, a in k.base_tune.items())
    )
    print(
        f"reference point (3 x baseline time to target, baseline accuracy - 0.05) = ({k.ref[0]:.2f} s, "
        f"{-k.ref[1]:.4f}); phase-1 targets (the study's scaled by the baseline's subset/full accuracy) "
        f"{k.tune_target}; budget {budget_trials:g} baseline trials = {k.budget:.0f} s of compute"
    )


def choose(ap: argparse.ArgumentParser, args) -> list:
    chosen = [
        m
        for m in methods(args.quick, args.gp, args.all or bool(args.only))
        if not args.only or m.name in args.only.split(",")
    ]
    unknown = set(args.only.split(",")) - {m.name for m in chosen} if args.only else set()
    if unknown:  # a misspelt method would run nothing and exit 0
        ap.error(
            f"--only: no method named {', '.join(sorted(unknown))} (--gp adds the gp+ methods; "
            f"the names are those in methods() of research/replay/methods.py)"
        )
    return chosen


def surrogates(table: Table, chosen: list, cond: bool) -> dict:
    """A surrogate for each fidelity with at least 20 recorded runs (losses only if a rule reads them)."""
    losses = any(m.rule is not None and m.rule.reads_loss for m in chosen)
    return {
        f: (CondSurrogate if cond and f == "full" else Surrogate)(table, f, losses=losses)
        for f in FIDELITIES
        if sum(1 for r in table.rows if f + "_run" in r) >= 20
    }


def print_checks(sur: dict, table: Table, space, k: Marks) -> None:
    print("\nsurrogate, held out (5-fold), Spearman / Kendall vs recorded:")
    for f in sur:
        tt = k.target if f == "full" else k.tune_target[f]
        sa, ka, st, kt = validate(sur[f], table, f, tt)
        print(
            f"  {f:6s} n={len(sur[f].runs):4d}  final accuracy rho {sa:.3f} tau {ka:.3f}; "
            f"time to target rho {st:.3f} tau {kt:.3f}"
        )
    print("the top of the table and of the surrogate's answers to 1,000 random configurations:")
    for line in tail_check(sur["full"], table, space, k.target):
        print(line)
    print()
    for line in tau_table(table, k.target, k.tune_target, sur):
        print(line)


WORLD: dict = {}  # the surrogate world (False) and the recorded rows' (True), set before the workers fork
FIRST_SEED = [0]  # --first-seed: seeds first..first+seeds-1 (set before the workers fork)


def set_worlds(args, spec, table: Table, sur: dict, k: Marks, chosen: list) -> list:
    """The two worlds the workers search in, and the chosen methods this table can run."""
    settle = None
    if not args.whole_evals:
        settle = product_settle(spec)
        print(
            f"evaluation points scored as the product does: a point settled on its first batch costs "
            f"{settle.n} of {settle.images} validation images' evaluation ({settle.share:.2f}; "
            f"--whole-evals: none settled)\n"
        )
    slowdown = args.max_slowdown or None
    WORLD[False] = World(spec.space, table, sur, k.target, k.tune_target, k.budget, spec.base, settle, slowdown)
    WORLD[True] = World(
        spec.space, table, {"full": RowFull(table)}, k.target, k.tune_target, k.budget, spec.base, settle, slowdown
    )
    # A rung before the first ninth needs every run's early points (EARLY_TABLE, all or none).
    ms = [m for m in chosen if (m.tune is None or m.tune in sur) and (table.early or not (m.rule and m.rule.early))]
    for m in ms:
        if isinstance(m.rule, OracleRule):
            m.rule.ref = k.ref
    FIRST_SEED[0] = args.first_seed
    return ms


def _worker(args):
    m, seed = args
    t = time.process_time()
    res = search(m, seed + FIRST_SEED[0], WORLD[m.sampler == "rows"])
    res["cpu_s"] = time.process_time() - t
    return m.name, seed, res


def _progress(done: int, total: int, t_start: float) -> None:
    if done % 20 == 0 or done == total:
        print(f"  searches {done}/{total}, {time.perf_counter() - t_start:.0f} s", file=sys.stderr, flush=True)


def run_searches(ms: list, seeds: int, n_jobs: int, t_start: float) -> dict:
    """Every method over every seed, in ``n_jobs`` forked processes: results[name][seed]."""
    jobs = [(m, s) for m in ms for s in range(seeds)]
    results: dict = {m.name: {} for m in ms}
    if n_jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(n_jobs) as pool:
            for i, (name, seed, res) in enumerate(pool.imap_unordered(_worker, jobs, chunksize=1)):
                results[name][seed] = res
                _progress(i + 1, len(jobs), t_start)
    else:
        for i, j in enumerate(jobs):
            name, seed, res = _worker(j)
            results[name][seed] = res
            _progress(i + 1, len(jobs), t_start)
    return results


def main(argv: list[str] | None = None) -> None:
    ap = build_parser()
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")
    spec, table = load(ap, args)
    k = Marks.of(table, study_target(spec), args.budget_trials)
    print_marks(args, table, k, args.budget_trials)
    chosen = choose(ap, args)
    sur = surrogates(table, chosen, args.cond)
    print_checks(sur, table, spec.space, k)
    ms = set_worlds(args, spec, table, sur, k, chosen)
    results = run_searches(ms, args.seeds, args.jobs, t_start)
    res = Results(ms, results, table, k.target, k.ref, k.budget, args.seeds, args.first_seed)
    if args.dump:  # per seed, to pool runs over disjoint seed blocks (--first-seed) afterwards
        res.dump(args.dump)
    report(res, args.plot, t_start)
