"""K-FAC preconditioned SGD (Martens and Grosse 2015; Grosse and Martens 2016 for convolutions).

Each Linear and Conv2d layer's Fisher block is approximated by A (x) G: A the second
moment of the layer's inputs (im2col patches for a convolution, a column of ones for
the bias), G that of the gradients with respect to its outputs. The gradient of the
layer's weight (bias as the last column) is replaced by

    (A (x) G + damping I)^-1 vec(grad)  =  Q_G [(Q_G' grad Q_A) / (d_G d_A' + damping)] Q_A'

with A = Q_A diag(d_A) Q_A' and G = Q_G diag(d_G) Q_G', the eigen-form of alecwangcq's
KFAC-Pytorch (the reference implementation this follows: batch-averaged factors, a
running average with decay 0.95, KL clipping of the step). Then torch's SGD applies
momentum and weight decay. Other parameters (BatchNorm) keep their plain gradient.

Why not a library: ASDL is not on PyPI (the name is another project), nngeometry
computes Fisher matrices but is no optimizer, BackPACK's KFAC quantities refuse
BatchNorm layers in training mode. This is about 150 lines.

Cost: factors are captured (module hooks, registered only then) and inverted on one
step in ``update_every``; the other steps pay two small matrix products per layer.

A layer with no decomposition to use (none has solved yet) or one for another shape takes
its plain gradient on that step: ``fallbacks()`` counts them for the run's result, and the
first is logged as a warning, since a run that is mostly plain SGD is not K-FAC's measure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from torch.optim.optimizer import ParamsT

    _Module = torch.nn.Linear | torch.nn.Conv2d  # the layers K-FAC preconditions


log = logging.getLogger(__name__)


def _cov(x: torch.Tensor, n: int) -> torch.Tensor:
    """x.T @ x / n in float32. The forward hook runs inside the step's autocast, which would
    make the product bf16 and then eigh refuses it on CUDA ("linalg_eigh_cuda not implemented
    for 'BFloat16'"); the factors need float32's range anyway."""
    with torch.autocast(x.device.type, enabled=False):
        return x.t() @ (x / n)


def _eigh(M: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """eigh of a factor, or None. float32's solver failed to converge on a finite 1152 x 1152
    input factor with 1,024 zero rows (sparsity and dead channels: many repeated eigenvalues), and
    the exception failed the trial; float64 solves it (once in a while, at double the cost). A
    factor that is not finite belongs to a diverging run: None keeps the last decomposition, and
    the loop's loss check stops the run as diverged."""
    try:
        return torch.linalg.eigh(M)
    except torch.linalg.LinAlgError:
        try:
            d, Q = torch.linalg.eigh(M.double())
            return d.to(M.dtype), Q.to(M.dtype)
        except torch.linalg.LinAlgError:
            return None


def _padded(conv: torch.nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """``x`` padded as ``conv`` pads its input, for ``F.unfold`` with padding 0: unfold takes
    ints only, and a Conv2d may say "same" or "valid" or pad by reflection, replication or
    wrapping. "same" pads dilation * (k - 1) per dimension, the odd one on the right, as
    torch's Conv2d does (``_reversed_padding_repeated_twice`` in torch/nn/modules/conv.py)."""
    if conv.padding == "valid":
        return x
    pads: list[int] = []
    for i in (1, 0):  # F.pad's order: the last dimension first
        if conv.padding == "same":
            total = conv.dilation[i] * (conv.kernel_size[i] - 1)
            pads += [total // 2, total - total // 2]
        else:
            pads += [int(conv.padding[i])] * 2
    if not any(pads):
        return x
    if conv.padding_mode == "zeros":
        return F.pad(x, pads)
    return F.pad(x, pads, mode=conv.padding_mode)


class _Layer:
    A: torch.Tensor | None
    G: torch.Tensor | None
    a_sum: torch.Tensor | None
    g_sum: torch.Tensor | None
    QA: torch.Tensor | None
    dA: torch.Tensor | None
    QG: torch.Tensor | None
    dG: torch.Tensor | None

    def __init__(self, module: _Module, name: str) -> None:
        self.module, self.name = module, name
        self.A = self.G = None  # running factors
        self.a_sum = self.g_sum = None  # this capture's sums
        self.a_n = self.g_n = 0
        self.QA = self.dA = self.QG = self.dG = None


class KFACSGD(torch.optim.SGD):
    def __init__(
        self,
        params: ParamsT,
        model: torch.nn.Module,
        lr: float,
        momentum: float = 0.9,
        nesterov: bool = False,
        weight_decay: float = 0.0,
        damping: float = 1e-3,
        update_every: int = 10,
        stat_decay: float = 0.95,
        kl_clip: float | None = 1e-3,
        accum_scale: float = 1.0,
        fused: bool | None = None,
    ) -> None:
        super().__init__(params, lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay, fused=fused)
        self.model = model
        self.damping, self.update_every, self.stat_decay, self.kl_clip = damping, update_every, stat_decay, kl_clip
        self.accum_scale = accum_scale  # accumulation: micro-batch losses are scaled by 1/k; G is corrected by k
        self.layers: dict[torch.nn.Module, _Layer] = {}
        self.handles: list = []
        self.kfac_steps = 0
        # What fell back to plain gradients (see fallbacks()); warned once, at the first.
        self.failed_decompositions = self.shape_mismatches = self.plain_steps = 0
        self.plain_layers: set[str] = set()
        self.warned = False
        self._arm()
        self._warn_grouped()

    # -- capturing the factors ----------------------------------------------------------
    def _eligible(self) -> Iterator[_Module]:
        ids = {id(p) for g in self.param_groups for p in g["params"]}
        for m in self.model.modules():
            if (
                isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))
                and id(m.weight) in ids
                and m.weight.requires_grad
                and (not isinstance(m, torch.nn.Conv2d) or m.groups == 1)
            ):
                yield m

    def _warn_grouped(self) -> None:
        """Grouped convolutions (depthwise ones among them) have a factor per group, which this
        does not build: they train with plain SGD, said once here (rank 0) so it is not silent."""
        ids = {id(p) for g in self.param_groups for p in g["params"]}
        grouped = [
            f"{name or type(m).__name__} (groups={m.groups})"
            for name, m in self.model.named_modules()
            if isinstance(m, torch.nn.Conv2d) and m.groups != 1 and id(m.weight) in ids and m.weight.requires_grad
        ]
        dist = torch.distributed.is_available() and torch.distributed.is_initialized()
        if grouped and not (dist and torch.distributed.get_rank() != 0):
            log.warning("K-FAC does not precondition grouped convolutions; %s train with plain SGD", ", ".join(grouped))

    def _arm(self) -> None:
        # The model's order, not a set's: a set of modules iterates by address, which differs
        # between runs, and the KL clip sums over layers in that order; the rounding it moved was
        # enough to change which examples selective backprop kept, so a seeded run did not repeat.
        current = list(self._eligible())  # model.modules() yields each module once
        names = {m: name or type(m).__name__ for name, m in self.model.named_modules()}
        self.layers = {m: self.layers.get(m) or _Layer(m, names[m]) for m in current}
        for layer in self.layers.values():
            self.handles.append(layer.module.register_forward_hook(self._forward_hook))

    def _disarm(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def _forward_hook(self, module: _Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        if not (module.training and torch.is_grad_enabled() and output.requires_grad):
            return  # evaluation and CORDS's selection passes are not training steps
        layer = self.layers[module]
        a = inputs[0].detach().float()
        batch = a.shape[0]
        if isinstance(module, torch.nn.Conv2d):
            a = F.unfold(_padded(module, a), module.kernel_size, module.dilation, 0, module.stride)  # B, C*k*k, T
            spatial = a.shape[-1]
            a = a.transpose(1, 2).reshape(-1, a.shape[1]) / spatial
        else:
            a = a.reshape(-1, a.shape[-1])
        if module.bias is not None:
            a = torch.cat([a, a.new_ones(a.shape[0], 1) / (spatial if isinstance(module, torch.nn.Conv2d) else 1)], 1)
        cov = _cov(a, batch)
        layer.a_sum = cov if layer.a_sum is None else layer.a_sum + cov
        layer.a_n += 1
        output.register_hook(lambda go, layer=layer, module=module: self._grad_hook(layer, module, go))

    @torch.no_grad()
    def _grad_hook(self, layer: _Layer, module: _Module, go: torch.Tensor) -> None:
        g = go.detach().float()
        batch = g.shape[0]
        if isinstance(module, torch.nn.Conv2d):
            spatial = g.shape[2] * g.shape[3]
            g = g.transpose(1, 2).transpose(2, 3).reshape(-1, g.shape[1]) * (batch * spatial)
        else:
            g = g.reshape(-1, g.shape[-1]) * batch
        g = g * self.accum_scale
        cov = _cov(g, g.shape[0])
        layer.g_sum = cov if layer.g_sum is None else layer.g_sum + cov
        layer.g_n += 1

    @torch.no_grad()
    def _update(self) -> None:
        dist = (
            torch.distributed.is_available()
            and torch.distributed.is_initialized()
            and torch.distributed.get_world_size() > 1
        )
        for layer in self.layers.values():
            if not layer.a_n or not layer.g_n:
                continue
            assert layer.a_sum is not None and layer.g_sum is not None  # summed whenever counted
            A, G = layer.a_sum / layer.a_n, layer.g_sum / layer.g_n
            layer.a_sum = layer.g_sum = None
            layer.a_n = layer.g_n = 0
            if dist:  # every rank must precondition alike: average the factors of all shards
                world = torch.distributed.get_world_size()
                torch.distributed.all_reduce(A)
                torch.distributed.all_reduce(G)
                A, G = A / world, G / world
            d = self.stat_decay
            layer.A = A if layer.A is None else d * layer.A + (1 - d) * A
            layer.G = G if layer.G is None else d * layer.G + (1 - d) * G
            ea, eg = _eigh(layer.A), _eigh(layer.G)
            if ea is None or eg is None:
                # The last decomposition stays (or none: plain gradients) until they solve.
                self.failed_decompositions += 1
                self._warn(
                    f"layer {layer.name}'s factors did not decompose (not finite, or eigh failed in float64 too)"
                )
                continue
            (layer.dA, layer.QA), (layer.dG, layer.QG) = ea, eg
            layer.dA.clamp_(min=0.0)
            layer.dG.clamp_(min=0.0)

    # -- the step -------------------------------------------------------------------------
    @staticmethod
    def _grad_matrix(module: _Module) -> torch.Tensor | None:
        if module.weight.grad is None:
            return None
        g = module.weight.grad.reshape(module.weight.shape[0], -1)
        if module.bias is not None and module.bias.grad is not None:
            g = torch.cat([g, module.bias.grad.reshape(-1, 1)], 1)
        return g

    def _warn(self, cause: str) -> None:
        """The first fallback of this run, logged (rank 0 only); the rest are counted in silence."""
        dist = torch.distributed.is_available() and torch.distributed.is_initialized()
        if self.warned or (dist and torch.distributed.get_rank() != 0):
            return
        self.warned = True
        log.warning(
            "K-FAC: %s; such layers train with plain SGD until a decomposition solves "
            "(counted in the result as kfac_fallbacks)",
            cause,
        )

    def _fits(self, layer: _Layer, grad: torch.Tensor) -> bool:
        """Whether ``layer``'s decomposition can precondition ``grad``; a miss (the layer takes its
        plain gradient this step) is counted and warned of."""
        if layer.QA is None:
            self._warn(f"layer {layer.name} has no decomposition of its factors yet")
        elif grad.shape[1] != layer.QA.shape[0]:
            self.shape_mismatches += 1
            self._warn(
                f"layer {layer.name}'s gradient ({grad.shape[1]} columns) does not fit its factors "
                f"({layer.QA.shape[0]})"
            )
        else:
            return True
        self.plain_layers.add(layer.name)
        return False

    def fallbacks(self) -> dict | None:
        """What trained without K-FAC's step (None when every layer had it on every step): the
        optimizer steps on which some layer took its plain gradient, those layers (model order),
        and the failed decompositions and shape mismatches behind them."""
        if not (self.plain_steps or self.failed_decompositions or self.shape_mismatches):
            return None
        return {
            "plain_steps": self.plain_steps,
            "layers": [layer.name for layer in self.layers.values() if layer.name in self.plain_layers],
            "failed_decompositions": self.failed_decompositions,
            "shape_mismatches": self.shape_mismatches,
        }

    @torch.no_grad()
    def precondition(self) -> None:
        updates = []
        plain = False
        for layer in self.layers.values():
            grad = self._grad_matrix(layer.module)
            if grad is None:
                continue  # a layer this step did not use: nothing to precondition, nothing falls back
            if not self._fits(layer, grad):
                plain = True
                continue
            g32 = grad.float()
            assert layer.QG is not None and layer.dG is not None and layer.QA is not None and layer.dA is not None
            v = layer.QG.t() @ g32 @ layer.QA
            v = v / (layer.dG.unsqueeze(1) * layer.dA.unsqueeze(0) + self.damping)
            v = layer.QG @ v @ layer.QA.t()
            updates.append((layer.module, v, g32))
        self.plain_steps += int(plain)
        if not updates:
            return
        nu = None
        if self.kl_clip is not None:
            lr = self.param_groups[0]["lr"]
            vg = sum((v * g).sum() for _, v, g in updates) * lr**2
            # A tensor, never read on the host: no sync per step.
            nu = torch.clamp(torch.sqrt(self.kl_clip / vg.abs().clamp_min(1e-30)), max=1.0)
        for m, v, _ in updates:
            if nu is not None:
                v = v * nu
            w = m.weight
            if m.bias is not None and m.bias.grad is not None:
                m.bias.grad.copy_(v[:, -1].view_as(m.bias))
                v = v[:, :-1]
            assert w.grad is not None  # _grad_matrix found it
            w.grad.copy_(v.reshape(w.shape))

    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        captured = bool(self.handles)
        if captured:
            self._disarm()
            self._update()
        self.precondition()
        loss = super().step(closure)
        self.kfac_steps += 1
        if self.kfac_steps % self.update_every == 0:
            self._arm()  # capture during the next step's forward and backward
        return loss
