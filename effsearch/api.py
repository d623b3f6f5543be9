"""effsearch from Python: train one configuration, run a study, read its front, pick a config.

Each function raises (``ConfigError`` for bad input, with the message the CLI prints;
``StudyFailed`` when a study could not do its work; ``KeyboardInterrupt`` after Ctrl-C)
and never exits the process; the ``effsearch`` command is a thin layer over these.
torch, Composer and Optuna are imported when a function is called, not on ``import effsearch``.

What the library says besides a run's progress (a warning: a note that could not be saved, a
storage connection lost and retried) goes to the ``effsearch`` logger (a child logger per
module); configure it as any Python logging, e.g. ``logging.basicConfig(level=logging.INFO)``.
Optuna's own logging is left as it is, but for its INFO lines while ``run_study`` runs (one per
trial, repeating the run's report; ``quiet=True`` shows none): its warnings and errors still show.

A config or study that names code by import path (``model.name: mypkg.models:small_cnn``,
``plugins:``) runs that code, as a Python script would.

Example (the embedded ``digits`` data, a few seconds on a CPU)::

    >>> import effsearch
    >>> result = effsearch.train({"dataset": {"name": "digits"}, "epochs": 1}, progress=False)
    >>> result.status
    'completed'
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from effsearch.config import ConfigError, TrainConfig, apply_override
from effsearch.config.arguments import said
from effsearch.config.imports import import_plugins, resolve_paths
from effsearch.search.run.errors import StudyFailed
from effsearch.search.study.spec import StudySpec

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from effsearch.trainer.result import RunResult

__all__ = [
    "Exported",
    "NothingToPick",
    "Picked",
    "StudyFailed",
    "best_config",
    "check_output",
    "export",
    "load_config",
    "load_study",
    "naming_file",
    "optuna_quieted",
    "pareto_front",
    "run_study",
    "status",
    "study_spec",
    "train",
    "write_best",
]


class NothingToPick(LookupError):
    """No trial of the study satisfies the pick (e.g. none reached the target)."""


class Exported(NamedTuple):
    """What ``export`` wrote: the study's name, the rows (or points) and the format."""

    study: str
    rows: int
    format: str


class Picked(NamedTuple):
    """The trial a pick chose (``write_best``): its study, number, the pick as text and its config."""

    study: str
    trial: int
    pick: str
    config: TrainConfig


