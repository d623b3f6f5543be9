"""Every rule across TrainConfig fields, as data: one list that validation, the search
space's conditional gating and ``effsearch space show`` all read.

A :class:`Rule` is about a *subject*, something a config can switch on (an algorithm,
K-FAC, data-parallel processes, a field's value): ``on`` says whether the subject is on,
``forbids`` whether the rest of the config rules it out. Validation refuses a config where
both hold, with ``message`` about ``field``. The space asks :func:`blockers` before it
switches a subject on, makes the fields in ``reads`` the parents of that switch, and shows
each rule's ``when`` (what the subject needs). So an invalid combination is never sampled,
and a rule changed here changes validation and the space together.

Predicates read raw config dicts (``TrainConfig.to_dict()``, or the dict the space builds
while sampling), where a level may still be missing: they read through ``value``, with the
schema's defaults (``DEFAULTS``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from effsearch.config.algorithms import ALGORITHMS, CONFLICTS, RESHAPES_BATCHES, UNSHARDED, check_algorithms, parse_time
from effsearch.config.choices import (
    FUSABLE,
    GREEDY,
    MODEL_SELECTIONS,
    NO_FEEDBACK,
    QUANTIZERS,
    SELECTIONS,
    SPARSIFIERS,
    WEIGHTED_SELECTIONS,
)
from effsearch.config.fields import ConfigError, get_path, quote
from effsearch.config.sources import FILE_DATASETS, ModelFacts, dataset_kind, facts, model_kind

if TYPE_CHECKING:
    from effsearch.config.schema import TrainConfig

Pred = Callable[[dict], bool]


@dataclass(frozen=True)
class Rule:
    subject: str  # what the rule keeps off: a space dimension's name where the space gates it
    field: str  # the dotted field the error names
    on: Pred  # the subject is on in this config
    forbids: Pred  # the rest of the config rules the subject out
    message: str | Callable[[dict], str]  # the error (today's wording)
    when: str  # what the subject needs, for `space show`: "compile off"
    reads: tuple[str, ...] = ()  # the fields ``forbids`` reads (the space's parents of the subject)

    def broken(self, cfg: dict) -> bool:
        return self.on(cfg) and self.forbids(cfg)

    def error(self, cfg: dict) -> ConfigError:
        text = self.message(cfg) if callable(self.message) else self.message
        return ConfigError(self.field, text)


# -- readers over raw dicts, with the schema's defaults -------------------------------

# The schema's default of every field a predicate (or the space) reads, for a raw dict that lacks
# it: a level the space has not built yet. config/schema.py declares them; this module cannot
# import it (the schema imports the rules to validate), so tests/test_rules.py holds this table
# equal to the schema's, and holds that no reader here or in the space types a default of its own.
DEFAULTS: dict[str, Any] = {
    "dataset.name": "digits",
    "dataset.path": None,
    "model.name": "tiny-cnn",
    "model.width": 0,
    "epochs": 5,
    "optimizer.name": "sgd",
    "optimizer.fused": None,
    "schedule.name": "cosine",
    "schedule.milestones": [0.5, 0.75],
    "sparsity.target": 0.0,
    "sparsity.schedule": "polynomial",
    "sparsity.start": 0.1,
    "sparsity.end": 0.75,
    "selection.strategy": "full",
    "selection.fraction": 1.0,
    "selection.select_every": None,
    "selection.kappa": 0.0,
    "selection.greedy": "auto",
    "loader": "torch",
    "precision": "fp32",
    "compile": False,
    "device": "auto",
    "distributed.processes": 1,
    "distributed.backend": "auto",
    "distributed.compression.method": "none",
    "distributed.compression.granularity": "layerwise",
    "distributed.compression.error_feedback": False,
}


def value(cfg: dict, path: str) -> Any:
    """``path``'s value in the raw dict ``cfg``, else the schema's default (``DEFAULTS``)."""
    return get_path(cfg, path, DEFAULTS[path])


def _algos(cfg: dict) -> dict:
    return cfg.get("algorithms") or {}


# A predicate about one algorithm (or fact, or parameter) is ``partial(_has, "ema")``, not a
# lambda a factory makes at import: its code then runs when a rule is asked, where mutation
# testing (benchmarks/mutation.sh) can switch a mutant of it on.
def _has(algo: str, cfg: dict) -> bool:
    return algo in _algos(cfg)


def _optimizer(cfg: dict) -> str:
    return value(cfg, "optimizer.name")


def _loader(cfg: dict) -> str:
    return value(cfg, "loader")


def _precision(cfg: dict) -> str:
    return value(cfg, "precision")


def _strategy(cfg: dict) -> str:
    return value(cfg, "selection.strategy")


def compression_method(cfg: dict) -> str:
    """``distributed.compression.method`` (the rules' and the space's one reader of it)."""
    return value(cfg, "distributed.compression.method")


def _processes(cfg: dict) -> int:
    return value(cfg, "distributed.processes") or 1


def parallel(cfg: dict) -> bool:
    """More than one data-parallel process (the rules' and the space's one test of it)."""
    return _processes(cfg) > 1


def kfac(cfg: dict) -> bool:
    """The optimizer is K-FAC (the rules' and the space's one test of it)."""
    return _optimizer(cfg) == "kfac-sgd"


def _never_selects(cfg: dict) -> bool:
    epochs = float(value(cfg, "epochs"))
    every = value(cfg, "selection.select_every")  # null: resolved below the epochs (select_every())
    return every is not None and int(value(cfg, "selection.kappa") * epochs) == 0 and every >= math.ceil(epochs)


def _greedy_wrong(cfg: dict) -> bool:
    greedy = value(cfg, "selection.greedy")
    return greedy != "auto" and greedy not in GREEDY.get(_strategy(cfg).split("-")[0], ())


def _facts(cfg: dict) -> ModelFacts | None:
    return facts(cfg.get("model") or {})


def _lacks(fact: str, cfg: dict) -> bool:
    """The model is known (built-in, or probed) to lack ``fact``; an unprobed model waits for its probe."""
    return _facts(cfg) is not None and not getattr(_facts(cfg), fact)


def _model_name(cfg: dict) -> str:
    return value(cfg, "model.name")


def _dataset_name(cfg: dict) -> str:
    return value(cfg, "dataset.name")


def _param(algo: str, key: str, cfg: dict) -> Any:
    """An algorithm's parameter as the config gives it, else its default."""
    return (_algos(cfg).get(algo) or {}).get(key, ALGORITHMS[algo].params[key])


