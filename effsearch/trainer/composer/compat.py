"""Five patches to Composer 0.32.1's algorithms, each explained; nothing else.

Composer's last release is frozen, so what breaks effsearch's runs is fixed here,
once, idempotently (``apply()``), and ``tests/trainer/test_loop.py`` fails if a patch stops
holding:

1. BlurPool under ``torch.compile``. ``_padding_for_filt_2d_same`` computes the
   padding as ``int(torch.div(h, 2))``: a tensor round trip on Python ints, which
   Dynamo cannot trace, so every BlurPool layer breaks the compiled graph (and the
   eager fallback runs between the pieces every step). Integer division gives the
   same numbers with no tensor.
2. GhostBatchNorm. Composer's forward raises on a batch smaller than one ghost
   batch, which every epoch's last partial batch, a CORDS subset's or
   SelectiveBackprop's kept part can be (7 of 17 live trials were lost to it):
   such a batch is one ghost batch and is normalised whole, as its one chunk would
   be. And it scales the BatchNorm's ``momentum`` attribute up and down inside
   ``forward``, which a compiled graph must guard on; the same running-statistics
   update is written with ``F.batch_norm`` and the scaled momentum as an argument,
   mutating nothing but the statistics.
3. One-hot targets without host reads. ``composer.loss.utils._one_hot`` (behind
   LabelSmoothing, MixUp and CutMix) compares ``tensor.max()`` and ``tensor.min()``
   with Python numbers: two reads back to the host per step, each a stall on a GPU.
   effsearch's labels are class indices in range by construction, so when the
   number of classes is known the one-hot is one ``scatter_`` (an index out of
   range still fails, on the device). (The loss itself is effsearch's:
   ``EffModel.loss`` does not call Composer's ``soft_cross_entropy``, which reads
   the targets' total back twice a step.)
4. SAM without host reads. ``SAMOptimizer.step`` asks ``if loss:`` of its closure's
   loss (and of the second pass's) to decide whether to step: ``bool()`` of a tensor, a
   stall every step even at ``interval`` 10 (1.58x the plain step on an H200, for 1.1x of
   the work). effsearch's closure returns the loss tensor, never None, so "the closure
   ran" is ``is not None``. The one difference: Composer skips the step of a loss of
   exactly 0.0; this takes it (its gradient is zero anyway).
5. LowPrecisionLayerNorm on a layer norm of another forward. Composer's surgery replaces every
   ``isinstance`` ``nn.LayerNorm``, subclasses too, with its ``LPLayerNorm``, which normalises the
   last dimension: torchvision's ConvNeXt ``LayerNorm2d`` (it permutes NCHW to normalise the
   channels) then fails on its first batch. Only a layer norm running nn.LayerNorm's own forward
   is replaced (``probe.plain_layernorm``, the fact the rules offer the algorithm on;
   ``tests/trainer/test_unseen_models.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

_applied: dict = {}


def apply() -> None:
    if _applied.get("done"):
        return
    _blurpool_padding()
    _ghost_batchnorm_forward()
    _one_hot_without_reads()
    _sam_without_reads()
    _plain_layernorms_only()
    _applied["done"] = True


def _blurpool_padding() -> None:
    from composer.algorithms.blurpool import blurpool_layers as b

    def padding(filt: torch.Tensor) -> tuple[int, int]:
        _, _, h, w = filt.shape
        if h % 2 == 0:
            raise IndexError(f"Filter must have odd height; got {h}")
        if w % 2 == 0:
            raise IndexError(f"Filter must have odd width; got {w}")
        return h // 2, w // 2

    b._padding_for_filt_2d_same = padding  # type: ignore[attr-defined]


def _ghost_batchnorm_forward() -> None:
    from composer.algorithms.ghost_batchnorm import ghost_batchnorm as g

    def forward(self: g._GhostBatchNorm, input: torch.Tensor) -> torch.Tensor:
        bn = self.batchnorm
        n = input.shape[0]
        # One ghost batch or less, or evaluation (per-sample statistics): the whole batch at once.
        if n <= self.ghost_batch_size or not self.training:
            return bn(input)
        chunks = input.chunk(-(-n // self.ghost_batch_size), 0)
        if bn.momentum is None or not bn.track_running_stats:
            return torch.cat([bn(c) for c in chunks], 0)
        # Applying BatchNorm once per chunk would move the running averages nchunks times:
        # scale the momentum down to compensate, as Composer does.
        momentum = float(bn.momentum) / len(chunks)
        return torch.cat(
            [
                F.batch_norm(c, bn.running_mean, bn.running_var, bn.weight, bn.bias, True, momentum, bn.eps)
                for c in chunks
            ],
            0,
        )

    g._GhostBatchNorm.forward = forward  # type: ignore[method-assign]


def _one_hot_without_reads() -> None:
    from composer.loss import utils as u

    original = u._one_hot

    def one_hot(tensor: torch.Tensor, num_classes: int = -1, dim: int = -1) -> torch.Tensor:
        if num_classes < 0 or not u.check_for_index_targets(tensor):
            return original(tensor, num_classes, dim)  # needs the max: Composer's way
        index = tensor.unsqueeze(dim)
        shape = list(index.shape)
        shape[dim] = num_classes
        return torch.zeros(shape, dtype=tensor.dtype, device=tensor.device).scatter_(dim, index, 1)

    u._one_hot = one_hot


def _sam_without_reads() -> None:
    from composer.algorithms.sam.sam import SAMOptimizer

    @torch.no_grad()
    def step(self: SAMOptimizer, closure: Callable[..., Any] | None = None) -> Any:
        assert closure is not None, "Sharpness Aware Minimization requires closure, but it was not provided"
        closure = torch.enable_grad()(closure)  # a full forward-backward pass
        if (self.global_step + 1) % self.interval == 0:
            loss = closure(ddp_sync=False)  # the gradient at w, not synced across ranks
            if loss is not None:
                self.first_step()  # to w + e(w)
                if closure(loss_dict={}) is not None:  # the gradient at w + e(w)
                    self.second_step()  # back to w, and the base optimizer's step
                else:
                    self.sub_e_w()
        else:
            loss = closure()
            if loss is not None:
                self.base_optimizer.step()
        self.global_step += 1
        return loss

    SAMOptimizer.step = step  # type: ignore[method-assign]


def _plain_layernorms_only() -> None:
    from composer.algorithms.low_precision_layernorm import low_precision_layernorm as lp

    from effsearch.trainer.probe import plain_layernorm

    original = lp._to_LPLayerNorm

    def replace(layer: torch.nn.Module, module_index: int) -> torch.nn.Module | None:
        return original(layer, module_index) if plain_layernorm(layer) else None

    lp._to_LPLayerNorm = replace  # type: ignore[assignment]  # None: the surgery skips the layer
