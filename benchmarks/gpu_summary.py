"""The figures of benchmarks/gpu_check.sh, from what it left in its output folder.

Prints (and writes to OUT/summary.txt): the device; each trained recipe's seconds to
its validation target and its test accuracy; the trainer's overhead ratio; the GPU
study's front, its fastest configuration with >= 91% test accuracy, that
configuration's train seconds to target and its speed-up over the study's baseline.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

TEST_TARGET = 0.91
# gpu_check.sh's --out folders
RUNS = ("baseline", "baseline-bf16", "fast", "text-baseline", "text-pick", "lm-baseline", "lm-pick")


def recipe_lines(out: Path, names: tuple[str, ...] = RUNS) -> list[str]:
    lines = []
    for name in names:
        path = out / name / "result.json"
        if not path.is_file():
            continue
        r = json.loads(path.read_text())
        f, tta = r["final"], r.get("time_to_target")
        cfg = r["config"]
        compiled = f"compile {f['compile_seconds']:.2f}s  " if f.get("compile_seconds") else ""
        metric = r.get("target_metric", "val_accuracy")  # absent from an accuracy run's file
        if metric == "val_accuracy":
            to, quality = f"{r['target_accuracy']:.2f} val", f"test {_f(f.get('test_accuracy'), 4)}"
        else:  # a loss: the final loss and, for a language model, bits per byte
            to = f"{metric} {r['target_accuracy']:.2f}"
            quality = f"final {metric} {_f(f.get(metric), 3)}" + (
                f" ({_f(f.get('val_bpb'), 3)} bits/byte)" if f.get("val_bpb") is not None else ""
            )
        lines.append(
            f"{name:14s} {cfg['precision']:8s} batch {cfg['batch_size']:<5d} epochs {cfg['epochs']:<5.3g} "
            f"time to {to}: {_s(tta)}  train {f.get('train_seconds', 0):.2f}s  "
            f"{quality}  set-up {f.get('setup_seconds', 0):.2f}s  "
            f"{compiled}"
            f"[{r['device']}]"
        )
    return lines


def _f(x, digits: int) -> str:
    return "none" if x is None else f"{x:.{digits}f}"


def _s(x) -> str:
    return "missed" if x is None else f"{x:.2f}s"


def study_lines(study_file: Path) -> list[str]:
    if not study_file.is_file():
        return []
    from optuna.trial import TrialState

    from effsearch.search.results import cost
    from effsearch.search.results.lookup import open_study
    from effsearch.search.store import queries
    from effsearch.trainer.result import speedup

    study, _ = open_study(str(study_file))
    trials = study.get_trials(deepcopy=False)
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    base = queries.baseline_trial(trials)
    front = queries.front(study)
    states = queries.counts(trials)
    lines = [
        f"study {study.study_name}: {len(trials)} trials ("
        + ", ".join(f"{n} {k}" for k, n in states.items() if n and k != "done")
        + f"), front of {len(front)}"
    ]
    lines += ["  " + line for line in cost.of(study).lines()[:1]]
    lines.append("  " + compute_split(trials))
    recipe = queries.best_recipe(trials)
    if recipe is not None:
        lines.append(
            f"  best recipe: {recipe.user_attrs.get('warm_start')} (trial {recipe.number}), "
            f"{_s(recipe.user_attrs.get('time_to_target'))} to target, test "
            f"{recipe.user_attrs.get('test_accuracy', float('nan')):.4f}"
        )
    if base is not None:
        lines.append(
            f"  baseline (trial {base.number}): time to target {_s(base.user_attrs.get('time_to_target'))}, "
            f"test {base.user_attrs.get('test_accuracy', float('nan')):.4f}"
        )
    else:
        lines.append("  no completed baseline: speed-ups cannot be read")
    shares = []
    for t in done:  # per-trial time outside training (set-up, evaluation, artifacts) over train time
        train = t.user_attrs.get("train_seconds")
        if train and t.datetime_start and t.datetime_complete:
            shares.append(((t.datetime_complete - t.datetime_start).total_seconds() - train) / train)
    if shares:
        shares.sort()
        lines.append(
            f"  non-training time per trial / training time: median {shares[len(shares) // 2]:.2f} "
            f"(target <= 0.10), range {shares[0]:.2f}-{shares[-1]:.2f}"
        )
    good = [
        t
        for t in front
        if t.user_attrs.get("time_to_target") is not None and (t.user_attrs.get("test_accuracy") or 0) >= TEST_TARGET
    ]
    if good:
        best = min(good, key=lambda t: t.user_attrs["time_to_target"])
        up = speedup(queries.seconds_to_target(base), queries.seconds_to_target(best))
        lines.append(
            f"  fastest front config with test >= {TEST_TARGET}: trial {best.number}, "
            f"{best.user_attrs['time_to_target']:.2f}s of training to target, test "
            f"{best.user_attrs['test_accuracy']:.4f}, speed-up over the baseline "
            f"{'-' if up is None else f'{up:.2f}x'}"
        )
        lines.append(f"  its params: {json.dumps(best.params, default=str)}")
    else:
        lines.append(f"  no front config reached the target with test >= {TEST_TARGET}")
    return lines


def compute_split(trials) -> str:
    """Where the study's compute went: its trials' wall seconds split into training (evaluation
    excluded; a compiled trial's first step, its compile, included and shown apart), evaluation,
    set-up and the rest (data, artifacts, the sampler's and the storage's share of a trial)."""

    from effsearch.search.run.budget import spent

    finished = [t for t in trials if t.state.is_finished()]

    def total(key):
        return sum(t.user_attrs.get(key) or 0.0 for t in finished)

    wall = spent(finished)  # the budget's own count, so the split adds up to what `cost` reports
    train, compile_, ev, setup = (
        total(k) for k in ("train_seconds", "compile_seconds", "eval_seconds", "setup_seconds")
    )
    if wall <= 0:
        return "compute: none recorded"
    rest = wall - train - ev - setup
    return (
        f"compute {wall:.0f} s: training {train:.0f} s ({train / wall:.0%}; compile {compile_:.0f} s of it), "
        f"evaluation {ev:.0f} s ({ev / wall:.0%}), set-up {setup:.0f} s ({setup / wall:.0%}), "
        f"other {rest:.0f} s ({rest / wall:.0%})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--study", type=Path)
    ap.add_argument("--study-only", action="store_true", help="the study's lines alone, written nowhere")
    ap.add_argument("--runs", nargs="+", metavar="NAME", help="these trained runs' lines alone, written nowhere")
    args = ap.parse_args()
    if args.runs:
        print("\n".join(recipe_lines(args.out, tuple(args.runs))) or f"no result for {' '.join(args.runs)}")
        return
    if args.study is None:
        ap.error("--study is needed unless --runs is given")
    if args.study_only:
        print("\n".join(study_lines(args.study)) or f"no study at {args.study}")
        return
    lines = []
    overhead = args.out / "overhead.txt"
    if overhead.is_file():
        text = overhead.read_text().splitlines()
        lines += [line for line in text if line.startswith(("device:", "ratio=", "profile:"))]
    lines += recipe_lines(args.out)
    lines += study_lines(args.study)
    text = "\n".join(lines) or f"no overhead, recipe or study results in {args.out} (which parts ran?)"
    print(text)
    (args.out / "summary.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
