"""The built-in ``gpt``: a nanoGPT-like causal language model, with the speedrun's switches.

Token and learned position embeddings, ``n_layer`` pre-LayerNorm blocks of causal self-attention
(``F.scaled_dot_product_attention`` with ``is_causal``) and an MLP, a final LayerNorm and the output
layer to the vocabulary, tied to the token embedding by default (nanoGPT's GPT-2 shape, Radford et
al. 2019). Linear layers have no biases (nanoGPT's ``bias=False``). The switches
(``model.kwargs``; defaults in ``config.choices.GPT``), each one the nanoGPT speedrun kept:

- ``qk_norm``: queries and keys RMS-normalised per head before attention (stabler at high lr);
- ``activation``: ``gelu`` (GPT-2's) or ``relu2``, ReLU squared (So et al. 2021, Primer);
- ``tied``: the output layer shares the embedding's weights, or has its own;
- ``zero_init``: the attention and MLP output projections start at zero, so every block starts as
  the identity (the residual stream is the embedding's at step 0).

``forward(ids)`` maps token ids (N, L) to logits (N, L, vocab): position i predicts token i + 1.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from effsearch.config import ConfigError
from effsearch.config.choices import GPT as GPT_KWARGS
from effsearch.config.readers import gpt_problem


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int, qk_norm: bool) -> None:
        super().__init__()
        self.heads, self.qk_norm = heads, qk_norm
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, length, width = x.shape
        q, k, v = self.qkv(x).view(n, length, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        if self.qk_norm:
            q, k = F.rms_norm(q, (q.shape[-1],)), F.rms_norm(k, (k.shape[-1],))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(n, length, width))


class MLP(nn.Module):
    def __init__(self, width: int, activation: str) -> None:
        super().__init__()
        self.fc = nn.Linear(width, 4 * width, bias=False)
        self.proj = nn.Linear(4 * width, width, bias=False)
        self.relu2 = activation == "relu2"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        h = F.relu(h).square() if self.relu2 else F.gelu(h)
        return self.proj(h)


class Block(nn.Module):
    def __init__(self, width: int, heads: int, qk_norm: bool, activation: str) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attention = CausalSelfAttention(width, heads, qk_norm)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = MLP(width, activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        max_length: int,
        *,
        n_layer: int,
        n_head: int,
        n_embd: int,
        qk_norm: bool,
        activation: str,
        tied: bool,
        zero_init: bool,
    ) -> None:
        """Every switch given (``gpt`` fills the defaults from ``config.choices.GPT``, their one home)."""
        super().__init__()
        self.embed = nn.Embedding(vocab_size, n_embd)
        self.positions = nn.Embedding(max_length, n_embd)
        blocks = [Block(n_embd, n_head, qk_norm, activation) for _ in range(n_layer)]
        self.blocks = nn.ModuleList(blocks)
        self.norm = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.apply(_init)
        # GPT-2's scaled init of the residual projections: the stream's variance stays put with depth.
        for block in blocks:
            for proj in (block.attention.proj, block.mlp.proj):
                if zero_init:
                    nn.init.zeros_(proj.weight)
                else:
                    nn.init.normal_(proj.weight, std=0.02 / (2 * n_layer) ** 0.5)
        if tied:
            self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) + self.positions.weight[: ids.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def _init(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)


def gpt(vocab_size: int, max_length: int, kwargs: dict[str, Any]) -> GPT:
    """The built-in ``gpt`` of ``model.kwargs`` (checked as validation checks them: a ConfigError)."""
    problem = gpt_problem(kwargs)
    if problem:
        raise ConfigError("model.kwargs", problem)
    return GPT(vocab_size, max_length, **{**GPT_KWARGS, **kwargs})
