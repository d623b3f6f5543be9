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
while sampling), where a level may still be missing: through the readers of
``effsearch.config.readers`` (``value``, with the schema's defaults).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from effsearch.config.algorithms import ALGORITHMS, CONFLICTS, RESHAPES_BATCHES, UNSHARDED, check_algorithms
from effsearch.config.choices import (
    FUSABLE,
    GREEDY,
    LM_ALGORITHMS,
    MIN_VOCAB,
    MODEL_SELECTIONS,
    MODELS,
    NO_FEEDBACK,
    POOLINGS,
    QUANTIZERS,
    SELECTIONS,
    SPARSIFIERS,
    WEIGHTED_SELECTIONS,
)
from effsearch.config.fields import ConfigError, quote
from effsearch.config.metrics import ACCURACY, METRICS
from effsearch.config.readers import (
    DEFAULTS,
    KFAC_CPU_FACTOR,
    bad_milestones,
    blur_idle,
    blur_min_channels,
    compression_method,
    conv_channels,
    dataset_name,
    ema_every,
    encoder_heads,
    encoder_width,
    gpt_kwargs,
    gpt_problem,
    greedy_wrong,
    half_life,
    has,
    kfac,
    kfac_factor,
    kfac_too_big,
    known,
    lacks,
    lm_data,
    lm_model,
    lm_run,
    loader,
    modality_clash,
    model_modality,
    model_name,
    never_selects,
    optimizer,
    parallel,
    positions,
    precision,
    sb_scale,
    sb_shrinks,
    se_idle,
    se_min_channels,
    smoothing,
    strategy,
    strided_channels,
    swa_end,
    swa_not_after,
    swa_start,
    text_run,
    unit,
    value,
    warmup_start,
)
from effsearch.config.sources import FILE_DATASETS, data_modality, dataset_kind, model_kind

if TYPE_CHECKING:
    from effsearch.config.schema import TrainFields

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


# What each structure an algorithm needs is, for the messages (the field of ModelFacts).
STRUCTURE = {
    "bottleneck": "bottleneck blocks (torchvision's Bottleneck)",
    "batchnorm": "batch norm layers",
    "downsamples": "strided convolutions or max-pools",
    "layernorm": "layer norms (nn.LayerNorm, not a subclass with a forward of its own)",
    "bert": "BERT's feed-forward blocks (transformers' BertIntermediate and BertOutput)",
    "images": "image inputs",
    "tokens": "token-id inputs (text)",
}
# What a model of each kind takes, for the messages of the rules about modality.
TAKES = {"images": "images", "tokens": "token ids (text)"}


def _lacks_message(fact: str, cfg: dict) -> str:
    if fact in TAKES:
        other = "tokens" if fact == "images" else "images"
        both = (
            f"a language model takes {', '.join(LM_ALGORITHMS)}"
            if lm_run(cfg)
            else "mixup, label_smoothing, ema, swa, sam, gradient_clipping and layer_freezing work on both"
        )
        return f"works on {TAKES[fact]}; model.name {quote(model_name(cfg))} takes {TAKES[other]} ({both})"
    return f"needs a model with {STRUCTURE[fact]}; model.name {quote(model_name(cfg))} has none"


def _one_size_message(what: str, cfg: dict) -> str:
    return (
        f"{what}; model.name {quote(model_name(cfg))} takes images of one size only (on smaller "
        "images its forward gave no logits: a Flatten into nn.Linear, or position embeddings of one grid); a "
        "global pool before its head (nn.AdaptiveAvgPool2d(1)) lets it take any size"
    )


def _se_message(cfg: dict) -> str:
    widest = conv_channels(cfg)
    has = f"convolutions of at most {widest} channels" if widest else "no convolution"
    return _idle_message(
        "squeeze_excite",
        se_min_channels(cfg),
        widest,
        f"{has} (the smaller of a Conv2d's in and out channels)",
        "SqueezeExcite adds no block",
        cfg,
    )


def _blur_message(cfg: dict) -> str:
    widest = strided_channels(cfg)
    has = f"strided convolutions of at most {widest} input channels" if widest else "no strided convolution"
    return _idle_message(
        "blurpool", blur_min_channels(cfg), widest, f"no nn.MaxPool2d and {has}", "BlurPool replaces no layer", cfg
    )


def _idle_message(algo: str, min_channels: int, widest: int | None, has: str, effect: str, cfg: dict) -> str:
    """An algorithm Composer applies only from ``min_channels`` channels, on a model with none that wide."""
    fix = f"lower algorithms.{algo}.min_channels to {widest} or " if widest else ""
    return (
        f"min_channels is {min_channels} and model.name {quote(model_name(cfg))}{_width_note(cfg)} has {has}, "
        f"so Composer's {effect} and the run would train the model unchanged; {fix}leave it out"
    )


def _width_note(cfg: dict) -> str:
    width = value(cfg, "model.width")
    return f" at model.width {width}" if width else ""


def _needs_text(fact: str) -> str:
    """What a model must be or have for ``space show``'s `when`: "a model of images", "a model with ..."."""
    return f"a model of {TAKES[fact]}" if fact in TAKES else f"a model with {STRUCTURE[fact]}"


def _clash_message(cfg: dict) -> str:
    data = data_modality(dataset_name(cfg)) or "images"
    fix = (
        "use text-encoder, hf:CONFIG_CLASS or a factory taking vocab_size"
        if data == "tokens"
        else "use an image model (tiny-cnn, resnet9, torchvision:NAME, ...)"
    )
    return (
        f"{quote(model_name(cfg))} takes {TAKES[model_modality(cfg) or 'images']} but dataset.name "
        f"{quote(dataset_name(cfg))} holds {TAKES[data]}; {fix}"
    )


def _encoder_only(field: str, default: object) -> Rule:
    """A model field only the built-in text encoder takes (others size themselves in model.kwargs)."""
    return Rule(
        field,
        field,
        on=lambda c: value(c, field) != default,
        forbids=lambda c: model_name(c) != "text-encoder",
        message=lambda c: (
            f"applies to the built-in text-encoder only; {quote(model_name(c))} has no such setting "
            "(other models take their size from model.width or model.kwargs)"
        ),
        when="model text-encoder",
        reads=("model.name",),
    )


def _text_only(field: str, on: Callable[[dict], bool], what: str) -> Rule:
    """An image field set on a text run: refused with what it does to images."""
    return Rule(
        field,
        field,
        on=on,
        forbids=text_run,
        message=f"{what}; the run is on text (token ids): leave it out",
        when="images",
        reads=("dataset.name", "model.name", "model.kwargs"),
    )


# -- the rules, in the order validation reports them -----------------------------------------

_UNWEIGHTED = ", ".join(s for s in ("random", "random-online", "glister", "glister-pb", "glister-pc"))


def _bad_target(cfg: dict) -> bool:
    return not METRICS[value(cfg, "target.metric")].allows(float(value(cfg, "target.value")))


def _target_message(cfg: dict) -> str:
    m = METRICS[value(cfg, "target.metric")]
    bounds = f"in [{m.low:g}, {m.high:g}]" if m.high is not None else f"above {m.low:g}"
    return f"a target on {m.name} must be {bounds} ({m.why}); got {quote(value(cfg, 'target.value'))}"


def _lm_only(c: dict) -> bool:
    """A language model's run (its data or its known model says so)."""
    return lm_run(c)


_LM_WHY = "a language model predicts every token of a window, not one label per text"
# Why the algorithms that are about no label are not a language model's. Both step at an epoch's end
# (Composer's LayerFreezing on EPOCH_END; SWA at its update_interval, 1ep), and a language model's run
# is counted in passes over one token stream, often a fraction of one (docs/guide.md, language models).
_LM_OWN_WHY = {
    "swa": "it averages the weights at epoch ends (update_interval 1ep) and a language model's run is often "
    "under one pass over its token stream, so it would average the last weights only; "
    "EMA (algorithms.ema) averages every step",
    "layer_freezing": "it freezes layers at epoch ends (Composer's LayerFreezing) and a language model's run "
    "is often under one pass over its token stream, so it would freeze at the end only, when nothing is "
    "left to save",
}
_LM_READS = ("dataset.name", "dataset.label_column", "model.name", "model.kwargs")
# A language model's own techniques (top-level fields, a share of training), what each grows.
LM_TECHNIQUES = {"batch_ramp": "a batch of windows", "length_warmup": "the windows of a token stream"}


def _ramped(name: str, cfg: dict) -> bool:
    return value(cfg, name) > 0


def _compiled(cfg: dict) -> bool:
    return bool(value(cfg, "compile"))


def _not_lm(cfg: dict) -> bool:
    return not lm_run(cfg)


def _lm_technique(name: str, what: str) -> Rule:
    return Rule(
        name,
        name,
        on=partial(_ramped, name),
        forbids=_not_lm,
        message=lambda c: (
            f"grows {what}, which only a language model trains on; dataset.name {quote(dataset_name(c))} with "
            f"model.name {quote(model_name(c))} is not one (dataset.label_column null or dataset.name text "
            "makes the data a corpus): set it to 0"
        ),
        when="a language model",
        reads=_LM_READS,
    )


def _lm_compiled(name: str) -> Rule:
    """Each new shape of a batch recompiles a compiled model (as Composer's SeqLengthWarmup's rule)."""
    return Rule(
        name,
        name,
        on=partial(_ramped, name),
        forbids=_compiled,
        message="changes the batch's shape as training goes, and each new shape recompiles the model: "
        "set compile: false (or this to 0)",
        when="compile off",
        reads=("compile",),
    )


def lm_refused(subject: str) -> str | None:
    """Why a language model never takes ``subject`` (None: it may), for ``space show``."""
    for r in of(subject):
        if r.forbids is _lm_only and isinstance(r.message, str):
            return r.message
    return None


_LM_RULES = [
    Rule(
        "selection.strategy",
        "selection.strategy",
        on=lambda c: strategy(c) != "full",
        forbids=_lm_only,
        message="subset selection is off for language models (strategy full): it selects examples by their "
        f"loss or last-layer gradient; {_LM_WHY}, and a per-window last-layer gradient is vocabulary x width",
        when="not a language model",
        reads=_LM_READS,
    ),
    *[
        Rule(
            f"algorithms.{name}",
            f"algorithms.{name}",
            on=partial(has, name),
            forbids=_lm_only,
            message=f"does not apply to a language model ({_LM_OWN_WHY.get(name, _LM_WHY)}); a language model takes "
            f"{', '.join(LM_ALGORITHMS)}"
            + ("; its warm-up is the field length_warmup" if name == "seq_length_warmup" else ""),
            when="not a language model",
            reads=_LM_READS,
        )
        for name, spec in ALGORITHMS.items()
        if name not in LM_ALGORITHMS and spec.needs_structure != "images"
    ],
    *[_lm_technique(name, what) for name, what in LM_TECHNIQUES.items()],
    *[_lm_compiled(name) for name in LM_TECHNIQUES],
    Rule(  # refused before the data is read (the builder refuses it too, for a config built in code)
        "model.kwargs",
        "model.kwargs",
        on=lambda c: bool(value(c, "model.kwargs")),
        forbids=lambda c: model_name(c) in MODELS and model_name(c) != "gpt",
        message=lambda c: (
            f"the built-in model {quote(model_name(c))} takes none (its size is model.width); "
            f"got {value(c, 'model.kwargs')!r}"
        ),
        when="gpt, hf:, torchvision:, timm: and factories",
        reads=("model.name",),
    ),
    Rule(
        "model.kwargs",
        "model.kwargs",
        on=lambda c: model_name(c) == "gpt",
        forbids=lambda c: gpt_problem(gpt_kwargs(c)) is not None,
        message=lambda c: str(gpt_problem(gpt_kwargs(c))),
        when="gpt's n_layer, n_head, n_embd and switches",
        reads=("model.name",),
    ),
    Rule(
        "model.name",
        "model.name",
        on=lambda c: bool(lm_model(c)),
        forbids=lambda c: not lm_data(c),
        message=lambda c: (
            f"{quote(model_name(c))} is a language model (it predicts each next token) and the dataset's "
            "rows have labels: set dataset.label_column: null (or dataset.name text) to train it on the "
            "texts, or use a classifier (text-encoder, hf:BertConfig)"
        ),
        when="a language model's corpus",
        reads=("dataset.name", "dataset.label_column"),
    ),
    Rule(
        "model.name",
        "model.name",
        on=lm_data,
        forbids=lambda c: lm_model(c) is False and model_modality(c) == "tokens",
        message=lambda c: (
            f"{quote(model_name(c))} is a classifier (one label a text) and the dataset is a language model's "
            "corpus (dataset.name text, or label_column null): use gpt, hf:GPT2Config or a factory taking "
            "vocab_size and max_length and returning logits (N, L, vocab_size)"
        ),
        when="a language model",
        reads=("model.name", "model.kwargs"),
    ),
]


RULES: list[Rule] = [
    Rule(
        "target.value",
        "target.value",
        on=lambda c: value(c, "target.value") is not None,
        forbids=_bad_target,
        message=_target_message,
        when="within the metric's range",
        reads=("target.metric",),
    ),
    # Without a value the target falls back to target_accuracy: a metric named alone would be ignored.
    Rule(
        "target.metric",
        "target.value",
        on=lambda c: value(c, "target.metric") != ACCURACY,
        forbids=lambda c: value(c, "target.value") is None,
        message=lambda c: (
            f"target.metric {quote(value(c, 'target.metric'))} needs a value to reach (e.g. target: "
            f"{{metric: {value(c, 'target.metric')}, value: 2.0}}); without one the target is target_accuracy"
        ),
        when="target.value given",
        reads=("target.value",),
    ),
    Rule(
        "dataset.path",
        "dataset.path",
        on=lambda c: dataset_kind(dataset_name(c)) in FILE_DATASETS,
        forbids=lambda c: not value(c, "dataset.path"),
        message=lambda c: (
            f"dataset.name {quote(dataset_name(c))} reads its data from dataset.path; set it (a folder "
            "of class folders for imagefolder, a .npz file, a folder written by datasets' "
            "save_to_disk or parquet files for hf, a .jsonl or .csv file for jsonl and csv, a text file or a folder of them "
            "for text)"
        ),
        when="a dataset read from a path",
        reads=("dataset.name",),
    ),
    Rule(
        "dataset.path",
        "dataset.path",
        on=lambda c: bool(value(c, "dataset.path")),
        forbids=lambda c: dataset_kind(dataset_name(c)) not in FILE_DATASETS,
        message=lambda c: (
            f"only applies to dataset.name {', '.join(FILE_DATASETS)}; dataset.name is {quote(dataset_name(c))}"
        ),
        when="dataset imagefolder, npz, hf, jsonl, csv or text",
        reads=("dataset.name",),
    ),
    Rule(
        "dataset.kwargs",
        "dataset.kwargs",
        on=lambda c: bool(value(c, "dataset.kwargs")),
        forbids=lambda c: dataset_kind(dataset_name(c)) != "import",
        message=lambda c: (
            f"only applies to an import path's callable (dataset.name package.module:callable); dataset.name is "
            f"{quote(dataset_name(c))}"
        ),
        when="dataset an import path",
        reads=("dataset.name",),
    ),
    # What the data holds and what the model takes must agree; the dataset's name says it for the
    # built-ins and the files (hf and an import path: the trainer checks once it has read them).
    Rule(
        "model.name",
        "model.name",
        on=lambda c: model_modality(c) is not None,
        forbids=modality_clash,
        message=_clash_message,
        when="a model of the dataset's kind",
        reads=("dataset.name", "model.name", "model.kwargs"),
    ),
    Rule(
        "dataset.tokenizer.path",
        "dataset.tokenizer.path",
        on=lambda c: value(c, "dataset.tokenizer.name") == "file",
        forbids=lambda c: not value(c, "dataset.tokenizer.path"),
        message="dataset.tokenizer.name 'file' reads a tokenizer.json from dataset.tokenizer.path; set it",
        when="a tokenizer read from a file",
        reads=("dataset.tokenizer.name",),
    ),
    Rule(
        "dataset.tokenizer.path",
        "dataset.tokenizer.path",
        on=lambda c: bool(value(c, "dataset.tokenizer.path")),
        forbids=lambda c: value(c, "dataset.tokenizer.name") != "file",
        message=lambda c: (
            f"only applies to dataset.tokenizer.name 'file'; it is {quote(value(c, 'dataset.tokenizer.name'))}"
        ),
        when="dataset.tokenizer.name file",
        reads=("dataset.tokenizer.name",),
    ),
    Rule(
        "dataset.tokenizer.vocab_size",
        "dataset.tokenizer.vocab_size",
        on=lambda c: value(c, "dataset.tokenizer.name") not in ("bytes", "file"),
        forbids=lambda c: value(c, "dataset.tokenizer.vocab_size") < MIN_VOCAB,
        message=lambda c: (
            f"must be at least {MIN_VOCAB} for {quote(value(c, 'dataset.tokenizer.name'))} (its 256 byte "
            f"values and 4 special tokens); got {value(c, 'dataset.tokenizer.vocab_size')}"
        ),
        when=f"at least {MIN_VOCAB}",
        reads=("dataset.tokenizer.name",),
    ),
    Rule(
        "dataset.max_length",
        "dataset.max_length",
        on=lambda c: positions(c) is not None,
        forbids=lambda c: value(c, "dataset.max_length") > (positions(c) or 0),
        message=lambda c: (
            f"is {value(c, 'dataset.max_length')} but model.name {quote(model_name(c))} has {positions(c)} "
            "positions (hf: its config's max_position_embeddings in model.kwargs, n_positions for "
            "GPT2Config); lower it or give the model more"
        ),
        when="within the model's positions",
        reads=("model.name", "model.kwargs"),
    ),
    Rule(
        "dataset.max_length",
        "dataset.max_length",
        on=lambda c: data_modality(dataset_name(c)) == "tokens" and not lm_data(c),
        forbids=lambda c: value(c, "dataset.max_length") < 2,
        message=lambda c: (
            f"is {value(c, 'dataset.max_length')}: a classifier's texts begin with its first token ([CLS]), "
            "so no word of a text would reach the model; at least 2"
        ),
        when="at least 2 for a classifier",
        reads=("dataset.name", "dataset.label_column"),
    ),
    _encoder_only("model.depth", 0),
    _encoder_only("model.heads", 0),
    _encoder_only("model.pooling", POOLINGS[0]),
    _encoder_only("model.dropout", 0.1),
    Rule(
        "model.heads",
        "model.heads",
        on=lambda c: model_name(c) == "text-encoder",
        forbids=lambda c: encoder_width(c) % encoder_heads(c) != 0,
        message=lambda c: (
            f"{encoder_heads(c)} heads do not divide the text encoder's width {encoder_width(c)} "
            "(model.width; 0: 128): each head takes an equal share"
        ),
        when="dividing model.width",
        reads=("model.width",),
    ),
    Rule(
        "dataset.classes",
        "dataset.classes",
        on=lambda c: value(c, "dataset.classes") is not None,
        forbids=lambda c: data_modality(dataset_name(c)) == "images",
        message=lambda c: (
            f"applies to text (jsonl, csv, hf text, an import path returning texts); dataset.name "
            f"{quote(dataset_name(c))} holds images"
        ),
        when="a text dataset",
        reads=("dataset.name",),
    ),
    _text_only("dataset.flip", lambda c: value(c, "dataset.flip") is True, "flips images"),
    _text_only("dataset.image_size", lambda c: value(c, "dataset.image_size") is not None, "resizes images"),
    _text_only("channels_last", lambda c: bool(value(c, "channels_last")), "lays images out NHWC"),
    _text_only("loader", lambda c: loader(c) == "ffcv", "FFCV's loader serves images"),
    _text_only(
        "quantize",
        lambda c: value(c, "quantize") == "int8",
        "int8 here is torch's FX graph-mode quantization, calibrated on images",
    ),
    Rule(
        "model.width",
        "model.width",
        on=lambda c: bool(value(c, "model.width")),
        forbids=lambda c: model_kind(model_name(c)) in ("torchvision", "timm") or model_name(c) == "gpt",
        message=lambda c: (
            f"applies to the built-in models and to factories that take `width`; "
            f"{quote(model_name(c))} takes its size from its name or model.kwargs"
            + (" (gpt: n_embd)" if model_name(c) == "gpt" else "")
        ),
        when="a built-in model or a factory",
        reads=("model.name",),
    ),
    Rule(
        "schedule.milestones",
        "schedule.milestones",
        on=lambda c: value(c, "schedule.name") == "multistep",
        forbids=bad_milestones,
        message=lambda c: f"must be fractions in (0, 1); got {quote(value(c, 'schedule.milestones'))}",
        when="fractions in (0, 1)",
        reads=("schedule.milestones",),
    ),
    Rule(
        "schedule.cooldown_fraction",
        "schedule.cooldown_fraction",
        on=lambda c: value(c, "schedule.cooldown_fraction") != DEFAULTS["schedule.cooldown_fraction"],
        forbids=lambda c: value(c, "schedule.name") != "wsd",
        message=lambda c: f"applies to schedule wsd only; schedule.name is {quote(value(c, 'schedule.name'))}",
        when="schedule wsd",
        reads=("schedule.name",),
    ),
    Rule(
        "schedule.cooldown_fraction",
        "schedule.cooldown_fraction",
        on=lambda c: value(c, "schedule.name") == "wsd",
        forbids=lambda c: value(c, "schedule.warmup_fraction") + value(c, "schedule.cooldown_fraction") > 1.0,
        message=lambda c: (
            f"{value(c, 'schedule.cooldown_fraction')} and schedule.warmup_fraction "
            f"{value(c, 'schedule.warmup_fraction')} overlap: together at most 1"
        ),
        when="with the warm-up, at most 1",
        reads=("schedule.warmup_fraction",),
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
        forbids=lambda c: strategy(c) == "full",
        message="only applies with a selection strategy; set selection.strategy "
        f"(one of {', '.join(SELECTIONS[1:])}) or fraction to 1.0",
        when="selection on",
        reads=("selection.strategy",),
    ),
    # The loader is no rule of selection: the FFCV loader serves every strategy's subsets and
    # weights through one compiled pipeline (effsearch.trainer.data.ffcv_loader).
    Rule(
        "selection.greedy",
        "selection.greedy",
        on=lambda c: strategy(c) != "full",
        forbids=greedy_wrong,
        message=lambda c: (
            f"{quote(value(c, 'selection.greedy'))} does not apply to {quote(strategy(c))} "
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
        on=lambda c: strategy(c) in MODEL_SELECTIONS,
        forbids=never_selects,
        message=lambda c: (
            f"{quote(strategy(c))} would never run: without a warm start (int(kappa * epochs) = 0) "
            "the first subset is random, as in CORDS, and the strategy first selects after "
            f"select_every = {value(c, 'selection.select_every')} epochs, but training lasts "
            f"{float(value(c, 'epochs')):g} epochs; lower selection.select_every or raise "
            "selection.kappa"
        ),
        when="select_every below the epochs, or a warm start",
        reads=("epochs", "selection.kappa", "selection.select_every"),
    ),
    Rule(
        "optimizer.muon",
        "optimizer.name",
        on=lambda c: optimizer(c) == "muon",
        forbids=partial(lacks, "matrices"),
        message=lambda c: (
            f"muon updates 2-d weights besides the embeddings and the output layer, and model.name "
            f"{quote(model_name(c))} has none (convolutions are 4-d); use adamw or sgd"
        ),
        when="a model with hidden 2-d weights",
        reads=("model.name", "model.kwargs"),
    ),
    Rule(
        "optimizer.fused",
        "optimizer.fused",
        on=lambda c: bool(value(c, "optimizer.fused")),
        forbids=lambda c: optimizer(c) not in FUSABLE,
        message=lambda c: (
            f"{quote(optimizer(c))} has no fused step (Composer's DecoupledSGDW); fused applies to "
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
        forbids=lambda c: precision(c) == "amp_fp16",
        message="'kfac-sgd' cannot run with precision amp_fp16: the loss scale would enter its Fisher factors; "
        "use fp32 or amp_bf16",
        when="precision not amp_fp16",
        reads=("precision",),
    ),
    # One K-FAC step decomposes every factor; the CPU takes minutes over a large one (n^3), past any
    # max_slowdown limit, which is checked between steps only (readers.KFAC_CPU_FACTOR says the bound).
    Rule(
        "optimizer.kfac",
        "optimizer.name",
        on=kfac,
        forbids=kfac_too_big,
        message=lambda c: (
            f"'kfac-sgd' on the CPU decomposes each layer's factors on one step, and model.name "
            f"{quote(model_name(c))}{_width_note(c)} has a {kfac_factor(c)} x {kfac_factor(c)} one (a layer's "
            f"inputs x kernel), over the {KFAC_CPU_FACTOR} the CPU decomposes in about a second: one step "
            "would outlast a study's max_slowdown; use sgd, a narrower model, or a CUDA device"
        ),
        when=f"factors up to {KFAC_CPU_FACTOR} on the CPU",
        reads=("model.name", "model.kwargs", "model.width", "device"),
    ),
    # One algorithm's own parameters, as Composer's EMA and SWA check them when built (after
    # ~20 s of set-up). The space never sets the fields of these subjects (no dimension gates on
    # them), so they read nothing else: reads=().
    Rule(
        "algorithms.ema.smoothing",
        "algorithms.ema.smoothing",
        on=partial(has, "ema"),
        forbids=lambda c: (half_life(c) is None) == (smoothing(c) is None),
        message=lambda c: (
            "give half_life or smoothing, not both (half_life defaults to '1000ba': set it to null to use smoothing)"
            if smoothing(c) is not None
            else "give half_life or smoothing (both are null)"
        ),
        when="half_life or smoothing",
    ),
    Rule(
        "algorithms.ema.update_interval",
        "algorithms.ema.update_interval",
        on=partial(has, "ema"),
        forbids=lambda c: half_life(c) is None and ema_every(c) is None,
        message="with smoothing and no half_life, Composer's EMA needs update_interval (e.g. '1ba')",
        when="given with smoothing",
    ),
    Rule(
        "algorithms.ema.update_interval",
        "algorithms.ema.update_interval",
        on=partial(has, "ema"),
        forbids=lambda c: (
            None not in (half_life(c), ema_every(c))
            and unit("ema", "half_life", c) != unit("ema", "update_interval", c)
        ),
        message=lambda c: f"must be in the same unit as half_life ({quote(half_life(c))}); got {quote(ema_every(c))}",
        when="half_life's unit",
    ),
    Rule(
        "algorithms.swa.swa_end",
        "algorithms.swa.swa_end",
        on=partial(has, "swa"),
        forbids=lambda c: unit("swa", "swa_start", c) != unit("swa", "swa_end", c),
        message=lambda c: f"must be in the same unit as swa_start ({quote(swa_start(c))}); got {quote(swa_end(c))}",
        when="swa_start's unit",
    ),
    Rule(
        "algorithms.swa.swa_end",
        "algorithms.swa.swa_end",
        on=partial(has, "swa"),
        forbids=swa_not_after,
        message=lambda c: f"must be after swa_start ({quote(swa_start(c))}); got {quote(swa_end(c))}",
        when="after swa_start",
    ),
    Rule(
        "algorithms.sam",
        "algorithms.sam",
        on=partial(has, "sam"),
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
        forbids=lambda c: loader(c) != "torch",
        message=lambda c: (
            f"{quote(loader(c))} is not sharded across processes; with distributed.processes > 1 use loader torch"
        ),
        when="loader torch",
        reads=("loader",),
    ),
    *[
        Rule(
            f"algorithms.{name}",
            f"algorithms.{name}",
            on=partial(has, name),
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
            on=partial(has, name),
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
            on=partial(has, name),
            forbids=partial(lacks, spec.needs_structure),
            message=partial(_lacks_message, spec.needs_structure),
            when=_needs_text(spec.needs_structure),
            reads=("model.name", "model.kwargs"),
        )
        for name, spec in ALGORITHMS.items()
        if spec.needs_structure
    ],
    # Composer's GatedLinearUnits builds BERT's feed-forward blocks afresh: a pretrained model's own,
    # the larger part of its weights, would be thrown away before fine-tuning begins.
    Rule(
        "algorithms.gated_linear_units",
        "algorithms.gated_linear_units",
        on=partial(has, "gated_linear_units"),
        forbids=partial(known, "pretrained"),
        message=lambda c: (
            f"builds BERT's feed-forward blocks afresh; model.name {quote(model_name(c))} is pretrained "
            "and would lose its own: leave it out"
        ),
        when="fresh weights (not a pretrained model)",
        reads=("model.name", "model.kwargs"),
    ),
    # An algorithm that feeds the model smaller images than the data's, on a model the probe saw take
    # one size only (ModelFacts.resizable): its first resized batch would fail in the model's forward.
    *[
        Rule(
            f"algorithms.{name}",
            f"algorithms.{name}",
            on=partial(has, name),
            forbids=partial(lacks, "resizable"),
            message=partial(_one_size_message, "feeds the model smaller images than the data's"),
            when="a model taking images of any size",
            reads=("model.name", "model.kwargs"),
        )
        for name, spec in ALGORITHMS.items()
        if spec.resizes
    ],
    Rule(
        "algorithms.selective_backprop.scale_factor",
        "algorithms.selective_backprop.scale_factor",
        on=sb_shrinks,
        forbids=partial(lacks, "resizable"),
        message=lambda c: _one_size_message(
            f"is {sb_scale(c):g}, which scores each batch on images shrunk to that scale (1: the data's size)", c
        ),
        when="1, or a model taking images of any size",
        reads=("model.name", "model.kwargs"),
    ),
    # Composer's SqueezeExcite adds a block after a Conv2d only where min(in, out) channels reach
    # min_channels: below that, the trial trains the model unchanged (a duplicate of one without it).
    Rule(
        "algorithms.squeeze_excite",
        "algorithms.squeeze_excite",
        on=partial(has, "squeeze_excite"),
        forbids=se_idle,
        message=_se_message,
        when="a convolution of min_channels channels",
        reads=("model.name", "model.kwargs", "model.width"),
    ),
    # Composer's BlurPool replaces max-pools, and strided convolutions only from min_channels inputs:
    # a patch embedding on the image's few channels is skipped, and the trial duplicates one without it.
    Rule(
        "algorithms.blurpool",
        "algorithms.blurpool",
        on=partial(has, "blurpool"),
        forbids=blur_idle,
        message=_blur_message,
        when="a max-pool, or a strided convolution of min_channels inputs",
        reads=("model.name", "model.kwargs", "model.width"),
    ),
    *_LM_RULES,
    Rule(
        "selection.model_based",
        "selection.strategy",
        on=lambda c: strategy(c) in MODEL_SELECTIONS,
        forbids=partial(lacks, "final_linear"),
        message=lambda c: (
            f"{quote(strategy(c))} takes its embeddings from the input of the model's final "
            f"nn.Linear; model.name {quote(model_name(c))} does not end in one (use random, "
            "random-online or full)"
        ),
        when="a model ending in nn.Linear",
        reads=("model.name", "model.kwargs"),
    ),
    *[
        Rule(
            f"algorithms.{name}",
            f"algorithms.{name}",
            on=partial(has, name),
            forbids=lambda c: loader(c) != "torch",
            message=lambda c: f"works on the torch loader's per-image transforms only; loader is {quote(loader(c))}",
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
            on=partial(has, b),
            forbids=partial(has, a),
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
            on=partial(has, a),
            forbids=partial(has, b),
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
        on=partial(has, "selective_backprop"),
        forbids=lambda c: strategy(c) in WEIGHTED_SELECTIONS,
        message=lambda c: (
            f"cannot be combined with selection.strategy {quote(strategy(c))}: SelectiveBackprop keeps "
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
            on=partial(has, name),
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
        on=partial(has, "sam"),
        forbids=lambda c: precision(c) == "amp_fp16",
        message="Composer's SAM cannot run with precision amp_fp16 (use fp32 or amp_bf16)",
        when="precision != amp_fp16",
        reads=("precision",),
    ),
    # Composer 0.32.1's ALiBi fails on transformers 5 (BERT: TypeError, unexpected keyword 'cache'
    # after its surgery; GPT-2: AttributeError, no attribute 'bias'): on no model.
    Rule(
        "algorithms.alibi",
        "algorithms.alibi",
        on=partial(has, "alibi"),
        forbids=lambda c: True,
        message="Composer's ALiBi is broken on transformers 5 (its surgery leaves BERT's attention "
        "called with an unexpected keyword 'cache', GPT-2's without 'bias'); leave it out",
        when="never (broken on transformers 5)",
    ),
    Rule(
        "algorithms.seq_length_warmup.min_seq_length",
        "algorithms.seq_length_warmup.min_seq_length",
        on=partial(has, "seq_length_warmup"),
        forbids=lambda c: warmup_start(c) > value(c, "dataset.max_length"),
        message=lambda c: (
            f"must be at most dataset.max_length ({value(c, 'dataset.max_length')}): the warm-up grows the "
            f"length from it to dataset.max_length; got {warmup_start(c)}"
        ),
        when="at most dataset.max_length",
    ),
    Rule(
        "algorithms.low_precision_layernorm",
        "algorithms.low_precision_layernorm",
        on=partial(has, "low_precision_layernorm"),
        forbids=lambda c: precision(c) == "fp32",
        message="acts only under mixed precision (amp_bf16 or amp_fp16, on a CUDA device); precision is 'fp32'",
        when="precision amp_bf16 or amp_fp16",
        reads=("precision",),
    ),
    # Precision x device. device: auto is resolved on the machine (effsearch.config.machine),
    # which runs this same rule on the resolved device.
    Rule(
        "precision",
        "precision",
        on=lambda c: precision(c) != "fp32",
        forbids=lambda c: value(c, "device") == "cpu",
        message=lambda c: f"{quote(precision(c))} needs a CUDA device; on CPU use fp32",
        when="a CUDA device",
        reads=("device",),
    ),
]


def check(cfg: dict, rules: list[Rule] | None = None) -> None:
    """Raise the first broken rule's ConfigError."""
    for rule in RULES if rules is None else rules:
        if rule.broken(cfg):
            raise rule.error(cfg)


def validate(cfg: TrainFields) -> None:
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
