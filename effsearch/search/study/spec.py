"""``StudySpec``: a study file as checked (``studyfile.py`` builds it), what every part of a study
reads: the runner, the workers, the objective, storage and the reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from effsearch import objectives as O
from effsearch.config import TrainConfig
from effsearch.config.options import Heartbeat, Named, StudyNumbers, SubsetTuning
from effsearch.search.store.urls import is_rdb_url, redact

if TYPE_CHECKING:
    from effsearch.spaces.space import Space


@dataclass
class StudySpec:
    name: str
    source: str  # the file, for messages
    storage: str  # an RDB URL or a journal file path
    artifacts: Path
    base: TrainConfig
    baseline: TrainConfig
    objectives: tuple[str, ...]
    space: Space
    sampler: Named  # the sampler's name and options (search/study/samplers.py: SAMPLERS)
    n_trials: int | None
    timeout: float | None
    seed: int
    workers: int
    pruner: Named  # the study pruner's name and options (search/pruners: PRUNERS)
    tuning: SubsetTuning | None  # None: no tuning phase (search/study/phases.py)
    heartbeat: Heartbeat
    failure_limit: int = 3
    dedupe: bool = True
    max_slowdown: float | None = StudyNumbers.max_slowdown  # SlowStop (effsearch.search.pruners.slowstop)
    budget: float | None = None  # compute seconds (effsearch.search.run.budget)
    budget_runs: float | None = None  # the budget in runs of the baseline trial (effsearch.search.run.budget)
    relative_target: float | None = None  # base's target relative to the baseline's final (search/run/target.py)
    share_devices: bool = False  # more workers than free GPUs: trials marked as timed on a shared device
    checkpoint_every: float | None = None  # train seconds between a trial's checkpoints (None: none)
    devices_per_trial: int = 1  # GPUs a trial may ask for (its distributed.processes at most)
    warm_start: list = field(default_factory=list)  # (label, TrainConfig) queued after the baseline
    raw: dict = field(default_factory=dict)
    path: Path | None = None
    storage_field: str = "storage"  # what messages about the storage name: --storage or the file's key
    phase: str = "search"  # "tune" / "confirm" with a tuning phase (effsearch.search.study.phases)
    notes: list = field(default_factory=list)  # what the run's header says (recipes skipped)

    @property
    def is_rdb(self) -> bool:
        return is_rdb_url(self.storage)

    @property
    def directions(self) -> list[str]:
        return O.directions(self.objectives)

    def storage_label(self) -> str:
        return redact(self.storage)