def load_config(spec: TrainConfig | Mapping[str, Any] | str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """A checked TrainConfig from a TrainConfig, a mapping or a YAML file, with ``KEY=VALUE``
    overrides applied (dotted keys, YAML values, as ``--set``).

    >>> effsearch.load_config({"model": {"name": "torchvision:resnet18"}}, ["epochs=2"]).epochs
    2.0
    """
    _a_list(overrides, "overrides", "KEY=VALUE strings")
    if isinstance(spec, (str, Path)):
        try:
            return TrainConfig.from_yaml(spec, list(overrides))
        except ConfigError:
            _refuse_study_file(spec)
            raise
    if isinstance(spec, TrainConfig):
        data = spec.to_dict()
    elif isinstance(spec, Mapping):
        data = copy.deepcopy(dict(spec))
    else:
        raise ConfigError("config", f"must be a TrainConfig, a mapping or a YAML file path; got {type(spec).__name__}")
    for item in overrides:
        apply_override(data, item)
    return TrainConfig.from_dict(data)


def _a_list(value: Any, field: str, of: str) -> None:
    """One string where a list of them goes: its characters had been read one each (an override
    `e`, a plugin module `m`)."""
    if isinstance(value, (str, Path)):
        raise ConfigError(field, f"must be a list of {of}; got the string {str(value)!r} (write [{str(value)!r}])")


def _refuse_study_file(path: str | Path) -> None:
    """A study file given where a training config goes is said to be one (its keys would each read
    as unknown): a study file is the mapping with ``base``, the TrainConfig its trials start from."""
    from effsearch.config import read_yaml

    try:
        raw = read_yaml(path)
    except ConfigError:
        return
    if isinstance(raw, dict) and "base" in raw:
        raise ConfigError(
            "",
            "this is a study file (it has `base`), not a training config: run it as a study "
            "(`effsearch run FILE`, or effsearch.run_study), or train its base alone",
            str(path),
        )


@contextlib.contextmanager
def naming_file(source: str | Path | None) -> Iterator[None]:
    """A refusal found after the config file was read (by the model, by the data) names that file,
    as the file's own errors do; one that names its source already is left as it is."""
    try:
        yield
    except ConfigError as e:
        if source is None or e.source:
            raise
        raise e.with_source(str(source)) from None


def train(
    spec: TrainConfig | Mapping[str, Any] | str | Path,
    *,
    overrides: Sequence[str] = (),
    data_dir: str | Path | None = None,
    out_dir: str | Path | None = None,
    progress: bool = True,
    plugins: Sequence[str] = (),
) -> RunResult:
    """Train one configuration; return its RunResult (history, final accuracies, time to target).

    ``out_dir``: also write ``out_dir/result.json``. ``plugins``: modules to import first (and in
    every data-parallel process). With ``distributed.processes`` N > 1 it starts N-1 processes.

    >>> r = effsearch.train({"dataset": {"name": "digits"}, "epochs": 1}, progress=False)
    >>> r.status, len(r.history), 0.0 <= r.final.val_accuracy <= 1.0
    ('completed', 1, True)
    """
    _a_list(plugins, "plugins", "module names")
    import_plugins(list(plugins))
    cfg = load_config(spec, overrides)
    if out_dir is not None:
        check_output(out_dir, "out_dir", folder=True)
    from effsearch.config.machine import check_runnable

    with naming_file(spec if isinstance(spec, (str, Path)) else None):
        resolve_paths(cfg.model.name, cfg.dataset.name)  # before torch's import: a typo answered at once
        check_runnable(cfg)
        from effsearch.trainer.training import train as run_training

        return run_training(cfg, data_root=data_dir, out_dir=out_dir, progress=progress)


def check_output(path: str | Path, field: str, *, folder: bool) -> None:
    """Refuse, before any work, an output path the writer would fail on after it: ``folder`` one
    that result.json is written into (train), else a file (export, best). Missing folders are
    fine (the writers make them); a file where a folder must be, or a folder where the file
    must be, or a place this user cannot write, is a ConfigError naming ``field``."""
    p = Path(path).expanduser().absolute()
    target = p / "result.json" if folder else p
    if target.is_dir():
        raise ConfigError(field, f"{_shown(path, target)} is a folder; give {'another folder' if folder else 'a file'}")
    above = target.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        what = "give a folder (result.json is written into it)" if folder else f"so {path} cannot be written"
        raise ConfigError(field, f"{_shown(path, above)} is a file; {what}")
    if not os.access(above, os.W_OK | os.X_OK):
        why = "a read-only file system" if _read_only(above) else "permission denied"
        raise ConfigError(field, f"cannot write in {above} ({why})")


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        return False


def _shown(given: str | Path, part: Path) -> str:
    """``part`` (absolute) as the user wrote the path it belongs to: relative if they wrote it so."""
    try:
        return str(part.relative_to(Path.cwd())) if not Path(given).expanduser().is_absolute() else str(part)
    except ValueError:
        return str(part)


def study_spec(study: Mapping[str, Any] | str | Path, *, folder: str | Path | None = None, **flags: Any) -> StudySpec:
    """A checked study (``effsearch.search.study.studyfile.StudySpec``) from a study file or a mapping
    (as a study file's contents; its default storage goes to ``folder``, default the current one)."""
    from effsearch.search.study import studyfile

    if isinstance(study, (str, Path)):
        return studyfile.load(study, **flags)
    if not isinstance(study, Mapping):
        raise ConfigError("study", f"must be a study file path or a mapping; got {type(study).__name__}")
    name = study.get("name") or "study"
    where = Path(folder) if folder is not None else Path.cwd()
    return studyfile.from_mapping(dict(study), where / f"{name}.yaml", source="study mapping", **flags)


def _as_spec(study: StudySpec | Mapping[str, Any] | str | Path, folder: str | Path | None, **flags: Any) -> StudySpec:
    """``study`` checked into a StudySpec; a StudySpec is run as it is (``flags``: none given)."""
    if not isinstance(study, StudySpec):
        return study_spec(study, folder=folder, **flags)
    given = sorted(k for k, v in flags.items() if v is not None)
    if given:
        raise ConfigError(
            given[0], "a StudySpec runs as it was checked; give the study file or mapping to change its values"
        )
    return study


def run_study(
    study: StudySpec | Mapping[str, Any] | str | Path,
    *,
    n_trials: int | None = None,
    timeout: float | None = None,
    budget: float | None = None,
    workers: int | str | None = None,
    storage: str | None = None,
    data_dir: str | Path | None = None,
    warm_start: Sequence[str] = (),
    plugins: Sequence[str] = (),
    folder: str | Path | None = None,
    out: TextIO | None = None,
    quiet: bool = False,
    callbacks: Sequence[Callable[[optuna.Study, FrozenTrial], Any]] = (),
) -> optuna.Study:
    """Run (or resume) a study and return it as an ``optuna.Study`` (with a tuning phase: the
    confirmed phase, study NAME). Progress lines go to ``out`` (default stderr); ``quiet``: none.
    Optuna's own INFO lines are held back while it runs (``optuna_quieted``).

    ``study``: a study file, a mapping of its keys (``{"base": {...}, "n_trials": 20}``; its
    journal goes to ``folder``, default the current folder), or a checked ``StudySpec``
    (``study_spec``). The keyword arguments replace the study's own values, as the command's flags
    do (not a StudySpec's: it runs as checked). ``callbacks``: each called with (study, trial)
    after a trial finishes, as Optuna's ``optimize`` calls its own (with several workers, in this
    process as it sees the trial end). Raises ``StudyFailed`` when the study could not do its work,
    ``ConfigError`` on bad input, ``KeyboardInterrupt`` after Ctrl-C.

    >>> study = effsearch.run_study({"name": "demo", "base": {"dataset": {"name": "digits"}, "epochs": 1},
    ...                              "n_trials": 3}, quiet=True)           # doctest: +SKIP
    >>> len(effsearch.pareto_front(study)) >= 1                           # doctest: +SKIP
    True
    """
    t0 = time.time()
    _a_list(plugins, "plugins", "module names")
    _a_list(warm_start, "warm_start", "configs or studies (a config file, study:NAME@STORAGE)")
    import_plugins(list(plugins))
    spec = _as_spec(study, folder, storage=storage, n_trials=n_trials, timeout=timeout, workers=workers, budget=budget)
    if warm_start:
        from effsearch.search.run.warmstart import with_front_of

        for earlier in warm_start:
            spec = with_front_of(spec, str(earlier))
    from effsearch.search.run.runner import run

    with optuna_quieted(logging.WARNING):  # its per-trial INFO lines repeat the run's own report
        run(spec, data_root=data_dir, out=None if quiet else (out or sys.stderr), t0=t0, callbacks=callbacks)
        return load_study(spec.name, spec.storage)


@contextlib.contextmanager
def optuna_quieted(level: int) -> Iterator[None]:
    """Optuna's logging from ``level`` up only (a ``logging`` level; a quieter setting is kept),
    and as it was afterwards."""
    import optuna

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(max(verbosity, level))
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)


