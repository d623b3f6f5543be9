"""The trial record's vocabulary: every attribute key effsearch writes on a trial or a study.

This is the stored format a study is read back from (``effsearch status``, ``export``, ``best``,
a resumed run, a later effsearch): a key renamed here is a study written before that reads as
empty. docs/architecture.md ("The trial record") lists each key, its type and who writes it.
Every reader and writer names these constants; a test holds that no module in effsearch/ passes
a bare string as a user-attribute key.
"""

from __future__ import annotations

# -- a trial's user attributes: what the objective writes on every trial it runs -----------------
WORKER_KEY = "worker"  # dict {"host", "pid", "id"}: the process running the trial (heartbeat.worker_id)
STATUS_KEY = "status"  # str: effsearch's word for how the trial ended ("completed", "pruned", "failed", ...)
REASON_KEY = "reason"  # str: why it stopped short (a pruner's verdict, an error), at most 2,000 characters
CONFIG_KEY = "config"  # str: the TrainConfig YAML the trial trained
FULL_CONFIG_KEY = "full_config"  # str: phase 1 only, the full-data config its shrunk config came from
CONFIG_HASH_KEY = "config_hash"  # str: TrainConfig.hash() of what the trial trains (or would have)
WALL_KEY = "wall_seconds"  # float: the whole trial (set-up, training, evaluation), what a budget counts
ARTIFACT_ERROR_KEY = "artifact_error"  # str: why the trial has no files in the artifact store
NOTE_ERROR_KEY = "note_error"  # str: why the trial has no dashboard note
DUPLICATE_KEY = "duplicate_of"  # int: the trial whose result a duplicate config was answered with
DEDUPE_NOTE_KEY = "dedupe_note"  # str: why a config trained before trains again (it failed, or ran on)
WAITED_FOR_KEY = "waited_for"  # dict {"trial", "seconds", "its_end"}: the same config's trial a duplicate waited on
# dict {"name", "index", "host", "shared"}: the device it trained on (config.machine.device_record): its kind
# (name), the worker's CUDA_VISIBLE_DEVICES, the host, and whether other workers trained on that GPU meanwhile
PLACEMENT_KEY = "placement"

# Statuses of a trial that failed for a reason of its own (counted, never retried); a lost worker's
# or an interrupted trial is queued again instead.
COUNTED_FAIL = ("failed", "diverged", "invalid")
# Statuses of a trial a worker ended without running it, neither counted nor a failure: a second
# baseline queued at the same moment, or a trial asked for when the study already had its n_trials
# (a worker's stop check and its next ask are not one step: search/run/objective.py, ``_surplus``).
NOT_RUN = ("duplicate", "surplus")
# The reason an interrupted trial records (Ctrl-C or SIGTERM; workers.requeue_interrupted queues it again).
INTERRUPTED_REASON = "stopped by Ctrl-C or SIGTERM; queued again: a rerun of the same command resumes it"

# -- a queued trial's user attributes (set when it is enqueued; a retry keeps them) ----------------
BASELINE_KEY = "baseline"  # bool: the study's trial 0, the yardstick for speed-ups (runner.ensure_study)
WARM_KEY = "warm_start"  # str: which warm start a queued trial is (search/run/warmstart.py)
WARM_CONFIG_KEY = "warm_config"  # str: the config YAML that warm start trains
TUNE_TRIAL_KEY = "tune_trial"  # int: phase 2, the phase-1 trial this one confirms (phases.queue_confirm)
TUNE_VALUES_KEY = "tune_values"  # list[float]: phase 2, that phase-1 trial's objective values
CONFIRM_SEED_KEY = "confirm_seed"  # int: phase 2, the seed this confirmation trains with
CONFIRM_CONFIG_KEY = "confirm_config"  # str: phase 2, the full-data config YAML it re-runs
RETRY_OF_KEY = "retry_of"  # int: the trial this one retries (storage.requeue)
RETRY_REASON_KEY = "retry_reason"  # str: why that trial is retried ("interrupted", a lost worker)
BASELINE_FOR_KEY = "baseline_for"  # str: a baseline queued for one kind of device (search/run/kinds.py)

# -- a trial's checkpoints (checkpoint_every; search/store/checkpoints.py, search/run/resume.py) -------
# dict {"artifact_id", "config_hash", "epoch", "step", "train_seconds"}: its last checkpoint in the artifact store
CHECKPOINT_KEY = "checkpoint"
RESUMED_KEY = "resumed_from"  # dict {"trial", "epoch", "step", "train_seconds"}: the checkpoint it started from
RESTORE_KEY = "restore_seconds"  # float: reading and restoring that checkpoint (not in its train seconds)
SEGMENTS_KEY = "segments"  # int: its training segments (2: resumed once)
CHECKPOINT_SKIPPED_KEY = "checkpoint_skipped"  # str: why a trial of a study with checkpoint_every took none
CHECKPOINT_ERROR_KEY = "checkpoint_error"  # str: why a checkpoint could not be saved

