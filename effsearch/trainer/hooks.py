"""What a caller asks of one run besides its config (``RunHooks``): a study's pruner and rungs,
or a user's progress bar; the trainer (``training.py``) and its loop (``loop.py``) read it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from effsearch.trainer.result import EvalPoint

# on_eval(point) -> a reason to stop the run early (e.g. the study's pruner), or None.
EvalHook = Callable[[EvalPoint], "str | None"]
# settle(epoch, train_seconds, upper) -> True: the point's decision is the same at any validation
# accuracy up to ``upper`` (stop scoring it); False: it needs the whole set; None: no decision of
# the hook's here (the trainer's own rule: below the target, or the target already reached).
SettleHook = Callable[[float, float, float], "bool | None"]


@dataclass(frozen=True)
class Checkpoints:
    """A run's checkpoints (``trainer/checkpoint.py``): once ``every`` train seconds have passed
    since the last, at the next evaluation point or epoch end, the run's state is written to a
    file and handed to ``save(path, facts)`` (the caller keeps it; the file is gone after).
    ``resume``: a file ``save`` was handed (by an earlier process): the run starts from it."""

    every: float | None = None
    save: Callable[[Path, dict], None] | None = None
    resume: Path | None = None


@dataclass(frozen=True)
class RunHooks:
    """What a caller asks of one run besides its config: a study's pruner and rungs, or a
    user's progress bar. ``eval_at``: epochs at which to evaluate besides every
    ``cfg.eval_every`` (a study's pruner asks for its rungs); ``eval_after``: train seconds, the
    same (a time rung; data-parallel: rank 0's clock). ``test`` False: no test accuracy (a tuning
    phase's subset model, whose test score nobody reads). ``settle``: score each evaluation point
    on as much of the validation set as its decision needs (True: the trainer's own rule; a
    SettleHook: the study's pruner first; ``loop.py``); False: every point on the whole set
    (``effsearch train``: the user's curve is exact). ``callbacks``: Composer callbacks that see
    every event (the tests' probes). ``checkpoints``: save the run's state as it goes, or start
    from a saved one (``Checkpoints``)."""

    progress: bool = False
    on_eval: EvalHook | None = None
    eval_at: tuple[float, ...] = ()
    eval_after: tuple[float, ...] = ()
    settle: SettleHook | bool = False
    test: bool = True
    callbacks: tuple = ()
    checkpoints: Checkpoints | None = None

    def quiet(self) -> RunHooks:
        """Ranks 1..N-1 of a data-parallel run: they train alongside rank 0 and report nothing."""
        return dataclasses.replace(self, progress=False, on_eval=None, settle=False)
