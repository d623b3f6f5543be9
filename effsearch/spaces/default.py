"""The default search space: every dimension effsearch knows, in sampling order.

Order matters: a dimension's condition looks at the config built so far, so
parents come before children, and the system and optimizer choices come before
the algorithms whose compatibility depends on them. The compatibility rules are
``effsearch.config.rules``, the very list ``TrainConfig.from_dict`` enforces: a
switch is gated on its rules (``gated``), so an invalid combination is never
sampled (a test samples thousands of trials to hold that). The algorithms' switches and
parameters come last, from ``effsearch.spaces.algorithm_dims``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from effsearch.config import COMPILE_MODES, COMPRESSIONS, MODEL_SELECTIONS, MODEL_WIDTHS, TrainConfig, readers
from effsearch.config.choices import GRANULARITIES, LOADERS, NO_FEEDBACK, OPTIMIZERS, SCHEDULES, SPARSITY_SCHEDULES
from effsearch.config.fields import get_path, set_path
from effsearch.config.machine import Machine
from effsearch.config.readers import compression_method, kfac, parallel
from effsearch.config.sources import facts
from effsearch.spaces.algorithm_dims import algorithm_dims, fit_swa_start, model_refuses
from effsearch.spaces.dims import Dim, gated, optimizer_switch
from effsearch.spaces.lm_dims import language_model, leave_out
from effsearch.spaces.text_dims import TEXT_ONLY, text_dims

# What an image run's system dimensions do to images, for a text run's `space show --all`.
IMAGE_ONLY = {
    "channels_last": "lays images out NHWC; the run is on text (token ids)",
    "loader": "FFCV's loader serves images; a text run uses torch's",
}

GROUPS = ("system", "distributed", "budget", "model", "optimizer", "schedule", "data", "sparsity", "algorithms")
# Searched unless a study's space.include says otherwise; distributed starts processes per
# trial (seconds of start-up each), so a study asks for it by name.
DEFAULT_GROUPS = tuple(g for g in GROUPS if g != "distributed")

# Strategies offered by default: the per-batch CORDS variants are the affordable ones.
STRATEGIES = ("full", "random", "random-online", "glister-pb", "craig-pb", "gradmatch-pb")
ADAPTIVE_OFF = ("full", "random")  # no periodic re-selection: select_every/kappa do not apply


def _batch_setter(cfg: dict, value: int) -> None:
    # The lr dimensions mean "lr at batch 128": searching the batch size scales lr linearly.
    cfg["batch_size"] = value
    set_path(cfg, "optimizer.scale_lr_with_batch", True)


def _sparsity_setter(base_target: float) -> Callable[[dict, bool], None]:
    def setter(cfg: dict, on: bool) -> None:
        current = readers.value(cfg, "sparsity.target")
        set_path(cfg, "sparsity.target", (current or base_target or 0.5) if on else 0.0)

    return setter


def _selection_setter(cfg: dict, strategy: str) -> None:
    set_path(cfg, "selection.strategy", strategy)
    if strategy == "full":  # validation: a fraction only applies with a strategy
        set_path(cfg, "selection.fraction", 1.0)


def _select_every_setter(cfg: dict, every: int) -> None:
    # Without a warm start (int(kappa * epochs) == 0) a model-based strategy must get to
    # select before training ends (config's rule): hold select_every below the budget.
    epochs = float(cfg["epochs"])
    model_based = get_path(cfg, "selection.strategy") in MODEL_SELECTIONS
    if model_based and int(readers.value(cfg, "selection.kappa") * epochs) == 0:
        every = max(1, min(every, math.ceil(epochs) - 1))
    set_path(cfg, "selection.select_every", every)


def batch_sizes(base: int) -> tuple:
    """Powers of two from a quarter of the base batch up to 2048 (and at least twice the base):
    the fast GPU recipes train with large batches and the lr scaled to them."""
    out, b = [], 8
    while b <= max(2048, 2 * base):
        if b >= base // 4 and (b <= 2048 or b <= 2 * base):
            out.append(b)
        b *= 2
    return tuple(sorted(set(out) | {base}))


def widths(base: TrainConfig) -> tuple:
    """Half, the base and double the base width; a model not built in has no default width to scale
    (its own size is in its name or model.kwargs), so only the base's value. The text encoder's:
    those its heads divide (config's rule)."""
    w = base.model.width or MODEL_WIDTHS.get(base.model.name, 0)
    if not w:
        return (base.model.width,)
    found = {max(4, w // 2), w, 2 * w}
    if base.model.name == "text-encoder":
        heads = readers.encoder_heads(base.to_dict())
        found = {x for x in found if x % heads == 0}
    return tuple(sorted(found))


def _sgd_family(cfg: dict) -> bool:
    return get_path(cfg, "optimizer.name") in ("sgd", "sgdw", "kfac-sgd")


def _processes_setter(cfg: dict, n: int) -> None:
    set_path(cfg, "distributed.processes", n)
    if n == 1:  # compression only applies between processes (config's rule)
        set_path(cfg, "distributed.compression.method", "none")
        set_path(cfg, "distributed.compression.error_feedback", False)


def _method_setter(cfg: dict, method: str) -> None:
    set_path(cfg, "distributed.compression.method", method)
    if method in NO_FEEDBACK:
        set_path(cfg, "distributed.compression.error_feedback", False)
    if method == "powersgd":
        set_path(cfg, "distributed.compression.granularity", "layerwise")


def process_counts(machine: Machine) -> tuple:
    cap, out, n = machine.max_processes(), [1], 2
    while n <= cap:
        out.append(n)
        n *= 2
    return tuple(out)


def _kfac_on_the_cpu(by_name: dict[str, Dim], base: TrainConfig, machine: Machine) -> None:
    """K-FAC where its largest factor takes the CPU too long to decompose (config's rule), at every
    width searched: unavailable with the reason, and a study's range on it refused."""
    if machine.device == "cuda" or by_name["optimizer.kfac"].extra.get("unavailable"):
        return
    on = {**base.to_dict(), "device": "cpu"}
    on["optimizer"] = {**on["optimizer"], "name": "kfac-sgd"}
    why = model_refuses("optimizer.kfac", on, widths(base), also=("device",))
    if why:
        for name in ("optimizer.kfac", "optimizer.kfac_damping", "optimizer.kfac_update_every"):
            by_name[name].extra.update(unavailable=why, model_bound=True)


def _by_modality(by_name: dict[str, Dim], base: TrainConfig) -> None:
    """The image dimensions unavailable to a text run, and the text dimensions to an image run (or a
    text model not built in: the encoder's own fields), each with the reason."""
    if readers.text_run(base.to_dict()):
        for name, why in IMAGE_ONLY.items():
            by_name[name].extra.update(unavailable=why, model_bound=True)
        if base.model.name != "text-encoder":
            for name in TEXT_ONLY[1:]:
                why = f"the built-in text-encoder's; {base.model.name!r} sizes itself"
                by_name[name].extra.update(unavailable=why, model_bound=True)
        return
    for name in TEXT_ONLY:
        by_name[name].extra.update(unavailable="text only (the run is on images)", model_bound=True)


_PLAIN_STRATEGIES = tuple(x for x in STRATEGIES if x not in MODEL_SELECTIONS)


def _strategies_dropped(epochs: float, no_embedding: bool) -> str:
    """Why the default choices of selection.strategy leave the model-based ones out ("": they don't),
    for `space show`; a study's own choices are checked against the model's rules instead."""
    if not no_embedding and epochs >= 2:
        return ""
    left = ", ".join(x for x in STRATEGIES if x in MODEL_SELECTIONS)
    why = "the model ends in no nn.Linear to take embeddings from" if no_embedding else "the base trains under 2 epochs"
    return f"{left} left out: {why}"


def catalogue(base: TrainConfig, machine: Machine) -> list[Dim]:
    """All dimensions, in sampling order; unavailable ones carry ``extra['unavailable']``
    (a reason, or a callable that returns one or None)."""
    e = float(base.epochs)
    bs = base.batch_size
    # A model known to end in no nn.Linear gives CORDS's model-based strategies no embedding.
    model_facts = facts(base.to_dict()["model"])
    no_embedding = model_facts is not None and not model_facts.final_linear
    dropped = _strategies_dropped(e, no_embedding)  # the model-based strategies left out, and why
    precisions = machine.precisions()

    def precision_check(v: Any) -> str | None:
        if v not in precisions:
            return f"this machine ({machine.describe()}) runs {', '.join(precisions)}"
        return None

    dims = [
        # -- system: only what this device and install can do ---------------------
        Dim(
            "precision",
            "system",
            "cat",
            choices=precisions,
            machine_check=precision_check,
            help="numeric precision (AMP needs CUDA)",
        ),
        Dim("channels_last", "system", "cat", choices=(False, True), help="NHWC memory format"),
        Dim(
            "compile",
            "system",
            "cat",
            choices=(False, True),
            help="torch.compile the model (compile time counts as train time)",
        ),
        Dim(
            "cudnn_benchmark", "system", "cat", choices=(False, True), help="cuDNN times its kernels for each new shape"
        ),
        Dim(
            "compile_mode",
            "system",
            "cat",
            choices=COMPILE_MODES,
            when=lambda cfg: bool(cfg.get("compile")),
            when_text="compile on",
            parents=("compile",),
            help="torch.compile's mode",
        ),
        Dim(
            "loader",
            "system",
            "cat",
            choices=LOADERS,
            machine_check=lambda v: None if v == "torch" or machine.has_ffcv() else "`import ffcv` fails here",
            help="data loader",
        ),
        # -- distributed: data-parallel processes and compressed gradients (opt-in group) ---------
        Dim(
            "distributed.processes",
            "distributed",
            "cat",
            choices=process_counts(machine),
            **gated("distributed.processes"),
            off=1,
            setter=_processes_setter,
            extra={"field": "distributed.processes"},
            help="data-parallel processes (DDP), at most one per core or GPU",
        ),
        Dim(
            "distributed.compression.method",
            "distributed",
            "cat",
            choices=COMPRESSIONS,
            **gated("distributed.compression.method"),
            off="none",
            setter=_method_setter,
            extra={"field": "distributed.compression.method"},
            help="gradient compression (a DDP hook)",
        ),
        Dim(
            "distributed.compression.ratio",
            "distributed",
            "float",
            low=0.001,
            high=0.1,
            log=True,
            when=lambda cfg: parallel(cfg) and compression_method(cfg) in ("topk", "randomk"),
            when_text="topk or randomk",
            parents=("distributed.compression.method",),
            help="share of gradient entries sent",
        ),
        Dim(
            "distributed.compression.threshold",
            "distributed",
            "float",
            low=1e-4,
            high=1e-2,
            log=True,
            when=lambda cfg: parallel(cfg) and compression_method(cfg) == "threshold",
            when_text="threshold",
            parents=("distributed.compression.method",),
            help="entries with |g| above it are sent",
        ),
        Dim(
            "distributed.compression.qstates",
            "distributed",
            "cat",
            choices=(3, 15, 255),
            when=lambda cfg: parallel(cfg) and compression_method(cfg) == "qsgd",
            when_text="qsgd",
            parents=("distributed.compression.method",),
            help="QSGD levels (3, 4 and 9 bits an entry)",
        ),
        Dim(
            "distributed.compression.rank",
            "distributed",
            "int",
            low=1,
            high=4,
            when=lambda cfg: parallel(cfg) and compression_method(cfg) == "powersgd",
            when_text="powersgd",
            parents=("distributed.compression.method",),
            help="PowerSGD rank",
        ),
        Dim(
            "distributed.compression.granularity",
            "distributed",
            "cat",
            choices=GRANULARITIES,
            when=lambda cfg: parallel(cfg) and compression_method(cfg) in ("topk", "randomk", "terngrad", "qsgd"),
            when_text="topk, randomk, terngrad or qsgd",
            parents=("distributed.compression.method",),
        ),
        Dim(
            "distributed.compression.error_feedback",
            "distributed",
            "cat",
            choices=(False, True),
            **gated("distributed.compression.error_feedback", also=parallel),
            help="add what compression dropped to the next gradient",
        ),
        # -- budget ------------------------------------------------------------
        # Fractional epochs: the fast recipes stop mid-epoch (airbench trains 9.9 epochs).
        # At least 2 when the base has 2: a model-based CORDS strategy must get to select.
        Dim(
            "epochs",
            "budget",
            "float",
            low=max(2.0, e / 4) if e >= 2 else e / 4,
            high=max(3.0, 1.5 * e) if e >= 2 else 1.5 * e,
            help="training budget in epochs (around the base budget; fractions allowed)",
        ),
        Dim(
            "batch_size",
            "budget",
            "cat",
            choices=batch_sizes(bs),
            setter=_batch_setter,
            extra={"field": "batch_size"},
            help="batch size; lr scales linearly with it (lr is the lr at batch 128)",
        ),
        # -- model ---------------------------------------------------------------
        Dim(
            "model.width",
            "model",
            "cat",
            choices=widths(base),
            # 0 is the model's default width: the baseline records the width it trains.
            getter=lambda cfg: get_path(cfg, "model.width") or MODEL_WIDTHS.get(get_path(cfg, "model.name"), 0),
            extra={"field": "model.width"},
            help="channels of the first layer (half, base and double the base width)",
        ),
        # -- optimizer ---------------------------------------------------------
        # K-FAC is offered as a switch on SGD (optimizer.kfac below), not as a name; Muon is not offered
        # here (a language model's optimizer: the image studies sample as they did).
        Dim(
            "optimizer.name", "optimizer", "cat", choices=tuple(o for o in OPTIMIZERS if o not in ("kfac-sgd", "muon"))
        ),
        # K-FAC as a switch on SGD, so that its rules (no compile, no fp16 scaling) gate it.
        Dim(
            "optimizer.kfac",
            "optimizer",
            "cat",
            choices=(False, True),
            **gated(
                "optimizer.kfac",
                also=lambda cfg: get_path(cfg, "optimizer.name") in ("sgd", "kfac-sgd"),
                also_text="optimizer sgd",
                also_parents=("optimizer.name",),
            ),
            off=False,
            setter=optimizer_switch("kfac-sgd", "sgd"),
            getter=kfac,
            extra={"field": "optimizer.name"},
            help="precondition SGD with K-FAC (optimizer kfac-sgd)",
        ),
        Dim(
            "optimizer.kfac_damping",
            "optimizer",
            "float",
            low=1e-4,
            high=1e-1,
            log=True,
            when=kfac,
            when_text="optimizer.kfac on",
            parents=("optimizer.kfac",),
            help="K-FAC damping",
        ),
        Dim(
            "optimizer.kfac_update_every",
            "optimizer",
            "int",
            low=1,
            high=50,
            log=True,
            when=kfac,
            when_text="optimizer.kfac on",
            parents=("optimizer.kfac",),
            help="steps between factor updates",
        ),
        Dim(
            "optimizer.fused",
            "optimizer",
            "cat",
            choices=(False, True),
            **gated("optimizer.fused"),
            help="one fused kernel per optimizer step",
            # null (the default) means fused on CUDA, torch's default on the CPU
            getter=lambda cfg: (
                get_path(cfg, "optimizer.fused")
                if get_path(cfg, "optimizer.fused") is not None
                else machine.device == "cuda"
            ),
        ),
        Dim(
            "accumulate",
            "optimizer",
            "cat",
            choices=(1, 2, 4),
            extra={"field": "accumulate"},
            help="micro-batches per optimizer step (effective batch = batch_size x accumulate)",
        ),
        Dim(
            "optimizer.lr",
            "optimizer",
            "float",
            low=0.005,
            high=1.0,
            log=True,
            when=_sgd_family,
            when_text="optimizer sgd or sgdw",
            parents=("optimizer.name",),
            help="peak lr (SGD family)",
        ),
        Dim(
            "optimizer.lr@adamw",
            "optimizer",
            "float",
            low=1e-4,
            high=1e-2,
            log=True,
            path="optimizer.lr",
            when=lambda cfg: get_path(cfg, "optimizer.name") == "adamw",
            when_text="optimizer adamw",
            parents=("optimizer.name",),
            help="peak lr (AdamW)",
        ),
        Dim("optimizer.momentum", "optimizer", "float", low=0.8, high=0.99, help="momentum (AdamW: beta1)"),
        Dim(
            "optimizer.nesterov",
            "optimizer",
            "cat",
            choices=(False, True),
            when=_sgd_family,
            when_text="optimizer sgd or sgdw",
            parents=("optimizer.name",),
            help="Nesterov momentum",
        ),
        Dim("optimizer.weight_decay", "optimizer", "float", low=1e-6, high=1e-2, log=True),
        # -- schedule ----------------------------------------------------------
        # wsd is a language model's shape, not offered here: the image studies sample as they did.
        Dim("schedule.name", "schedule", "cat", choices=tuple(s for s in SCHEDULES if s != "wsd")),
        Dim(
            "schedule.warmup_fraction",
            "schedule",
            "float",
            low=0.0,
            high=0.3,
            help="warmup share (onecycle: where the peak is; 0 means 0.25)",
        ),
        Dim(
            "schedule.final_lr_fraction",
            "schedule",
            "float",
            low=0.0,
            high=0.2,
            when=lambda cfg: get_path(cfg, "schedule.name") in ("cosine", "linear", "onecycle"),
            when_text="schedule cosine, linear or onecycle",
            parents=("schedule.name",),
        ),
        Dim(
            "schedule.gamma",
            "schedule",
            "float",
            low=0.05,
            high=0.5,
            log=True,
            when=lambda cfg: get_path(cfg, "schedule.name") == "multistep",
            when_text="schedule multistep",
            parents=("schedule.name",),
        ),
        # -- data: CORDS subsets -----------------------------------------------
        Dim(
            "selection.strategy",
            "data",
            "cat",
            choices=_PLAIN_STRATEGIES if dropped else STRATEGIES,
            **gated("selection.strategy"),
            off="full",
            setter=_selection_setter,
            extra={"field": "selection.strategy", "dropped": dropped},
            help="CORDS data subset selection",
        ),
        Dim(
            "selection.fraction",
            "data",
            "float",
            low=0.1,
            high=0.9,
            **gated("selection.fraction"),
            help="share of the training set per epoch",
        ),
        Dim(
            "selection.kappa",
            "data",
            "float",
            low=0.0,
            high=0.5,
            when=lambda cfg: get_path(cfg, "selection.strategy") not in ADAPTIVE_OFF,
            when_text="adaptive selection",
            parents=("selection.strategy",),
            help="share of training on full data first",
        ),
        Dim(
            "selection.select_every",
            "data",
            "int",
            low=1,
            high=max(2, min(10, math.ceil(e / 2))),
            when=lambda cfg: get_path(cfg, "selection.strategy") not in ADAPTIVE_OFF,
            when_text="adaptive selection",
            parents=("selection.strategy",),
            setter=_select_every_setter,
            extra={"field": "selection.select_every"},
            help="epochs between selections (held below the budget without a warm start)",
        ),
        # -- sparsity ----------------------------------------------------------
        Dim(
            "sparsity",
            "sparsity",
            "cat",
            choices=(False, True),
            setter=_sparsity_setter(base.sparsity.target),
            getter=lambda cfg: readers.value(cfg, "sparsity.target") > 0,
            help="gradual magnitude pruning",
        ),
        Dim(
            "sparsity.target",
            "sparsity",
            "float",
            low=0.3,
            high=0.9,
            when=lambda cfg: readers.value(cfg, "sparsity.target") > 0,
            when_text="sparsity on",
            parents=("sparsity",),
        ),
        Dim(
            "sparsity.schedule",
            "sparsity",
            "cat",
            choices=SPARSITY_SCHEDULES,
            when=lambda cfg: readers.value(cfg, "sparsity.target") > 0,
            when_text="sparsity on",
            parents=("sparsity",),
        ),
    ]
    dims[dims.index(next(d for d in dims if d.name == "model.width")) + 1 : 0] = text_dims(base)
    dims += algorithm_dims(base.to_dict(), widths(base))
    lm = readers.lm_run(base.to_dict())
    if lm:
        dims = language_model(dims, base)
    by_name = {d.name: d for d in dims}
    model_facts = facts(base.to_dict()["model"])
    if model_facts is not None and model_facts.pretrained:
        # Fine-tuning moves trained weights a little: lrs a decade under training from scratch (BERT's
        # authors fine-tuned at 2e-5 to 5e-5); the scratch ranges' upper half undoes the checkpoint.
        for name, low, high in (("optimizer.lr@adamw", 1e-5, 1e-3), ("optimizer.lr", 5e-4, 0.1)):
            by_name[name].low, by_name[name].high = low, high
            by_name[name].help += ", fine-tuning a pretrained model"
    # A rule reads config fields; a dimension's parents are the dimensions that set them
    # (optimizer.name is set by optimizer.name and by the optimizer.kfac switch).
    setters: dict[str, list[str]] = {}
    for d in dims:
        setters.setdefault(d.extra.get("field", d.path), []).append(d.name)
    for d in dims:
        d.parents = tuple(
            dict.fromkeys(n for p in d.parents for n in ([p] if p in by_name else []) + setters.get(p, []))
        )
    fit_swa_start(by_name["algorithms.swa.swa_start"], base)
    if len(by_name["model.width"].choices) < 2:
        by_name["model.width"].extra["unavailable"] = (
            f"{base.model.name!r} takes its size from its name or "
            "model.kwargs (give model.width to a factory that takes it)"
        )
    if len(precisions) < 2:
        by_name["precision"].extra["unavailable"] = "AMP needs a CUDA device"
        by_name["algorithms.low_precision_layernorm"].extra["unavailable"] = (
            "acts under mixed precision only, and AMP needs a CUDA device"
        )
    if machine.device != "cuda":
        by_name["cudnn_benchmark"].extra["unavailable"] = "cuDNN runs on CUDA only"
        # torch 2.7 runs fused SGD/AdamW on the CPU, but 9-17x slower a step than its default
        # (docs/benchmarks.md): settable, not worth searching.
        by_name["optimizer.fused"].extra["unavailable"] = (
            "fused steps are slower on the CPU (measured on torch 2.7: docs/benchmarks.md)"
        )
    else:
        # A worker caches cuDNN's choice per shape: its first trial of a shape pays 1-6 s of timing
        # (H100), later ones nothing, so searching it times trials unlike each other. A range opts in.
        by_name["cudnn_benchmark"].extra["unavailable"] = "not timed alike across a worker's trials; give a range"
    if machine.max_processes() < 2:
        for d in dims:
            if d.group == "distributed":
                d.extra["unavailable"] = f"one {'GPU' if machine.device == 'cuda' else 'core'} here"
    if not machine.compile:
        by_name["compile"].extra["unavailable"] = "offered on CUDA with triton only"
        by_name["compile_mode"].extra["unavailable"] = "offered on CUDA with triton only"
    # Asked lazily (a callable): importing ffcv takes seconds, so only when the loader is searched.
    by_name["loader"].extra["unavailable"] = lambda: (
        None if machine.has_ffcv() else "`import ffcv` fails here (only torch)"
    )
    if not machine.selection:
        for name in ("selection.strategy", "selection.fraction", "selection.select_every", "selection.kappa"):
            by_name[name].extra["unavailable"] = "CORDS selection (effsearch.trainer.data.selection) is not installed"
    _by_modality(by_name, base)
    _kfac_on_the_cpu(by_name, base, machine)
    if lm:
        leave_out(by_name, base)
    return dims
