"""The built-in text encoder, and the wrapper every text model is trained through.

``TextEncoder`` is a pre-LayerNorm transformer (Xiong et al. 2020): token and learned position
embeddings, ``depth`` blocks of self-attention through ``F.scaled_dot_product_attention`` and a
GELU feed-forward, a final LayerNorm, the text's embedding (the mean over its tokens, or its first,
``[CLS]``, token) and one ``nn.Linear`` to the logits, whose input CORDS takes as the embedding.

``TokenInput`` is what the trainer holds: it is called with a batch of token ids only (padding is
id 0, ``effsearch.trainer.data.tokenizer.PAD``) and gives the model the attention mask as well,
so the loop, the evaluation, the probe and CORDS call a text model as they call an image model.
MixUp on text mixes the input embeddings (the output of the model's first ``nn.Embedding``): the
trainer's MixUp sets ``mixing`` before a forward, which uses it once.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from effsearch.trainer.data.tokenizer import PAD

# What embeds token ids: a model holding one (and no 2-d convolution) takes text (trainer/probe.py).
# An EmbeddingBag (fastText's pooled bag of words) is no subclass of nn.Embedding.
EMBEDDINGS = (nn.Embedding, nn.EmbeddingBag)


class SelfAttention(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n, length, width = x.shape
        q, k, v = self.qkv(x).view(n, length, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        # mask: (N, L) True at tokens; broadcast over heads and queries (a padded query attends to
        # the text's tokens too: position 0 is always a token, so no row is all masked).
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask[:, None, None, :], dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(y.transpose(1, 2).reshape(n, length, width))


class Block(nn.Module):
    """x + attention(LN(x)), then x + MLP(LN(x)): pre-LN, stable without a learning-rate warm-up."""

    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attention = SelfAttention(width, heads, dropout)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attention(self.norm1(x), mask))
        return x + self.drop(self.mlp(self.norm2(x)))


class TextEncoder(nn.Module):
    """Token ids (N, L) and their mask to logits (N, num_classes)."""

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        max_length: int,
        width: int = 128,
        depth: int = 2,
        heads: int = 4,
        pooling: str = "mean",
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.pooling = pooling
        self.embed = nn.Embedding(vocab_size, width, padding_idx=PAD)
        self.positions = nn.Embedding(max_length, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(width, heads, dropout) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, num_classes)
        self.apply(_init)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.embed(ids) + self.positions.weight[: ids.shape[1]])
        for block in self.blocks:
            x = block(x, mask)
        x = self.norm(x)
        if self.pooling == "cls":
            pooled = x[:, 0]
        else:
            m = mask.unsqueeze(-1).to(x.dtype)
            pooled = (x * m).sum(1) / m.sum(1).clamp_min(1.0)
        return self.head(pooled)


def _init(module: nn.Module) -> None:
    # GPT-2's and BERT's: N(0, 0.02) weights, zero biases (torch's default fan-in init leaves the
    # embeddings at N(0, 1), which drowns the position signal).
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class TokenInput(nn.Module):
    """A text model called with token ids only: the mask is made here (``ids != PAD``).

    ``style`` says how the model is called: ``"ids_mask"`` (``net(ids, mask)``: the built-in
    encoder, a user's factory), ``"hf"`` (a transformers model: ``input_ids``, ``attention_mask``,
    its output's ``logits``) or ``"causal"`` (a language model: ``net(ids)``, no mask: a window of
    the token stream has no padding, and the model masks the future itself). ``mixing`` (a 0-d tensor and a permutation of the batch, set by the
    trainer's MixUp just before a forward) mixes the input embeddings of that forward, and the mask
    then covers the tokens of both texts. ``own`` (a pretrained model's, ``hfconfig.own_table``)
    maps effsearch's ids to the model's tokenizer's; a language model's logits map back
    (``causal_logits``), one per effsearch id.
    """

    def __init__(
        self, net: nn.Module, style: str, own: torch.Tensor | None = None, causal_logits: bool = False
    ) -> None:
        super().__init__()
        self.net, self.style, self.causal_logits = net, style, causal_logits
        self.own: torch.Tensor | None
        self.register_buffer("own", own, persistent=False)  # follows the model to its device
        self.mixing: tuple[torch.Tensor, torch.Tensor] | None = None
        embedding = next((m for m in net.modules() if isinstance(m, EMBEDDINGS)), None)
        self.embedding_dim = embedding.embedding_dim if embedding is not None else None
        if embedding is not None and style != "causal":  # no MixUp for a language model (rules.py)
            embedding.register_forward_hook(self._mix)

    def _mix(self, _module: nn.Module, _inputs: Any, out: torch.Tensor) -> torch.Tensor | None:
        if self.mixing is None:
            return None
        lam, perm = self.mixing
        return out * (1 - lam) + out[perm] * lam  # Composer's MixUp: (1 - mixing) x + mixing x[perm]

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.style == "causal":
            return self.net(ids)
        mask = ids != PAD
        if self.mixing is not None:
            mask = mask | mask[self.mixing[1]]
        try:
            if self.style == "hf":
                if self.own is None:
                    return self.net(input_ids=ids, attention_mask=mask.long()).logits
                logits = self.net(input_ids=self.own[ids], attention_mask=mask.long()).logits
                return logits.index_select(-1, self.own) if self.causal_logits else logits
            return self.net(ids, mask)
        finally:
            self.mixing = None


def encoder(
    vocab_size: int, num_classes: int, max_length: int, width: int, depth: int, heads: int, pooling: str, dropout: float
) -> TextEncoder:
    """The built-in ``text-encoder`` (the caller resolves 0 widths, depths and heads to defaults)."""
    if width % heads:
        raise ValueError(f"{heads} heads do not divide width {width}")
    return TextEncoder(vocab_size, num_classes, max_length, width, depth, heads, pooling, dropout)
