"""One training run of one TrainConfig: set-up here, the steps in ``loop.py``.

Data stays on the device as uint8 and is augmented there in batches; Composer's
algorithms run through its Engine inside effsearch's own loop (see ``loop.py``
for why not Composer's Trainer). The result: history, final accuracies of the
delivered model, and where the seconds went (setup, train, compile, eval).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from effsearch.config import ConfigError, TrainConfig, effective_batch, rules
from effsearch.config.algorithms import ALGORITHMS
from effsearch.config.imports import resolve_paths
from effsearch.config.machine import check_runnable
from effsearch.config.metrics import target_of
from effsearch.config.sources import model_kind
from effsearch.trainer.data.cachefolder import removed_on_refusal
from effsearch.trainer.data.splits import BatchAugment, DeviceBatches, Splits, load_splits, make_loader, to_device
from effsearch.trainer.hooks import Checkpoints, EvalHook, RunHooks, SettleHook
from effsearch.trainer.models import build_network
from effsearch.trainer.result import ResultNotSaved, RunResult, hold_ctrl_c, time_to_target, versions

if TYPE_CHECKING:
    import os

    from composer.core import Algorithm, Callback, State

    from effsearch.trainer.data.selection import SubsetSelection
    from effsearch.trainer.loop import Loop
    from effsearch.trainer.parallel.distributed import Context
    from effsearch.trainer.techniques.sparsity import GradualMagnitudePruning


def build_optimizer(
    cfg: TrainConfig, params: Iterable[torch.Tensor], device: str = "cpu", model: torch.nn.Module | None = None
) -> torch.optim.Optimizer:
    """The optimizer of ``cfg``. The lr rule: with ``scale_lr_with_batch`` the lr is ``optimizer.lr``
    x effective batch / 128 (effective batch = batch_size x accumulate x processes), linear scaling
    (Goyal et al. 2017); otherwise it is used as given."""
    o = cfg.optimizer
    lr = o.lr * (effective_batch(cfg) / 128 if o.scale_lr_with_batch else 1.0)
    # One fused kernel for the whole update on a GPU (torch's default there is foreach: a few
    # kernels per parameter group); CPU keeps torch's default unless optimizer.fused says so
    # (torch 2.7 has fused SGD and AdamW on CPU too).
    fused = o.fused if o.fused is not None else device == "cuda"
    fast = {"fused": True} if fused else {}
    if o.name == "kfac-sgd":
        from effsearch.trainer.techniques.kfac import KFACSGD

        if model is None:
            raise ValueError("kfac-sgd needs the model (its layers' inputs and output gradients)")
        return KFACSGD(
            params,
            model,
            lr=lr,
            momentum=o.momentum,
            nesterov=o.nesterov and o.momentum > 0,
            weight_decay=o.weight_decay,
            damping=o.kfac_damping,
            update_every=o.kfac_update_every,
            accum_scale=cfg.accumulate,
            **fast,
        )
    if o.name == "muon":
        from effsearch.trainer.techniques.muon import MuonAdamW

        if model is None:
            raise ValueError("muon needs the model (its hidden 2-d weights)")
        return MuonAdamW(model, lr, o.momentum, o.nesterov, o.beta2, o.weight_decay)
    if o.name == "sgd":
        return torch.optim.SGD(
            params,
            lr=lr,
            momentum=o.momentum,
            nesterov=o.nesterov and o.momentum > 0,
            weight_decay=o.weight_decay,
            **fast,
        )
    if o.name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=(o.momentum, o.beta2), weight_decay=o.weight_decay, **fast)
    from composer.optim import DecoupledSGDW

    return DecoupledSGDW(
        params, lr=lr, momentum=o.momentum, weight_decay=o.weight_decay, nesterov=o.nesterov and o.momentum > 0
    )


def train(
    cfg: TrainConfig,
    data_root: str | os.PathLike | None = None,
    out_dir: str | Path | None = None,
    progress: bool = True,
    on_eval: EvalHook | None = None,
    eval_at: tuple[float, ...] = (),
    test: bool = True,
    eval_after: tuple[float, ...] = (),
    settle: SettleHook | bool = False,
    checkpoints: Checkpoints | None = None,
) -> RunResult:
    """Train ``cfg`` once; return (and, with ``out_dir``, write) its RunResult. The other
    arguments are a RunHooks's fields.

    Set-up goes from cheap to dear, so that bad input is refused before the dear part: the
    import paths resolved, the model checked on a batch shaped like the data (where that shape is
    known without loading it), the data loaded, then the model built and Composer imported."""
    resolve_paths(cfg.model.name, cfg.dataset.name)
    device = check_runnable(cfg)
    from effsearch.trainer.probe import check_config

    check_config(cfg)
    from effsearch.trainer.parallel import distributed

    hooks = RunHooks(
        progress=progress,
        on_eval=on_eval,
        eval_at=tuple(eval_at),
        eval_after=tuple(eval_after),
        settle=settle,
        test=test,
        checkpoints=checkpoints,
    )
    # Every rank must evaluate at the same steps (they agree on stopping there): the other ranks
    # get the same extra points (rank 0 scores them, the others wait there).
    entry = (
        functools.partial(train, eval_at=hooks.eval_at, eval_after=hooks.eval_after) if eval_at or eval_after else train
    )
    with distributed.session(cfg, device, data_root, train=entry) as dist:
        if not dist.main:  # ranks 1..N-1 train alongside rank 0 and write nothing
            out_dir, hooks = None, hooks.quiet()
        return _train(cfg, device, dist, data_root, out_dir, hooks)


def fresh_compile_state() -> None:
    """Dynamo's and Inductor's in-process caches as a new process has them: a worker calls it
    between trials, so that a trial's compile time is its own. The same compile configuration's
    first step took 4.0 s as its worker's first compile trial and 77.9 s as its fourth on an H100
    (docs/benchmarks.md, "GPU study"; `bash benchmarks/gpu_check.sh compile-reset` measures it).
    A process that never compiled has nothing to reset."""
    import sys

    if "torch._dynamo" not in sys.modules:
        return
    torch.compiler.reset()
    inductor = sys.modules.get("torch._inductor.utils")  # loaded by a compile that used Inductor
    clear = getattr(inductor, "clear_inductor_caches", None)
    if clear is not None:
        clear()


def _train(
    cfg: TrainConfig,
    device: str,
    dist: Context,
    data_root: str | os.PathLike | None,
    out_dir: str | Path | None,
    hooks: RunHooks,
) -> RunResult:
    t_start = time.perf_counter()
    with removed_on_refusal():  # decoded, then found not to fit: the run leaves no cache it made
        splits = load_splits(cfg, data_root)
    data_seconds = time.perf_counter() - t_start
    result = RunResult(
        status="failed",
        config=cfg.to_dict(),
        target_accuracy=target_of(cfg).value,
        target_metric=target_of(cfg).metric,
        device=_device_name(device),
        versions=versions(),
    )
    out = Path(out_dir) if out_dir else None
    try:
        _fit(cfg, splits, device, result, hooks, data_root, dist)
    except ConfigError:  # bad input found in set-up (a model that does not fit the data): nothing is written
        out = None
        raise
    except KeyboardInterrupt as e:
        said = "stopped by SIGTERM" if isinstance(e, Terminated) else "interrupted by the user (Ctrl-C)"
        result.status, result.reason = "interrupted", said
        raise
    finally:
        with hold_ctrl_c():  # a second Ctrl-C waits until the partial result is written
            _finish(result, cfg, data_seconds)
            if out is not None:
                _save(result, out / "result.json")
    return result


def _save(result: RunResult, path: Path) -> None:
    try:
        result.save(path)
    except OSError as e:
        raise ResultNotSaved(path, e, result) from e


def _finish(result: RunResult, cfg: TrainConfig, data_seconds: float) -> None:
    if result.final.data_seconds is None:
        result.final.data_seconds = data_seconds
    # Earned by the delivered model only: no final value (a crash, Ctrl-C), no time.
    target = target_of(cfg)
    final = target.of(result.final)
    result.time_to_target = time_to_target(result.history, target, final if final is not None else float("nan"))
    crossed = time_to_target(result.history, target)
    if crossed is not None and result.time_to_target is None:
        result.final.target_crossed_at = crossed  # shown, never counted


def _device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    import platform

    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


@dataclass
class Prepared:
    """A built run, before ``fit()``: what ``train`` and the tests work with."""

    loop: Loop
    gmp: GradualMagnitudePruning | None
    selection: SubsetSelection | None
    splits: Splits  # on the run's device
    train_loader: Any

    @property
    def state(self) -> State:
        return self.loop.state

    def fit(self) -> None:
        self.loop.fit()


def prepare(
    cfg: TrainConfig,
    splits: Splits,
    device: str,
    result: RunResult,
    hooks: RunHooks | None = None,
    callbacks: Sequence[Callback] = (),
    data_root: str | os.PathLike | None = None,
    dist: Context | None = None,
) -> Prepared:
    """Build model, loader, algorithms and the loop for ``cfg`` (``dist``: this rank's place
    in a data-parallel run, default a single process; ``callbacks``: added to ``hooks``')."""
    from effsearch.trainer.checkpoint import Saver
    from effsearch.trainer.loop import Loop, LoopParts
    from effsearch.trainer.parallel.distributed import SINGLE

    dist = dist if dist is not None else SINGLE
    hooks = hooks if hooks is not None else RunHooks()
    if callbacks:
        hooks = dataclasses.replace(hooks, callbacks=(*hooks.callbacks, *callbacks))
    t_setup = time.perf_counter()
    splits = to_device(splits, device)
    network = _network(cfg, splits, device, result)  # a model that does not fit the data: before Composer
    _quiet_composer()
    from effsearch.trainer.composer.model import EffModel

    model = EffModel(network, splits.num_classes).to(device)
    train_loader, selection = _train_loader(cfg, splits, device, data_root, dist)
    algorithms, gmp = _algorithms(cfg, selection, text=splits.tokens is not None)
    parts = LoopParts(
        model=model,
        optimizer=build_optimizer(cfg, model.parameters(), device, model),
        loader=train_loader,
        augment=_augment(cfg, splits, device, dist, train=True),
        eval_augment=_augment(cfg, splits, device, dist, train=False),
        val=(splits.val_x, splits.val_y),
        algorithms=algorithms,
        point_extras=[selection.point_extra] if selection is not None else [],
        on_deliver=[gmp.apply_masks] if gmp is not None else [],
        held_out=splits.held_out,
        saver=Saver(hooks.checkpoints) if hooks.checkpoints is not None else None,
    )
    loop = Loop(cfg, parts, device, result, hooks, dist)
    loop.setup_seconds = time.perf_counter() - t_setup
    return Prepared(loop, gmp, selection, splits, train_loader)


def _quiet_composer() -> None:
    """Import Composer without its warnings and log lines, keeping Ctrl-C's KeyboardInterrupt."""
    warnings.filterwarnings("ignore", module="composer")
    warnings.filterwarnings("ignore", message=".*torch.utils._pytree.*")
    warnings.filterwarnings("ignore", message=".*GradScaler is enabled, but CUDA is not available.*")
    logging.getLogger("composer").setLevel(logging.ERROR)
    import composer  # noqa: F401  (installs a SIGINT handler, put back below)

    _restore_ctrl_c()


def _network(cfg: TrainConfig, splits: Splits, device: str, result: RunResult | None = None) -> torch.nn.Module:
    """The network on the device, seeded by ``cfg.seed``. A model not built in is checked on a
    batch shaped like the data, adapted to its channels (the note goes into the result), and the
    rules about structure are checked on its probed facts."""
    torch.manual_seed(cfg.seed)
    if splits.tokens is not None:
        from effsearch.trainer.probe import check_text_network

        module = build_network(cfg.model, 0, splits.num_classes, tokens=splits.tokens)
        module = check_text_network(module.to(device), cfg.model, splits.tokens, splits.num_classes, device)
        rules.check(cfg.to_dict())  # now that the model's facts are known
        return module.to(device)
    module = build_network(cfg.model, splits.channels, splits.num_classes)
    if model_kind(cfg.model.name) != "builtin":
        from effsearch.trainer.probe import check_network

        module, note = check_network(
            module.to(device), cfg.model, splits.channels, splits.num_classes, tuple(splits.train_x.shape[-2:]), device
        )
        rules.check(cfg.to_dict())  # now that the model's facts are known
        if note and result is not None:
            result.final.extra["input_adapted"] = note
    return module.to(device)


def _augment(cfg: TrainConfig, splits: Splits, device: str, dist: Context, train: bool) -> Any:
    """Batch augmentation on the device; each rank draws its own flips and crops. Token rows: onto
    the device (evaluation batches cut to their longest text); a language model's windows as they are."""
    if splits.held_out is not None:
        from effsearch.trainer.data.lmdata import LMBatch

        return LMBatch(device)
    if splits.tokens is not None:
        from effsearch.trainer.data.textbatches import TokenBatch

        return TokenBatch(device, train)
    flip = cfg.dataset.flip if cfg.dataset.flip is not None else cfg.dataset.name.startswith("cifar")
    return BatchAugment(
        splits.mean,
        splits.std,
        device,
        flip=flip,
        crop_padding=cfg.dataset.crop_padding,
        train=train,
        channels_last=cfg.channels_last,
        seed=cfg.seed + 1000 * dist.rank,
    )


def _algorithms(
    cfg: TrainConfig, selection: SubsetSelection | None, text: bool = False
) -> tuple[list[Algorithm], GradualMagnitudePruning | None]:
    """Composer algorithms of ``cfg`` (``text``: their versions for token-id models), then
    channels-last, sparsity (returned too: its masks apply to the delivered model) and the data
    selection, in that order."""
    from effsearch.trainer.composer.algorithms import build_algorithms
    from effsearch.trainer.techniques.sparsity import GradualMagnitudePruning

    algorithms = build_algorithms(cfg, text=text)
    if cfg.channels_last and "channels_last" not in cfg.algorithms:
        from composer.algorithms import ChannelsLast

        algorithms.append(ChannelsLast())
    gmp = None
    if cfg.sparsity.target > 0:
        sp = cfg.sparsity
        gmp = GradualMagnitudePruning(sp.target, sp.schedule, sp.start, sp.end, sp.update_every)
        algorithms.append(gmp)
    if selection is not None:
        algorithms.append(selection)
    return algorithms, gmp


def _fit(
    cfg: TrainConfig,
    splits: Splits,
    device: str,
    result: RunResult,
    hooks: RunHooks,
    data_root: str | os.PathLike | None = None,
    dist: Context | None = None,
) -> None:
    from effsearch.trainer.techniques.sparsity import measure

    run = prepare(cfg, splits, device, result, hooks, data_root=data_root, dist=dist)
    loop = run.loop
    result.final.setup_seconds = loop.setup_seconds
    try:
        run.fit()
    finally:
        result.final.set(**loop.summary())
        if run.selection is not None:
            result.final.selection_seconds = run.selection.seconds
    if not loop.dist.main:
        result.status = "completed"
        return
    # The delivered model: EMA's averages swapped in, sparsity masks applied (also to the
    # averages EMA or SWA keep, which were never masked).
    t_eval = time.perf_counter()
    with loop.delivered() as model:
        if loop.stop_status == "pruned" and result.history:
            # The rung evaluation that pruned it evaluated this same delivered model a moment ago,
            # and nobody reads a pruned trial's test score: no evaluation at all (one val pass and
            # 10,000 test images saved on every pruned trial).
            val_acc, val_loss = result.history[-1].val_accuracy, result.history[-1].val_loss
        else:
            val_acc, val_loss = loop.evaluate(run.splits.val_x, run.splits.val_y)
            if hooks.test:
                test_acc, test_loss = loop.evaluate(run.splits.test_x, run.splits.test_y)
                result.final.test_accuracy = test_acc
                if run.splits.held_out is not None:  # a language model's test loss, recorded beside it
                    result.final.test_loss = test_loss
        sizes = measure(model)
        if cfg.quantize == "int8":
            from effsearch.trainer.techniques import quantize

            sizes.update(quantize.measure(model, run.splits, cfg.seed))
    result.final.set(val_accuracy=val_acc, val_loss=val_loss, final_eval_seconds=time.perf_counter() - t_eval, **sizes)
    if run.splits.held_out is not None and val_loss is not None:
        result.final.val_bpb = run.splits.held_out.bpb(val_loss)
    if loop.stop_reason:
        result.status, result.reason = loop.stop_status, loop.stop_reason
    elif not math.isfinite(cast(float, val_loss)):  # evaluated: not a pruned trial's
        result.status, result.reason = "diverged", "validation loss is not finite"
    else:
        result.status = "completed"


def _restore_ctrl_c() -> None:
    """Composer's import installs SIGINT and SIGTERM handlers that call sys.exit(128 + signal); put
    Python's back so Ctrl-C raises KeyboardInterrupt, and raise ``Terminated`` (one) on SIGTERM: the
    run ends as ``interrupted`` with its result. Under sys.exit a SIGTERM (a scheduler, `kill`) left
    a result "failed" with no reason, and `effsearch train` exited 143. A SIGTERM handler of anyone
    else's (a study's watch) is kept."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        held = signal.getsignal(signal.SIGTERM)
        if held in (signal.SIG_DFL, None) or getattr(held, "__module__", "") == "composer.core.engine":
            signal.signal(signal.SIGTERM, _terminated)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is as Ctrl-C's KeyboardInterrupt is."""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated()


def _train_loader(
    cfg: TrainConfig,
    splits: Splits,
    device: str,
    data_root: str | os.PathLike | None = None,
    dist: Context | None = None,
) -> tuple[Any, SubsetSelection | None]:
    """The training loader and, when ``cfg.selection`` is on, the CORDS algorithm feeding it.

    Batches come from tensors on the device (``DeviceBatches``) unless an algorithm needs
    torchvision's per-image transforms (RandAugment, AugMix: a DataLoader on the host) or
    the loader is FFCV's."""
    from effsearch.trainer.parallel.distributed import SINGLE

    dist = dist if dist is not None else SINGLE
    if splits.held_out is not None:  # a language model: windows of the token stream
        from effsearch.trainer.data.lmdata import LMBatches

        length = cfg.dataset.max_length
        stream = cast(torch.Tensor, splits.train_x)  # a token stream, never images on disk
        windows = LMBatches(stream, cfg.batch_size, length, cfg.seed, dist.rank, dist.world)
        if cfg.batch_ramp or cfg.length_warmup:
            windows.ramp(cfg.epochs, cfg.batch_ramp, cfg.length_warmup)
        return windows, None
    if cfg.loader == "ffcv":
        from effsearch.trainer.data.ffcv_loader import make_train_loader

        return make_train_loader(cfg, splits, device, data_root, dist)
    per_image = any(ALGORITHMS[name].needs_torch_loader for name in cfg.algorithms)
    # A compiled model sees one batch shape: the last partial batch would compile a second graph.
    drop_last = cfg.compile or _lone_last(len(splits.train_y), cfg.batch_size, dist.world)
    if cfg.selection.strategy == "full":
        return _full_data_loader(cfg, splits, device, dist, per_image, drop_last), None
    from effsearch.trainer.data.selection import make_selection, plan_selection

    if per_image:  # rank 0 chooses each subset; the others receive it
        return make_selection(cfg, splits, device, dist)
    plan = plan_selection(cfg, splits)
    drop_last = drop_last or _lone_last(len(plan.sampler), cfg.batch_size, dist.world)
    batches = _batches(cfg, splits, device, dist, drop_last, sampler=plan.sampler, weights=plan.weights)
    return batches, plan.selection(cfg, splits, device, batches, dist)  # it writes each subset's weights there


def _full_data_loader(
    cfg: TrainConfig, splits: Splits, device: str, dist: Context, per_image: bool, drop_last: bool
) -> Any:
    """Every training image each epoch: a DataLoader on the host for per-image transforms, else
    batches sliced from tensors on the device (this rank's share)."""
    if per_image:
        return make_loader(
            splits.train_x.cpu(), splits.train_y.cpu(), cfg.batch_size, shuffle=True, seed=cfg.seed, drop_last=drop_last
        )
    return _batches(cfg, splits, device, dist, drop_last)


def _batches(
    cfg: TrainConfig, splits: Splits, device: str, dist: Context, drop_last: bool, **subset: Any
) -> DeviceBatches:
    """Batches sliced from tensors on the device (this rank's share; ``subset``: CORDS's sampler
    and weights). Token rows: each batch cut to its longest text, unless a compiled model wants
    one shape."""
    args = (splits.train_x, splits.train_y, cfg.batch_size, cfg.seed, device)
    common = dict(drop_last=drop_last, rank=dist.rank, world=dist.world, **subset)
    if splits.tokens is not None:
        from effsearch.trainer.data.textbatches import TokenBatches

        return TokenBatches(*args, full=cfg.compile, **common)
    return DeviceBatches(*args, **common)


def _lone_last(n: int, batch_size: int, world: int) -> bool:
    """Whether an epoch of ``n`` samples (split over ``world`` ranks) ends in a batch of one image:
    batch norm cannot train on one value per channel (a ResNet's last 1x1 maps), so it is dropped."""
    per_rank = -(-n // world)
    return batch_size > 1 and per_rank % batch_size == 1
