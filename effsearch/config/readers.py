"""Readers over raw config dicts, with the schema's defaults: what the rules'
predicates (``effsearch.config.rules``) and the search space ask of a config.

A raw dict (``TrainConfig.to_dict()``, or the dict the space builds while sampling) may
still lack a level; every reader goes through :func:`value`, which reads the schema's
default (``DEFAULTS``) there. The predicates here are module-level functions, not lambdas
made at import, so mutation testing (benchmarks/mutation.sh) reaches them.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, cast

from effsearch.config.algorithms import ALGORITHMS, parse_time
from effsearch.config.choices import GPT, GPT_ACTIVATIONS, GREEDY, MODEL_WIDTHS, TEXT_ENCODER
from effsearch.config.fields import get_path
from effsearch.config.schema import TrainFields
from effsearch.config.sources import ModelFacts, data_modality, facts

# The fields a predicate (or the space) reads from a raw dict that may lack them (a level the space
# has not built yet); where it does, ``value`` reads the schema's default, taken from the schema itself.
READ_FIELDS = (
    "dataset.name",
    "dataset.path",
    "dataset.kwargs",
    "dataset.flip",
    "dataset.image_size",
    "dataset.max_length",
    "dataset.classes",
    "dataset.tokenizer.name",
    "dataset.tokenizer.vocab_size",
    "dataset.tokenizer.path",
    "dataset.label_column",
    "dataset.val_tokens",
    "model.name",
    "model.kwargs",
    "model.width",
    "model.depth",
    "model.heads",
    "model.pooling",
    "model.dropout",
    "channels_last",
    "quantize",
    "epochs",
    "optimizer.name",
    "optimizer.fused",
    "schedule.name",
    "schedule.milestones",
    "sparsity.target",
    "sparsity.schedule",
    "sparsity.start",
    "sparsity.end",
    "selection.strategy",
    "selection.fraction",
    "selection.select_every",
    "selection.kappa",
    "selection.greedy",
    "loader",
    "precision",
    "compile",
    "device",
    "distributed.processes",
    "distributed.backend",
    "distributed.compression.method",
    "distributed.compression.granularity",
    "distributed.compression.error_feedback",
    "target.metric",
    "target.value",
    "schedule.warmup_fraction",
    "schedule.cooldown_fraction",
    "batch_ramp",
    "length_warmup",
)
_SCHEMA = TrainFields().to_dict()
DEFAULTS: dict[str, Any] = {path: get_path(_SCHEMA, path) for path in READ_FIELDS}


def value(cfg: dict, path: str) -> Any:
    """``path``'s value in the raw dict ``cfg``, else the schema's default (``DEFAULTS``)."""
    return get_path(cfg, path, DEFAULTS[path])


def _algos(cfg: dict) -> dict:
    return cfg.get("algorithms") or {}


# A predicate about one algorithm (or fact, or parameter) is ``partial(has, "ema")``, not a
# lambda a factory makes at import: its code then runs when a rule is asked, where mutation
# testing (benchmarks/mutation.sh) can switch a mutant of it on.
def has(algo: str, cfg: dict) -> bool:
    return algo in _algos(cfg)


def optimizer(cfg: dict) -> str:
    return value(cfg, "optimizer.name")


def sb_scale(cfg: dict) -> float:
    """Selective backprop's scale_factor: the size its scoring forward shrinks images to."""
    return float(_param("selective_backprop", "scale_factor", cfg))


def sb_shrinks(cfg: dict) -> bool:
    return has("selective_backprop", cfg) and sb_scale(cfg) < 1


def loader(cfg: dict) -> str:
    return value(cfg, "loader")


def precision(cfg: dict) -> str:
    return value(cfg, "precision")


def strategy(cfg: dict) -> str:
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
    return optimizer(cfg) == "kfac-sgd"


def never_selects(cfg: dict) -> bool:
    epochs = float(value(cfg, "epochs"))
    every = value(cfg, "selection.select_every")  # null: resolved below the epochs (select_every())
    return every is not None and int(value(cfg, "selection.kappa") * epochs) == 0 and every >= math.ceil(epochs)


