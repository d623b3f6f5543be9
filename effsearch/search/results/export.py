"""`effsearch export`: a study's Pareto front as CSV, JSON, YAML, HTML or PNG.

One row per trial: its objective values, test accuracy, speed-up over the
baseline trial, whether it reached the target, and what it trained (a summary and
the sampled parameters). ``all_trials`` adds the dominated complete trials with
``on_front`` false. Pruned and failed trials have no values and are left out.
``plot="anytime"`` (``--plot anytime``) writes the study's anytime curve instead
(``search.anytime``: the best speed-up within a point found against the compute spent so
far, in baseline runs); the JSON and YAML exports carry it either way.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from optuna.trial import FrozenTrial, TrialState, create_trial

from effsearch.config import ConfigError
from effsearch.config.metrics import ACCURACY
from effsearch.search.results import anytime, report
from effsearch.search.results.best import cost_of
from effsearch.search.store import queries
from effsearch.search.store.attrs import (
    SEED_TRIALS_KEY,
    TARGET_KEY,
    TARGET_METRIC_KEY,
    TUNE_STUDY_KEY,
    TUNE_TRIAL_KEY,
    TUNING_KEY,
    WARM_KEY,
)
from effsearch.search.store.queries import objectives_of
from effsearch.search.store.record import Recorded
from effsearch.trainer.result import clean, speedup

if TYPE_CHECKING:
    from optuna import Study

FORMATS = ("csv", "json", "yaml", "html", "png")
SUFFIXES = {
    ".csv": "csv",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".html": "html",
    ".htm": "html",
    ".png": "png",
}


def format_of(path: str | Path, fmt: str | None) -> str:
    """--format, else the output file's suffix."""
    if fmt:
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise ConfigError(
            "--format",
            f"cannot tell the format from {str(path)!r}; give --format "
            f"({', '.join(FORMATS)}) or an output file ending in "
            f"{', '.join(SUFFIXES)}",
        )
    return SUFFIXES[suffix]


def row(
    trial: FrozenTrial,
    objectives: list[str],
    base: FrozenTrial | None,
    on_front: bool | None,
    recipe: FrozenTrial | None = None,
) -> dict:
    a = Recorded.of(trial)
    cfg = queries.config_of(trial)
    sp, tta = a.speedup, queries.seconds_to_target(trial)
    r: dict[str, Any] = {"trial": trial.number}
    if on_front is not None:
        r["on_front"] = on_front
    r["baseline"] = a.baseline
    r.update(zip(objectives, trial.values))
    if "time_to_accuracy" in r and not queries.reached(trial):
        r["time_to_accuracy"] = None  # a miss has no time to target (the study stores its train seconds)
    r.update(
        {
            "time_to_target": a.time_to_target,
            "reached_target": a.reached_target,
            "test_accuracy": a.test_accuracy,
            "test_loss": a.test_loss,  # a language model's
            # Recorded when the trial ran; computed from the baseline for older trials without it.
            "speedup": sp if sp is not None else speedup(queries.seconds_to_target(base), tta),
            # Over the fastest named recipe that reached the target (queries.best_recipe): None without one.
            "speedup_over_recipe": speedup(queries.seconds_to_target(recipe), tta),
            "warm_start": trial.user_attrs.get(WARM_KEY),
            "train_seconds": a.train_seconds,
            "tune_trial": trial.user_attrs.get(TUNE_TRIAL_KEY),  # phase 2: the phase-1 trial it confirms
            "seed_trials": trial.user_attrs.get(SEED_TRIALS_KEY),  # a front row of several seeds: their mean
            "summary": report.summary(cfg) if cfg else "",
            "params": dict(trial.params),
        }
    )
    return r


def rows(study: Study, all_trials: bool = False) -> list[dict]:
    """The front (fastest first), or with ``all_trials`` every complete trial by number."""
    objectives = objectives_of(study)
    trials = study.get_trials(deepcopy=False)
    base = queries.baseline_trial(trials)
    recipe = queries.best_recipe(trials)
    pareto = queries.front(study)
    if not all_trials:
        return [row(t, objectives, base, None, recipe) for t in pareto]
    on = {n for t in pareto for n in (t.user_attrs.get(SEED_TRIALS_KEY) or [t.number])}
    return [row(t, objectives, base, t.number in on, recipe) for t in trials if t.state == TrialState.COMPLETE]