# -- a trial's result (record.result_attrs; a duplicate copies them from the trial it repeats) ----
REACHED_KEY = "reached_target"  # bool: the delivered model reached the target
TIME_TO_TARGET_KEY = "time_to_target"  # float | None: train seconds to the target
TARGET_KEY = "target_accuracy"  # float: the target's value that trial (or, on a study, the study) aims at
# str: the metric TARGET_KEY's value is on (val_accuracy, val_loss, val_bpb); absent: val_accuracy (older studies)
TARGET_METRIC_KEY = "target_metric"
HISTORY_KEY = "history"  # list[dict]: the evaluation points (EvalPoint.to_dict)
DEVICE_KEY = "device"  # str: what trained it
VERSIONS_KEY = "versions"  # dict: package versions
SPEEDUP_KEY = "speedup"  # float | None: the baseline's time to target over this trial's
KFAC_KEY = "kfac_fallbacks"  # dict: K-FAC's layers and steps that took plain SGD (also a Final.extra key)
VAL_ACCURACY_KEY = "val_accuracy"  # float: the final validation accuracy (one of FINAL_KEYS)
VAL_LOSS_KEY = "val_loss"  # float: the final validation loss (one of FINAL_KEYS)
VAL_BPB_KEY = "val_bpb"  # float: language models, the final bits per byte of held-out text (one of FINAL_KEYS)
TEST_ACCURACY_KEY = "test_accuracy"  # float: the final test accuracy, recorded, never optimised
TEST_LOSS_KEY = "test_loss"  # float: language models, the final test loss, recorded, never optimised
TRAIN_SECONDS_KEY = "train_seconds"  # float: training time, evaluation excluded
# bool: the run trained on token rows, as the probed model said in the process that trained it (a
# report in another process knows an import path's model by this alone; it shows the trial's max_length)
TEXT_KEY = "text"
# Final's fields of the same names (trainer/result.py), each written when the run measured it.
FINAL_KEYS = (
    VAL_ACCURACY_KEY,
    VAL_LOSS_KEY,
    VAL_BPB_KEY,
    TEST_ACCURACY_KEY,
    TEST_LOSS_KEY,
    TRAIN_SECONDS_KEY,
    "eval_seconds",
    "setup_seconds",
    "compile_seconds",
    "steps",
    "target_crossed_at",
    "data_seconds",
    "selection_seconds",
    "sparsity",
    "nonzero_params",
    "nonzero_param_bytes",
)

# -- the pruner's points (search/pruners/moasha.py): the first verdict at a rung is kept ------------
RUNG_PREFIX = "rung_"  # rung_K: list [time bound, accuracy, reached] (RungPoint.to_attr) at budget rung K
TIME_RUNG_KEY = "rung_time"  # list [train seconds, val accuracy]: the point at the time rung


def rung_key(k: int) -> str:
    """The attribute of a trial's point at budget rung ``k``."""
    return f"{RUNG_PREFIX}{k}"


# -- on a phase-2 front point only (phases.seed_means builds it; never stored) ---------------------
SEED_TRIALS_KEY = "seed_trials"  # list[int]: the trials whose seeds this point is the mean of
FAILED_SEEDS_KEY = "failed_seed_trials"  # list[int]: its seeds that failed (the point is a miss)

# -- a study's user attributes ---------------------------------------------------------------------
OBJECTIVES_KEY = (
    "objectives"  # list[str]: the objectives' names (runner.ensure_study); TARGET_KEY, TARGET_METRIC_KEY too
)
STUDY_FILE_KEY = "study_file"  # str: the study file as read (studyfile.dump)
# float: how much better than the baseline's final value of the target's metric a relative target is
# (-0.01: an accuracy less a point, a loss plus 0.01; search/run/target.py); TARGET_KEY is set when it completes
TARGET_OFFSET_KEY = "target_relative_to_baseline"
PHASE_KEY = "phase"  # str: "tune" or "confirm", with a tuning phase (phases.queue_confirm)
TUNE_STUDY_KEY = "tune_study"  # str: phase 2's study names its phase 1
CONFIRM_STUDY_KEY = "confirm_study"  # str: phase 1's study names its phase 2
TUNING_KEY = "tuning"  # dict: phase 2's study, the tuning options (SubsetTuning's fields)
TUNE_COMPUTE_KEY = "tune_compute"  # float: phase 2's study, phase 1's summed wall seconds (search/results/cost.py)

# -- a trial's system attributes ------------------------------------------------------------------
HEARTBEAT_KEY = "effsearch:heartbeat"  # float: a RUNNING trial's last time.time() on a journal file
# Optuna's own retry format (RetryHeartbeatStaleTrialCallback writes the same keys), shared by storage.requeue.
RETRY_HISTORY_KEY = "retry_history"  # list[int]: the trials a retry retries, oldest first
FAILED_TRIAL_KEY = "failed_trial"  # int: the first of them
FAIL_REASON_KEY = "fail_reason"  # str: Optuna's, the exception a trial failed with when effsearch wrote no reason
