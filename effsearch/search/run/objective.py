"""The study's objective: one trial trained, recorded and scored.

``Objective(trial)`` samples a config (or takes the queued baseline / a confirmation),
trains it in this process with the study pruner watching each evaluation, records the
result on the trial (attributes, artifacts, a note) and returns the objective values.
A config the study already trained (same ``TrainConfig.hash()``) is not trained again
unless the study file says ``dedupe: false``: a COMPLETE or PRUNED trial of it answers
(``duplicate_of``), a RUNNING one another worker started first is waited for, and a FAILED
one is trained again (a failure may be transient; the note says so).
A failure it can explain (an invalid config, an exception, divergence) is recorded and
raised as ``TrialFailed``, which the worker's ``study.optimize`` catches: the study goes on.
A trial the other workers took over while this one was stopped or hung (they failed it as lost
and queued it again: heartbeat.requeue_dead_local, Optuna's heartbeats) is dropped when this
worker resumes: ``TrialTakenOver``, said once on stderr and in the trial's note.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import optuna
from optuna.trial import FrozenTrial, TrialState

from effsearch import objectives as O
from effsearch.config import TrainConfig, readers
from effsearch.config.machine import device_record
from effsearch.search.pruners import SlowStop, make_pruner
from effsearch.search.results import report
from effsearch.search.run import kinds, target, warmstart
from effsearch.search.run.resume import TrialCheckpoints
from effsearch.search.store import queries, record
from effsearch.search.store.attrs import (
    ARTIFACT_ERROR_KEY,
    BASELINE_FOR_KEY,
    BASELINE_KEY,
    CONFIG_HASH_KEY,
    CONFIG_KEY,
    COUNTED_FAIL,
    DEDUPE_NOTE_KEY,
    DUPLICATE_KEY,
    FULL_CONFIG_KEY,
    INTERRUPTED_REASON,
    NOTE_ERROR_KEY,
    PLACEMENT_KEY,
    REASON_KEY,
    STATUS_KEY,
    WAITED_FOR_KEY,
    WALL_KEY,
    WORKER_KEY,
)
from effsearch.search.store.heartbeat import JournalHeartbeat, worker_id
from effsearch.search.store.storage import (
    artifact_problem,
    constraints_of,
    finished_elsewhere,
    retries_of,
    retry_history,
    save_note_by_id,
    set_constraints,
    storage_errors,
    trial_id,
    why,
)
from effsearch.search.study import phases
from effsearch.trainer.result import speedup

if TYPE_CHECKING:
    from optuna.artifacts import FileSystemArtifactStore

    from effsearch.search.study.spec import StudySpec
    from effsearch.trainer.hooks import Checkpoints
    from effsearch.trainer.result import RunResult


log = logging.getLogger(__name__)


clock = time.perf_counter  # a trial's wall seconds (a test may stand in its own clock)

# A train function: effsearch.trainer.training.train's signature, returning a RunResult.
TrainFn = Callable[..., "RunResult"]

# What trials train with when no train function is given: the function this variable names
# ("module:function"), else effsearch's trainer. Worker processes inherit the environment, so a
# stand-in named here trains their trials too (tests/support/scripted.py uses it).
TRAIN_FN_ENV = "EFFSEARCH_TRAIN_FN"


def trainer(given: TrainFn | None = None) -> TrainFn:
    """``given``, else the function EFFSEARCH_TRAIN_FN names, else effsearch's trainer."""
    if given is not None:
        return given
    path = os.environ.get(TRAIN_FN_ENV)
    if path:
        from effsearch.config.imports import load_object

        return load_object(path, TRAIN_FN_ENV)
    from effsearch.trainer.training import train

    return train


class TrialFailed(Exception):
    """A trial that failed for a recorded reason; the study goes on."""


class TrialTakenOver(Exception):
    """This worker's trial was failed (and queued again) by the other workers while it ran: its
    heartbeat went stale, the process stopped or hung. Whatever it trained is dropped: its times
    hold the time it was stopped, and the retry trains the config again."""


