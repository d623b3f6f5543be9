"""effsearch from Python: train one configuration, run a study, read its front, pick a config.

Each function raises (``ConfigError`` for bad input, with the message the CLI prints;
``StudyFailed`` when a study could not do its work; ``KeyboardInterrupt`` after Ctrl-C)
and never exits the process; the ``effsearch`` command is a thin layer over these.
torch, Composer and Optuna are imported when a function is called, not on ``import effsearch``.

A config or study that names code by import path (``model.name: mypkg.models:small_cnn``,
``plugins:``) runs that code, as a Python script would.

Example (the embedded ``digits`` data, a few seconds on a CPU)::

    >>> import effsearch
    >>> result = effsearch.train({"dataset": {"name": "digits"}, "epochs": 1}, progress=False)
    >>> result.status
    'completed'
"""

from __future__ import annotations

import collections
import copy
import io
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from effsearch.config import ConfigError, TrainConfig, apply_override
from effsearch.config.imports import import_plugins

if TYPE_CHECKING:
    import optuna

    from effsearch.search.study.spec import StudySpec
    from effsearch.trainer.result import RunResult


class StudyFailed(RuntimeError):
    """A study that could not do its work (the CLI's exit code 1): the message holds why."""


class NothingToPick(LookupError):
    """No trial of the study satisfies the pick (e.g. none reached the target)."""


def load_config(spec: TrainConfig | Mapping[str, Any] | str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """A checked TrainConfig from a TrainConfig, a mapping or a YAML file, with ``KEY=VALUE``
    overrides applied (dotted keys, YAML values, as ``--set``).

    >>> effsearch.load_config({"model": {"name": "torchvision:resnet18"}}, ["epochs=2"]).epochs
    2.0
    """
    if isinstance(spec, (str, Path)):
        return TrainConfig.from_yaml(spec, list(overrides))
    if isinstance(spec, TrainConfig):
        data = spec.to_dict()
    elif isinstance(spec, Mapping):
        data = copy.deepcopy(dict(spec))
    else:
        raise ConfigError("config", f"must be a TrainConfig, a mapping or a YAML file path; got {type(spec).__name__}")
    for item in overrides:
        apply_override(data, item)
    return TrainConfig.from_dict(data)


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

    >>> r = effsearch.train({"dataset": {"name": "digits"}, "epochs": 1, "target_accuracy": 0.5},
    ...                     progress=False)
    >>> r.final.val_accuracy > 0.5
    True
    """
    import_plugins(list(plugins))
    cfg = load_config(spec, overrides)
    if out_dir is not None:
        check_output(out_dir, "out_dir", folder=True)
    from effsearch.config.machine import check_runnable
    from effsearch.trainer.training import train as run_training

    check_runnable(cfg)
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
        raise ConfigError(field, f"cannot write in {above} (permission denied)")


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


def run_study(
    study: Mapping[str, Any] | str | Path,
    *,
    n_trials: int | None = None,
    timeout: float | None = None,
    budget: float | None = None,
    workers: int | None = None,
    storage: str | None = None,
    data_dir: str | Path | None = None,
    warm_start: Sequence[str] = (),
    plugins: Sequence[str] = (),
    folder: str | Path | None = None,
    out: TextIO | None = None,
    quiet: bool = False,
) -> optuna.Study:
    """Run (or resume) a study and return it as an ``optuna.Study`` (with a tuning phase: the
    confirmed phase, study NAME). Progress lines go to ``out`` (default stderr) unless ``quiet``.

    ``study``: a study file, or a mapping of its keys (``{"base": {...}, "n_trials": 20}``; its
    journal goes to ``folder``, default the current folder). The keyword arguments replace the
    study's own values, as the command's flags do. Raises ``StudyFailed`` when the study could
    not do its work, ``ConfigError`` on bad input, ``KeyboardInterrupt`` after Ctrl-C.

    >>> study = effsearch.run_study({"name": "demo", "base": {"dataset": {"name": "digits"}, "epochs": 1},
    ...                              "n_trials": 3}, quiet=True)           # doctest: +SKIP
    >>> len(effsearch.pareto_front(study)) >= 1                           # doctest: +SKIP
    True
    """
    t0 = time.time()
    import_plugins(list(plugins))
    spec = study_spec(
        study, folder=folder, storage=storage, n_trials=n_trials, timeout=timeout, workers=workers, budget=budget
    )
    if warm_start:
        from effsearch.search.run.warmstart import with_front_of

        for earlier in warm_start:
            spec = with_front_of(spec, str(earlier))
    from effsearch.search.run.runner import run

    tail = _Tail(io.StringIO() if quiet else (out or sys.stderr))
    code = run(spec, data_root=data_dir, out=cast(TextIO, tail), t0=t0)  # a text stream
    if code == 130:
        raise KeyboardInterrupt
    if code != 0:
        raise StudyFailed(f"study {spec.name!r} could not do its work:\n" + tail.text())
    return load_study(spec.name, spec.storage)


def load_study(study: str | Path, storage: str | None = None) -> optuna.Study:
    """An existing study: its study file, or its name with ``storage`` (a URL or journal file)."""
    from effsearch.search.results.lookup import open_study

    return open_study(str(study), storage)[0]


def _study(study: optuna.Study | str | Path) -> optuna.Study:
    return load_study(study) if isinstance(study, (str, Path)) else study


def pareto_front(study: optuna.Study | str | Path, all_trials: bool = False) -> list[dict]:
    """The Pareto front's rows, fastest first, as ``effsearch export`` writes them: trial, objective
    values, time to target, test accuracy, speed-up over the baseline, the summary and parameters
    (``all_trials``: every complete trial, with ``on_front``)."""
    from effsearch.search.results import export

    return export.rows(_study(study), all_trials=all_trials)


def best_config(study: optuna.Study | str | Path, pick: str = "knee") -> TrainConfig:
    """The TrainConfig of the trial ``pick`` chooses (``knee``, ``fastest``, ``most-accurate``,
    ``fastest-above:ACC``, ``fastest-within:D``, as ``effsearch best --pick``); train it with
    :func:`train`. Raises ``NothingToPick`` when no trial satisfies the pick."""
    from effsearch.search.results import best
    from effsearch.search.store import queries

    kind, acc = best.parse_pick(pick)
    s = _study(study)
    trial = best.pick(s, kind, acc)
    if trial is None:
        raise NothingToPick(f"no trial of study {s.study_name!r} satisfies --pick {best.describe(kind, acc)}")
    return TrainConfig.from_dict(queries.config_of(trial))


class _Tail(io.TextIOBase):
    """Writes through to ``out`` and keeps the last lines (a failed study's reason)."""

    def __init__(self, out: TextIO, keep: int = 30):
        self.out = out
        self.lines: collections.deque[str] = collections.deque(maxlen=keep)

    def write(self, text: str) -> int:
        self.out.write(text)
        self.lines.extend(line for line in text.splitlines() if line.strip())
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    def text(self) -> str:
        return "\n".join(self.lines)