def load_study(study: str | Path, storage: str | None = None) -> optuna.Study:
    """An existing study: its study file, its storage alone (a journal or database file, or a URL,
    holding one study), or its name with ``storage`` (a URL or journal file)."""
    return _opened(study, storage)[0]


def _opened(study: optuna.Study | str | Path, storage: str | None) -> tuple[optuna.Study, str]:
    """(the study, its storage URL) from an opened Study (``run_study``'s), a study file, a storage
    file or URL alone (the study it holds), or a name with ``storage``."""
    from effsearch.search.results.lookup import open_study

    if isinstance(study, (str, Path)):
        return open_study(str(study), storage)
    from effsearch.search.store.storage import url_of

    if storage is not None:
        raise ConfigError("--storage", "an opened Study knows its storage; give the study alone, or its name")
    return study, url_of(study) or "memory"


def _study(study: optuna.Study | str | Path) -> optuna.Study:
    return _opened(study, None)[0]


def pareto_front(study: optuna.Study | str | Path, all_trials: bool = False) -> list[dict]:
    """The Pareto front's rows, fastest first, as ``effsearch export`` writes them: trial, objective
    values, time to target, test accuracy, speed-up over the baseline, the summary and parameters
    (``all_trials``: every complete trial, with ``on_front``)."""
    from effsearch.search.results import export

    return export.rows(_study(study), all_trials=all_trials)


def _pick(study: optuna.Study, pick: str) -> tuple[FrozenTrial, str]:
    """The trial ``pick`` chooses and the pick as text; NothingToPick when none satisfies it."""
    from effsearch.search.results import best

    kind, acc = best.parse_pick(pick)
    trial = best.pick(study, kind, acc)
    text = best.describe(kind, acc)
    if trial is None:
        why = "" if kind == "most-accurate" else " among the trials that reached the target"
        raise NothingToPick(said(f"no trial of study {study.study_name!r} satisfies --pick={text}{why}"))
    return trial, text


