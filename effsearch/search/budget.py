"""When a worker stops: the study has its n_trials, or the same error keeps repeating."""

from __future__ import annotations

import datetime
import warnings

import optuna

from effsearch.search import report
from effsearch.search.storage import STATUS_KEY


class StopAtTotal:
    """Stop this worker once the study's counted trials (plus those running elsewhere) reach n_trials."""

    def __init__(self, n_trials: int | None):
        self.n = n_trials

    def reached(self, study) -> bool:
        if self.n is None:
            return False
        # A dead worker's trial stays RUNNING until someone checks its heartbeat: check first,
        # so it is failed (and re-queued) instead of counted as running.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optuna.storages.fail_stale_trials(study)
        c = report.counts(study.get_trials(deepcopy=False))
        return c["done"] + c["running"] >= self.n

    def __call__(self, study, trial) -> None:
        if self.reached(study):
            study.stop()


# Statuses of trials that failed with an error (an exception, a config the trainer refused);
# a diverged trial is a result of the search (a too-high lr), not an error.
ERROR_STATUSES = ("failed", "invalid")


def repeated_failure(study, limit: int, since: datetime.datetime | None = None) -> tuple[str, list[int]] | None:
    """(the error, the trial numbers) when the last ``limit`` finished trials started since
    ``since`` all failed with the same error (class and message); else None."""
    if not limit:
        return None
    done = [t for t in study.get_trials(deepcopy=False) if report.counted(t)
            and (since is None or (t.datetime_start and t.datetime_start >= since))]
    last = sorted(done, key=lambda t: (t.datetime_complete or t.datetime_start, t.number))[-limit:]
    if len(last) < limit or any(t.user_attrs.get(STATUS_KEY) not in ERROR_STATUSES for t in last):
        return None
    reasons = {t.user_attrs.get("reason") for t in last}
    return (reasons.pop(), sorted(t.number for t in last)) if len(reasons) == 1 else None


class StopOnRepeatedFailure:
    """Stop this worker when the study's last few trials failed with the same error: a missing
    dataset, a broken install or a bad base config fails every trial alike."""

    def __init__(self, limit: int, since: datetime.datetime):
        self.limit, self.since, self.hit = limit, since, None

    def __call__(self, study, trial) -> None:
        self.hit = repeated_failure(study, self.limit, self.since)
        if self.hit:
            study.stop()
