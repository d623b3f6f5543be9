"""Study files (``studies/*.yaml``): what to search, how, and where to keep it.

Every key is checked before anything is written: an error names the file, the
field and what is allowed (exit code 2 in the CLI). Keys::

    name: quickstart            # Optuna study name (default: the file's stem)
    storage: null               # default: NAME.journal next to this file (no server);
                                # or sqlite:///x.db, postgresql://user@host/db, PATH.journal
    artifacts: null             # plots and configs per trial (default: beside the journal file,
                                # or STEM.artifacts/ beside this file for an RDB storage)
    base: {...}                 # the TrainConfig every trial starts from (or a path to one)
    baseline: {}                # dotted overrides of base: trial 0, the yardstick for speed-ups
    objectives: [time_to_accuracy, final_accuracy]
    space: {...}                # see effsearch.spaces.space
    sampler: tpe                # or {name: nsga2, population_size: 20}; tpe nsga2 nsga3 gp random
    n_trials: 20                # the study's total, across reruns and workers
    timeout: null               # seconds per `effsearch run`: no new trial starts after it
    seed: 0
    workers: 1                  # worker processes on this machine
    pruner: none                # or {name: moasha, eta: 3, min_fraction: 0.111, min_trials: 4}
    tuning: none                # or {name: subset, data_fraction: 0.2, epochs_fraction: 1,
                                #     target_accuracy: T, n_trials: N, top_k: 5, seeds: 1}
    heartbeat: {interval: 30, grace_period: 90, max_retry: 3}   # a dead worker's trial is retried
    failure_limit: 3            # stop (exit 1) when this many trials in a row fail with the same
                                # error (class and message); 0: never
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from effsearch import objectives as O
from effsearch.config import ConfigError, TrainConfig, read_yaml

# What an empty study file is told.
MINIMAL_STUDY = ("a minimal study file is `base: {dataset: {name: digits}}` (the TrainConfig every trial "
                 "starts from; objectives, space, sampler and n_trials have defaults), e.g. studies/quickstart.yaml")
from effsearch.search import phases
from effsearch.search.storage import is_rdb_url, redact
from effsearch.spaces.dims import set_path

KEYS = ("name", "description", "storage", "artifacts", "base", "baseline", "objectives", "space", "sampler",
        "n_trials", "timeout", "seed", "workers", "pruner", "tuning", "heartbeat", "failure_limit")

# Options each sampler takes from the study file (the rest stay Optuna's defaults).
SAMPLERS: dict[str, dict[str, type]] = {
    "tpe": {"n_startup_trials": int, "multivariate": bool, "group": bool, "constant_liar": bool,
            "n_ei_candidates": int},
    "nsga2": {"population_size": int, "mutation_prob": float, "crossover_prob": float, "swapping_prob": float},
    "nsga3": {"population_size": int, "mutation_prob": float, "crossover_prob": float, "swapping_prob": float},
    "gp": {"n_startup_trials": int},
    "random": {},
}
PRUNERS: dict[str, dict[str, type]] = {"none": {}, "moasha": {"eta": float, "min_fraction": float,
                                                               "min_trials": int}}
TUNING: dict[str, dict[str, type]] = {"none": {}, "subset": phases.OPTIONS}
RDB_SCHEMES = ("sqlite", "postgresql", "mysql")
URL_LIKE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")  # `scheme:` (a path starts with /, ., ~ or a name without :)


@dataclass
class StudySpec:
    name: str
    source: str  # the file, for messages
    storage: str  # an RDB URL or a journal file path
    artifacts: Path
    base: TrainConfig
    baseline: TrainConfig
    objectives: tuple[str, ...]
    space: Any  # effsearch.spaces.Space
    sampler: dict  # {"name": ..., **options}
    n_trials: int | None
    timeout: float | None
    seed: int
    workers: int
    pruner: dict
    tuning: dict
    heartbeat: dict
    failure_limit: int = 3
    raw: dict = field(default_factory=dict)
    path: Path | None = None
    storage_field: str = "storage"  # what messages about the storage name: --storage or the file's key
    phase: str = "search"  # "tune" / "confirm" with a tuning phase (effsearch.search.phases)

    @property
    def is_rdb(self) -> bool:
        return is_rdb_url(self.storage)

    @property
    def directions(self) -> list[str]:
        return O.directions(self.objectives)

    def storage_label(self) -> str:
        return redact(self.storage)


def load(path: str | Path, *, storage: str | None = None, n_trials: int | None = None,
         timeout: float | None = None, workers: int | None = None, machine=None) -> StudySpec:
    """Read and check a study file; command-line values replace the file's."""
    path = Path(path)
    source = str(path)
    raw = read_yaml(path, MINIMAL_STUDY)
    try:
        return _load(raw, path, storage, n_trials, timeout, workers, machine)
    except ConfigError as e:
        raise (e if e.source else e.with_source(source)) from None