class Objective:
    # A duplicate waits for the trial of its config that another worker runs: until that one
    # ends, its worker is found dead (the heartbeat's grace period, through ``reap``), or it
    # has run WAIT_FACTOR times the study's longest trial (at least WAIT_FLOOR seconds), past
    # which it is more likely stuck than slow and this trial trains the config itself.
    WAIT_FLOOR, WAIT_FACTOR = 600.0, 3.0

    def __init__(
        self,
        spec: StudySpec,
        study: optuna.Study,
        store: FileSystemArtifactStore | None,
        data_root: str | Path | None = None,
        heartbeat: JournalHeartbeat | None = None,
        reap: Callable[[], object] | None = None,
        train_fn: TrainFn | None = None,
    ) -> None:
        self.spec, self.study, self.store, self.data_root = spec, study, store, data_root
        self.train_fn = trainer(train_fn)  # what each trial trains with (``trainer``)
        self.pruner = make_pruner(spec.pruner, study)
        if spec.max_slowdown is not None:
            self.pruner = SlowStop(self.pruner, spec.max_slowdown, study)
        self.heartbeat = heartbeat  # journal storages: JournalHeartbeat
        self.reap = reap  # fails the trials of dead workers (workers.reap_dead)
        self.no_store = artifact_problem(spec) if store is None else None  # why trials keep no files
        self.uncounted: str | None = None  # a trial's wall seconds could not be written: the worker stops
        self.warned: set[str] = set()
        self._baseline_tta: dict[str | None, float | None] = {}  # by kind of device
        self.current: optuna.Trial | None = None  # the trial run last, until Optuna records its end (``told``)
        self.to_sweep: TrialCheckpoints | None = None  # its checkpoints, removed once its end is recorded
        self.raised: BaseException | None = None  # what the current trial's call raised, if anything
        self.dropped: int | None = None  # its number, when it was taken over and dropped
        self._trained = False  # the current trial's training returned
        self.wall = 0.0  # the current trial's wall seconds
        self.started = 0.0  # when the current trial started (clock)
        self.devices: str | None = None  # this worker's CUDA_VISIBLE_DEVICES (None: no GPUs to pin)
        self.shared = False  # other workers train on the same GPUs
        self.kind: str | None = None  # the kind of device it trains on (its name)

    def place(self, devices: str | None, shared: bool, kind: str | None = None) -> None:
        """The GPUs this worker trains on, whether others train there too (recorded on each trial),
        and their kind (a baseline is queued for a kind that has none: search/run/kinds.py)."""
        self.devices, self.shared, self.kind = devices, shared, kind

    def __call__(self, trial: optuna.Trial) -> list[float]:
        self.current, self.raised, self.dropped, self._trained = trial, None, None, False
        self.to_sweep = None  # an earlier trial's end not recorded here: its checkpoints are its retry's now
        try:
            return self._call(trial)
        except BaseException as e:
            self.raised = e
            raise

    def _call(self, trial: optuna.Trial) -> list[float]:
        start = self.started = clock()
        from effsearch.trainer.training import fresh_compile_state

        fresh_compile_state()  # a trial's compile time is its own, not the worker's earlier trials'
        try:
            trial.set_user_attr(WORKER_KEY, worker_id())
            if self.heartbeat is not None:
                self.heartbeat.beat(trial_id(trial))
            if self.kind is not None:
                kinds.queue_baseline(self.spec, self.study, self.kind)
            return self._run(trial)
        except (KeyboardInterrupt, SystemExit):
            self._interrupted(trial)
            raise
        except Exception as e:
            # A write refused because the trial is finished: the others took it over while this
            # worker was stopped; only storage can tell that from a bug writing to an old trial.
            stored = finished_elsewhere(trial) if _refused_as_finished(e) else None
            if stored is None:
                raise
            raise self._drop(trial, stored, clock() - start) from e
        finally:
            self.wall = clock() - start
            if self.dropped is None:
                self._record_wall(trial, self.wall)  # what a study budget counts, whatever the trial's end
            if self.heartbeat is not None:
                self.heartbeat.beat(None)

    def _interrupted(self, trial: optuna.Trial) -> None:
        try:
            trial.set_user_attr(STATUS_KEY, "interrupted")
            trial.set_user_attr(REASON_KEY, INTERRUPTED_REASON)
        except optuna.exceptions.UpdateFinishedTrialError:
            return  # the others failed it as lost and queued it again already: Ctrl-C goes on
        self._status_note(trial, "interrupted", INTERRUPTED_REASON)

    def _record_wall(self, trial: optuna.Trial, seconds: float) -> None:
        """The trial's wall seconds, written (or tried once more: a dropped connection is
        reopened); when both fail ``uncounted`` says why and the worker stops the study, which
        would otherwise run on past its budget with this trial's compute unseen. A trial the others
        took over since its last write takes none: Optuna's tell then fails and ``lost_at_tell`` drops it."""
        for attempt in (1, 2):
            try:
                trial.set_user_attr(WALL_KEY, seconds)
                return
            except optuna.exceptions.UpdateFinishedTrialError:
                return
            except Exception as e:  # noqa: BLE001 - a dropped connection, reopened by the next call: once more
                if attempt == 1:
                    time.sleep(0.5)
                    continue
                # recorded in ``uncounted``: the worker stops the study on it
                self.uncounted = (
                    f"trial {trial.number}'s wall seconds ({seconds:.1f} s) could not be "
                    f"written, twice: {type(e).__name__}: {e}"
                )

    # -- a trial taken over by the other workers -------------------------------------------------
    def told(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """A study.optimize callback: Optuna recorded the end of the current trial; only now are its
        checkpoint files removed (a worker killed while it records the trial's results leaves them
        to the retry, which then resumes instead of training from the start)."""
        self.current = None
        if self.to_sweep is not None and self.to_sweep.trial.number == trial.number:
            self.to_sweep.finish()
        self.to_sweep = None

    def lost_at_tell(self, e: Exception) -> bool:
        """After ``study.optimize`` raised ``e``: True when that is Optuna failing to record the
        end of this worker's trial (it raises "Cannot tell a FAIL trial", or an assertion of its
        own when the trial returned values) because the others failed it meanwhile
        (``TrialTakenOver``, or taken over after its last write); it is dropped, said once. False
        for anything else, such as the trial's own error, which Optuna records and raises again."""
        trial = self.current
        if trial is None or e is self.raised:
            return False
        if self.dropped == trial.number:
            return True
        stored = finished_elsewhere(trial)
        if stored is None or stored.state != TrialState.FAIL:
            return False
        self._drop(trial, stored, self.wall)
        return True

    def _drop(self, trial: optuna.Trial, stored: FrozenTrial, seconds: float) -> TrialTakenOver:
        """Say once (stderr and the trial's note) that ``trial`` was taken over and what this
        worker did on it is dropped; its ``seconds`` of wall time are not counted (unless they
        were written before it was taken over)."""
        self.dropped = trial.number
        retry = retries_of(self.study, trial.number)
        lost = stored.user_attrs.get(REASON_KEY) or (
            f"its worker sent no heartbeat for {self.spec.heartbeat.grace_period:g} s"
        )
        again = f"queued again as trial {retry[0]}" if retry else "not queued again (heartbeat.max_retry)"
        did = "finished training it" if self._trained else "was training it"
        if WALL_KEY in stored.user_attrs:  # taken over after its last write
            cost = f"its {stored.user_attrs[WALL_KEY]:.1f} s of wall time, written before, count"
        else:  # as a killed worker's trial's, which no one can count
            cost = (
                f"its {seconds:.1f} s of wall time are not counted in the study's compute: they hold "
                "the time it was stopped"
            )
        text = (
            f"trial {trial.number} was taken over by the other workers ({lost}) and {again}; this worker "
            f"then resumed, {did}, and dropped its result ({cost})"
        )
        try:
            save_note_by_id(
                self.study,
                stored,
                f"### Trial {trial.number}: lost\n\n{lost}; {again}\n\n"
                f"- Its worker then resumed, {did}, and dropped its result "
                f"({cost}).",
            )
        except storage_errors() as e:
            text += f"; its note could not be saved: {why(e)}"
        log.warning("%s", text)
        return TrialTakenOver(text)

    def _run(self, trial: optuna.Trial) -> list[float]:
        is_baseline = bool(trial.user_attrs.get(BASELINE_KEY))
        if self._surplus(trial):
            trial.set_user_attr(STATUS_KEY, "surplus")
            trial.set_user_attr(
                REASON_KEY,
                f"the study had its {self.spec.n_trials} trials (done or running) when this one started, "
                "asked for by a worker at the same moment as another; not run",
            )
            raise TrialFailed("surplus")
        if is_baseline and self._other_baseline(trial):
            trial.set_user_attr(STATUS_KEY, "duplicate")
            trial.set_user_attr(
                REASON_KEY, "a second baseline, queued by another worker starting at the same moment; not run"
            )
            raise TrialFailed("duplicate baseline")
        warm, full, cfg, device = self._configs(trial, is_baseline)
        self._place(trial, device, is_baseline)
        self._set_config(trial, full, cfg)
        # Never pruned (their rung points still count): the baseline, the yardstick, and a warm
        # start, a recipe the user queued to be trained as given. With rungs evaluated where they
        # sit, the quickstart's own warm start (2.3x the baseline) is at chance at 1/9 and was stopped.
        keep = is_baseline or warm is not None
        if self.spec.dedupe and not is_baseline:  # the baseline is the yardstick: always trained
            original = self._trained_before(trial, cfg.hash(), prunable=not keep)
            if original is not None:
                return self._answer_from(trial, original)
        self.pruner.begin(trial, cfg, may_prune=not keep)
        relative = target.offset(self.spec) if is_baseline else None
        result = self._train(trial, cfg, watched=relative is None)
        self._trained = True
        if relative is not None:  # the target is this baseline's final value, the offset better
            full, cfg = self._resolve(trial, full, cfg, result, relative)
        self._record(trial, cfg, result, cfg.to_yaml(), is_baseline)
        if result.status in ("completed", "pruned"):
            # Optuna's format, which TPE and optuna-dashboard read. A pruned trial's shortfall at
            # the accuracy it stopped at is all TPE learns from it (no values in a
            # multi-objective study); without it TPE would rank it ahead of every near miss.
            constraints = O.constraints(result, self.spec.objectives)
            if constraints:
                set_constraints(trial, constraints)
        if result.status == "completed":
            return O.values(result, self.spec.objectives)
        if result.status == "pruned":
            raise optuna.TrialPruned(result.reason)
        self._fail(trial, "diverged" if result.status == "diverged" else "failed", result.reason or result.status)

    def _set_config(self, trial: optuna.Trial, full: TrainConfig, cfg: TrainConfig) -> None:
        trial.set_user_attr(CONFIG_KEY, cfg.to_yaml())
        trial.set_user_attr(CONFIG_HASH_KEY, cfg.hash())
        if cfg != full:
            trial.set_user_attr(FULL_CONFIG_KEY, full.to_yaml())

    def _resolve(
        self, trial: optuna.Trial, full: TrainConfig, cfg: TrainConfig, result: RunResult, by: float
    ) -> tuple[TrainConfig, TrainConfig]:
        """The baseline's result at the target it resolves (its final value made ``by`` better): its config
        recorded with that target, its points at the rungs recorded for the others as the pruner
        would have at that target (they trained unwatched: the target was unknown)."""
        try:
            t = target.resolve_from(self.study, result, by)
        except target.NoBaseline as e:
            self._fail(trial, "failed" if result.status != "diverged" else "diverged", str(e))
        full, cfg = target.applied(full, t), target.applied(cfg, t)
        self._set_config(trial, full, cfg)
        self.pruner.begin(trial, cfg, may_prune=False)
        for point in result.history:
            self.pruner.on_eval(trial, point)
        return full, cfg

    def _place(self, trial: optuna.Trial, device: str, is_baseline: bool) -> None:
        """Where the trial trains, recorded; a baseline queued for another kind of device handed back."""
        placement = device_record(device, self.devices, self.shared)
        trial.set_user_attr(PLACEMENT_KEY, placement)
        other = kinds.not_mine(trial, placement["name"]) if is_baseline else None
        if other is not None:
            self._fail(
                trial,
                kinds.HANDED_BACK,
                f"the baseline for {other} devices, drawn by a worker on {placement['name']}: handed back "
                "untrained (a worker on that kind queues it again)",
            )

    def _train(self, trial: optuna.Trial, cfg: TrainConfig, watched: bool = True) -> RunResult:
        """``cfg`` trained under the pruner's eyes (and checkpointed, or resumed from a lost
        worker's checkpoint: ``TrialCheckpoints``); a trainer that raises fails the trial ("failed").
        ``watched`` False (a baseline whose target is not known yet): every point scored whole, and
        the pruner sees none while it trains."""
        with TrialCheckpoints(
            self.study,
            trial,
            cfg,
            self.store,
            self.spec.artifacts,
            self.spec.checkpoint_every,
            lambda: clock() - self.started,
            self._warn,
        ) as saved:
            try:
                result = self._train_once(trial, cfg, saved.hooks(), watched)
            except TrialFailed:  # the trainer raised: the trial is over, its checkpoints with it
                saved.finish()
                raise
            saved.note(result)
            self.to_sweep = saved  # removed once the trial's end is recorded (``told``)
            return result

    def _train_once(
        self, trial: optuna.Trial, cfg: TrainConfig, checkpoints: Checkpoints | None, watched: bool
    ) -> RunResult:
        extra: dict[str, Any] = {"checkpoints": checkpoints} if checkpoints is not None else {}
        try:
            # Phase 1 of a tuning phase scores no test set: its subset model's test accuracy is read
            # by no one, and on Fashion-MNIST its 10,000 images were most of the 3 s of final
            # evaluation and set-up in each completed phase-1 trial's 14 s (docs/results.md).
            # Each point scores as much of the validation set as its decision needs (a rung's
            # verdict, else whether it can be the crossing of the target): below the target a
            # shuffled first batch or two usually settle it (trainer/loop.py, ``score``).
            return self.train_fn(
                cfg,
                data_root=self.data_root,
                progress=False,
                on_eval=(lambda point: self.pruner.on_eval(trial, point)) if watched else None,
                eval_at=self.pruner.eval_at(cfg),
                eval_after=self.pruner.eval_after(cfg),
                test=self.spec.phase != "tune",
                settle=(lambda epoch, seconds, upper: self.pruner.settle(trial, epoch, seconds, upper))
                if watched
                else False,
                **extra,
            )
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # out of memory, a CORDS error, ...: recorded, the study goes on
            free_memory()
            self._fail(trial, "failed", f"{type(e).__name__}: {e}")

    def _configs(self, trial: optuna.Trial, is_baseline: bool) -> tuple:
        """(the warm start or None, the full config, the config this trial trains, its device): a trial
        that cannot have them (a space bug, a rule the space does not know) fails as invalid, untrained."""
        from effsearch.config.machine import check_runnable

        resolved = None
        if not is_baseline and target.offset(self.spec) is not None:  # the baseline resolves it
            try:
                resolved = target.wait(self.study, reap=self.reap)
            except target.NoBaseline as e:
                self._fail(trial, "failed", str(e))
        try:
            # The baseline and a warm start train exactly their configs; their parameters are
            # recorded as far as the space can express them, and never a value drawn instead.
            warm = warmstart.config_of(trial)  # None unless a queued warm start
            given = self.spec.baseline if is_baseline else warm
            if given is not None:
                self.spec.space.record(trial, given)
                full = given
            else:
                sampled = self.spec.space.sample(trial)
                full = phases.confirm_config(trial) or TrainConfig.from_dict(sampled, source=f"trial {trial.number}")
            if resolved is not None:
                full = target.applied(full, resolved)
            cfg = phases.trial_config(self.spec, full)  # phase 1 of a tuning phase trains on a subset
            device = check_runnable(cfg)
        except Exception as e:  # a space bug or a rule the space does not know: never trained
            self._fail(trial, "invalid", f"invalid config: {e}")
        return warm, full, cfg, device

    def _record(
        self, trial: optuna.Trial, cfg: TrainConfig, result: RunResult, config_yaml: str, is_baseline: bool
    ) -> None:
        """The result's attributes, files and note on the trial."""
        sp = 1.0 if is_baseline and result.reached_target else self._speedup(trial, result)
        raw = cfg.to_dict()
        text = readers.text_run(raw)  # the model was probed in this process: known here
        record.set_attrs(trial, record.result_attrs(result, sp, text))
        self._keep_files(trial, result, config_yaml)
        self._save_note(
            trial, record.note_text(trial.number, result, report.summary(raw, text), sp, is_baseline) + _remark(trial)
        )

    def _keep_files(self, trial: optuna.Trial, result: RunResult, config_yaml: str) -> None:
        """The trial's files in the artifact store; why it has none is its ``artifact_error``
        (printed once: a full disk or a broken install fails every trial alike)."""
        if self.store is None:
            trial.set_user_attr(ARTIFACT_ERROR_KEY, f"no artifact folder: {self.no_store}")
            return
        try:
            record.upload_files(trial, self.store, result, config_yaml)
        except Exception as e:  # noqa: BLE001 - recorded and warned of: a full disk must not cost the trial
            why = f"{type(e).__name__}: {e}"
            trial.set_user_attr(ARTIFACT_ERROR_KEY, why[:2000])
            self._warn(
                "files",
                f"trial {trial.number}'s files (learning curve, config, result.json) were not "
                f"saved: {why}; each trial without them records why as `artifact_error`",
            )

    def _save_note(self, trial: optuna.Trial, text: str) -> None:
        """The trial's dashboard note; one that cannot be saved is its ``note_error``, printed once."""
        try:
            record.save_note(trial, text)
        except Exception as e:  # noqa: BLE001 - recorded and warned of: a note must not cost the study a trial
            why = f"{type(e).__name__}: {e}"
            trial.set_user_attr(NOTE_ERROR_KEY, why[:2000])
            self._warn(
                "note",
                f"trial {trial.number}'s dashboard note was not saved: {why}; each trial "
                "without one records why as `note_error`",
            )

    def _warn(self, kind: str, text: str) -> None:
        """``text`` as a warning, the first time this worker meets ``kind``."""
        if kind not in self.warned:
            self.warned.add(kind)
            log.warning("%s", text)

    # -- no configuration trained twice ------------------------------------------------------
    def _trained_before(self, trial: optuna.Trial, config_hash: str, prunable: bool) -> FrozenTrial | None:
        """The trial whose result answers this one, or None (train it). A COMPLETE trial of the
        same config answers; so does a PRUNED one, unless this trial may not be pruned (a warm
        start is trained as given). One another worker is running, started before this one, is
        waited for (the later of two waits, so two never wait on each other). A FAILED one is
        trained again, as a failure may be transient, and the note says so."""
        same = self._same_config(trial, config_hash)
        running = [t for t in same if t.state == TrialState.RUNNING and t.number < trial.number]
        if self._answering(same, prunable) is None and running:
            same = self._wait_for(trial, running[0], config_hash)
        found = self._answering(same, prunable)
        if found is None:
            self._remark_failed(trial, same)
        return found

    def _same_config(self, trial: optuna.Trial, config_hash: str) -> list[FrozenTrial]:
        """The study's other trials of this config, oldest first (this trial's own earlier tries,
        a lost worker's trial it retries, left out)."""
        mine = set(retry_history(trial)) | {trial.number}
        return sorted(
            (
                t
                for t in self.study.get_trials(deepcopy=False)
                if t.user_attrs.get(CONFIG_HASH_KEY) == config_hash and t.number not in mine
            ),
            key=lambda t: t.number,
        )

    @staticmethod
    def _answering(same: list[FrozenTrial], prunable: bool) -> FrozenTrial | None:
        """The trial of ``same`` that answers: the first that trained (not itself answered), else a
        PRUNED one when this trial may be pruned; None when none has a result to give."""
        states = (TrialState.COMPLETE, TrialState.PRUNED) if prunable else (TrialState.COMPLETE,)
        done = [t for t in same if t.state in states]
        return min(
            done, key=lambda t: (t.state != TrialState.COMPLETE, DUPLICATE_KEY in t.user_attrs, t.number), default=None
        )

    def _wait_for(self, trial: optuna.Trial, other: FrozenTrial, config_hash: str) -> list[FrozenTrial]:
        """Wait while ``other`` (this config, another worker's) runs; returns the config's trials as
        they are then. Its worker's death fails it (``reap``); past the bound this trial trains too."""
        started = time.monotonic()
        limit = self._wait_limit()
        poll = min(2.0, self.spec.heartbeat.interval)
        while True:
            if self.reap is not None:
                self.reap()
            same = self._same_config(trial, config_hash)
            now = next((t for t in same if t.number == other.number), other)
            waited = time.monotonic() - started
            if now.state != TrialState.RUNNING:
                trial.set_user_attr(
                    WAITED_FOR_KEY,
                    {"trial": other.number, "seconds": round(waited, 1), "its_end": now.state.name.lower()},
                )
                return same
            if waited > limit:
                _set_remark(
                    trial,
                    f"trial {other.number} trains this same config on another worker and was "
                    f"still running after {waited:.0f} s of waiting (the bound: "
                    f"{self.WAIT_FACTOR:g}x the study's longest trial, at least "
                    f"{self.WAIT_FLOOR:g} s): trained here as well",
                )
                return same
            time.sleep(poll)

    def _wait_limit(self) -> float:
        """How long a duplicate waits for the running trial of its config (see WAIT_FACTOR)."""
        walls = [
            t.user_attrs.get(WALL_KEY) or 0.0 for t in self.study.get_trials(deepcopy=False) if t.state.is_finished()
        ]
        return max(self.WAIT_FLOOR, self.WAIT_FACTOR * max(walls, default=0.0))

    @staticmethod
    def _remark_failed(trial: optuna.Trial, same: list[FrozenTrial]) -> None:
        """A config that failed before is trained again; the trial's note says which trial failed."""
        failed = [t for t in same if t.state == TrialState.FAIL]
        if failed:
            last = failed[-1]
            why = last.user_attrs.get(REASON_KEY) or last.user_attrs.get(STATUS_KEY) or "no reason recorded"
            _set_remark(
                trial,
                f"trial {last.number} had this same config and failed ({why[:300]}); trained "
                "again, as a failure may be transient",
            )

    def _answer_from(self, trial: optuna.Trial, original: FrozenTrial) -> list[float]:
        """Record ``original``'s result on ``trial`` and return its values (a COMPLETE original)
        or raise TrialPruned at its rung (a PRUNED one): no training."""
        n = original.user_attrs.get(DUPLICATE_KEY, original.number)
        record.set_attrs(trial, record.copied_attrs(original))
        trial.set_user_attr(DUPLICATE_KEY, n)
        constraints = constraints_of(original)
        if constraints:
            set_constraints(trial, constraints)
        pruned = original.state == TrialState.PRUNED
        waited = trial.user_attrs.get(WAITED_FOR_KEY)
        self._status_note(
            trial,
            f"duplicate of trial {n}" + (" (pruned)" if pruned else ""),
            f"trial {n} trained this same config (hash {original.user_attrs[CONFIG_HASH_KEY]})"
            + (f", waited for {waited['seconds']:g} s as it ran on another worker" if waited else "")
            + "; its result is answered from storage, not trained again"
            + (f": pruned as it was ({original.user_attrs.get(REASON_KEY) or 'pruned'})" if pruned else "")
            + " (`dedupe: false` in the study file re-trains)",
        )
        if pruned:
            raise optuna.TrialPruned(original.user_attrs.get(REASON_KEY) or f"pruned, as trial {n} was")
        return list(original.values)

    def _surplus(self, trial: optuna.Trial) -> bool:
        """Two workers can both see n_trials - 1 and both ask (a stop check and the next ask are not
        one step); the storage numbers trials atomically, so the later one sees the earlier one here."""
        n = self.spec.n_trials
        if n is None:
            return False
        ahead = [
            t
            for t in self.study.get_trials(deepcopy=False)
            if t.number < trial.number and (t.state == TrialState.RUNNING or queries.counted(t))
        ]
        return len(ahead) >= n

    def _other_baseline(self, trial: optuna.Trial) -> bool:
        """Two workers that start on a new study together both queue the baseline: the lower number wins."""
        mine = set(retry_history(trial)) | {trial.number}
        kind = trial.user_attrs.get(BASELINE_FOR_KEY)
        for t in self.study.get_trials(deepcopy=False):
            if t.number >= trial.number or t.number in mine or not t.user_attrs.get(BASELINE_KEY):
                continue
            if t.user_attrs.get(BASELINE_FOR_KEY) != kind:  # another kind of device's baseline
                continue
            if t.state == TrialState.FAIL and t.user_attrs.get(STATUS_KEY) not in COUNTED_FAIL:
                continue  # lost, interrupted or itself a duplicate: its retry (if any) is the baseline
            return True
        return False

    def _fail(self, trial: optuna.Trial, status: str, reason: str) -> NoReturn:
        trial.set_user_attr(STATUS_KEY, status)
        trial.set_user_attr(REASON_KEY, reason[:2000])
        if status != "diverged":  # a diverged trial has its full note (curve, config) already
            self._status_note(trial, status, reason)
        raise TrialFailed(reason)

    def _status_note(self, trial: optuna.Trial, status: str, reason: str) -> None:
        """The dashboard note of a trial that did not train to its end: why, and its config when it has one."""
        cfg = queries.config_of(trial)
        self._save_note(
            trial,
            f"### Trial {trial.number}: {status}\n\n{reason[:2000]}"
            + (f"\n\n- {report.summary(cfg)}" if cfg else "")
            + _remark(trial),
        )

    def _speedup(self, trial: optuna.Trial, result: RunResult) -> float | None:
        """Over the baseline timed on the same kind of device as ``trial`` (None: no such baseline)."""
        if result.time_to_target is None:
            return None
        kind = (trial.user_attrs.get(PLACEMENT_KEY) or {}).get("name")
        if self._baseline_tta.get(kind) is None:
            self._baseline_tta[kind] = queries.baseline_time_to_target(self.study, kind)
        return speedup(self._baseline_tta[kind], result.time_to_target)


def _refused_as_finished(e: BaseException | None) -> bool:
    """Is ``e``, or an error it was raised from or during, a write refused on a finished trial?"""
    for _ in range(10):
        if e is None:
            return False
        if isinstance(e, optuna.exceptions.UpdateFinishedTrialError):
            return True
        e = e.__cause__ or e.__context__
    return False


def _set_remark(trial: optuna.Trial, text: str) -> None:
    """What the duplicate check found for a trial it lets train, kept for the trial's note."""
    trial.set_user_attr(DEDUPE_NOTE_KEY, text)


def _remark(trial: optuna.Trial) -> str:
    text = trial.user_attrs.get(DEDUPE_NOTE_KEY)
    return f"\n- {text}" if text else ""


def free_memory() -> None:
    """Hand back what this process's allocator holds cached on its GPU (after a failed trial, and in
    the main process before its workers start: the pre-flight's warm-up trained there)."""
    gc.collect()
    torch = sys.modules.get("torch")  # never imported: nothing to give back
    if torch is None:
        return
    try:
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    except RuntimeError:  # a broken CUDA context: the cache stays held, as it was
        pass