def greedy_wrong(cfg: dict) -> bool:
    greedy = value(cfg, "selection.greedy")
    return greedy != "auto" and greedy not in GREEDY.get(strategy(cfg).split("-")[0], ())


def _facts(cfg: dict) -> ModelFacts | None:
    return facts(cfg.get("model") or {})


def lacks(fact: str, cfg: dict) -> bool:
    """The model is known (built-in, or probed) to lack ``fact``; an unprobed model waits for its probe."""
    return _facts(cfg) is not None and not getattr(_facts(cfg), fact)


def known(fact: str, cfg: dict) -> bool:
    """The model is known (built-in, or probed) to have ``fact``."""
    return _facts(cfg) is not None and bool(getattr(_facts(cfg), fact))


def se_idle(cfg: dict) -> bool:
    """Composer's SqueezeExcite would add no block: the (known) model of images has no Conv2d with
    min_channels channels on both sides (``ModelFacts.conv_channels``)."""
    known = _facts(cfg)
    if known is None or not known.images:
        return False
    return (known.conv_channels or 0) < se_min_channels(cfg)


def blur_idle(cfg: dict) -> bool:
    """Composer's BlurPool would replace nothing: the (known) model of images downsamples, but with
    no MaxPool2d and no strided Conv2d of min_channels input channels (``ModelFacts.strided_channels``)."""
    known = _facts(cfg)
    if known is None or not known.images or not known.downsamples or known.maxpools:
        return False
    return (known.strided_channels or 0) < blur_min_channels(cfg)


def blur_min_channels(cfg: dict) -> int:
    return int(_param("blurpool", "min_channels", cfg))


def strided_channels(cfg: dict) -> int | None:
    """The (known) model's widest strided Conv2d by its input channels (None: none, or not known)."""
    known = _facts(cfg)
    return known.strided_channels if known is not None else None


# The largest K-FAC factor the CPU decomposes in about a second: eigh of an n x n float32 factor took
# 0.56 s at 1,024 and 2.5 s at 1,537 on this project's 2-core machine (benchmarks/kfac_eigh.py;
# docs/benchmarks.md, "K-FAC's factors on the CPU"), growing as n^3; K-FAC decomposes two per layer on
# one step, and a study's max_slowdown is checked only between steps.
KFAC_CPU_FACTOR = 1280


def kfac_factor(cfg: dict) -> int:
    """The (known) model's largest K-FAC factor (0: not known)."""
    known = _facts(cfg)
    return known.kfac_factor if known is not None else 0


def kfac_too_big(cfg: dict) -> bool:
    """On the CPU, the model's largest K-FAC factor takes more than about a second to decompose."""
    return value(cfg, "device") == "cpu" and kfac_factor(cfg) > KFAC_CPU_FACTOR


def se_min_channels(cfg: dict) -> int:
    return int(_param("squeeze_excite", "min_channels", cfg))


def conv_channels(cfg: dict) -> int | None:
    """The (known) model's widest convolution by its narrower side (None: none, or not known)."""
    known = _facts(cfg)
    return known.conv_channels if known is not None else None


def model_name(cfg: dict) -> str:
    return value(cfg, "model.name")


def model_modality(cfg: dict) -> str | None:
    """What the model takes, "images" or "tokens" (None: not probed yet)."""
    known = _facts(cfg)
    return known.modality if known is not None else None


def text_run(cfg: dict) -> bool:
    """The run is on text, as its dataset's name or its (known) model says."""
    return data_modality(dataset_name(cfg)) == "tokens" or model_modality(cfg) == "tokens"


def modality_clash(cfg: dict) -> bool:
    """The dataset (by its name) holds one kind of input and the (known) model takes the other."""
    data, model = data_modality(dataset_name(cfg)), model_modality(cfg)
    return None not in (data, model) and data != model


def positions(cfg: dict) -> int | None:
    """The longest sequence the (known) model's position embeddings take (None: any, or not known)."""
    known = _facts(cfg)
    return known.positions if known is not None else None


