"""A run's state saved and restored (``RunHooks.checkpoints``), so that a trial outlives its worker.

One file holds the model, the optimizer (and SAM's base optimizer), the AMP scaler, each Composer
algorithm's state (EMA's and SWA's averages, sparsity's masks), the loop's counters and the
learning curve so far, the data order (the epoch's shuffling generator and how far into the epoch
the run was), every random generator (torch's, CUDA's, NumPy's, Python's, the batch
augmentations') and the clock (train and evaluation seconds so far). Restored, a run goes on as if
it had never stopped: the same batches in the same order, the same evaluation points and
accuracies (tests/trainer/test_checkpoint.py).

A run whose state lives elsewhere is not checkpointed, and ``why_not`` says why: data-parallel
ranks, a loader other than effsearch's device batches (FFCV's, a per-image DataLoader), CORDS
selection, K-FAC (its factors are kept outside its state_dict).
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from effsearch.trainer.result import EvalPoint

if TYPE_CHECKING:
    from effsearch.trainer.hooks import Checkpoints
    from effsearch.trainer.loop import Loop

FORMAT = 1  # the file's layout; a file of another layout is refused, not misread
LOOP_FIELDS = ("step", "epoch", "batch_in_epoch", "samples", "samples_in_epoch", "loss_steps", "marks")


def why_not(loop: Loop) -> str | None:
    """Why ``loop``'s run cannot be checkpointed (None: it can)."""
    from effsearch.trainer.data.splits import DeviceBatches

    if loop.dist.on:
        return "a data-parallel run: each rank's state would have to be gathered"
    if not isinstance(loop.loader, DeviceBatches):
        return f"its loader ({type(loop.loader).__name__}) keeps its own order, which is not saved"
    if loop.loader.sampler is not None:
        return "CORDS selection keeps its subsets outside the run's state"
    if loop.cfg.optimizer.name == "kfac-sgd":
        return "K-FAC keeps its factors outside its state_dict"
    return None


def capture(loop: Loop, train_seconds: float) -> dict:
    """Everything ``restore`` needs to go on from this step (tensors referenced: save at once)."""
    opt = loop.optimizer
    base = getattr(opt, "base_optimizer", None)  # SAM keeps the momentum in its base optimizer
    return {
        "format": FORMAT,
        "model": loop.model.state_dict(),
        "optimizer": opt.state_dict(),
        "base_optimizer": base.state_dict() if base is not None else None,
        "global_step": getattr(opt, "global_step", None),  # SAM's interval counter
        "scaler": loop.scaler.state_dict() if loop.scaler is not None else None,
        "algorithms": [a.state_dict() for a in loop.state.algorithms],
        "loop": {name: getattr(loop, name) for name in LOOP_FIELDS},
        "loss_sum": loop.loss_sum.detach().cpu(),
        "clock": {
            "train_seconds": train_seconds,
            "eval_seconds": loop.before_eval + loop.eval_seconds,
            "compile_seconds": loop.compile_seconds,
            "segments": loop.segments,
        },
        "history": [p.to_dict() for p in loop.result.history],
        "data": {"now": loop.loader.gen.get_state(), "epoch_start": loop.loader.epoch_state},
        "rng": _rng_states(loop),
    }


def _rng_states(loop: Loop) -> dict:
    states = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "augment": [
            gen.get_state() if (gen := _gen(a)) is not None else None for a in (loop.augment, loop.eval_augment)
        ],
    }
    if loop.cuda:
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def write(state: dict, path: Path) -> None:
    """``state`` into ``path``, whole or not at all (a worker killed mid-write leaves no half file)."""
    tmp = path.with_name(path.name + ".part")
    torch.save(state, tmp)
    os.replace(tmp, path)


def read(path: Path, device: str) -> dict:
    """A checkpoint file ``write`` wrote (effsearch's own: it is unpickled), tensors on ``device``."""
    state = torch.load(path, map_location=device, weights_only=False)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"{path} is not a checkpoint of this effsearch (format {FORMAT})")
    return state


