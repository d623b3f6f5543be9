"""The ComposerModel wrapper: batches are (x, y) or (x, y, weights)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from composer.metrics import CrossEntropy
from composer.models import ComposerModel
from torchmetrics.classification import MulticlassAccuracy

if TYPE_CHECKING:
    from torchmetrics import Metric


class EffModel(ComposerModel):
    """No train metrics (they cost per batch); validation accuracy and loss only.

    A third batch element holds per-sample weights (CORDS CRAIG/GradMatch); the
    loss is their weighted mean. Targets may be class indices or soft
    distributions (LabelSmoothing, MixUp, CutMix).
    """

    def __init__(self, module: torch.nn.Module, num_classes: int) -> None:
        super().__init__()
        self.module = module
        self.num_classes = num_classes
        self.val_acc = MulticlassAccuracy(num_classes=num_classes, average="micro")
        self.val_ce = CrossEntropy()
        # (weakref to the last weighted outputs, their weights)
        self._weighted: tuple[weakref.ref[torch.Tensor], torch.Tensor] | None = None
        # torch.compile(module) when the run compiles: training steps use it. Kept out of the
        # registered submodules (see ``use_compiled``) so surgery and state dicts see one model.
        self.compiled: Callable[..., Any] | None = None

    def __getstate__(self) -> dict[str, Any]:  # copies and pickles: the weak reference to the last outputs stays behind
        state = self.__dict__.copy()
        state["_weighted"] = None
        state["compiled"] = None
        return state

    def __deepcopy__(self, memo: dict) -> EffModel:
        # ComposerModel's copy sets each attribute with setattr, which registers the compiled
        # module as a child: SWA's averaged copy then held the weights twice (a second set under
        # ``compiled._orig_mod``) and could not be loaded back (a GPU study's compile + SWA trial
        # failed so). The copy is of the eager model; training compiles anew if it needs to.
        saved = self.__dict__["compiled"], self._weighted
        self.__dict__["compiled"], self._weighted = None, None
        try:
            return super().__deepcopy__(memo)
        finally:
            self.__dict__["compiled"], self._weighted = saved

    def use_compiled(self, compiled: Callable[..., Any]) -> None:
        self.__dict__["compiled"] = compiled  # nn.Module.__setattr__ would register it as a child

    def forward(self, batch: Any) -> Any:
        return (self.module if self.compiled is None else self.compiled)(batch[0])

    def loss(self, outputs: Any, batch: Any, *args: Any, reduction: str = "mean", **kwargs: Any) -> torch.Tensor:
        target = batch[1]
        weights = batch[2] if isinstance(batch, (tuple, list)) and len(batch) > 2 else None
        if weights is not None:
            self._weighted = (weakref.ref(outputs), weights)
        elif self._weighted is not None and self._weighted[0]() is outputs:
            # MixUp/CutMix with interpolate_loss call loss(outputs, (input, permuted_target)) on the same
            # outputs, without the batch's weights: weight that term alike, as the first one.
            weights = self._weighted[1]
        if weights is None:
            return soft_cross_entropy(outputs, target, reduction=reduction)
        per_sample = soft_cross_entropy(outputs, target, reduction="none") * weights
        if reduction == "none":
            return per_sample
        total = per_sample.sum()
        return total / weights.sum().clamp_min(1e-12) if reduction == "mean" else total

    def get_metrics(self, is_train: bool = False) -> dict[str, Metric]:
        return {} if is_train else {"MulticlassAccuracy": self.val_acc, "CrossEntropy": self.val_ce}

    def eval_forward(self, batch: Any, outputs: Any = None) -> Any:
        return outputs if outputs is not None else self.module(batch[0])

    def update_metric(self, batch: Any, outputs: Any, metric: Metric) -> None:
        metric.update(outputs, batch[1])


def soft_cross_entropy(logits: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy with class indices or soft targets (each row a distribution).

    Composer's ``soft_cross_entropy`` gives the same numbers for such targets but reads
    their total back to the host twice a step to warn about rows summing below 1."""
    if logits.dim() == 3:  # a language model: (rows, positions, vocabulary), a target per position
        return F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction=reduction)
    if target.dim() == logits.dim() - 1:
        return F.cross_entropy(logits, target, reduction=reduction)
    per_sample = -(target * F.log_softmax(logits, dim=1)).sum(dim=1)
    if reduction == "none":
        return per_sample
    return per_sample.sum() if reduction == "sum" else per_sample.mean()