def _load(raw: dict, path: Path, storage_flag, n_trials_flag, timeout_flag, workers_flag, machine) -> StudySpec:
    source = str(path)
    here = path.resolve().parent
    for key in raw:
        if key not in KEYS:
            raise ConfigError(str(key), f"unknown key; allowed keys in a study file: {', '.join(KEYS)}")

    name = raw.get("name", path.stem)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("name", f"must be a non-empty string; got {name!r}")

    # Base and baseline configs.
    base_raw = raw.get("base", {})
    if isinstance(base_raw, str):
        base_path = (here / base_raw) if not Path(base_raw).is_absolute() else Path(base_raw)
        base = TrainConfig.from_yaml(base_path)
        base_dict = base.to_dict()
    elif isinstance(base_raw, dict):
        base_dict = copy.deepcopy(base_raw)
        base = _config(base_dict, "base")
    else:
        raise ConfigError("base", f"must be a TrainConfig mapping or a path to a TrainConfig YAML; got {base_raw!r}")
    baseline_raw = raw.get("baseline", {}) or {}
    if not isinstance(baseline_raw, dict):
        raise ConfigError("baseline", "must be a mapping of dotted TrainConfig keys to values, applied to base "
                                      f"(e.g. {{algorithms: {{}}, optimizer.lr: 0.1}}); got {baseline_raw!r}")
    bl = base.to_dict()
    for key, value in baseline_raw.items():
        set_path(bl, str(key), copy.deepcopy(value))
    baseline = _config(bl, "baseline")

    # The machine decides what the space may offer (imports torch unless given).
    if machine is None:
        from effsearch.spaces.machine import detect

        machine = detect(base.device)
    _check_runnable(base, "base")
    _check_runnable(baseline, "baseline")

    objectives = O.check(raw.get("objectives", list(O.DEFAULT)))
    for i, objective in enumerate(objectives):
        if objective in O.NEEDS:
            key, want = O.NEEDS[objective]
            for label, cfg in (("base", base), ("baseline", baseline)):
                if getattr(cfg, key) != want:
                    raise ConfigError(f"objectives[{i}]", f"{objective} needs {key}: {want} in {label} (every trial "
                                                          f"must measure it); {label}.{key} is {getattr(cfg, key)!r}")
    from effsearch.spaces.space import Space

    space = Space.build(base, raw.get("space"), machine)

    sampler = _named(raw.get("sampler", "tpe"), "sampler", SAMPLERS)
    pruner = _named(raw.get("pruner", "none"), "pruner", PRUNERS)
    from effsearch.search.pruner import make_pruner

    make_pruner(pruner)  # checks the knobs' ranges
    tuning = phases.check(_named(raw.get("tuning", "none"), "tuning", TUNING))

    n_trials = n_trials_flag if n_trials_flag is not None else raw.get("n_trials", 20)
    n_trials = _number(n_trials, "n_trials", int, low=1, allow_none=True)
    timeout = timeout_flag if timeout_flag is not None else raw.get("timeout")
    timeout = _number(timeout, "timeout", float, low=1e-9, allow_none=True)
    if n_trials is None and timeout is None:
        raise ConfigError("n_trials", "give n_trials or timeout (or both), else the study never ends")
    seed = _number(raw.get("seed", 0), "seed", int, low=0)
    workers = _number(workers_flag if workers_flag is not None else raw.get("workers", 1), "workers", int, low=1)

    hb = raw.get("heartbeat") or {}
    if not isinstance(hb, dict):
        raise ConfigError("heartbeat", f"must be a mapping with interval, grace_period, max_retry; got {hb!r}")
    for key in hb:
        if key not in ("interval", "grace_period", "max_retry"):
            raise ConfigError(f"heartbeat.{key}", "unknown key; allowed: interval, grace_period, max_retry")
    interval = _number(hb.get("interval", 30), "heartbeat.interval", int, low=1)
    heartbeat = {
        "interval": interval,
        "grace_period": _number(hb.get("grace_period", 3 * interval), "heartbeat.grace_period", int, low=interval),
        "max_retry": _number(hb.get("max_retry", 3), "heartbeat.max_retry", int, low=0),
    }

    failure_limit = _number(raw.get("failure_limit", 3), "failure_limit", int, low=0)

    storage = _storage(storage_flag, raw.get("storage"), path)
    storage_field = "--storage" if storage_flag is not None else "storage"
    if workers > 1 and storage.startswith("sqlite"):
        raise ConfigError("workers", f"{workers} workers on SQLite ({storage}) end in 'database is locked'; "
                                     "use the default journal file or PostgreSQL for several workers")
    artifacts = raw.get("artifacts")
    if artifacts is not None and not isinstance(artifacts, str):
        raise ConfigError("artifacts", f"must be a folder path; got {artifacts!r}")
    from effsearch.search.storage import artifact_dir

    artifacts_dir = artifact_dir(path, artifacts, storage)
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise ConfigError("description", f"must be a string; got {description!r}")

    return StudySpec(name=name, source=source, storage=storage, artifacts=artifacts_dir, base=base,
                     baseline=baseline, objectives=objectives, space=space, sampler=sampler,
                     n_trials=n_trials, timeout=timeout, seed=seed, workers=workers, pruner=pruner,
                     tuning=tuning, heartbeat=heartbeat, failure_limit=failure_limit, raw=raw, path=path, storage_field=storage_field)