def encoder_width(cfg: dict) -> int:
    """The text encoder's width, model.width 0 resolved."""
    return value(cfg, "model.width") or MODEL_WIDTHS["text-encoder"]


def encoder_heads(cfg: dict) -> int:
    """The text encoder's attention heads, model.heads 0 resolved."""
    return value(cfg, "model.heads") or TEXT_ENCODER["heads"]


def dataset_name(cfg: dict) -> str:
    return value(cfg, "dataset.name")


def _param(algo: str, key: str, cfg: dict) -> Any:
    """An algorithm's parameter as the config gives it, else its default."""
    return (_algos(cfg).get(algo) or {}).get(key, ALGORITHMS[algo].params[key])


def unit(algo: str, key: str, cfg: dict) -> str | None:
    return (parse_time(_param(algo, key, cfg)) or (None, None))[1] if isinstance(_param(algo, key, cfg), str) else None


def _time(algo: str, key: str, cfg: dict) -> float | None:
    return (parse_time(_param(algo, key, cfg)) or (None, None))[0] if isinstance(_param(algo, key, cfg), str) else None


half_life, smoothing, ema_every = (
    partial(_param, "ema", "half_life"),
    partial(_param, "ema", "smoothing"),
    partial(_param, "ema", "update_interval"),
)
swa_start, swa_end = partial(_param, "swa", "swa_start"), partial(_param, "swa", "swa_end")
warmup_start = partial(_param, "seq_length_warmup", "min_seq_length")


def swa_not_after(cfg: dict) -> bool:
    """swa_end not after swa_start, in one unit (the unit rule speaks for two)."""
    start = unit("swa", "swa_start", cfg)
    # Both times are set where the unit is: parse_time gave both.
    return (
        start is not None
        and start == unit("swa", "swa_end", cfg)
        and cast(float, _time("swa", "swa_end", cfg)) <= cast(float, _time("swa", "swa_start", cfg))
    )


def bad_milestones(cfg: dict) -> bool:
    ms = value(cfg, "schedule.milestones")
    return not ms or not all(isinstance(m, (int, float)) and 0 < m < 1 for m in ms)


def gpt_problem(kwargs: Any) -> str | None:
    """What is wrong with the built-in gpt's ``model.kwargs`` (None: nothing), naming the key."""
    if not isinstance(kwargs, dict):
        return f"must be a mapping; got {type(kwargs).__name__}"
    unknown = [k for k in kwargs if k not in GPT]
    if unknown:
        return f"gpt takes no {', '.join(map(repr, unknown))}; it takes {', '.join(GPT)} (defaults: {GPT})"
    k = {**GPT, **kwargs}
    for name in ("n_layer", "n_head", "n_embd"):
        if isinstance(k[name], bool) or not isinstance(k[name], int) or k[name] < 1:
            return f"{name} must be a positive integer; got {k[name]!r}"
    for name in ("qk_norm", "tied", "zero_init"):
        if not isinstance(k[name], bool):
            return f"{name} must be true or false; got {k[name]!r}"
    if k["activation"] not in GPT_ACTIVATIONS:
        return f"activation must be one of {', '.join(GPT_ACTIVATIONS)}; got {k['activation']!r}"
    if k["n_embd"] % k["n_head"]:
        return f"n_head {k['n_head']} does not divide n_embd {k['n_embd']}: each head takes an equal share"
    return None


def gpt_kwargs(cfg: dict) -> Any:
    return value(cfg, "model.kwargs") or {}


def lm_data(cfg: dict) -> bool:
    """The dataset is a language model's corpus: plain text files, or rows read without labels
    (``dataset.label_column: null``)."""
    name = dataset_name(cfg)
    return name == "text" or (value(cfg, "dataset.label_column") is None and data_modality(name) != "images")


def lm_model(cfg: dict) -> bool | None:
    """The (known) model is a language model (logits for every position); None: not probed yet."""
    known = _facts(cfg)
    return known.causal if known is not None else None


def lm_run(cfg: dict) -> bool:
    """The run trains a language model, as its data or its (known) model says."""
    return lm_data(cfg) or bool(lm_model(cfg))