def _unit(algo: str, key: str, cfg: dict) -> str | None:
    return (parse_time(_param(algo, key, cfg)) or (None, None))[1] if isinstance(_param(algo, key, cfg), str) else None


def _time(algo: str, key: str, cfg: dict) -> float | None:
    return (parse_time(_param(algo, key, cfg)) or (None, None))[0] if isinstance(_param(algo, key, cfg), str) else None


_half_life, _smoothing, _ema_every = (
    partial(_param, "ema", "half_life"),
    partial(_param, "ema", "smoothing"),
    partial(_param, "ema", "update_interval"),
)
_swa_start, _swa_end = partial(_param, "swa", "swa_start"), partial(_param, "swa", "swa_end")


def _swa_not_after(cfg: dict) -> bool:
    """swa_end not after swa_start, in one unit (the unit rule speaks for two)."""
    unit = _unit("swa", "swa_start", cfg)
    # Both times are set where the unit is: parse_time gave both.
    return (
        unit is not None
        and unit == _unit("swa", "swa_end", cfg)
        and cast(float, _time("swa", "swa_end", cfg)) <= cast(float, _time("swa", "swa_start", cfg))
    )


# What each structure an algorithm needs is, for the messages (the field of ModelFacts).
STRUCTURE = {
    "bottleneck": "bottleneck blocks (torchvision's Bottleneck)",
    "batchnorm": "batch norm layers",
    "downsamples": "strided convolutions or max-pools",
}


def _lacks_message(fact: str, cfg: dict) -> str:
    return f"needs a model with {STRUCTURE[fact]}; model.name {quote(_model_name(cfg))} has none"


def _bad_milestones(cfg: dict) -> bool:
    ms = value(cfg, "schedule.milestones")
    return not ms or not all(isinstance(m, (int, float)) and 0 < m < 1 for m in ms)


# -- the rules, in the order validation reports them -----------------------------------------