def _config(data: dict, prefix: str) -> TrainConfig:
    try:
        return TrainConfig.from_dict(data)
    except ConfigError as e:
        raise ConfigError(f"{prefix}.{e.field}" if e.field else prefix, e.message) from None


def _check_runnable(cfg: TrainConfig, prefix: str) -> None:
    from effsearch.trainer.run import check_runnable

    try:
        check_runnable(cfg)
    except ConfigError as e:
        raise ConfigError(f"{prefix}.{e.field}" if e.field else prefix, e.message) from None


def _named(value: Any, field_name: str, table: dict[str, dict[str, type]]) -> dict:
    """``name`` or ``{name: ..., option: value}``, checked against ``table``."""
    if isinstance(value, str) or value is None:
        value = {"name": value or "none"}
    if not isinstance(value, dict) or "name" not in value:
        raise ConfigError(field_name, f"must be one of {', '.join(table)} or a mapping with `name`; got {value!r}")
    name = value["name"]
    if name not in table:
        raise ConfigError(f"{field_name}.name" if len(value) > 1 else field_name,
                          f"unknown {field_name} {name!r}; allowed: {', '.join(table)}")
    options = table[name]
    for key, val in value.items():
        if key == "name":
            continue
        if key not in options:
            allowed = ", ".join(options) or "none"
            raise ConfigError(f"{field_name}.{key}", f"not an option of {name}; allowed: {allowed}")
        _number(val, f"{field_name}.{key}", options[key], low=0) if options[key] is not bool else \
            _bool(val, f"{field_name}.{key}")
    return dict(value)


def _bool(value: Any, field_name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(field_name, f"must be true or false; got {value!r}")
    return value


def _number(value: Any, field_name: str, kind: type, low: float | None = None, allow_none: bool = False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (kind is int and not float(value).is_integer()):
        what = "an integer" if kind is int else "a number"
        raise ConfigError(field_name, f"must be {what}{' or null' if allow_none else ''}; got {value!r}")
    if not math.isfinite(value):  # NaN passes every `<` check
        raise ConfigError(field_name, f"must be a finite number; got {value!r}")
    if low is not None and value < low:
        raise ConfigError(field_name, f"must be >= {low:g}; got {value!r}")
    return kind(value)


def _storage(flag: str | None, value: Any, path: Path) -> str:
    """An RDB URL, or the absolute path of a journal file."""
    if flag is not None:
        where, base_dir, text = "--storage", Path.cwd(), flag
    elif value is not None:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError("storage", f"must be a storage URL or a file path; got {value!r}")
        where, base_dir, text = "storage", path.resolve().parent, value
    else:
        return str(path.resolve().parent / f"{path.stem}.journal")
    scheme = URL_LIKE.match(text)
    if scheme:  # a URL, even a malformed one: never taken as a file name (sqlite:/x would make a folder `sqlite:`)
        name = scheme.group(1).split("+", 1)[0].lower()
        if name not in RDB_SCHEMES:
            raise ConfigError(where, f"unknown storage scheme {name!r}; allowed: {', '.join(RDB_SCHEMES)} URLs "
                                     "(e.g. postgresql://user:pass@host/db) or a journal file path")
        if not text.startswith(scheme.group(0) + "//"):
            raise ConfigError(where, f"malformed storage URL {redact(text)!r}: a URL is {name}://..., e.g. "
                                     + ("sqlite:///path/to/study.db" if name == "sqlite" else
                                        f"{name}://user:pass@host/db")
                                     + "; a journal file path must not start with `NAME:`")
        from effsearch.search.storage import check_url

        check_url(text, where)
        return text
    p = Path(text).expanduser()
    p = p if p.is_absolute() else base_dir / p
    if p.suffix in (".db", ".sqlite", ".sqlite3"):
        return f"sqlite:///{p}"
    return str(p)


def dump(spec: StudySpec) -> str:
    """The study file as stored on the study (for `effsearch status` by name)."""
    return yaml.safe_dump(spec.raw, sort_keys=False)


def locate(study: str, storage_flag: str | None = None) -> tuple[str, str]:
    """(study name, storage) from a study file or a name, without the full check (for `status`)."""
    path = Path(study)
    if not path.is_file() and (Path("studies") / f"{study}.yaml").is_file():
        path = Path("studies") / f"{study}.yaml"
    if path.is_file():
        raw = read_yaml(path, MINIMAL_STUDY)
        name = raw.get("name", path.stem)
        try:
            return str(name), _storage(storage_flag, raw.get("storage"), path)
        except ConfigError as e:
            raise e.with_source(str(path)) from None
    if storage_flag is None:
        raise ConfigError("study", f"{study!r} is neither a study file nor a study name under studies/; "
                                   "give a study file, or the name with --storage URL")
    return study, _storage(storage_flag, None, Path("study.yaml"))
