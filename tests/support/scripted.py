"""A scripted trainer, standing in for training where only a study's bookkeeping is under test.

``scripted_train`` plays a learning curve decided by the config (accuracy rises to a ceiling set by
the lr, and a little by the data fraction; a second an epoch), so which trials a pruner stops and
which configurations a tuning phase confirms are known in advance, and a study runs in seconds.

How it reaches the trials: effsearch takes the function its trials train with by injection,
never by patching its modules.

- In Python: ``runner.run(spec, train_fn=...)``, ``workers.work(spec, train_fn=...)``,
  ``Objective(..., train_fn=...)``: any callable with ``effsearch.trainer.training.train``'s
  signature (to worker processes only a module-level function: they import it by name).
- Through a command (``main(["run", ...])``, ``effsearch run`` in a subprocess) and the worker
  processes it starts: ``EFFSEARCH_TRAIN_FN=module:function`` (``objective.TRAIN_FN_ENV``),
  read wherever no function was given. The ``scripted`` fixture (tests/conftest.py) sets it to
  ``train`` below, which calls ``scripted_train``, or in this process the function the test hands
  the fixture (``scripted(fn)``); a worker process imports this module afresh and plays
  ``scripted_train``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from effsearch.search.run.objective import TRAIN_FN_ENV
from effsearch.trainer.result import EvalPoint, Final, RunResult, time_to_target

__all__ = ["SLOW_TRAIN_FN", "TRAIN_FN", "TRAIN_FN_ENV", "Scripted", "scripted_train", "slow_train", "train"]


def scripted_train(
    cfg, data_root=None, out_dir=None, progress=False, on_eval=None, eval_at=(), test=True, eval_after=(), settle=False
):
    """Accuracy rises to a ceiling set by the lr (and a little by the data fraction); a second an
    epoch; evaluated every ``eval_every`` and at ``eval_at`` (the pruner's rungs)."""
    ceiling = min(0.95, 0.4 + 3 * cfg.optimizer.lr) * (0.9 + 0.1 * cfg.dataset.data_fraction)
    result = RunResult(status="completed", config=cfg.to_dict(), target_accuracy=cfg.target_accuracy)
    steps = int(round(cfg.epochs / cfg.eval_every))
    for epoch in sorted({k * cfg.eval_every for k in range(1, steps + 1)} | set(eval_at)):
        point = EvalPoint(
            epoch=epoch,
            train_seconds=epoch * cfg.dataset.data_fraction,
            val_accuracy=ceiling * (1 - math.exp(-2 * epoch)),
            val_loss=1.0,
        )
        result.history.append(point)
        reason = on_eval(point) if on_eval else None
        if reason:
            result.status, result.reason = "pruned", reason
            break
    last = result.history[-1]
    result.final = Final(
        val_accuracy=last.val_accuracy,
        test_accuracy=last.val_accuracy if test else None,
        train_seconds=last.train_seconds,
    )
    result.time_to_target = time_to_target(result.history, cfg.target_accuracy)
    return result


class Scripted:
    """What ``train`` calls in this process: ``scripted_train`` unless a test handed its own."""

    fn: Callable[..., RunResult] = scripted_train


def train(cfg, **kwargs):
    """The function EFFSEARCH_TRAIN_FN names in tests (``TRAIN_FN``)."""
    return Scripted.fn(cfg, **kwargs)


TRAIN_FN = f"{__name__}:train"


def slow_train(cfg, **kwargs):
    """``scripted_train`` three seconds a trial (the warm-ups too), so that a signal or a kill lands
    mid-trial (worker processes import it by name: ``SLOW_TRAIN_FN``)."""
    time.sleep(3)
    return scripted_train(cfg, **kwargs)


SLOW_TRAIN_FN = f"{__name__}:slow_train"