_UNWEIGHTED = ", ".join(s for s in ("random", "random-online", "glister", "glister-pb", "glister-pc"))

RULES: list[Rule] = [
    Rule(
        "dataset.path",
        "dataset.path",
        on=lambda c: dataset_kind(_dataset_name(c)) in FILE_DATASETS,
        forbids=lambda c: not value(c, "dataset.path"),
        message=lambda c: (
            f"dataset.name {quote(_dataset_name(c))} reads its data from dataset.path; set it (a folder "
            "of class folders for imagefolder, a .npz file, or a folder written by datasets' "
            "save_to_disk for hf)"
        ),
        when="a dataset read from a path",
        reads=("dataset.name",),
    ),
    Rule(
        "dataset.path",
        "dataset.path",
        on=lambda c: bool(value(c, "dataset.path")),
        forbids=lambda c: dataset_kind(_dataset_name(c)) not in FILE_DATASETS,
        message=lambda c: (
            f"only applies to dataset.name {', '.join(FILE_DATASETS)}; dataset.name is {quote(_dataset_name(c))}"
        ),
        when="dataset imagefolder, npz or hf",
        reads=("dataset.name",),
    ),
    Rule(
        "model.width",
        "model.width",
        on=lambda c: bool(value(c, "model.width")),
        forbids=lambda c: model_kind(_model_name(c)) in ("torchvision", "timm"),
        message=lambda c: (
            f"applies to the built-in models and to factories that take `width`; "
            f"{quote(_model_name(c))} takes its size from its name or model.kwargs"
        ),
        when="a built-in model or a factory",
        reads=("model.name",),
    ),
    Rule(
        "schedule.milestones",
        "schedule.milestones",
        on=lambda c: value(c, "schedule.name") == "multistep",
        forbids=_bad_milestones,
        message=lambda c: f"must be fractions in (0, 1); got {quote(value(c, 'schedule.milestones'))}",
        when="fractions in (0, 1)",
        reads=("schedule.milestones",),
    ),
    Rule(
        "sparsity.end",
        "sparsity.end",
        on=lambda c: value(c, "sparsity.target") > 0 and value(c, "sparsity.schedule") == "polynomial",
        forbids=lambda c: value(c, "sparsity.end") <= value(c, "sparsity.start"),
        message=lambda c: (
            f"must be after sparsity.start ({value(c, 'sparsity.start')}); got {value(c, 'sparsity.end')}"
        ),
        when="sparsity.end after sparsity.start",
        reads=("sparsity.start", "sparsity.end"),
    ),
    Rule(
        "selection.fraction",
        "selection.fraction",
        on=lambda c: value(c, "selection.fraction") != 1.0,
        forbids=lambda c: _strategy(c) == "full",
        message="only applies with a selection strategy; set selection.strategy "
        f"(one of {', '.join(SELECTIONS[1:])}) or fraction to 1.0",
        when="selection on",
        reads=("selection.strategy",),
    ),
    # The loader is no rule of selection: the FFCV loader serves every strategy's subsets and
    # weights through one compiled pipeline (effsearch.trainer.ffcv_loader).
    Rule(
        "selection.greedy",
        "selection.greedy",
        on=lambda c: _strategy(c) != "full",
        forbids=_greedy_wrong,
        message=lambda c: (
            f"{quote(value(c, 'selection.greedy'))} does not apply to {quote(_strategy(c))} "
            "(greedy methods by strategy: "
            + "; ".join(f"{f}: {', '.join(g)}" for f, g in GREEDY.items())
            + "; others take 'auto')"
        ),
        when="a greedy method of the strategy",
        reads=("selection.strategy",),
    ),
    Rule(
        "selection.select_every",
        "selection.select_every",
        on=lambda c: _strategy(c) in MODEL_SELECTIONS,
        forbids=_never_selects,
        message=lambda c: (
            f"{quote(_strategy(c))} would never run: without a warm start (int(kappa * epochs) = 0) "
            "the first subset is random, as in CORDS, and the strategy first selects after "
            f"select_every = {value(c, 'selection.select_every')} epochs, but training lasts "
            f"{float(value(c, 'epochs')):g} epochs; lower selection.select_every or raise "
            "selection.kappa"
        ),
        when="select_every below the epochs, or a warm start",
        reads=("epochs", "selection.kappa", "selection.select_every"),
    ),
    Rule(
        "optimizer.fused",
        "optimizer.fused",
        on=lambda c: bool(value(c, "optimizer.fused")),
        forbids=lambda c: _optimizer(c) not in FUSABLE,
        message=lambda c: (
            f"{quote(_optimizer(c))} has no fused step (Composer's DecoupledSGDW); fused applies to "
            f"{', '.join(FUSABLE)}; set it to null or false"
        ),
        when="optimizer sgd, adamw or kfac",
        reads=("optimizer.name",),
    ),
    # K-FAC reads each layer's inputs and output gradients through module hooks.
    Rule(
        "optimizer.kfac",
        "optimizer.name",
        on=kfac,
        forbids=lambda c: bool(value(c, "compile")),
        message="'kfac-sgd' cannot run with compile: its module hooks come and go between steps and each "
        "change recompiles the model; set compile: false",
        when="compile off",
        reads=("compile",),
    ),
    Rule(
        "optimizer.kfac",
        "optimizer.name",
        on=kfac,
        forbids=lambda c: _precision(c) == "amp_fp16",
        message="'kfac-sgd' cannot run with precision amp_fp16: the loss scale would enter its Fisher factors; "
        "use fp32 or amp_bf16",
        when="precision not amp_fp16",
        reads=("precision",),
    ),
    # One algorithm's own parameters, as Composer's EMA and SWA check them when built (after
    # ~20 s of set-up). The space never sets the fields of these subjects (no dimension gates on
    # them), so they read nothing else: reads=().
    Rule(
        "algorithms.ema.smoothing",
        "algorithms.ema.smoothing",
        on=partial(_has, "ema"),
        forbids=lambda c: (_half_life(c) is None) == (_smoothing(c) is None),
        message=lambda c: (
            "give half_life or smoothing, not both (half_life defaults to '1000ba': set it to null to use smoothing)"
            if _smoothing(c) is not None
            else "give half_life or smoothing (both are null)"
        ),
        when="half_life or smoothing",
    ),
    Rule(
        "algorithms.ema.update_interval",
        "algorithms.ema.update_interval",
        on=partial(_has, "ema"),
        forbids=lambda c: _half_life(c) is None and _ema_every(c) is None,
        message="with smoothing and no half_life, Composer's EMA needs update_interval (e.g. '1ba')",
        when="given with smoothing",
    ),
    Rule(
        "algorithms.ema.update_interval",
        "algorithms.ema.update_interval",
        on=partial(_has, "ema"),
        forbids=lambda c: (
            None not in (_half_life(c), _ema_every(c))
            and _unit("ema", "half_life", c) != _unit("ema", "update_interval", c)
        ),
        message=lambda c: f"must be in the same unit as half_life ({quote(_half_life(c))}); got {quote(_ema_every(c))}",
        when="half_life's unit",
    ),
    Rule(
        "algorithms.swa.swa_end",
        "algorithms.swa.swa_end",
        on=partial(_has, "swa"),
        forbids=lambda c: _unit("swa", "swa_start", c) != _unit("swa", "swa_end", c),
        message=lambda c: f"must be in the same unit as swa_start ({quote(_swa_start(c))}); got {quote(_swa_end(c))}",
        when="swa_start's unit",
    ),
    Rule(
        "algorithms.swa.swa_end",
        "algorithms.swa.swa_end",
        on=partial(_has, "swa"),
        forbids=_swa_not_after,
        message=lambda c: f"must be after swa_start ({quote(_swa_start(c))}); got {quote(_swa_end(c))}",
        when="after swa_start",
    ),
    Rule(
        "algorithms.sam",
        "algorithms.sam",
        on=partial(_has, "sam"),
        forbids=kfac,
        message="cannot be combined with optimizer 'kfac-sgd' (SAM wraps the optimizer and runs two passes "
        "a step); pick one",
        when="optimizer not kfac-sgd",
        reads=("optimizer.name",),
    ),
    Rule(
        "distributed.compression.method",
        "distributed.compression.method",
        on=lambda c: compression_method(c) != "none",
        forbids=lambda c: not parallel(c),
        message=lambda c: (
            f"{quote(compression_method(c))} compresses what processes exchange; "
            "distributed.processes is 1 (raise it, or use method none)"
        ),
        when="processes > 1",
        reads=("distributed.processes",),
    ),
    Rule(
        "distributed.backend",
        "distributed.backend",
        on=lambda c: parallel(c) and value(c, "distributed.backend") == "nccl",
        forbids=lambda c: value(c, "device") == "cpu",
        message="'nccl' needs CUDA devices; device is 'cpu' (use gloo or auto)",
        when="device not cpu",
        reads=("device",),
    ),
    Rule(
        "distributed.processes",
        "loader",
        on=parallel,
        forbids=lambda c: _loader(c) != "torch",
        message=lambda c: (
            f"{quote(_loader(c))} is not sharded across processes; with distributed.processes > 1 use loader torch"
        ),
        when="loader torch",
        reads=("loader",),
    ),
    *[
        Rule(
            f"algorithms.{name}",
            f"algorithms.{name}",
            on=partial(_has, name),
            forbids=parallel,
            message="its per-image loader is not sharded across processes; with distributed.processes > 1 leave it out",
            when="one process",
            reads=("distributed.processes",),
        )
        for name, spec in ALGORITHMS.items()
        if spec.needs_torch_loader
    ],
    *[
        Rule(
            f"algorithms.{name}",
            f"algorithms.{name}",
            on=partial(_has, name),
            forbids=parallel,
            message="leaves parameters without gradients mid-training, which DDP's reducer cannot wait for; "
            "with distributed.processes > 1 leave it out",
            when="one process",
            reads=("distributed.processes",),
        )
        for name in UNSHARDED
    ],
    Rule(
        "distributed.compression.error_feedback",
        "distributed.compression.error_feedback",
        on=lambda c: parallel(c) and bool(value(c, "distributed.compression.error_feedback")),
        forbids=lambda c: compression_method(c) in NO_FEEDBACK,
        message=lambda c: (
            f"applies to {', '.join(SPARSIFIERS + QUANTIZERS + ('powersgd',))}; "
            f"method is {quote(compression_method(c))}"
        ),
        when="a lossy method but fp16/bf16",
        reads=("distributed.compression.method",),
    ),
    Rule(
        "distributed.compression.granularity",
        "distributed.compression.granularity",
        on=lambda c: parallel(c) and value(c, "distributed.compression.granularity") != "layerwise",
        forbids=lambda c: compression_method(c) == "powersgd",
        message="powersgd compresses each layer's gradient matrix; use layerwise",
        when="method not powersgd",
        reads=("distributed.compression.method",),
    ),
    # Structure an algorithm needs, read from the model's facts (built-ins written down, any other
    # model probed as built: effsearch.config.sources), so no trial meets a model it cannot change.
    *[
        Rule(
            f"algorithms.{name}",
            f"algorithms.{name}",
            on=partial(_has, name),
            forbids=partial(_lacks, spec.needs_structure),
            message=partial(_lacks_message, spec.needs_structure),
            when=f"a model with {STRUCTURE[spec.needs_structure]}",
            reads=("model.name", "model.kwargs"),
        )
        for name, spec in ALGORITHMS.items()
        if spec.needs_structure
    ],
    Rule(
        "selection.model_based",
        "selection.strategy",
        on=lambda c: _strategy(c) in MODEL_SELECTIONS,
        forbids=partial(_lacks, "final_linear"),
        message=lambda c: (
            f"{quote(_strategy(c))} takes its embeddings from the input of the model's final "
            f"nn.Linear; model.name {quote(_model_name(c))} does not end in one (use random, "
            "random-online or full)"
        ),
        when="a model ending in nn.Linear",
        reads=("model.name", "model.kwargs"),
    ),
    *[
        Rule(
            f"algorithms.{name}",
            f"algorithms.{name}",
            on=partial(_has, name),
            forbids=lambda c: _loader(c) != "torch",
            message=lambda c: f"works on the torch loader's per-image transforms only; loader is {quote(_loader(c))}",
            when="loader torch",
            reads=("loader",),
        )
        for name, spec in ALGORITHMS.items()
        if spec.needs_torch_loader
    ],
    # A pair that cannot both be on is a rule of each; validation names the later one (by name).
    *[
        Rule(
            f"algorithms.{b}",
            f"algorithms.{b}",
            on=partial(_has, b),
            forbids=partial(_has, a),
            message=f"cannot be combined with {a}: {why}",
            when=f"not {a}",
            reads=(f"algorithms.{a}",),
        )
        for pair, why in CONFLICTS.items()
        for a, b in [sorted(pair)]
    ],
    *[
        Rule(
            f"algorithms.{a}",
            f"algorithms.{b}",
            on=partial(_has, a),
            forbids=partial(_has, b),
            message=f"cannot be combined with {a}: {why}",
            when=f"not {b}",
            reads=(f"algorithms.{b}",),
        )
        for pair, why in CONFLICTS.items()
        for a, b in [sorted(pair)]
    ],
    # CORDS's weighted subsets (CRAIG, GradMatch): MixUp, CutMix and LabelSmoothing only change
    # inputs and targets, so each sample's loss keeps its weight (EffModel.loss also weights MixUp's
    # and CutMix's interpolate_loss term). SelectiveBackprop keeps a loss-ranked part of each batch
    # but drops the weights of that part: refused.
    Rule(
        "algorithms.selective_backprop",
        "algorithms.selective_backprop",
        on=partial(_has, "selective_backprop"),
        forbids=lambda c: _strategy(c) in WEIGHTED_SELECTIONS,
        message=lambda c: (
            f"cannot be combined with selection.strategy {quote(_strategy(c))}: SelectiveBackprop keeps "
            "a loss-ranked part of each batch but not the CORDS per-sample weights of that part, so "
            f"the weighted loss would be wrong; use an unweighted strategy ({_UNWEIGHTED}) or drop "
            "selective_backprop"
        ),
        when="unweighted selection",
        reads=("selection.strategy",),
    ),
    *[
        Rule(
            f"algorithms.{name}",
            f"algorithms.{name}",
            on=partial(_has, name),
            forbids=lambda c: bool(value(c, "compile")),
            message=f"cannot be combined with compile: {why}, and every new shape compiles the model again",
            when="compile off",
            reads=("compile",),
        )
        for name, why in RESHAPES_BATCHES.items()
    ],
    Rule(
        "algorithms.sam",
        "algorithms.sam",
        on=partial(_has, "sam"),
        forbids=lambda c: _precision(c) == "amp_fp16",
        message="Composer's SAM cannot run with precision amp_fp16 (use fp32 or amp_bf16)",
        when="precision != amp_fp16",
        reads=("precision",),
    ),
    # Precision x device. device: auto is resolved on the machine (effsearch.config.machine),
    # which runs this same rule on the resolved device.
    Rule(
        "precision",
        "precision",
        on=lambda c: _precision(c) != "fp32",
        forbids=lambda c: value(c, "device") == "cpu",
        message=lambda c: f"{quote(_precision(c))} needs a CUDA device; on CPU use fp32",
        when="a CUDA device",
        reads=("device",),
    ),
]


def check(cfg: dict, rules: list[Rule] | None = None) -> None:
    """Raise the first broken rule's ConfigError."""
    for rule in RULES if rules is None else rules:
        if rule.broken(cfg):
            raise rule.error(cfg)


def validate(cfg: TrainConfig) -> None:
    """Algorithm names and parameters, then every rule, on a TrainConfig."""
    check_algorithms(cfg.algorithms)
    check(cfg.to_dict())


def of(subject: str) -> list[Rule]:
    """The rules about ``subject`` (e.g. ``"algorithms.sam"``)."""
    return [r for r in RULES if r.subject == subject]


def blockers(subject: str, cfg: dict) -> list[Rule]:
    """The rules that keep ``subject`` off in ``cfg`` (empty: it can be switched on)."""
    return [r for r in of(subject) if r.forbids(cfg)]


def reads(subject: str) -> tuple[str, ...]:
    """The fields the rules about ``subject`` read, in order, once each."""
    return tuple(dict.fromkeys(f for r in of(subject) for f in r.reads))


def when_text(subject: str) -> str:
    """What ``subject`` needs, as ``space show`` says it."""
    return ", ".join(dict.fromkeys(r.when for r in of(subject)))
