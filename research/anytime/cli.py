"""The command line: ``python -m research.anytime replay|live [...]`` (research/anytime/__init__.py)."""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

from research.anytime import curve
from research.anytime.variants import chosen, variants

ROOT = Path(__file__).resolve().parents[2]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m research.anytime",
        description="The anytime yardstick: best speed-up within a point of the baseline against compute.",
    )
    sub = ap.add_subparsers(dest="mode", required=True)
    rp = sub.add_parser("replay", help="on the replay's recorded table (no training)")
    rp.add_argument("--table", type=Path, default=ROOT / "research" / "data" / "quickstart_curves.jsonl")
    rp.add_argument("--study", type=Path, default=ROOT / "studies" / "quickstart.yaml")
    rp.add_argument("--phase1", action="store_true", help="the table holds the study's phase 1")
    rp.add_argument("--seeds", type=int, default=20)
    rp.add_argument("--first-seed", type=int, default=0)
    rp.add_argument("--jobs", type=int, default=2)
    lv = sub.add_parser("live", help="real studies (trains networks: minutes to hours)")
    lv.add_argument("--study", type=Path, default=ROOT / "studies" / "quickstart.yaml")
    lv.add_argument("--seeds", type=int, default=2)
    lv.add_argument("--first-seed", type=int, default=0)
    lv.add_argument("--data-dir")
    lv.add_argument("--out", type=Path, help="a folder for the studies' storage (default: a temporary one)")
    for p in (rp, lv):
        p.add_argument("--budget-runs", type=float, default=20, help="compute budget, in baseline runs")
        p.add_argument("--only", default="", help="comma-separated variants (default: the peers and the levers)")
        p.add_argument("--list", action="store_true", help="list the variants and exit")
    return ap


def _run_replay(args, vs) -> list[curve.Summary]:
    from research.anytime import replay

    task = replay.load_task(args.table, args.study, args.phase1, args.budget_runs)
    print(f"task: {task.name}; a baseline trial costs {task.unit:.2f} s; budget {args.budget_runs:g} baseline runs")
    jobs = [(v, s) for v in vs for s in range(args.first_seed, args.first_seed + args.seeds)]
    found: dict = {v.name: [] for v in vs}
    cpu: dict = {v.name: 0.0 for v in vs}
    _TASK[0] = task
    t0 = time.perf_counter()
    if args.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            results = pool.imap(_replay_one, jobs, chunksize=1)
            for i, (name, s, counts) in enumerate(results):
                found[name].append(s)
                cpu[name] += counts["cpu_s"]
                _progress(i + 1, len(jobs), t0)
    else:
        for i, j in enumerate(jobs):
            name, s, counts = _replay_one(j)
            found[name].append(s)
            cpu[name] += counts["cpu_s"]
            _progress(i + 1, len(jobs), t0)
    for v in vs:
        print(f"  {v.name}: {cpu[v.name] / max(args.seeds, 1):.1f} CPU-s a search")
    return [curve.summarise(v.name, found[v.name]) for v in vs]


_TASK: list = [None]  # the replay task, set before the workers fork


def _replay_one(job):
    from research.anytime import replay

    v, seed = job
    s, counts = replay.search(v, seed, _TASK[0])
    return v.name, s, counts


def _progress(done: int, total: int, t0: float) -> None:
    if done % 10 == 0 or done == total:
        print(f"  searches {done}/{total}, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


def _run_live(args, vs) -> list[curve.Summary]:
    from research.anytime import live

    out = []
    for v in vs:
        searches = [
            live.search(v, args.study, seed, args.budget_runs, args.data_dir, args.out)
            for seed in range(args.first_seed, args.first_seed + args.seeds)
        ]
        out.append(curve.summarise(v.name, searches))
    return out


def print_curves(rows: list[curve.Summary]) -> None:
    """Each variant's mean curve, every baseline run (over the baseline / over the best recipe)."""
    print("\nmean curve (x baseline / x best recipe), every baseline run of compute:")
    for r in rows:
        cells = " ".join(f"{x:g}:{b:.2f}/{o:.2f}" for x, b, o in r.grid)
        print(f"  {r.name}: {cells}")


def main(argv: list[str] | None = None) -> None:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.list:
        for v in variants():
            print(f"{v.name}: sampler {v.sampler}, target {v.target}, warm {list(v.warm)}, pruner {v.pruner}")
        return
    try:
        vs = chosen(args.only)
    except KeyError as e:
        ap.error(f"--only: {e.args[0]}")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    warnings.filterwarnings("ignore")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    t0 = time.perf_counter()
    rows = _run_replay(args, vs) if args.mode == "replay" else _run_live(args, vs)
    print_curves(rows)
    print()
    print(curve.table(rows))
    print(f"\n{len(rows)} variants x {args.seeds} seeds in {time.perf_counter() - t0:.0f} s")
