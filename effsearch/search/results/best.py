"""`effsearch best`: one trial's TrainConfig as a YAML that `effsearch train` takes as it is.

Picks, read on each complete trial's time to target and the final value of the study's metric
(val accuracy; a language model's val loss or bits per byte: ``queries.measures``), from the
study's objective values where it has them, else the recorded attributes:

- ``fastest``: the least time to target.
- ``most-accurate``: the best final value (the highest accuracy, the lowest loss; ties: the faster).
- ``fastest-above:ACC``: the least time to target among those with final val accuracy >= ACC;
  ``fastest-below:L`` the same for a metric where lower is better (final val loss <= L).
- ``fastest-within:D``: the least time to target among those whose final value is at most D
  worse than the baseline trial's (0.01: within 1 point of accuracy; a loss at most D above),
  the question a speed-up is asked with.
- ``knee``: on the Pareto front, after min-max normalising time (0 fastest, 1 slowest)
  and accuracy (0 least, 1 most accurate), the point farthest from the straight line
  joining the front's two ends, on the side of the ideal corner (fast and accurate):
  the trial that buys the most accuracy for its time. A front of one or two points,
  or one with no point on that side, has no knee: then the point nearest the ideal
  corner, ties to the faster.

Only trials that reached the target count for ``fastest``, ``knee``, ``fastest-above`` and
``fastest-within``; ``most-accurate`` counts every complete trial. A configuration phase 2
confirmed with several seeds (``tuning.seeds``) is one candidate, read at the mean of its
seeds, and a hit only if every seed hit (none diverged or failed); the config written is its first seed's.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, cast

from optuna.trial import FrozenTrial, TrialState

from effsearch.config import ConfigError, TrainConfig
from effsearch.config.metrics import ACCURACY
from effsearch.search import pareto
from effsearch.search.results import cost, report
from effsearch.search.store import queries
from effsearch.search.store.attrs import CONFIRM_STUDY_KEY, FULL_CONFIG_KEY, SEED_TRIALS_KEY, WARM_KEY
from effsearch.search.store.queries import objectives_of
from effsearch.search.store.record import Recorded
from effsearch.search.store.urls import redact
from effsearch.search.study import phases
from effsearch.trainer.result import speedup

if TYPE_CHECKING:
    from optuna import Study

PICKS = ("knee", "fastest", "most-accurate", "fastest-above:ACC", "fastest-below:LOSS", "fastest-within:D")


# The picks that take a number: (its name, the range it must fall in, what to say when not).
_ARG_PICKS = {
    "fastest-above": (lambda x: 0 < x <= 1, "a val accuracy in (0, 1], e.g. fastest-above:0.95"),
    "fastest-below": (lambda x: x > 0, "a val loss (or bits per byte) above 0, e.g. fastest-below:2.5"),
    "fastest-within": (
        lambda x: 0 <= x < 1,
        "how much worse than the baseline's final value, in [0, 1), e.g. fastest-within:0.01 "
        "(1 point of val accuracy; a loss 0.01 above the baseline's)",
    ),
}


def parse_pick(text: str) -> tuple[str, float | None]:
    if text in ("knee", "fastest", "most-accurate"):
        return text, None
    name, _, raw = text.partition(":")
    if name in _ARG_PICKS and raw:
        ok, allowed = _ARG_PICKS[name]
        try:
            x = float(raw)
        except ValueError:
            x = math.nan
        if not ok(x):  # NaN fails every range
            raise ConfigError("--pick", f"{name} takes {allowed}; got {raw!r}")
        return name, x
    raise ConfigError("--pick", f"expected one of {', '.join(PICKS)} (e.g. fastest-above:0.95); got {text!r}")


def knee(points: list[tuple[float, float]]) -> int:
    """Index of the knee of ``points`` (time, accuracy), all on one front (see the module doc)."""
    ts, accs = [p[0] for p in points], [p[1] for p in points]

    def norm(v: float, lo: float, hi: float) -> float:
        return (v - lo) / (hi - lo) if hi > lo else 0.0

    scaled = [(norm(t, min(ts), max(ts)), norm(a, min(accs), max(accs))) for t, a in points]
    # Ends: the fastest (0, 0) and the most accurate (1, 1); the line between them is a = t.
    above = [(a - t) / math.sqrt(2) for t, a in scaled]
    ideal = [math.hypot(t, 1 - a) for t, a in scaled]
    return max(range(len(points)), key=lambda i: (round(above[i], 12), -round(ideal[i], 12), -points[i][0]))


def pick(study: Study, kind: str, acc: float | None = None) -> FrozenTrial | None:
    """The chosen trial, or None where no trial satisfies the pick."""
    objectives = objectives_of(study)
    # A configuration phase 2 confirmed with several seeds is judged on their mean, not on its luckiest seed.
    trials = [
        t
        for t in phases.seed_means(study.get_trials(deepcopy=False))
        if t.state == TrialState.COMPLETE and queries.config_of(t) is not None
    ]
    m = {t.number: queries.measures(t, objectives) for t in trials}
    kind, acc = _directed(study, trials, kind, acc)
    if kind == "most-accurate":
        return min(trials, key=lambda t: (-m[t.number][1], m[t.number][0], t.number), default=None)
    hits = [t for t in trials if m[t.number][2]]
    if kind == "fastest-within":
        base = queries.baseline_trial(trials)
        if base is None:
            raise ConfigError(
                "--pick",
                f"fastest-within reads the baseline trial's final value, and study "
                f"{study.study_name!r} has none; give fastest-above:ACC (or fastest-below:LOSS)",
            )
        assert acc is not None  # parse_pick gives fastest-within its points
        kind, acc = "fastest-above", m[base.number][1] - acc - 1e-9  # 1e-9: 0.95 - 0.02 is 0.9299999...
    if kind == "fastest-above":
        assert acc is not None  # parse_pick gives fastest-above its accuracy (a score: _directed)
        hits = [t for t in hits if m[t.number][1] >= acc]
    if kind in ("fastest", "fastest-above"):
        return min(hits, key=lambda t: (m[t.number][0], -m[t.number][1], t.number), default=None)
    if not hits:
        return None
    points = [(m[t.number][0], -m[t.number][1]) for t in hits]
    front = sorted((hits[i] for i in pareto.fronts(points)[0]), key=lambda t: (m[t.number][0], t.number))
    return front[knee([m[t.number][:2] for t in front])]


def _directed(study: Study, trials: list[FrozenTrial], kind: str, x: float | None) -> tuple[str, float | None]:
    """``fastest-above``/``fastest-below`` checked against the study's metric's direction, and read as
    ``fastest-above`` on the score ``queries.measures`` ranks (a loss negated)."""
    if kind not in ("fastest-above", "fastest-below"):
        return kind, x
    recorded = Recorded.of(trials[0]).target_metric if trials else ACCURACY
    q = queries.quality(objectives_of(study), recorded)
    wanted = "fastest-above" if q.m.higher else "fastest-below"
    if kind != wanted:
        raise ConfigError(
            "--pick",
            f"{kind} reads a metric where {'higher' if kind == 'fastest-above' else 'lower'} is better, and "
            f"study {study.study_name!r} is judged on {q.m.label} ({'higher' if q.m.higher else 'lower'} is "
            f"better): give {wanted}:VALUE",
        )
    assert x is not None  # parse_pick gives both their number
    return "fastest-above", q.score(x)


def cost_of(study: Study, pick_text: str = cost.DEFAULT_PICK) -> cost.Cost:
    """The study's cost and the saving of the trial ``pick_text`` chooses (none: no saving)."""
    kind, acc = parse_pick(pick_text)
    try:
        trial = pick(study, kind, acc)
    except ConfigError:  # fastest-within without a baseline: nothing picked
        trial = None
    return cost.of(study, trial, pick_text)


