"""effsearch's training loop: a hand-written hot path; Composer's algorithms through its Engine.

Composer's ``Trainer`` costs about 2x a plain loop per step on an H100 (four host
syncs a step: the loss for its logger, the batch size and wall time all-reduced
across ranks, a closure's ``.item()``; a deep copy of every batch; twelve events
walked through every algorithm and callback). Here a step is what a hand-written
loop does, plus, only when an algorithm of the run listens to it, Composer's
event at the same point, with Composer's own ``State`` and ``Engine``: Composer
stays the source of the algorithms, and they see the state they expect.

No host sync inside an epoch on a GPU: the loss accumulates on the device and is
read at evaluation points (and once an epoch, to catch divergence); the clock
synchronises only at fit start, evaluation boundaries and fit end. Train seconds
run from FIT_START and exclude evaluation (as DAWNBench does).

Gradient accumulation (``accumulate: k``): an optimizer step takes k micro-batches; a
"batch" for Composer and the schedule is the step (as Composer's own microbatching:
AFTER_DATALOADER and the forward/backward events fire per micro-batch, the others once
a step). Data-parallel (``distributed``): training steps go through DDP (``no_sync``
on all but the last micro-batch); rank 0 evaluates and decides when to stop, and the
others learn its decision at evaluation points and epoch ends, never per step (but for
rank 0's clock, broadcast a few times while a time-rung mark is ahead).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
import torch.nn.functional as F
from composer.core import Engine, Event, State, Time, Timestamp, TimeUnit

from effsearch.config.metrics import ACCURACY, target_of
from effsearch.trainer.composer.events import BATCH_EVENTS, composer_device, listens
from effsearch.trainer.data.lmdata import IGNORE
from effsearch.trainer.result import EvalPoint
from effsearch.trainer.techniques.schedule import factors

if TYPE_CHECKING:
    from composer.core import Algorithm, Callback
    from torch.nn.parallel import DistributedDataParallel

    from effsearch.config import TrainConfig
    from effsearch.trainer.composer.model import EffModel
    from effsearch.trainer.data.lmdata import HeldOut
    from effsearch.trainer.hooks import RunHooks
    from effsearch.trainer.parallel.compression import HookState
    from effsearch.trainer.parallel.distributed import Context
    from effsearch.trainer.result import RunResult

# Evaluation batches, by device. On a GPU large: no gradients, few launches. On a CPU 128: at
# 1,024 the activations spill out of cache and an image costs 1.5-2.4x as much to score (tiny CNN
# on Fashion-MNIST 1.5x, ResNet-20 2.4x; digits' 8x8 images are the exception, 3 ms a trial;
# benchmarks/eval_batch.py). Phase 1 of the Fashion-MNIST
# study spends a sixth of its compute evaluating.
EVAL_BATCH = {"cuda": 1024, "cpu": 128}
# A point scored on part of the validation set (``settle``) stops once an upper confidence bound
# of its accuracy settles its decision: wrong at most 0.135% of the time (z = 3, one-sided), and
# then conservatively (a crossing of the target seen one point late, a trial a rung would have kept).
SETTLE_ALPHA = 0.00135


def accuracy_upper(correct: int, n: int, alpha: float = SETTLE_ALPHA) -> float:
    """Clopper-Pearson upper bound of an accuracy seen as ``correct`` of ``n``: exact, so its
    error rate is at most ``alpha`` at any accuracy (Wilson's, near 0.97 on 128 images, 0.6%)."""
    if correct >= n:
        return 1.0
    from scipy.special import betaincinv

    return float(betaincinv(correct + 1, n - correct, 1 - alpha))


@dataclass
class LoopParts:
    """What ``run.prepare`` builds for one run's loop: the model in Composer's wrapper, its
    optimizer, the training loader, the batch augmentations, the validation tensors, the Composer
    algorithms, callables adding fields to each history point (CORDS's subset), and what applies
    to whatever weights are delivered (sparsity's masks)."""

    model: EffModel
    optimizer: torch.optim.Optimizer
    loader: Any  # batches, with a len(): DeviceBatches, a DataLoader, FFCV's loader
    augment: Callable[[Any], tuple[torch.Tensor, ...]]  # a batch onto the device, ready for the model
    eval_augment: Callable[[Any], tuple[torch.Tensor, ...]]
    val: tuple[torch.Tensor, torch.Tensor]
    algorithms: list[Algorithm] = field(default_factory=list)
    point_extras: list[Callable[[], dict]] = field(default_factory=list)
    on_deliver: list[Callable[[], None]] = field(default_factory=list)
    held_out: HeldOut | None = None  # a language model's scored validation tokens (bits per byte)
    saver: Checkpointer | None = None  # trainer/checkpoint.py's Saver, with RunHooks.checkpoints


class Checkpointer(Protocol):
    """Checkpoints as the loop asks for them: ``start`` after FIT_START (a resume), ``maybe`` at
    evaluation points and epoch ends, ``summary`` into the result."""

    def start(self, loop: Loop) -> None: ...
    def maybe(self, loop: Loop) -> None: ...
    def summary(self, segments: int) -> dict: ...


class Loop:
    """One run: ``fit()`` trains, ``evaluate()`` measures the model a user would get now.

    ``point_extras`` are callables adding fields to each history point; ``on_eval(point)``
    may return a reason to stop (the study's pruner).
    """

    setup_seconds: float  # set by run.prepare
    t0: float | None
    t_end: float | None
    ddp: DistributedDataParallel | None
    comm: HookState | None
    bar: Any  # a tqdm bar while the run shows progress

    def __init__(
        self,
        cfg: TrainConfig,
        parts: LoopParts,
        device: str,
        result: RunResult,
        hooks: RunHooks,
        dist: Context | None = None,
    ) -> None:
        model, loader, callbacks = parts.model, parts.loader, hooks.callbacks
        self.cfg, self.model, self.loader, self.device, self.result = cfg, model, loader, device, result
        self.augment, self.eval_augment, self.val = parts.augment, parts.eval_augment, parts.val
        self.on_eval, self.progress, self.point_extras = hooks.on_eval, hooks.progress, list(parts.point_extras)
        self.on_deliver = list(parts.on_deliver)  # e.g. sparsity's masks, applied to whatever weights are delivered
        self.held_out = parts.held_out
        self.cuda = device == "cuda"
        from effsearch.trainer.parallel.distributed import SINGLE

        self.dist = dist if dist is not None else SINGLE
        # Points scored on as much of the validation set as their decision needs (``settle``):
        # in a shuffled order (fixed, the same for every trial), so any prefix is a fair sample.
        # Only an accuracy has the exact bound a partial score is settled by: a loss target scores whole.
        self.settle = settle = hooks.settle if target_of(cfg).metric == ACCURACY else False
        if settle and self.dist.main:
            x, y = parts.val
            order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0)).to(y.device)
            self.val = (x[order], y[order])
        self._plan_points(cfg, len(loader), hooks)
        self._composer_state(cfg, parts, callbacks)
        self._wrap(cfg, model, device)
        # A non-finite loss is checked every step on CPU (free) and once an epoch on a GPU, or when
        # ranks must agree on stopping (they do so once an epoch).
        self.check_every = 1 if not self.cuda and not self.dist.on else 0

        self.step = self.epoch = self.batch_in_epoch = self.samples = self.samples_in_epoch = 0
        self.loss_sum = torch.zeros((), device=device)
        self.loss_steps = 0
        self.t0 = self.t_end = None
        self.eval_seconds = self.paused = 0.0  # this segment's evaluation, and checkpoints written
        # A run resumed from a checkpoint (trainer/checkpoint.py): the earlier segments' seconds.
        self.before_train = self.before_eval = 0.0
        self.segments, self.mid_epoch, self.first_step = 1, False, 0
        self.saver = parts.saver
        self.stop_status = self.stop_reason = ""
        self.bar = None

    def _plan_points(self, cfg: TrainConfig, batches: int, hooks: RunHooks) -> None:
        """The step budget, the schedule's factors and the steps at which the run evaluates."""
        self.accumulate = cfg.accumulate
        self.bpe = max(1, -(-batches // self.accumulate))  # optimizer steps an epoch
        self.total = max(1, round(cfg.epochs * self.bpe))
        every = max(1, round(cfg.eval_every * self.bpe))
        self.eval_steps = set(range(every, self.total + 1, every)) | {self.total}
        # Extra points (a pruner's rungs): the first step at or past each, so that the point's
        # epoch is never short of it (a rung decided early would see a less trained model).
        self.eval_steps |= {min(self.total, max(1, math.ceil(e * self.bpe - 1e-9))) for e in hooks.eval_at}
        # Points at train seconds (a pruner's time rung): the first step at or past each, read on the
        # host clock (no sync: on a GPU the host may be a few steps ahead; the point's own time is
        # synced). Data-parallel: rank 0's clock decides for every rank (_due).
        self.marks = sorted(hooks.eval_after)
        self.next_look = 0  # data-parallel: the step at which rank 0's clock is next broadcast
        self.lr_factors = factors(cfg.schedule, self.total)

    def _composer_state(self, cfg: TrainConfig, parts: LoopParts, callbacks: Sequence[Callback]) -> None:
        """Composer's State and Engine, INIT's surgery done, and which of its events to fire."""
        model, loader = parts.model, parts.loader
        state = State(
            model=model,
            rank_zero_seed=cfg.seed,
            run_name="effsearch",
            device=composer_device(self.device),
            max_duration=Time(self.total, TimeUnit.BATCH),
            device_train_microbatch_size=cfg.batch_size,
            precision=cfg.precision,
            optimizers=parts.optimizer,
            algorithms=list(parts.algorithms),
            callbacks=list(callbacks),
        )
        state.set_dataloader(loader, "train")
        state.train_dataloader = loader
        from composer.loggers import Logger

        self.state, self.logger = state, Logger(state, [])
        self.engine = Engine(state, self.logger)
        model.logger = self.logger
        self.engine.run_event(Event.INIT)  # model surgery (BlurPool, ChannelsLast, ...)
        self.engine.run_event(Event.AFTER_LOAD)  # SAM wraps the optimizer here
        from composer.utils import reproducibility

        reproducibility.seed_all(cfg.seed)  # as Composer's Trainer: INIT's surgery may have drawn numbers

        # Tests' probes are callbacks: they see every event. Otherwise only what algorithms use.
        events = set(BATCH_EVENTS) if callbacks else {e for a in state.algorithms for e in listens(a)}
        self.events = frozenset(events)
        self.timed = bool(self.events)  # algorithms that act per batch read state.timestamp
        self.optimizer = state.optimizers[0]
        for group in self.optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        # Composer's SAM needs a closure (it runs forward and backward twice); nothing else gets one.
        self.closure = type(self.optimizer).__name__ == "SAMOptimizer"

    def _wrap(self, cfg: TrainConfig, model: EffModel, device: str) -> None:
        """Mixed precision, data-parallel and compiled wrappers, after Composer's surgery."""
        self.scaler = torch.amp.GradScaler("cuda") if cfg.precision == "amp_fp16" else None
        dtype = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}.get(cfg.precision)
        self.autocast = torch.autocast("cuda", dtype=dtype) if dtype is not None else contextlib.nullcontext()
        self.eval_module = model.module  # evaluation stays eager (a compiled graph recompiles for eval)
        self.compile_seconds = 0.0
        self.ddp = self.comm = None
        self.dense_bytes = 0
        train_module = model.module
        if self.dist.on:  # after Composer's surgery: DDP fixes its parameter list when built
            from effsearch.trainer.parallel import distributed

            self.ddp, self.comm, self.dense_bytes = distributed.wrap(model, cfg, self.dist, device)
            train_module = self.ddp
            model.use_compiled(self.ddp)
        if cfg.compile:
            # Dynamo keeps its compiled graphs per code object for the whole process, so a worker's
            # compile trials shared the model's forward: a later trial reused an earlier one's graph
            # (no compile time paid), and after 8 variants (width, layout, batch size, ...) Dynamo's
            # recompile limit ran every later "compile" trial eager, silently. Each compiles afresh.
            torch._dynamo.reset()
            model.use_compiled(torch.compile(train_module, mode=cfg.compile_mode))

    # -- the clock ------------------------------------------------------------------
    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def train_seconds(self, now: float | None = None) -> float:
        if self.t0 is None:
            return 0.0
        end = now if now is not None else (self.t_end or self._now())
        return end - self.t0 - self.eval_seconds - self.paused + self.before_train

    def _sync_time(self) -> None:
        self.state.timestamp = Timestamp(
            epoch=self.epoch,
            batch=self.step,
            sample=self.samples,
            batch_in_epoch=self.batch_in_epoch,
            sample_in_epoch=self.samples_in_epoch,
        )

    def _fire(self, event: Event) -> None:
        if event in self.events:
            self.engine.run_event(event)

    # -- training ---------------------------------------------------------------------
    def fit(self) -> None:
        if self.progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, unit="batch", desc="train", dynamic_ncols=True, leave=False)
        if self.cuda:
            torch.backends.cudnn.benchmark = self.cfg.cudnn_benchmark
        self.model.train()
        self._sync_time()
        self.engine.run_event(Event.FIT_START)
        if self.saver is not None:  # after FIT_START: it sets up what a checkpoint restores (EMA's copy)
            self.saver.start(self)
            self._sync_time()
        self.first_step = self.step
        self.t0 = self._now()
        try:
            while self.step < self.total and not self.stop_reason:
                self._epoch()
            self._sync_time()
            self.engine.run_event(Event.FIT_END)  # sparsity's last pruning: inside the clock
            self.t_end = self._now()
        finally:
            self.finish()

    def _epoch(self) -> None:
        self._sync_time()
        if not self.mid_epoch:  # a run resumed mid-epoch is past its start
            self.engine.run_event(Event.EPOCH_START)  # CORDS selection: inside the clock
        self.mid_epoch = False
        per_epoch = self.bpe
        batches = self.loader if self.accumulate == 1 else _groups(self.loader, self.accumulate)
        for batch in batches:
            n = len(batch[1]) if self.accumulate == 1 else sum(len(b[1]) for b in batch)
            self._train_step(batch)
            self.step += 1
            self.batch_in_epoch += 1
            self.samples += n
            self.samples_in_epoch += n
            if self.timed:
                self._sync_time()
                self._fire(Event.BATCH_END)
                self._fire(Event.BATCH_CHECKPOINT)
            if self.bar is not None:
                self.bar.update(1)
            ends_epoch = self.batch_in_epoch >= per_epoch or self.step >= self.total
            if not ends_epoch and self._due():
                self._eval_point()
                if self.saver is not None:
                    self.saver.maybe(self)
            if self.stop_reason or self.step >= self.total:
                break
        if self.batch_in_epoch >= per_epoch or self.step >= self.total:
            self.epoch += 1
            self.batch_in_epoch = self.samples_in_epoch = 0
            if self.check_every == 0 and not self.stop_reason and self.dist.main:
                self._check_loss(float(self.loss_sum), f"by the end of epoch {self.epoch} (batch {self.step})")
            self._agree()
            self._sync_time()
            self.engine.run_event(Event.EPOCH_END)  # LayerFreezing, SWA per epoch
            self.engine.run_event(Event.EPOCH_CHECKPOINT)
            # An evaluation at an epoch's end comes after EPOCH_END, as in Composer: it sees
            # what the epoch's algorithms made of the model (SWA's averages at its end, say).
            if not self.stop_reason and self._due():
                self._eval_point()
            if self.saver is not None:
                self.saver.maybe(self)

    def _due(self) -> bool:
        """An evaluation is due at this step: a planned step, or a train-seconds mark passed."""
        due = self.step in self.eval_steps
        if self.marks:
            if self.dist.on and self.step < self.next_look:
                return due
            now = self.train_seconds(time.perf_counter())  # the host clock: no sync
            if self.dist.on:
                # Every rank must evaluate at the same step (rank 0 scores, the others wait in
                # _agree), so rank 0's clock decides. A broadcast costs ~0.7 ms on 2 CPU processes
                # (10% of a tiny model's step): look again halfway to the mark at the pace so far,
                # which every rank computes alike from what was broadcast; a handful of looks,
                # then every step just before it. Half: on time even if steps slow down 2x.
                from effsearch.trainer.parallel.distributed import broadcast_float

                now = broadcast_float(now, self.dist, self.device)
                if now < self.marks[0]:
                    pace = now / max(self.step, 1)
                    self.next_look = self.step + max(1, int((self.marks[0] - now) / max(pace, 1e-9) / 2))
            if now >= self.marks[0]:
                self.marks = [m for m in self.marks if m > now]
                due = True
        return due

    def _train_step(self, batch: Any) -> None:
        st = self.state
        if self.accumulate == 1:
            st.batch = self._loaded(batch)
        else:  # a list of micro-batches: each is augmented (and seen by AFTER_DATALOADER) by itself
            st.batch = [self._loaded(b) for b in batch]
        self._fire(Event.BATCH_START)
        lr = self.lr_factors[self.step]
        for group in self.optimizer.param_groups:
            group["lr"] = group["initial_lr"] * lr
        first = self.cfg.compile and self.step == self.first_step  # a resumed run compiles again
        if first:
            t = self._now()
        if self.closure:
            current = st.batch
            # The loss stays on the device (composer_compat 4: SAM asks only "is not None").
            loss = self.optimizer.step(closure=lambda **kw: self._forward_backward(current))
        else:
            loss = self._forward_backward(st.batch)
            if self.scaler is not None:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
        if first:
            self.compile_seconds += self._now() - t  # the first step compiles; the user pays it
        loss = loss.detach()
        self.loss_sum += loss
        self.loss_steps += 1
        if self.check_every and self.step % self.check_every == 0:
            self._check_loss(float(loss), f"at batch {self.step + 1}")

    def _loaded(self, batch: Any) -> Any:
        """A loader's batch augmented and seen by AFTER_DATALOADER. An algorithm may keep part of
        it (selective backprop keeps int(keep * n) samples: none of a batch of 2 at keep 0.3): a
        mean loss over no sample is nan, and batch norm cannot train on one value per channel, so
        a batch left with fewer than two samples trains whole."""
        st = self.state
        st.batch = whole = self.augment(batch)
        if Event.AFTER_DATALOADER in self.events:
            self.engine.run_event(Event.AFTER_DATALOADER)
            if len(st.batch[1]) < min(2, len(whole[1])):
                st.batch = whole
        return st.batch

    def _forward_backward(self, batch: Any) -> torch.Tensor:
        st, fire = self.state, self._fire
        st.batch = batch
        fire(Event.BEFORE_TRAIN_BATCH)
        self.optimizer.zero_grad(set_to_none=True)
        if self.accumulate == 1:
            loss = self._micro(batch, None)
        else:
            total = sum(len(b[1]) for b in batch)
            loss = torch.zeros((), device=self.device)
            for i, b in enumerate(batch):
                # DDP averages gradients once a step: on the last micro-batch only.
                sync = self.ddp is None or i == len(batch) - 1
                with contextlib.nullcontext() if sync else cast("DistributedDataParallel", self.ddp).no_sync():
                    share = len(b[1]) / total  # the step's loss is the mean over all its samples
                    loss = loss + self._micro(b, share).detach() * share
            st.batch = batch
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)  # Composer's order: unscaled before AFTER_TRAIN_BATCH
        fire(Event.AFTER_TRAIN_BATCH)
        return loss

    def _micro(self, batch: Any, share: float | None) -> torch.Tensor:
        """Forward and backward of one (micro-)batch; its loss is scaled by ``share`` for backward."""
        st, fire = self.state, self._fire
        st.batch = batch
        fire(Event.BEFORE_FORWARD)
        with self.autocast:
            st.outputs = self.model(st.batch)
        fire(Event.AFTER_FORWARD)
        fire(Event.BEFORE_LOSS)
        with self.autocast:
            st.loss = self.model.loss(st.outputs, st.batch)
        fire(Event.AFTER_LOSS)
        fire(Event.BEFORE_BACKWARD)
        loss = st.loss
        scaled = loss if share is None else loss * share
        (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
        fire(Event.AFTER_BACKWARD)
        return loss

    def _check_loss(self, value: float, where: str) -> None:
        if not math.isfinite(value):
            self._stop("diverged", f"training loss became {value} {where}")

    def _stop(self, status: str, reason: str) -> None:
        if not self.stop_reason:
            self.stop_status, self.stop_reason = status, reason

    def _agree(self) -> None:
        """Data-parallel: every rank stops where rank 0 decided to (else they would wait on
        each other's gradients forever). One tiny broadcast, at evaluation points and epoch ends."""
        if not self.dist.on:
            return
        from effsearch.trainer.parallel.distributed import agree

        if agree(bool(self.stop_reason), self.dist, self.device) and not self.stop_reason:
            self._stop("stopped", "rank 0 stopped the run")

    # -- evaluation ---------------------------------------------------------------------
    def _eval_point(self) -> None:
        if not self.dist.main:  # rank 0 evaluates; the others learn whether to go on
            self._agree()
            return
        t = self._now()
        self._sync_time()
        seconds = self.train_seconds(t)
        epoch = round(self.step / self.bpe, 4)
        # The last point is scored whole: it ends the curve the user sees.
        enough = (lambda upper: self._enough(epoch, seconds, upper)) if self.settle and self.step < self.total else None
        with self.delivered():
            acc, loss, n = self.score(*self.val, enough=enough)
        train_loss = float(self.loss_sum) / max(self.loss_steps, 1)  # one read per point: the GPU is idle here
        self.loss_sum.zero_()
        self.loss_steps = 0
        fields = {
            "epoch": epoch,
            "samples_seen": self.samples * self.dist.world,
            "train_seconds": seconds,
            "val_accuracy": acc,
            "val_loss": loss,
            "train_loss": train_loss,
        }
        if self.held_out is not None:
            fields["val_bpb"] = self.held_out.bpb(loss)
        if n < len(self.val[1]):
            fields["val_images"] = n
        for extra in self.point_extras:
            fields.update(extra())
        point = EvalPoint.from_dict(fields)
        self.result.history.append(point)
        if self.bar is not None:
            self._show(point)
        if not math.isfinite(loss):
            self._stop("diverged", "validation loss is not finite")
        elif not math.isfinite(train_loss):
            self._check_loss(train_loss, f"by batch {self.step}")
        elif self.on_eval is not None and not self.stop_reason:
            reason = self.on_eval(point)
            if reason:
                self._stop("pruned", reason)
        self._agree()
        self.eval_seconds += self._now() - t

    def _show(self, point: EvalPoint) -> None:
        """The progress line's figure: the metric the run is timed on (a language model's val loss)."""
        target = target_of(self.cfg)
        value = target.of(point)
        if self.bar is not None and value is not None:
            self.bar.set_postfix({f"val_{target.m.short}": f"{value:.4f}"}, refresh=False)

    @contextlib.contextmanager
    def delivered(self) -> Iterator[torch.nn.Module]:
        """The model a user would get if training stopped now: EVAL_START/EVAL_END let EMA swap
        its averaged weights in and back out, and ``on_deliver`` (sparsity masks) applies to them."""
        self.engine.run_event(Event.EVAL_START)
        try:
            for hook in self.on_deliver:
                hook()
            yield self.eval_module
        finally:
            self.engine.run_event(Event.EVAL_END)

    def _enough(self, epoch: float, seconds: float, upper: float) -> bool:
        """Whether a point whose accuracy is at most ``upper`` is settled: the study's hook decides
        at its decision points (a rung); elsewhere a point's only use is the time to target."""
        verdict = self.settle(epoch, seconds, upper) if callable(self.settle) else None
        if verdict is not None:
            return verdict
        target = self.cfg.target_accuracy  # once a point reached it, later points decide nothing
        return upper < target or any(p.val_accuracy >= target for p in self.result.history)

    def evaluate(self, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        """Accuracy and mean loss of the model on ``(x, y)``: large batches, no gradients, the
        run's precision, one read back. Use inside ``delivered()``."""
        acc, loss, _ = self.score(x, y)
        return acc, loss

    def score(
        self, x: torch.Tensor, y: torch.Tensor, enough: Callable[[float], bool] | None = None
    ) -> tuple[float, float, int]:
        """Accuracy, mean loss and images (rows) scored. ``enough(upper)``: asked after 1, 2, 4, ...
        batches with an upper bound of the accuracy so far; True stops there (one read
        per question: a few a point, where a whole pass is the alternative). A language model's
        rows are windows: the accuracy and loss are per scored token (targets ``IGNORE`` left out)."""
        module = self.eval_module
        was_training = module.training
        module.eval()
        correct = torch.zeros((), dtype=torch.long, device=self.device)
        total_loss = torch.zeros((), device=self.device)
        tokens = torch.zeros((), dtype=torch.long, device=self.device)  # a language model's scored targets
        n, ask = len(y), 1
        try:
            with torch.no_grad(), self.autocast:
                step = EVAL_BATCH[self.device]
                for b, i in enumerate(range(0, len(y), step), 1):
                    xb, yb = self.eval_augment((x[i : i + step], y[i : i + step]))
                    out = module(xb).float()
                    if out.dim() == 3:  # (rows, positions, vocabulary): every position a prediction
                        out, yb = out.flatten(0, 1), yb.flatten()
                        tokens += (yb != IGNORE).sum()
                    total_loss += F.cross_entropy(out, yb, reduction="sum", ignore_index=IGNORE)
                    correct += (out.argmax(1) == yb).sum()
                    if enough is not None and b == ask and i + step < len(y):
                        ask *= 2
                        if enough(accuracy_upper(int(correct), i + step)):
                            n = i + step
                            break
        finally:
            module.train(was_training)
        c, lsum, t = torch.stack([correct.float(), total_loss, tokens.float()]).tolist()
        units = t if t else n
        return c / max(units, 1), lsum / max(units, 1), n

    def finish(self) -> None:
        if self.t_end is None and self.t0 is not None:
            self.t_end = self._now()
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def summary(self) -> dict:
        out = {
            "train_seconds": self.train_seconds(),
            "eval_seconds": self.before_eval + self.eval_seconds,
            "compile_seconds": self.compile_seconds,
            "steps": self.step,
        }
        if self.saver is not None:
            out.update(self.saver.summary(self.segments))
        if self.accumulate > 1 or self.dist.on:
            out["effective_batch"] = self.cfg.batch_size * self.accumulate * self.dist.world
        if self.dist.on:
            steps = max(self.step, 1)
            sent = self.comm.bytes_sent / steps if self.comm is not None else self.dense_bytes
            out.update(
                processes=self.dist.world, comm_bytes_per_step=sent, comm_bytes_per_step_uncompressed=self.dense_bytes
            )
        fallbacks = getattr(self.optimizer, "fallbacks", None)  # K-FAC: what it did not precondition
        if fallbacks is not None and fallbacks() is not None:
            out["kfac_fallbacks"] = fallbacks()  # Final.set keeps it in extra, so result.json has it
        return out


def _groups(loader: Iterable[Any], k: int) -> Iterator[list[Any]]:
    """Consecutive batches of ``loader`` in lists of ``k`` (the last list may be shorter)."""
    group = []
    for batch in loader:
        group.append(batch)
        if len(group) == k:
            yield group
            group = []
    if group:
        yield group
