"""Composer algorithms by the names users type, with their parameters: data about configs.

The table keeps validation fast (importing Composer takes ~18 s on 2 cores, and nothing
here imports it) and is checked against Composer's own signatures by a test, so it
cannot drift. What an algorithm cannot be combined with is in ``effsearch.config.rules``;
building the Composer objects is ``effsearch.trainer.composer.algorithms``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from effsearch.config.fields import ConfigError, quote


@dataclass(frozen=True)
class TimeParam:
    """A parameter Composer reads as a time string (``Time.from_timestring``): the units it takes
    here, whether 0 is allowed and whether null is."""

    units: tuple[str, ...]
    positive: bool = False  # Composer divides by it (half_life) or takes steps modulo it (update_interval)
    nullable: bool = False


@dataclass(frozen=True)
class AlgoSpec:
    composer_name: str
    params: dict  # user-settable parameter -> default
    fixed: dict = field(default_factory=dict)  # passed by effsearch, not by users
    ranges: dict = field(default_factory=dict)  # parameter -> (low, high) inclusive
    choices: dict = field(default_factory=dict)  # parameter -> allowed values
    times: dict = field(default_factory=dict)  # parameter -> TimeParam (a Composer time string)
    needs_structure: str = ""  # a field of sources.ModelFacts the model must have (the rules read it)
    needs_torch_loader: bool = False  # edits a torchvision dataset's transforms
    resizes: bool = False  # feeds the model images smaller than the data's (ModelFacts.resizable)
    mixes_targets: bool = False  # builds soft / permuted targets in the loss
    help: str = ""
    # The per-batch events its ``match`` can accept (the loop fires only those; a test
    # checks every other per-batch event is refused). Once-a-run events always fire.
    batch_events: tuple = ()


_P01 = (0.0, 1.0)
TIME = "a Composer time string such as '100ba', '2ep' or '0.5dur'"

# The units effsearch's loop counts (trainer/loop.py keeps Composer's timestamp in epochs, batches
# and samples; dur is batches over the run's). Composer also parses tok, iter and sec, which this
# loop never advances: an ema_start of '10tok' would never start.
TIME_UNITS = {"ba": "batches", "ep": "epochs", "sp": "samples", "dur": "a fraction of training"}
# Composer's grammar (Time.from_timestring): a number, then a unit. Its number is whatever
# Python's float() reads ('inf', ' 1_0'); this takes plain decimals and exponents only.
TIME_STRING = re.compile(r"^((?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)([a-z]+)$", re.IGNORECASE)
_STEPS = ("ba", "ep")  # what Composer's EMA and SWA update on (Event.BATCH_END, EPOCH_END)

ALGORITHMS: dict[str, AlgoSpec] = {
    "blurpool": AlgoSpec(
        "BlurPool",
        {"replace_convs": True, "replace_maxpools": True, "blur_first": True, "min_channels": 16},
        ranges={"min_channels": (0, 4096)},
        needs_structure="downsamples",
        help="anti-aliased downsampling",
    ),
    "channels_last": AlgoSpec("ChannelsLast", {}, needs_structure="images", help="NHWC memory format"),
    "ema": AlgoSpec(
        "EMA",
        {"half_life": "1000ba", "smoothing": None, "ema_start": "0.0dur", "update_interval": None},
        ranges={"smoothing": _P01},
        # update_interval defaults to one of half_life's unit, so half_life's unit is one it takes.
        times={
            "half_life": TimeParam(_STEPS, positive=True, nullable=True),
            "ema_start": TimeParam(tuple(TIME_UNITS)),
            "update_interval": TimeParam(_STEPS, positive=True, nullable=True),
        },
        help="exponential moving average of weights",
    ),
    "progressive_resizing": AlgoSpec(
        "ProgressiveResizing",
        {
            "mode": "resize",
            "initial_scale": 0.5,
            "finetune_fraction": 0.2,
            "delay_fraction": 0.5,
            "size_increment": 4,
            "resize_targets": False,
        },
        ranges={
            "initial_scale": (0.05, 1.0),
            "finetune_fraction": _P01,
            "delay_fraction": _P01,
            "size_increment": (1, 64),
        },
        choices={"mode": ("resize", "crop")},
        needs_structure="images",
        resizes=True,
        help="train on smaller images first",
    ),
    "label_smoothing": AlgoSpec(
        "LabelSmoothing", {"smoothing": 0.1}, ranges={"smoothing": (0.0, 0.99)}, mixes_targets=True
    ),
    "mixup": AlgoSpec(
        "MixUp", {"alpha": 0.2, "interpolate_loss": False}, ranges={"alpha": (1e-6, 100.0)}, mixes_targets=True
    ),
    "cutmix": AlgoSpec(
        "CutMix",
        {"alpha": 1.0, "interpolate_loss": False, "uniform_sampling": False},
        ranges={"alpha": (1e-6, 100.0)},
        mixes_targets=True,
        needs_structure="images",
    ),
    "cutout": AlgoSpec(
        "CutOut",
        {"num_holes": 1, "length": 0.5, "uniform_sampling": False},
        ranges={"num_holes": (1, 64), "length": _P01},
        needs_structure="images",
    ),
    "colout": AlgoSpec(
        "ColOut",
        {"p_row": 0.15, "p_col": 0.15, "batch": True, "resize_target": "auto"},
        ranges={"p_row": _P01, "p_col": _P01},
        needs_structure="images",
        resizes=True,  # drops rows and columns of the batch
    ),
    "randaugment": AlgoSpec(
        "RandAugment",
        {"severity": 9, "depth": 2, "augmentation_set": "all"},
        ranges={"severity": (1, 10), "depth": (1, 10)},
        choices={"augmentation_set": ("all", "safe", "original")},
        needs_torch_loader=True,
        needs_structure="images",
    ),
    "augmix": AlgoSpec(
        "AugMix",
        {"severity": 3, "depth": -1, "width": 3, "alpha": 1.0, "augmentation_set": "all"},
        ranges={"severity": (1, 10), "depth": (-1, 10), "width": (1, 10)},
        choices={"augmentation_set": ("all", "safe", "original")},
        needs_torch_loader=True,
        needs_structure="images",
    ),
    "sam": AlgoSpec(
        "SAM",
        {"rho": 0.05, "epsilon": 1e-12, "interval": 1},
        ranges={"rho": (0.0, 10.0), "interval": (1, 10_000)},
        help="sharpness-aware minimisation (two passes per step)",
    ),
    "swa": AlgoSpec(
        "SWA",
        {
            "swa_start": "0.7dur",
            "swa_end": "0.97dur",
            "update_interval": "1ep",
            "schedule_swa_lr": False,
            "anneal_strategy": "linear",
            "anneal_steps": 10,
            "swa_lr": None,
        },
        ranges={"anneal_steps": (1, 1_000_000), "swa_lr": (0.0, 10.0)},
        choices={"anneal_strategy": ("linear", "cos")},
        times={
            "swa_start": TimeParam(("ep", "dur")),
            "swa_end": TimeParam(("ep", "dur")),
            "update_interval": TimeParam(_STEPS, positive=True),
        },
    ),
    "selective_backprop": AlgoSpec(
        "SelectiveBackprop",
        {"start": 0.5, "end": 0.9, "keep": 0.5, "scale_factor": 1.0, "interrupt": 2},
        ranges={"start": _P01, "end": _P01, "keep": (0.01, 1.0), "scale_factor": (0.05, 1.0), "interrupt": (0, 1000)},
        needs_structure="images",  # scale_factor resizes its inputs as images
    ),
    "stochastic_depth": AlgoSpec(
        "StochasticDepth",
        {"stochastic_method": "block", "drop_rate": 0.2, "drop_distribution": "linear", "drop_warmup": 0.0},
        fixed={"target_layer_name": "ResNetBottleneck"},
        ranges={"drop_rate": _P01, "drop_warmup": _P01},
        choices={"stochastic_method": ("block", "sample"), "drop_distribution": ("uniform", "linear")},
        needs_structure="bottleneck",
    ),
    "squeeze_excite": AlgoSpec(
        "SqueezeExcite",
        {"latent_channels": 64, "min_channels": 128},
        ranges={"latent_channels": (1, 4096), "min_channels": (1, 4096)},
        needs_structure="images",
    ),
    "ghost_batchnorm": AlgoSpec(
        "GhostBatchNorm", {"ghost_batch_size": 32}, ranges={"ghost_batch_size": (1, 65536)}, needs_structure="batchnorm"
    ),
    "layer_freezing": AlgoSpec(
        "LayerFreezing", {"freeze_start": 0.5, "freeze_level": 1.0}, ranges={"freeze_start": _P01, "freeze_level": _P01}
    ),
    "gradient_clipping": AlgoSpec(
        "GradientClipping",
        {"clipping_type": "norm", "clipping_threshold": 1.0},
        ranges={"clipping_threshold": (0.0, 1e6)},
        choices={"clipping_type": ("norm", "value", "adaptive")},
    ),
    "weight_standardization": AlgoSpec(
        "WeightStandardization",
        {"n_last_layers_ignore": 0},
        ranges={"n_last_layers_ignore": (0, 100)},
        needs_structure="images",
    ),
    # Transformers. Each is effsearch's subclass of Composer's (trainer/composer/textalgorithms.py):
    # Composer's act on its own HuggingFaceModel wrapper only.
    "low_precision_layernorm": AlgoSpec(
        "LowPrecisionLayerNorm",
        {},
        fixed={"apply_at": "init"},
        needs_structure="layernorm",
        help="LayerNorm in the autocast precision (CUDA, amp)",
    ),
    "gated_linear_units": AlgoSpec(
        "GatedLinearUnits",
        {"gated_layer_bias": False, "non_gated_layer_bias": False},
        fixed={"act_fn": None},
        needs_structure="bert",
        help="BERT's feed-forward blocks as gated linear units",
    ),
    "seq_length_warmup": AlgoSpec(
        "SeqLengthWarmup",
        {"duration": 0.3, "min_seq_length": 8, "step_size": 8},
        # max_seq_length is dataset.max_length, given when the run builds it.
        fixed={"max_seq_length": 1024, "truncate": True, "preserve_end_of_sequence": False},
        ranges={"duration": _P01, "min_seq_length": (1, 65_536), "step_size": (1, 65_536)},
        needs_structure="tokens",
        help="train on shorter sequences first, growing to dataset.max_length",
    ),
    # In the table so that asking for it says why not (rules.py refuses it on every model).
    "alibi": AlgoSpec(
        "Alibi",
        {"max_sequence_length": 8192, "train_sequence_length_scaling": 0.25},
        ranges={"max_sequence_length": (1, 1_000_000), "train_sequence_length_scaling": _P01},
        help="attention with linear biases (refused: broken on transformers 5)",
    ),
}

# The per-batch events each algorithm's ``match`` can accept (Composer's Event values; kept as
# strings so that validation does not import Composer). Unlisted algorithms act only on
# once-a-run or once-an-epoch events (INIT, AFTER_LOAD, FIT_START, EPOCH_END, EVAL_*).
BATCH_EVENTS = {
    "ema": ("batch_start", "batch_end"),  # update after each batch; training weights back before the next
    "progressive_resizing": ("after_dataloader",),
    "label_smoothing": ("before_loss", "after_loss"),
    "mixup": ("before_forward", "before_loss", "before_backward"),
    "cutmix": ("before_forward", "before_loss", "before_backward"),
    "cutout": ("after_dataloader",),
    "colout": ("after_dataloader",),
    "swa": ("batch_end",),
    "selective_backprop": ("after_dataloader",),
    "stochastic_depth": ("batch_start",),
    "gradient_clipping": ("after_train_batch",),
    "seq_length_warmup": ("after_dataloader",),
}
ALGORITHMS = {name: replace(spec, batch_events=BATCH_EVENTS.get(name, ())) for name, spec in ALGORITHMS.items()}
BY_COMPOSER_NAME = {spec.composer_name: spec for spec in ALGORITHMS.values()}

# Pairs that cannot both be on, and why.
CONFLICTS = {
    frozenset({"mixup", "cutmix"}): "both replace the targets with a mix; pick one",
    frozenset({"ema", "swa"}): "both replace the final weights with an average; pick one",
}

# Algorithms DDP cannot run: parameters stop getting gradients mid-training.
UNSHARDED = ("layer_freezing", "stochastic_depth")

# Algorithms that change the batch's shape from step to step (a compiled model recompiles).
RESHAPES_BATCHES = {
    "progressive_resizing": "it grows the image size during training",
    "colout": "it drops a random number of rows and columns each batch",
    "selective_backprop": "it keeps a loss-ranked part of each batch",
    "seq_length_warmup": "it grows the sequence length during training",
}


def check_algorithms(algos: dict) -> None:
    """Check the names and parameters in ``algorithms:``, in place: ``null`` or ``false`` turns an
    algorithm off (it is removed: the way to drop one a base file or --set's file has), ``true``
    or ``{}`` turns it on with Composer's defaults. The rules across fields (models, loaders,
    other algorithms) are ``effsearch.config.rules``."""
    for name, params in list(algos.items()):
        where = f"algorithms.{name}"
        if name not in ALGORITHMS:  # even one turned off: a misspelt name would turn nothing off
            raise ConfigError(where, f"unknown algorithm; known: {', '.join(sorted(ALGORITHMS))}")
        if params is None or params is False:
            del algos[name]
            continue
        if params is True:
            params = algos[name] = {}
        if not isinstance(params, dict):
            raise ConfigError(
                where,
                "must be a mapping of parameters ({} or true: on with defaults; null or "
                f"false: off); got {quote(params)}",
            )
        for key, value in params.items():
            check_param(ALGORITHMS[name], where, key, value)


def check_param(spec: AlgoSpec, where: str, key: str, value: Any) -> None:
    name = f"{where}.{key}"
    if key not in spec.params:
        allowed = ", ".join(spec.params) or "none"
        raise ConfigError(name, f"unknown parameter of {spec.composer_name}; allowed: {allowed}")
    if key in spec.times:
        why = time_problem(spec.times[key], key, value)
        if why:
            raise ConfigError(name, why)
        return
    default = spec.params[key]
    if isinstance(default, bool):
        ok = isinstance(value, bool)
        want = "true or false"
    elif isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        want = "a number"
    elif isinstance(default, str) and key not in spec.choices:
        ok = isinstance(value, str)
        want = "a string"
    else:  # None default: a number or null
        ok = value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
        want = "a number or null"
    if key in spec.choices:
        if value not in spec.choices[key]:
            raise ConfigError(name, f"must be one of {', '.join(map(str, spec.choices[key]))}; got {quote(value)}")
        return
    if not ok:
        raise ConfigError(name, f"must be {want}; got {quote(value)}")
    if key in spec.ranges and isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = spec.ranges[key]
        if not lo <= value <= hi:
            raise ConfigError(name, f"must be in [{lo}, {hi}]; got {quote(value)}")


def parse_time(text: str) -> tuple[float, str] | None:
    """(value, unit) of a Composer time string ('100ba' -> (100.0, 'ba')); None if it is not one."""
    match = TIME_STRING.match(text.strip())
    return (float(match.group(1)), match.group(2).lower()) if match else None


def time_problem(param: TimeParam, key: str, value: Any) -> str | None:
    """Why ``value`` is not a time string Composer and effsearch's loop take for ``key`` (None: it is).
    Composer's own errors come after ~20 s of set-up (Time.from_timestring, EMA's and SWA's checks)."""
    units = ", ".join(f"{u} {TIME_UNITS[u]}" for u in param.units)
    if value is None and param.nullable:
        return None
    if not isinstance(value, str):
        return f"must be {TIME} (units: {units}); got {quote(value)}"
    parsed = parse_time(value)
    if parsed is None or parsed[1] not in (*TIME_UNITS, "tok", "iter", "sec"):
        return f"must be {TIME}: a number and a unit ({units}); got {quote(value)}"
    number, unit = parsed
    if unit not in param.units:
        return f"unit {unit!r} is not allowed for {key} (allowed: {units}); got {quote(value)}"
    if unit != "dur" and not number.is_integer():
        return f"must be a whole number of {unit} ({TIME_UNITS[unit]}); got {quote(value)}"
    if unit == "dur" and number > 1:
        return f"a fraction of training (dur) must be in [0, 1]; got {quote(value)}"
    if param.positive and number == 0:
        return f"must be more than 0 {unit}; got {quote(value)}"
    return None