def describe(kind: str, acc: float | None) -> str:
    return f"{kind}:{acc:g}" if kind in ("fastest-above", "fastest-below", "fastest-within") else kind


def header(study: Study, storage_url: str, trial: FrozenTrial, pick_text: str, out: Path) -> str:
    objectives = objectives_of(study)
    a = Recorded.of(trial)
    v = a.versions
    values = ", ".join(f"{n} {report.fmt_value(n, x)}" for n, x in zip(objectives, trial.values))
    test = a.test_accuracy
    sp = (
        a.speedup
        if a.speedup is not None
        else speedup(
            queries.seconds_to_target(queries.baseline_trial(study.get_trials(deepcopy=False))), a.time_to_target
        )
    )
    seeds = trial.user_attrs.get(SEED_TRIALS_KEY)
    recipe = queries.best_recipe(study.get_trials(deepcopy=False))
    over = speedup(queries.seconds_to_target(recipe), a.time_to_target) if recipe is not None else None
    lines = [
        f"effsearch best --pick {pick_text}: trial {trial.number} of study {study.study_name!r}"
        + (f", the mean of its {len(seeds)} seeds (trials {', '.join(map(str, seeds))})" if seeds else ""),
        f"storage: {redact(storage_url)}",
        f"objectives: {values}"
        + (f"; test loss {a.test_loss:.4f}" if a.test_loss is not None else "")
        + (f"; test accuracy {test:.4f}" if test is not None and a.test_loss is None else "")
        + (f"; {sp:.2f}x the baseline" if sp else "")
        + (
            f"; {over:.2f}x the best known recipe ({recipe.user_attrs[WARM_KEY]}, trial {recipe.number})"
            if over and recipe is not None
            else ""
        ),
        f"config: {report.summary(cast(dict, queries.config_of(trial)))}",  # a pick has its config
        f"trained with effsearch {v.get('effsearch', '?')}, torch {v.get('torch', '?')}, "
        f"composer (mosaicml) {v.get('mosaicml', '?')} on {a.device or '?'}"
        + (f", {trial.datetime_complete:%Y-%m-%d %H:%M}" if trial.datetime_complete else ""),
        f"exported {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}",
    ]
    lines += cost.of(study, trial, pick_text).lines()
    if trial.user_attrs.get(FULL_CONFIG_KEY):  # a tuning-phase trial trained a shrunk config
        lines.append(
            f"a phase-1 (subset) trial; the confirmed full-data configs are in study "
            f"{study.user_attrs.get(CONFIRM_STUDY_KEY) or 'NAME'!r}"
        )
    lines.append(train_line(a.device, out))
    return "\n".join(lines)