def restore(loop: Loop, state: dict) -> None:
    """Put ``state`` (``capture``'s) into ``loop``, built afresh for the same config, after FIT_START."""
    loop.model.load_state_dict(state["model"])
    loop.optimizer.load_state_dict(state["optimizer"])
    base = getattr(loop.optimizer, "base_optimizer", None)
    if base is not None and state["base_optimizer"] is not None:
        base.load_state_dict(state["base_optimizer"])
    if state["global_step"] is not None:
        loop.optimizer.global_step = state["global_step"]  # SAM's
    if loop.scaler is not None and state["scaler"] is not None:
        loop.scaler.load_state_dict(state["scaler"])
    for algorithm, saved in zip(loop.state.algorithms, state["algorithms"]):
        algorithm.load_state_dict(saved)
    for name, value in state["loop"].items():
        setattr(loop, name, value)
    loop.loss_sum.copy_(state["loss_sum"])
    clock = state["clock"]
    loop.before_train, loop.before_eval = clock["train_seconds"], clock["eval_seconds"]
    loop.compile_seconds, loop.segments = clock["compile_seconds"], clock["segments"] + 1
    loop.result.history[:] = [EvalPoint.from_dict(p) for p in state["history"]]
    _restore_order(loop, state["data"])
    _restore_rng(loop, state["rng"])


def _restore_order(loop: Loop, data: dict) -> None:
    """The data order: mid-epoch, the epoch's shuffle drawn again and the batches already trained
    skipped; at an epoch's end, the generator as it stood."""
    batches = loop.loader
    if loop.batch_in_epoch:
        batches.gen.set_state(_cpu(data["epoch_start"]))
        batches.skip = loop.batch_in_epoch * loop.accumulate  # micro-batches
        loop.mid_epoch = True
    else:
        batches.gen.set_state(_cpu(data["now"]))


def _restore_rng(loop: Loop, rng: dict) -> None:
    torch.set_rng_state(_cpu(rng["torch"]))
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    for augment, saved in zip((loop.augment, loop.eval_augment), rng["augment"]):
        gen = _gen(augment)
        if gen is not None and saved is not None:
            gen.set_state(_cpu(saved))
    if loop.cuda and "cuda" in rng:
        torch.cuda.set_rng_state_all([_cpu(s) for s in rng["cuda"]])


def _gen(augment: Any) -> torch.Generator | None:
    """A batch augmentation's random generator (an image one's flips and crops; None: it draws nothing)."""
    return getattr(augment, "gen", None)


def _cpu(t: Any) -> Any:
    """A generator's state as its setter takes it: a CPU byte tensor (``read`` moved tensors to the device)."""
    return t.cpu() if isinstance(t, torch.Tensor) else t


class Saver:
    """A run's checkpoints as it trains (``Loop`` asks ``maybe`` at evaluation points and epoch
    ends, never per step): when the next is due, and what they cost, kept out of the train clock."""

    def __init__(self, hooks: Checkpoints) -> None:
        self.hooks = hooks
        self.last = 0.0  # train seconds at the last checkpoint (or at the one resumed from)
        self.seconds = 0.0  # spent writing them
        self.count = 0
        self.skipped: str | None = None  # why this run takes none
        self.restore_seconds: float | None = None  # reading and restoring the one resumed from

    def start(self, loop: Loop) -> None:
        """After FIT_START: whether this run can be checkpointed, and the resume, timed apart."""
        if self.hooks.every is not None:
            self.skipped = why_not(loop)
        if self.hooks.resume is not None:
            t = time.perf_counter()
            restore(loop, read(self.hooks.resume, loop.device))
            self.last = loop.before_train
            self.restore_seconds = time.perf_counter() - t

    def maybe(self, loop: Loop) -> None:
        """A checkpoint, when ``every`` train seconds passed since the last (read on the host clock:
        no sync unless one is due) and the run goes on past this step."""
        every, save = self.hooks.every, self.hooks.save
        if every is None or save is None or self.skipped or loop.stop_reason or loop.step >= loop.total:
            return
        if loop.train_seconds(time.perf_counter()) - self.last < every:
            return
        if loop.cuda:
            torch.cuda.synchronize()
        t = time.perf_counter()
        seconds = loop.train_seconds(t)
        with tempfile.TemporaryDirectory(prefix="effsearch-checkpoint-") as tmp:
            path = Path(tmp) / "checkpoint.pt"
            write(capture(loop, seconds), path)
            save(path, {"epoch": round(loop.step / loop.bpe, 4), "step": loop.step, "train_seconds": seconds})
        self.last, self.count = seconds, self.count + 1
        self.seconds += time.perf_counter() - t
        loop.paused += time.perf_counter() - t

    def summary(self, segments: int) -> dict:
        """What the run's result keeps of its checkpoints (Final.extra)."""
        out: dict[str, Any] = {"segments": segments} if segments > 1 else {}
        if self.count:
            out.update(checkpoints=self.count, checkpoint_seconds=self.seconds)
        if self.restore_seconds is not None:
            out["restore_seconds"] = self.restore_seconds
        if self.skipped:
            out["checkpoint_skipped"] = self.skipped
        return out
