"""Data-subset selection with CORDS inside one training run (``cfg.selection``).

The strategies are the ``cords`` package's own (``cords.selectionstrategies.SL``,
patched only as :mod:`effsearch.trainer.data.cords_compat` explains); this module
runs them on effsearch's data, models and Composer clock:

=================  ==========================================  ========
strategy           CORDS class and ``selection_type``          weights
=================  ==========================================  ========
``random``         ``RandomStrategy``: one fixed subset         no
``random-online``  ``RandomStrategy(online)``: new each time    no
``glister``        ``GLISTERStrategy``, ``Supervised``          no
``glister-pb``     ``GLISTERStrategy``, ``PerBatch``            no
``glister-pc``     ``GLISTERStrategy``, ``PerClass``            no
``craig``          ``CRAIGStrategy``, ``Supervised``            yes
``craig-pb``       ``CRAIGStrategy``, ``PerBatch``              yes
``craig-pc``       ``CRAIGStrategy``, ``PerClass``              yes
``gradmatch``      ``GradMatchStrategy``, ``PerClassPerGradient``  yes
``gradmatch-pb``   ``GradMatchStrategy``, ``PerBatch``          yes
``gradmatch-pc``   ``GradMatchStrategy``, ``PerClass``          yes
=================  ==========================================  ========

Schedule, as CORDS's adaptive data loaders: ``budget = int(fraction * N)``. The
first ``int(kappa * epochs)`` epochs are a warm start on full data; an epoch
stays ``ceil(budget / batch_size)`` batches throughout (so Composer's epoch
length, LR schedule and evaluation interval never change), and the warm start
walks through full-data permutations, which spends the same share of the
budget on full data as CORDS's ``ceil(kappa * epochs * fraction)`` full epochs.
Then a subset is chosen, and again every ``select_every`` epochs. Without a
warm start the first subset is random, as in CORDS (the model is untrained);
the strategy's own first selection comes ``select_every`` epochs later.

GLISTER's gradients are taken on the held-out validation split, never on the
test set; GradMatch matches the training gradient (CORDS's ``valid=False``).
Selection runs at ``Event.EPOCH_START`` inside the training clock, so its time
is train time; it is also summed in :attr:`SubsetSelection.seconds`.

Per-batch variants pick whole sequential batches (``ceil(budget/B)`` of them)
and per-class variants round up per class, so the subset can exceed the budget
by up to one batch; an epoch still serves at most ``ceil(budget/B)`` batches
(a fresh random part of an oversized subset each epoch).
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from composer.core import Algorithm, Event

from effsearch.config import WEIGHTED_SELECTIONS, ConfigError, select_every
from effsearch.trainer.data import cords_compat
from effsearch.trainer.data.sampler import SubsetSampler
from effsearch.trainer.data.splits import DiskImages, Splits, TensorImages, make_loader

if TYPE_CHECKING:
    from composer.core import State
    from composer.loggers import Logger
    from torch.utils.data import DataLoader

    from effsearch.config import TrainConfig
    from effsearch.trainer.parallel.distributed import Context

log = logging.getLogger("effsearch.selection")

# strategy -> (CORDS family, CORDS selection_type)
VARIANTS = {
    "random": ("random", None),
    "random-online": ("random", None),
    "glister": ("glister", "Supervised"),
    "glister-pb": ("glister", "PerBatch"),
    "glister-pc": ("glister", "PerClass"),
    "craig": ("craig", "Supervised"),
    "craig-pb": ("craig", "PerBatch"),
    "craig-pc": ("craig", "PerClass"),
    "gradmatch": ("gradmatch", "PerClassPerGradient"),
    "gradmatch-pb": ("gradmatch", "PerBatch"),
    "gradmatch-pc": ("gradmatch", "PerClass"),
}
# CORDS's defaults per family (configs/SL/config_*_cifar10.py): gradients of the
# last layer's weights too (GradMatch) or of its bias/logits only (GLISTER, CRAIG).
LINEAR_LAYER = {"glister": False, "craig": False, "gradmatch": True}
# CRAIG "Supervised" builds dense N x N float32 and int64 arrays (about 32 bytes per pair).
CRAIG_SUPERVISED_MAX_N = 10_000


class SelectionError(RuntimeError):
    """A CORDS strategy failed; the message names the strategy and the epoch."""


# -- the loader side ------------------------------------------------------------


class NormalizedImages(torch.utils.data.Dataset):
    """What CORDS iterates: normalised float images and labels, one item at a time
    (its per-class loaders collate items with PyTorch's default collate)."""

    def __init__(self, x: torch.Tensor | DiskImages, y: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> None:
        self.x, self.y = x, y
        self.mean, self.std = mean.view(-1, 1, 1), std.view(-1, 1, 1)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return (self.x[i].float().div_(255.0) - self.mean) / self.std, self.y[i]

    def __getitems__(self, idx: list[int] | torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        # One gather and one normalisation per batch; still a list of items for the default collate.
        idx = torch.as_tensor(idx, dtype=torch.long)
        x = (self.x[idx].float().div_(255.0) - self.mean) / self.std
        return list(zip(x.unbind(0), self.y[idx].unbind(0)))


class TokenRows(torch.utils.data.Dataset):
    """What CORDS iterates of a text dataset: token rows (whole: the model masks the padding) and labels."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], self.y[i]

    def __getitems__(self, idx: list[int] | torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        idx = torch.as_tensor(idx, dtype=torch.long)
        return list(zip(self.x[idx].unbind(0), self.y[idx].unbind(0)))


class ModelView(torch.nn.Module):
    """The live training model as CORDS calls it: ``forward(x, last, freeze)``
    and ``get_embedding_dim()``. The built-in models have both; for any other model
    the embedding is the input of its final ``nn.Linear``, read by a forward hook,
    so a user's plain ``nn.Module`` needs no CORDS interface.

    Computes without autograd through the network; the logits come back as a
    leaf that requires grad, which is all CORDS differentiates (its gradients
    are closed-form in the last layer), so frozen layers (LayerFreezing) are
    fine. ``load_state_dict`` is a no-op: the view is the model itself, so the
    copy CORDS asks for would change nothing.
    """

    module: torch.nn.Module  # set with object.__setattr__ (not submodules)
    linear: torch.nn.Linear | None

    def __init__(self, module: torch.nn.Module, sample: torch.Tensor | None = None) -> None:
        """``sample``: a few inputs; the embedding's layer is then the ``nn.Linear`` a forward on them
        calls last (a model may register an unused or hidden one after its output layer)."""
        super().__init__()
        object.__setattr__(self, "module", module)  # not a submodule: no parameters of its own
        linear = None
        if not hasattr(module, "get_embedding_dim"):
            from effsearch.trainer.probe import called_last, final_linear

            linear = final_linear(module) if sample is None else called_last(module, sample)
            if linear is None:
                raise SelectionError(
                    "the model ends in no nn.Linear, whose input CORDS's model-based strategies "
                    "take as the embedding; use random, random-online or full"
                )
        object.__setattr__(self, "linear", linear)

    def forward(
        self, x: torch.Tensor, last: bool = False, freeze: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            if self.linear is None:
                out, emb = self.module(x, last=True, freeze=True)
            else:
                seen = []
                hook = self.linear.register_forward_hook(lambda _m, inputs, output: seen.append((inputs[0], output)))
                try:
                    out = self.module(x)
                finally:
                    hook.remove()
                emb = per_example(*seen[-1], out)
        out = out.float().detach().requires_grad_(True)
        return (out, emb.float()) if last else out

    def get_embedding_dim(self) -> int:
        return cast(Any, self.module).get_embedding_dim() if self.linear is None else self.linear.in_features

    def load_state_dict(self, *_args: Any, **_kwargs: Any) -> None:
        return None


def per_example(inputs: torch.Tensor, head: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """The final ``nn.Linear``'s input, one row per example, as the model's output ``out`` used it.

    A classifier whose head saw one row per example gives it as it is. A decoder classifier
    (transformers' GPT-2, Llama, Qwen ... ForSequenceClassification) runs its head on every position
    and keeps one per example, its last token's: that position is the one whose logits (``head``,
    the layer's output) are the model's; CORDS's last-layer gradients need its input alone (all
    positions flattened made a row of length x width, and gradmatch failed on the shapes). A head
    whose positions the model averages gets the mean position (a Linear of the mean is the mean of
    the Linear's)."""
    n = len(out)
    if inputs.dim() <= 2 or out.dim() != 2 or len(inputs) != n:
        return inputs.flatten(1)
    rows, logits = inputs.reshape(n, -1, inputs.shape[-1]), head.reshape(n, -1, head.shape[-1])
    if logits.shape[-1] != out.shape[-1]:
        return inputs.flatten(1)
    same = (logits == out[:, None, :]).all(-1)  # (examples, positions)
    if not bool(same.any(-1).all()):
        return rows.mean(1)
    last = same.shape[1] - 1 - same.flip(-1).to(torch.uint8).argmax(-1)  # the last position that matches
    return rows[torch.arange(n, device=rows.device), last]


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The network inside Composer's model (and DDP / torch.compile wrappers)."""
    from effsearch.trainer.composer.model import EffModel

    m: Any = model
    for _ in range(8):
        if hasattr(m, "get_embedding_dim"):
            return m
        if isinstance(m, EffModel):
            return m.module
        m = getattr(m, "_orig_mod", None) or getattr(m, "module", None)
        if m is None:
            break
    raise SelectionError(f"no network found inside {type(model).__name__} for CORDS")


# -- greedy methods ---------------------------------------------------------------


def _glister_fits_stochastic(calls: list[tuple[int, int]]) -> bool:
    """CORDS's stochastic greedy draws ``int(N/k * ln 100)`` of the remaining
    candidates each step; it fails ('Sample larger than population') when that
    exceeds the ``N - k + 1`` left at the last step."""
    return all(k == 0 or int(n / k * math.log(100)) <= n - k + 1 for n, k in calls)


def _greedy_calls(
    selection_type: str, n: int, budget: int, batch: int, labels: np.ndarray, classes: int
) -> list[tuple[int, int]]:
    if selection_type == "PerBatch":
        return [(math.ceil(n / batch), math.ceil(budget / batch))]
    if selection_type == "PerClass":
        counts = np.bincount(labels, minlength=classes)
        return [(int(c), math.ceil(budget * int(c) / n)) for c in counts]
    return [(n, budget)]


def resolve_greedy(cfg: TrainConfig, n: int, labels: np.ndarray, classes: int) -> str | None:
    """The CORDS greedy/optimizer argument for ``cfg.selection``; ConfigError if it cannot work here."""
    sel = cfg.selection
    family, selection_type = VARIANTS[sel.strategy]
    if family == "craig":
        return "lazy" if sel.greedy == "auto" else sel.greedy
    if family != "glister":
        return None
    assert selection_type is not None  # each glister variant names one
    budget = max(1, int(n * sel.fraction))
    calls = _greedy_calls(selection_type, n, budget, cfg.batch_size, labels, classes)
    fits = _glister_fits_stochastic(calls)
    if sel.greedy == "auto":
        return "Stochastic" if fits else "Naive"
    if sel.greedy == "stochastic" and not fits:
        what = {"PerBatch": "batches", "PerClass": "samples of a class"}.get(selection_type, "samples")
        raise ConfigError(
            "selection.greedy",
            f"'stochastic' cannot run {sel.strategy} on this data: CORDS's stochastic greedy samples "
            f"int(N/k*ln 100) candidates per step, more than remain among the {what} "
            f"(N, k per greedy call: {calls[:3]}{'...' if len(calls) > 3 else ''}), and would fail "
            "with 'Sample larger than population'. Use greedy 'naive' or 'auto', a larger dataset, "
            "or a smaller batch_size",
        )
    return {"naive": "Naive", "stochastic": "Stochastic"}[sel.greedy]


# -- the Composer algorithm ----------------------------------------------------------


class SubsetSelection(Algorithm):
    """Chooses the training subset at ``EPOCH_START`` (inside the train clock)."""

    batch_events = ()  # nothing per batch

    def __init__(
        self,
        cfg: TrainConfig,
        splits: Splits,
        device: str,
        dataset: Any,
        sampler: SubsetSampler,
        budget: int,
        greedy: str | None,
        dist: Context | None = None,
    ) -> None:
        self.cfg, self.device, self.budget, self.greedy = cfg, device, budget, greedy
        self.strategy_name = cfg.selection.strategy
        self.family, self.selection_type = VARIANTS[self.strategy_name]
        self.weighted = self.strategy_name in WEIGHTED_SELECTIONS
        self.dataset, self.sampler = dataset, sampler
        self.n = len(splits.train_y)
        self.splits = splits
        self.warm_epochs = int(cfg.selection.kappa * cfg.epochs)  # CORDS's select_after
        self.every = select_every(cfg)
        self.seconds = 0.0
        self.selections = 0  # times the subset was (re)chosen
        self.subset_size = self.n
        self.log: list[dict] = []  # one entry per epoch start that changed the data plan
        self._strategy: Any = None  # CORDS's strategy objects
        self._random: Any = None
        self._view: ModelView | None = None
        self.dist = dist  # data-parallel: rank 0 chooses, the others receive

    # Composer calls these
    def match(self, event: Event, state: State) -> bool:
        return event == Event.EPOCH_START

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        epoch = int(state.timestamp.epoch)
        kind = self._kind(epoch)
        if kind is None:
            return
        t0 = self._now()
        if kind == "warm-start":
            self.subset_size = self.n
            fingerprint = "full"
        else:
            fingerprint = self._choose(kind, state, epoch)
        took = self._now() - t0
        self.seconds += took
        self.log.append(
            {"epoch": epoch, "kind": kind, "subset_size": self.subset_size, "seconds": took, "fingerprint": fingerprint}
        )

    def point_extra(self) -> dict:
        return {"subset_size": int(self.subset_size), "selections": self.selections}

    # the plan
    def _kind(self, epoch: int) -> str | None:
        w = self.warm_epochs
        if epoch < w:
            return "warm-start" if epoch == 0 else None
        since = epoch - w
        if since == 0:
            if self.family == "random":
                return "random"
            return "strategy" if w > 0 else "random"  # CORDS: the untrained model's first subset is random
        if since % self.every == 0:
            if self.strategy_name == "random":
                return None
            return "random" if self.strategy_name == "random-online" else "strategy"
        return None

    def _now(self) -> float:
        if self.device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    def _round_seed(self) -> int:
        return self.cfg.seed * 100_003 + self.selections * 7919 + 17

    def _choose(self, kind: str, state: State, epoch: int) -> str:
        fork_devices = [torch.cuda.current_device()] if self.device == "cuda" else []
        try:
            with (
                cords_compat.seeded(self._round_seed()),
                torch.random.fork_rng(devices=fork_devices),
                warnings.catch_warnings(),
            ):
                warnings.simplefilter("ignore")  # pin_memory without an accelerator, sklearn/numba chatter
                dist = self.dist
                if dist is not None and dist.on and not dist.main:
                    idxs, gammas = broadcast_object(None, dist)  # the subset rank 0 chose
                else:
                    if kind == "random":
                        idxs, gammas = self._random_strategy().select(self.budget)
                    else:
                        idxs, gammas = self._run_strategy(state)
                    if dist is not None and dist.on:  # once per selection: every rank trains this subset
                        idxs = np.asarray([int(i) for i in idxs], dtype=np.int64)
                        broadcast_object((idxs, np.asarray(gammas, dtype=np.float32)), dist)
        except ConfigError:
            raise
        except Exception as e:  # noqa: BLE001 - CORDS raises many kinds: raised again, naming the strategy
            raise SelectionError(
                f"selection.strategy {self.strategy_name!r} (CORDS "
                f"{self.family}/{self.selection_type or 'random'}) failed at epoch {epoch}: "
                f"{type(e).__name__}: {e}"
            ) from e
        return self._install(idxs, gammas)

    def _install(self, idxs: Any, gammas: Any) -> str:
        idx = torch.as_tensor(np.asarray([int(i) for i in idxs], dtype=np.int64))
        w = torch.as_tensor(np.asarray(gammas, dtype=np.float32)).reshape(-1)
        if len(w) != len(idx):
            raise SelectionError(f"CORDS {self.strategy_name} returned {len(idx)} indices but {len(w)} weights")
        if len(idx) == 0:
            raise SelectionError(f"CORDS {self.strategy_name} selected no samples (budget {self.budget})")
        idx, inverse = torch.unique(idx, return_inverse=True)  # a repeated index keeps its summed weight
        weights = torch.zeros(len(idx)).index_add_(0, inverse, w)
        self.sampler.set_subset(idx)
        if self.weighted:
            self.dataset.weights.zero_()
            self.dataset.weights[idx] = weights
        self.subset_size = len(idx)
        self.selections += 1
        return hashlib.sha1(idx.numpy().tobytes()).hexdigest()[:16]

    # CORDS objects, built on first use
    def _cords_loaders(self) -> tuple[DataLoader, DataLoader]:
        s = self.splits
        bs = self.cfg.batch_size

        def items(x: Any, y: torch.Tensor) -> torch.utils.data.Dataset:
            return TokenRows(x, y) if s.tokens is not None else NormalizedImages(x, y, s.mean, s.std)

        # CORDS maps batch positions back to indices: in order.
        trn = torch.utils.data.DataLoader(items(s.train_x, s.train_y), batch_size=bs, shuffle=False)
        # GLISTER per-batch splits the validation gradients into len(val)//batch_size chunks: keep that >= 1.
        val = torch.utils.data.DataLoader(
            items(s.val_x, s.val_y), batch_size=max(1, min(bs, len(s.val_y))), shuffle=False
        )
        return trn, val

    def _random_strategy(self) -> Any:
        if self._random is None:
            trn, _ = self._cords_loaders()
            self._random = cords_compat.strategies().RandomStrategy(trn, online=True)
        return self._random

    def _run_strategy(self, state: State) -> Any:
        module = _unwrap(state.model)
        was_training = module.training
        module.eval()  # no BatchNorm statistics from selection passes; dropout off
        try:
            if self._strategy is None:
                self._view = ModelView(module, self._sample(module))
                self._strategy = self._build(self._view)
            object.__setattr__(self._view, "module", module)  # the same network unless a wrapper changed
            return self._strategy.select(self.budget, {})
        finally:
            module.train(was_training)

    def _sample(self, module: torch.nn.Module) -> torch.Tensor:
        """Two training inputs as CORDS passes them, on the model's device."""
        x = next(iter(self._cords_loaders()[0]))[0][:2]
        return x.to(next(module.parameters()).device)

    def _build(self, view: ModelView) -> Any:
        S = cords_compat.strategies()
        sel = self.cfg.selection
        trn, val = self._cords_loaders()
        loss = torch.nn.CrossEntropyLoss(reduction="none")
        classes = self.splits.num_classes
        linear = LINEAR_LAYER[self.family]
        if self.family == "glister":
            return S.GLISTERStrategy(
                trn, val, view, loss, sel.eta, self.device, classes, linear, self.selection_type, self.greedy, log
            )
        if self.family == "craig":
            return S.CRAIGStrategy(
                trn,
                val,
                view,
                loss,
                self.device,
                classes,
                linear,
                False,
                self.selection_type,
                log,
                optimizer=self.greedy,
            )
        return S.GradMatchStrategy(
            trn,
            val,
            view,
            loss,
            sel.eta,
            cords_compat.gradmatch_device(self.device),
            classes,
            linear,
            self.selection_type,
            log,
            valid=False,
            v1=True,
            lam=sel.lam,
            eps=sel.omp_eps,
        )


def broadcast_object(obj: Any, dist: Context) -> Any:
    from effsearch.trainer.parallel.distributed import broadcast_object as bcast

    return bcast(obj, dist)


@dataclass
class SelectionPlan:
    """What a training loader needs from ``cfg.selection`` before the algorithm exists: the
    sampler it draws from (the algorithm sets its subset) and, for weighted strategies, the
    per-sample weights it serves (the algorithm writes them in place)."""

    sampler: SubsetSampler
    weights: torch.Tensor | None
    budget: int
    greedy: str | None

    def selection(
        self, cfg: TrainConfig, splits: Splits, device: str, dataset: Any, dist: Context | None = None
    ) -> SubsetSelection:
        """The algorithm, for the loader built on this plan (``dataset``: whatever holds its
        ``weights``)."""
        return SubsetSelection(cfg, splits, device, dataset, self.sampler, self.budget, self.greedy, dist=dist)


def plan_selection(cfg: TrainConfig, splits: Splits) -> SelectionPlan:
    """Check ``cfg.selection`` against the data and make its sampler and weights."""
    sel = cfg.selection
    if sel.strategy not in VARIANTS:
        raise ConfigError("selection.strategy", f"must be one of {', '.join(VARIANTS)}; got {sel.strategy!r}")
    n = len(splits.train_y)
    if VARIANTS[sel.strategy] == ("craig", "Supervised") and n > CRAIG_SUPERVISED_MAX_N:
        raise ConfigError(
            "selection.strategy",
            f"'craig' (CORDS's Supervised CRAIG) builds dense {n}x{n} matrices (about "
            f"{32 * n * n / 2**30:.1f} GiB) for {n} training images; it is allowed up to "
            f"{CRAIG_SUPERVISED_MAX_N}. Use craig-pc or craig-pb",
        )
    cords_compat.strategies()  # import cords (and numba, apricot) now: setup time, not train time
    labels = splits.train_y.numpy()
    greedy = resolve_greedy(cfg, n, labels, splits.num_classes)
    family, selection_type = VARIANTS[sel.strategy]
    if family == "craig":
        cords_compat.precompile_craig(greedy, sparse=selection_type == "Supervised")
    budget = max(1, int(n * sel.fraction))
    per_epoch = math.ceil(budget / cfg.batch_size) * cfg.batch_size
    sampler = SubsetSampler(n, per_epoch, cfg.seed)
    weights = torch.ones(n) if sel.strategy in WEIGHTED_SELECTIONS else None
    return SelectionPlan(sampler, weights, budget, greedy)


def make_selection(
    cfg: TrainConfig, splits: Splits, device: str, dist: Context | None = None
) -> tuple[DataLoader, SubsetSelection]:
    """A torch DataLoader fed by ``cfg.selection`` and the algorithm that chooses its subsets."""
    plan = plan_selection(cfg, splits)
    loader = make_loader(splits.train_x, splits.train_y, cfg.batch_size, shuffle=False, sampler=plan.sampler)
    cast(TensorImages, loader.dataset).weights = plan.weights
    return loader, plan.selection(cfg, splits, device, loader.dataset, dist)