def train_line(device: str | None, out: Path) -> str:
    """How to train the pick. A CPU trial ran with the threads its worker had (``run --workers N``
    splits the cores), and another thread count sums in another order: other figures, though
    the same config. So the line sets that count where this process has another."""
    import torch

    found = re.search(r"\bcpu \(.*, (\d+) threads\)$", device or "")
    n = int(found.group(1)) if found else None
    if n is None or n == torch.get_num_threads():
        return f"train it: effsearch train {out}"
    return (
        f"train it: OMP_NUM_THREADS={n} effsearch train {out}  (the trial's {n} CPU thread(s): "
        f"this machine's {torch.get_num_threads()} give other figures)"
    )


def write(study: Study, storage_url: str, trial: FrozenTrial, pick_text: str, out: str | Path) -> TrainConfig:
    """The trial's config, as it was trained, with the provenance as a comment."""
    out = Path(out)
    try:
        cfg = TrainConfig.from_dict(queries.config_of(trial), source=f"trial {trial.number}'s config")
    except ConfigError as e:  # a config an older effsearch accepted
        raise ConfigError("", f"{e}; it no longer loads in this effsearch") from None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        cfg.dump(out, header=header(study, storage_url, trial, pick_text, out))
    except OSError as e:
        raise ConfigError("-o", f"cannot write {out}: {e.strerror or e}") from None
    return cfg
