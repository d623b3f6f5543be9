"""``optimizer.name: muon``: Muon (``torch.optim.Muon``: momentum orthogonalised by Newton-Schulz
iterations, Jordan et al. 2024, the nanoGPT speedrun's optimizer) for the hidden 2-d weights, AdamW
for the rest (embeddings, the output layer, norms and biases), as the speedrun splits them.

One optimizer to the loop: its ``param_groups`` are the two inner optimizers' own group dicts, so
the per-step lr the loop writes reaches both, and Muon scales its update to AdamW's RMS
(``adjust_lr_fn="match_rms_adamw"``) so that one ``optimizer.lr`` serves both.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

from effsearch.config import ConfigError
from effsearch.trainer.probe import hidden_matrices


class MuonAdamW(torch.optim.Optimizer):
    """Muon on ``hidden_matrices(net)``, AdamW on the other parameters."""

    def __init__(
        self, net: nn.Module, lr: float, momentum: float, nesterov: bool, beta2: float, weight_decay: float
    ) -> None:
        matrices = hidden_matrices(net)
        if not matrices:
            raise ConfigError(
                "optimizer.name",
                "muon updates 2-d weights besides the embeddings and the output layer, and the model has none; "
                "use adamw",
            )
        ids = {id(p) for p in matrices}
        rest = [p for p in net.parameters() if p.requires_grad and id(p) not in ids]
        self.muon = torch.optim.Muon(
            matrices,
            lr=lr,
            momentum=momentum,
            nesterov=nesterov,
            weight_decay=weight_decay,
            adjust_lr_fn="match_rms_adamw",
        )
        self.adamw = torch.optim.AdamW(rest, lr=lr, betas=(momentum, beta2), weight_decay=weight_decay)
        super().__init__(matrices + rest, {"lr": lr})
        self.param_groups = self.muon.param_groups + self.adamw.param_groups  # shared: the loop's lr reaches both

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.muon.step()
        self.adamw.step()
        return loss

    def state_dict(self) -> dict[str, Any]:
        return {"muon": self.muon.state_dict(), "adamw": self.adamw.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.muon.load_state_dict(state_dict["muon"])
        self.adamw.load_state_dict(state_dict["adamw"])
