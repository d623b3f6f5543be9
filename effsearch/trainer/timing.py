"""The run's clock, history, divergence check, early stop hook and progress bar."""

from __future__ import annotations

import math
import time

import torch
from composer.core import Callback, State


class Clock(Callback):
    """Train seconds run from FIT_START and exclude every evaluation.

    Each evaluation appends ``{epoch, samples_seen, train_seconds, val_accuracy,
    val_loss}`` to the history, then asks ``on_eval`` whether to stop.
    """

    def __init__(self, cfg, device: str, result, on_eval, progress: bool, batches_per_epoch: int,
                 point_extras=()):
        self.cfg, self.result, self.on_eval = cfg, result, on_eval
        self.point_extras = list(point_extras)  # callables returning more fields for each history point
        self.cuda = device == "cuda"
        self.bpe = batches_per_epoch
        self.setup_seconds = 0.0
        self.t0 = None
        self.t_end = None
        self.eval_seconds = 0.0
        self._eval_start = 0.0
        self.stop_status = ""
        self.stop_reason = ""
        self.bar = None
        self._progress = progress
        # Checking the loss forces a device sync: every batch on CPU (free), every 25 on GPU.
        self.check_every = 25 if self.cuda else 1

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def train_seconds(self, now: float | None = None) -> float:
        if self.t0 is None:
            return 0.0
        end = now if now is not None else (self.t_end or self._now())
        return end - self.t0 - self.eval_seconds

    def fit_start(self, state: State, logger) -> None:
        if self._progress:
            from tqdm.auto import tqdm

            total = int(state.max_duration.value * self.bpe) if state.max_duration.unit.name == "EPOCH" \
                else int(state.max_duration.value)
            self.bar = tqdm(total=total, unit="batch", desc="train", dynamic_ncols=True, leave=False)
        self.t0 = self._now()

    def batch_end(self, state: State, logger) -> None:
        if self.bar is not None:
            self.bar.update(1)
        if int(state.timestamp.batch) % self.check_every == 0:
            loss = state.loss
            loss = loss if isinstance(loss, torch.Tensor) else torch.stack(list(loss.values())).sum() \
                if isinstance(loss, dict) else torch.as_tensor(loss)
            if not bool(torch.isfinite(loss.detach()).all()):
                self._stop(state, "diverged", f"training loss became {loss.item()} at batch "
                                              f"{int(state.timestamp.batch)}")

    def eval_before_all(self, state: State, logger) -> None:
        self._eval_start = self._now()

    def eval_after_all(self, state: State, logger) -> None:
        metrics = state.eval_metrics.get("eval", {})
        acc = float(metrics["MulticlassAccuracy"].compute()) if "MulticlassAccuracy" in metrics else float("nan")
        loss = float(metrics["CrossEntropy"].compute()) if "CrossEntropy" in metrics else float("nan")
        point = {
            "epoch": round(int(state.timestamp.batch) / self.bpe, 4),
            "samples_seen": int(state.timestamp.sample),
            "train_seconds": self.train_seconds(self._eval_start),
            "val_accuracy": acc,
            "val_loss": loss,
        }
        for extra in self.point_extras:
            point.update(extra())
        self.result.history.append(point)
        if self.bar is not None:
            self.bar.set_postfix(val_acc=f"{acc:.4f}", refresh=False)
        if not math.isfinite(loss):
            self._stop(state, "diverged", "validation loss is not finite")
        elif self.on_eval is not None and not self.stop_reason:
            reason = self.on_eval(point)
            if reason:
                self._stop(state, "pruned", reason)
        self.eval_seconds += self._now() - self._eval_start

    def fit_end(self, state: State, logger) -> None:
        self.t_end = self._now()

    def _stop(self, state: State, status: str, reason: str) -> None:
        if not self.stop_reason:
            self.stop_status, self.stop_reason = status, reason
        state.stop_training()

    def finish(self) -> None:
        if self.t_end is None and self.t0 is not None:
            self.t_end = self._now()
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def summary(self) -> dict:
        return {"train_seconds": self.train_seconds(), "eval_seconds": self.eval_seconds,
                "setup_seconds": self.setup_seconds}
