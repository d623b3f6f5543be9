"""One training run of one TrainConfig, on Composer's Trainer.

Composer drives the algorithms (its Algorithm + Event engine); effsearch keeps
the per-batch work down (no train metrics, loggers or console output), moves
uint8 batches to the device and augments them there, and keeps the clock:
train seconds run from FIT_START and exclude evaluation (as DAWNBench does).
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from effsearch.config import ConfigError, TrainConfig
from effsearch.trainer import data as D
from effsearch.trainer.models import build_model
from effsearch.trainer.result import RunResult, time_to_target, versions

# on_eval(point) -> a reason to stop the run early (e.g. the study's pruner), or None.
EvalHook = Callable[[dict], "str | None"]


def resolve_device(cfg: TrainConfig) -> str:
    has_cuda = torch.cuda.is_available()
    if cfg.device == "cuda" and not has_cuda:
        raise ConfigError("device", "is 'cuda' but no CUDA device is available; use 'auto' or 'cpu'")
    device = "cuda" if cfg.device == "auto" and has_cuda else ("cpu" if cfg.device == "auto" else cfg.device)
    if device == "cpu" and cfg.precision != "fp32":
        raise ConfigError("precision", f"{cfg.precision!r} needs a CUDA device; on CPU use fp32")
    if cfg.precision == "amp_bf16" and device == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError("precision", "amp_bf16 is not supported by this GPU; use amp_fp16 or fp32")
    return device


def check_runnable(cfg: TrainConfig) -> str:
    """Rules that need the machine (device, installed extras). Returns the device."""
    device = resolve_device(cfg)
    if cfg.loader == "ffcv":
        from effsearch.trainer import ffcv_loader  # noqa: F401  (raises ConfigError if ffcv is missing)
    return device


def build_optimizer(cfg: TrainConfig, params):
    o = cfg.optimizer
    lr = o.lr * (cfg.batch_size / 128 if o.scale_lr_with_batch else 1.0)
    if o.name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=o.momentum, nesterov=o.nesterov and o.momentum > 0,
                               weight_decay=o.weight_decay)
    if o.name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=(o.momentum, o.beta2), weight_decay=o.weight_decay)
    from composer.optim import DecoupledSGDW

    return DecoupledSGDW(params, lr=lr, momentum=o.momentum, weight_decay=o.weight_decay,
                         nesterov=o.nesterov and o.momentum > 0)


def build_scheduler(cfg: TrainConfig):
    import composer.optim as co

    s = cfg.schedule
    warm = f"{s.warmup_fraction}dur"
    if s.name == "constant":
        return co.ConstantWithWarmupScheduler(t_warmup=warm)
    if s.name == "multistep":
        return co.MultiStepWithWarmupScheduler(t_warmup=warm, milestones=[f"{m}dur" for m in s.milestones],
                                               gamma=s.gamma)
    if s.name == "cosine":
        return co.CosineAnnealingWithWarmupScheduler(t_warmup=warm, alpha_f=s.final_lr_fraction)
    if s.name == "linear":
        return co.LinearWithWarmupScheduler(t_warmup=warm, alpha_f=s.final_lr_fraction)
    return OneCycle(s.warmup_fraction or 0.25, s.final_lr_fraction)


class OneCycle:
    """Linear ramp from ~0 to the peak, then linear decay (Smith's one-cycle, as in cifar10-fast)."""

    def __init__(self, peak_at: float, final: float):
        self.peak_at, self.final = peak_at, final

    def __call__(self, state, ssr: float = 1.0) -> float:
        p = float(state.get_elapsed_duration())
        if p < self.peak_at:
            return 0.05 + 0.95 * p / self.peak_at
        return 1.0 - (1.0 - self.final) * (p - self.peak_at) / (1.0 - self.peak_at)


def _duration(value: float, batches_per_epoch: int) -> str:
    if float(value).is_integer():
        return f"{int(value)}ep"
    return f"{max(1, round(value * batches_per_epoch))}ba"


def train(cfg: TrainConfig, data_root=None, out_dir: str | Path | None = None, progress: bool = True,
          on_eval: EvalHook | None = None) -> RunResult:
    """Train ``cfg`` once; return (and, with ``out_dir``, write) its RunResult."""
    device = check_runnable(cfg)
    t_start = time.perf_counter()
    splits = D.load_splits(cfg, data_root)
    data_seconds = time.perf_counter() - t_start
    result = RunResult(status="failed", config=cfg.to_dict(), target_accuracy=cfg.target_accuracy,
                       device=_device_name(device), versions=versions())
    out = Path(out_dir) if out_dir else None
    try:
        _fit(cfg, splits, device, result, progress, on_eval, data_root)
    except KeyboardInterrupt:
        result.status, result.reason = "interrupted", "interrupted by the user (Ctrl-C)"
        raise
    finally:
        result.final.setdefault("data_seconds", data_seconds)
        result.time_to_target = time_to_target(result.history, cfg.target_accuracy)
        if out is not None:
            result.save(out / "result.json")
    return result


def _device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    import platform

    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


@dataclass
class Prepared:
    """A built run, before ``trainer.fit()``: what ``train`` and the tests work with."""

    trainer: object
    clock: object
    gmp: object
    selection: object
    val_loader: object
    test_loader: object
    eval_transform: object
    train_loader: object


def prepare(cfg: TrainConfig, splits: D.Splits, device: str, result: RunResult, progress: bool = False,
            on_eval: EvalHook | None = None, callbacks=(), data_root=None) -> Prepared:
    """Build model, loaders, algorithms and Composer's Trainer for ``cfg``."""
    warnings.filterwarnings("ignore", module="composer")
    warnings.filterwarnings("ignore", message=".*torch.utils._pytree.*")
    logging.getLogger("composer").setLevel(logging.ERROR)
    from composer import Trainer
    from composer.core import DataSpec, Evaluator

    _restore_ctrl_c()

    from effsearch.trainer.algorithms import build_algorithms
    from effsearch.trainer.composer_model import EffModel
    from effsearch.trainer.sparsity import GradualMagnitudePruning
    from effsearch.trainer.timing import Clock

    torch.manual_seed(cfg.seed)
    t_setup = time.perf_counter()
    module = build_model(cfg.model.name, splits.channels, splits.num_classes, cfg.model.width)
    model = EffModel(module, splits.num_classes)
    flip = cfg.dataset.flip if cfg.dataset.flip is not None else cfg.dataset.name.startswith("cifar")
    mean, std = splits.mean, splits.std

    def aug(train):
        return D.BatchAugment(mean, std, device, flip=flip, crop_padding=cfg.dataset.crop_padding,
                              train=train, channels_last=cfg.channels_last, seed=cfg.seed)

    train_loader, selection = _train_loader(cfg, splits, device, data_root)
    val_loader = D.make_loader(splits.val_x, splits.val_y, batch_size=512, shuffle=False)
    bpe = len(train_loader)
    algorithms = build_algorithms(cfg)
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
    clock = Clock(cfg, device, result, on_eval, progress, bpe,
                  point_extras=[selection.point_extra] if selection is not None else [])
    optimizer = build_optimizer(cfg, model.parameters())
    trainer = Trainer(
        model=model,
        train_dataloader=DataSpec(train_loader, batch_transforms=aug(True)),
        eval_dataloader=Evaluator(label="eval", dataloader=DataSpec(val_loader, batch_transforms=aug(False)),
                                  metric_names=["MulticlassAccuracy", "CrossEntropy"]),
        eval_interval=_duration(cfg.eval_every, bpe),
        max_duration=_duration(cfg.epochs, bpe),
        optimizers=optimizer,
        schedulers=build_scheduler(cfg),
        step_schedulers_every_batch=True,
        algorithms=algorithms,
        callbacks=[clock, *callbacks],
        loggers=[],
        progress_bar=False,
        log_to_console=False,
        device=device,
        precision=cfg.precision,
        seed=cfg.seed,
        device_train_microbatch_size=cfg.batch_size,
        compile_config={} if cfg.compile else None,
        python_log_level=None,
    )
    clock.setup_seconds = time.perf_counter() - t_setup
    test_loader = D.make_loader(splits.test_x, splits.test_y, 512, False)
    return Prepared(trainer, clock, gmp, selection, val_loader, test_loader, aug(False), train_loader)


def _fit(cfg: TrainConfig, splits: D.Splits, device: str, result: RunResult, progress: bool,
         on_eval: EvalHook | None, data_root=None) -> None:
    from effsearch.trainer.sparsity import measure

    run = prepare(cfg, splits, device, result, progress, on_eval, data_root=data_root)
    try:
        run.trainer.fit()
    finally:
        run.clock.finish()
        result.final.update(run.clock.summary())
        if run.selection is not None:
            result.final["selection_seconds"] = run.selection.seconds
    if run.gmp is not None:  # EMA/SWA may have swapped unmasked averages in at FIT_END
        run.gmp.apply_masks()
    final_model = run.trainer.state.model.module
    t_eval = time.perf_counter()
    val_acc, val_loss = evaluate(final_model, run.val_loader, run.eval_transform)
    test_acc, _ = evaluate(final_model, run.test_loader, run.eval_transform)
    result.final.update(
        val_accuracy=val_acc, val_loss=val_loss, test_accuracy=test_acc,
        final_eval_seconds=time.perf_counter() - t_eval, **measure(final_model))
    if run.clock.stop_reason:
        result.status, result.reason = run.clock.stop_status, run.clock.stop_reason
    elif not math.isfinite(val_loss):
        result.status, result.reason = "diverged", "validation loss is not finite"
    else:
        result.status = "completed"


def _restore_ctrl_c() -> None:
    """Composer's import installs a SIGINT handler that calls sys.exit(130); put Python's back
    so Ctrl-C raises KeyboardInterrupt and the run ends as ``interrupted`` with its result."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _train_loader(cfg: TrainConfig, splits: D.Splits, device: str, data_root=None):
    """The training loader and, when ``cfg.selection`` is on, the CORDS algorithm feeding it."""
    if cfg.loader == "ffcv":
        from effsearch.trainer.ffcv_loader import make_train_loader

        return make_train_loader(cfg, splits, device, data_root)
    if cfg.selection.strategy == "full":
        return D.make_loader(splits.train_x, splits.train_y, cfg.batch_size, shuffle=True, seed=cfg.seed), None
    from effsearch.trainer.selection import make_selection

    return make_selection(cfg, splits, device)


@torch.no_grad()
def evaluate(module: torch.nn.Module, loader, transform) -> tuple[float, float]:
    """Accuracy and mean loss of ``module`` over ``loader`` (eval mode, no grad)."""
    was_training = module.training
    module.eval()
    correct, total, loss = 0, 0, 0.0
    for batch in loader:
        x, y = transform(batch)[:2]
        out = module(x)
        loss += torch.nn.functional.cross_entropy(out.float(), y, reduction="sum").item()
        correct += int((out.argmax(1) == y).sum())
        total += len(y)
    module.train(was_training)
    return correct / max(total, 1), loss / max(total, 1)