def best_config(study: optuna.Study | str | Path, pick: str = "knee") -> TrainConfig:
    """The TrainConfig of the trial ``pick`` chooses (``knee``, ``fastest``, ``most-accurate``,
    ``fastest-above:ACC``, ``fastest-within:D``, as ``effsearch best --pick``); train it with
    :func:`train`. Raises ``NothingToPick`` when no trial satisfies the pick."""
    from effsearch.search.results import best
    from effsearch.search.store import queries

    best.parse_pick(pick)  # a bad pick is bad input before the storage is opened
    trial, _ = _pick(_study(study), pick)
    return TrainConfig.from_dict(queries.config_of(trial))


def write_best(
    study: optuna.Study | str | Path, out: str | Path, *, pick: str = "knee", storage: str | None = None
) -> Picked:
    """Write the TrainConfig of the trial ``pick`` chooses to the YAML file ``out``, headed by
    where it came from (what `effsearch best` writes; `effsearch train FILE` trains it). ``study``:
    a Study (``run_study``'s), a study file, a storage file holding one study, or its name with ``storage``. Raises ``NothingToPick`` when no trial satisfies it."""
    from effsearch.search.results import best

    best.parse_pick(pick)
    check_output(out, "out", folder=False)
    opened, url = _opened(study, storage)
    trial, text = _pick(opened, pick)
    cfg = best.write(opened, url, trial, text, out)
    return Picked(opened.study_name, trial.number, text, cfg)


def status(study: optuna.Study | str | Path, storage: str | None = None, *, front_only: bool = False) -> str:
    """What `effsearch status` shows: where the study lives, the table of its trials (``front_only``:
    of its Pareto front), what it cost, and with a tuning phase how well phase 1 predicted phase 2.
    ``study``: a Study (``run_study``'s), a study file, a storage file (``NAME.journal``, a
    database) holding one study, or its name with ``storage``."""
    from effsearch.config.metrics import ACCURACY
    from effsearch.search.results import best, report
    from effsearch.search.store.attrs import OBJECTIVES_KEY
    from effsearch.search.store.queries import study_target
    from effsearch.search.store.urls import redact
    from effsearch.search.study import phases

    opened, url = _opened(study, storage)
    objectives = opened.user_attrs.get(OBJECTIVES_KEY) or [f"objective {i}" for i in range(len(opened.directions))]
    target = study_target(opened)
    lines = [
        f"study {opened.study_name!r} in {redact(url)}: objectives {', '.join(objectives)}"
        + (f"; target {report.target_words(target) if target.metric != ACCURACY else target.said()}" if target else ""),
        report.status_table(opened, objectives, show_all=not front_only),
        "\n" + "\n".join(best.cost_of(opened).lines()),
    ]
    warning = report.baseline_warning(opened.get_trials(deepcopy=False))
    if warning:
        lines.append(f"\nwarning: {warning}")
    linked = phases.describe(opened, objectives)  # with a tuning phase: how well phase 1 predicted it
    if linked:
        lines.append("\n" + linked)
    return "\n".join(lines)


def export(
    study: optuna.Study | str | Path,
    out: str | Path,
    *,
    storage: str | None = None,
    format: str | None = None,
    all_trials: bool = False,
    plot: str = "front",
) -> Exported:
    """Write the study's Pareto front (``all_trials``: every complete trial, with ``on_front``;
    ``plot="anytime"``: the anytime curve) to ``out`` as csv, json, yaml, html or png (``format``,
    default: from the suffix of ``out``), as `effsearch export` does. ``study``: a Study
    (``run_study``'s), a study file, a storage file holding one study, or its name with ``storage``."""
    from effsearch.search.results.export import FORMATS, format_of, write
    from effsearch.search.store.attrs import TUNE_STUDY_KEY
    from effsearch.search.store.urls import redact

    if format is not None and format not in FORMATS:
        raise ConfigError("format", f"must be one of {', '.join(FORMATS)}; got {format!r}")
    if plot not in ("front", "anytime"):
        raise ConfigError("plot", f"must be front or anytime; got {plot!r}")
    fmt = format_of(out, format)  # bad input is answered before the storage is opened
    check_output(out, "out", folder=False)
    opened, url = _opened(study, storage)
    tune_name = opened.user_attrs.get(TUNE_STUDY_KEY)  # a tuning phase: its compute starts in phase 1
    tune = _opened(tune_name, url)[0] if tune_name else None
    rows = write(opened, redact(url), out, fmt, all_trials=all_trials, tune=tune, plot=plot)
    return Exported(opened.study_name, rows, fmt)