def document(study: Study, storage_label: str, all_trials: bool, tune: Study | None = None) -> dict:
    """The JSON/YAML export: the study's facts, then the rows. ``tune``: phase 1's study, for the
    anytime curve (a tuning phase's compute starts there)."""
    trials = study.get_trials(deepcopy=False)
    base = queries.baseline_trial(trials)
    front_numbers = {t.number for t in queries.front(study)}
    return {
        "study": study.study_name,
        "storage": storage_label,
        "objectives": objectives_of(study),
        "directions": [d.name.lower() for d in study.directions],
        **_target(study),
        "baseline_trial": base.number if base else None,
        # Its full row too: the plots mark it even when it is not on the front.
        "baseline": row(base, objectives_of(study), base, base.number in front_numbers) if base else None,
        "trials": "all complete" if all_trials else "pareto front",
        "best_recipe": _recipe_facts(queries.best_recipe(trials)),
        "tuning_phase": tuning_phase(study),
        # What the study cost (both phases), in baseline runs, and when `best`'s default pick pays it back.
        "cost": cost_of(study).as_dict(),
        # The best speed-up within a point found against the compute spent so far (search.anytime).
        "anytime": anytime.curve(study, tune),
        "rows": rows(study, all_trials),
    }


def _target(study: Study) -> dict:
    """The target's metric and value; an accuracy's value also under the key older exports had
    (``target_accuracy``), which a loss target's had too, misnamed."""
    metric, value = study.user_attrs.get(TARGET_METRIC_KEY) or ACCURACY, study.user_attrs.get(TARGET_KEY)
    return {
        "target_metric": metric,
        "target_value": value,
        **({"target_accuracy": value} if metric == ACCURACY else {}),
    }


def _recipe_facts(trial: FrozenTrial | None) -> dict | None:
    if trial is None:
        return None
    return {
        "trial": trial.number,
        "recipe": trial.user_attrs.get(WARM_KEY),
        "time_to_target": Recorded.of(trial).time_to_target,
    }


def tuning_phase(study: Study) -> dict | None:
    """For phase 2 of a tuning phase: phase 1's study and how well it predicted this one."""
    from effsearch.search.study import phases

    tune = study.user_attrs.get(TUNE_STUDY_KEY)
    if not tune:
        return None
    return {
        "tune_study": tune,
        "settings": study.user_attrs.get(TUNING_KEY),
        "rank_correlation": phases.correlation(study, objectives_of(study)),
    }


def flat(r: dict) -> dict:
    """A CSV row: parameters as ``param.NAME`` columns."""
    out = {k: v for k, v in r.items() if k != "params"}
    out.update({f"param.{k}": v for k, v in r["params"].items()})
    return out


def write_csv(table: list[dict], path: Path, objectives: list[str], all_trials: bool) -> None:
    write_table([flat(r) for r in table], path, columns(objectives, all_trials))


def columns(objectives: list[str], all_trials: bool) -> list[str]:
    """A row's columns before its parameters: those of a trial that recorded nothing."""
    blank = create_trial(values=[0.0] * len(objectives))
    return [k for k in row(blank, objectives, None, True if all_trials else None) if k != "params"]


def write_table(flats: list[dict], path: Path, fixed: Sequence[str] = ()) -> None:
    """A CSV of ``flats``, under a header of ``fixed`` and then any other column a row has: a table
    with no row still says what it would hold."""
    columns: list[str] = list(fixed)
    for r in flats:  # the union, in first-seen order: trials may sample different parameters
        columns += [k for k in r if k not in columns]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(flats)


def write(
    study: Study,
    storage_label: str,
    path: str | Path,
    fmt: str,
    all_trials: bool = False,
    tune: Study | None = None,
    plot: str = "front",
) -> int:
    """Write the export (``plot``: the front's rows, or the anytime curve's points); returns the
    number of rows or points."""
    path = Path(path)
    doc = document(study, storage_label, all_trials, tune)
    # Written beside and renamed over: a full disk or Ctrl-C never leaves a truncated export where a
    # good one was. The same suffix: matplotlib and the HTML writer go by it.
    part = path.with_name(f".{path.stem}.part{path.suffix}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        n = _write(doc, part, fmt, plot)
        os.replace(part, path)
    except OSError as e:
        part.unlink(missing_ok=True)
        raise ConfigError("-o", f"cannot write {path}: {e.strerror or e}") from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return n


def _write(doc: dict, path: Path, fmt: str, plot: str) -> int:
    """The export in ``fmt`` at ``path``; the number of rows or points."""
    if plot == "anytime":
        from effsearch.search.results import plots

        if fmt == "csv":
            write_table(doc["anytime"]["points"], path, anytime.COLUMNS)
        elif fmt in ("json", "yaml"):
            text = (
                json.dumps(clean(doc["anytime"]), indent=2) + "\n"
                if fmt == "json"
                else yaml.safe_dump(clean(doc["anytime"]), sort_keys=False)
            )
            path.write_text(text)
        else:
            (plots.write_anytime_html if fmt == "html" else plots.write_anytime_png)(doc, path)
        return len(doc["anytime"]["points"])
    if fmt == "csv":
        write_csv(doc["rows"], path, doc["objectives"], doc["trials"] == "all complete")
    elif fmt == "json":
        path.write_text(json.dumps(clean(doc), indent=2) + "\n")
    elif fmt == "yaml":
        path.write_text(yaml.safe_dump(clean(doc), sort_keys=False))
    else:
        from effsearch.search.results import plots

        (plots.write_html if fmt == "html" else plots.write_png)(doc, path)
    return len(doc["rows"])
