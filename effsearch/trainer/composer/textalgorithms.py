"""Composer's algorithms as text models need them (``build_algorithms`` picks these for a token-id
model). Composer's own act on its ``HuggingFaceModel`` wrapper, not on effsearch's ``EffModel``:

- ``EmbeddingMixUp``: MixUp on the input embeddings (Guo et al. 2019's wordMixup; token ids cannot
  be mixed). Composer's MixUp draws the mix and the permutation and mixes the targets; the forward
  mixes the embeddings (``models.text.TokenInput``) instead of the ids.
- ``GatedLinearUnits``: Composer's surgery, applied to the BERT inside the run's model (Composer's
  refuses any model that is not itself a ``BertPreTrainedModel``).
- ``SeqLengthWarmup``: Composer's schedule of lengths and its ``set_batch_sequence_length``, on
  effsearch's ``(ids, labels[, weights])`` batches (Composer's class refuses a model that is not
  its ``HuggingFaceModel``, and its batches are dicts).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from composer.algorithms import GatedLinearUnits as _ComposerGLU
from composer.algorithms import MixUp
from composer.algorithms import SeqLengthWarmup as _ComposerWarmup
from composer.core import Event, State
from composer.loggers import Logger

from effsearch.trainer.models.text import TokenInput


def token_input(model: torch.nn.Module) -> TokenInput:
    found = next((m for m in model.modules() if isinstance(m, TokenInput)), None)
    if found is None:
        raise TypeError(f"{type(model).__name__} holds no text model (models.text.TokenInput)")
    return found


class EmbeddingMixUp(MixUp):
    """MixUp with the input embeddings mixed (set on the model just before each forward)."""

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        if event != Event.BEFORE_FORWARD:
            return super().apply(event, state, logger)
        ids, target = state.batch_get_item(key=self.input_key), state.batch_get_item(key=self.target_key)
        z = float(np.random.beta(self.alpha, self.alpha)) if self.alpha > 0 else 0.0
        self.mixing = max(z, 1 - z)  # Composer's coefficient: the permuted sample's weight
        self.indices = torch.randperm(ids.shape[0], device=ids.device)
        self.permuted_target = target[self.indices]
        token_input(state.model).mixing = (torch.tensor(self.mixing, device=ids.device), self.indices)
        return None


class GatedLinearUnits(_ComposerGLU):
    def apply(self, event: Event, state: State, logger: Logger) -> None:
        from composer.algorithms.gated_linear_units.gated_linear_units import apply_gated_linear_units
        from transformers import BertPreTrainedModel

        bert = next((m for m in state.model.modules() if isinstance(m, BertPreTrainedModel)), None)
        if bert is None:
            raise TypeError("GatedLinearUnits needs a transformers BERT-family model (hf:BertConfig, ...)")
        apply_gated_linear_units(
            model=bert,
            optimizers=state.optimizers,
            act_fn=self.act_fn,
            gated_layer_bias=self.gated_layer_bias,
            non_gated_layer_bias=self.non_gated_layer_bias,
        )


class SeqLengthWarmup(_ComposerWarmup):
    """Sequences cut to a length growing linearly from ``min_seq_length`` to ``max_seq_length`` (the
    dataset's) over the first ``duration`` of training, ``step_size`` tokens at a time."""

    def match(self, event: Event, state: State) -> bool:
        return event == Event.AFTER_DATALOADER

    def length(self, batch: int, total: int) -> int:
        """The length at ``batch`` of ``total``: Composer's steps of ``step_size`` from the minimum, spread
        evenly over the warm-up (Composer's own divides by zero where the warm-up has fewer batches
        than steps), then the maximum."""
        warmup = int(total * self.duration)
        if batch >= warmup:
            return self.max_seq_length
        updates = (self.max_seq_length - self.min_seq_length) // self.step_size
        grown = self.min_seq_length + self.step_size * int(updates * batch / warmup)
        return max(self.min_seq_length, min(grown, self.max_seq_length))

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        from composer.algorithms.seq_length_warmup import set_batch_sequence_length

        assert state.max_duration is not None  # the loop sets it in batches
        length = self.length(int(state.timestamp.batch), int(state.max_duration.value))
        ids, *rest = state.batch
        ids = set_batch_sequence_length({"input_ids": ids}, length, truncate=True)["input_ids"]
        state.batch = (ids, *rest)


TEXT_VERSIONS: dict[str, Any] = {
    "mixup": EmbeddingMixUp,
    "gated_linear_units": GatedLinearUnits,
    "seq_length_warmup": SeqLengthWarmup,
}
