"""TrainConfig: the one currency between studies, the trainer and export.

A tree of dataclasses, loaded from and dumped to YAML. Every field is checked on
load; errors name the file, the dotted field and what is allowed (exit code 2 in
the CLI), in the spirit of scikit-learn's parameter validation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A config value that is wrong; ``str()`` names the source and the field."""

    def __init__(self, field_name: str, message: str, source: str | None = None):
        self.field = field_name
        self.message = message
        self.source = source
        super().__init__(self._text())

    def _text(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return f"{where}{self.field}: {self.message}" if self.field else f"{where}{self.message}"

    def with_source(self, source: str) -> ConfigError:
        return ConfigError(self.field, self.message, source)


def spec(default: Any = dataclasses.MISSING, *, choices=None, low=None, high=None,
         low_open=False, high_open=False, factory=None, help: str = ""):
    """A dataclass field with its allowed values attached."""
    meta = {"choices": choices, "low": low, "high": high, "low_open": low_open,
            "high_open": high_open, "help": help}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


DATASETS = ("digits", "fashion-mnist", "cifar10", "cifar100", "synthetic")
MODELS = ("tiny-cnn", "resnet9", "resnet20", "resnet56", "resnet-bottleneck")
# Each model's channel width at ``model.width: 0``.
MODEL_WIDTHS = {"tiny-cnn": 32, "resnet9": 64, "resnet20": 16, "resnet56": 16, "resnet-bottleneck": 16}
OPTIMIZERS = ("sgd", "adamw", "sgdw", "kfac-sgd")
# Optimizers torch can step with one fused kernel (Composer's DecoupledSGDW has no fused path).
FUSABLE = ("sgd", "adamw", "kfac-sgd")
SCHEDULES = ("constant", "multistep", "cosine", "linear", "onecycle")
PRECISIONS = ("fp32", "amp_fp16", "amp_bf16")
DEVICES = ("auto", "cpu", "cuda")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs")
LOADERS = ("torch", "ffcv")
BACKENDS = ("auto", "gloo", "nccl")
COMPRESSIONS = ("none", "fp16", "bf16", "powersgd", "topk", "randomk", "threshold", "terngrad", "qsgd")
# Methods effsearch writes as DDP hooks (the others are torch's own hooks); error feedback applies to these
# and to PowerSGD (torch's own residual memory).
SPARSIFIERS = ("topk", "randomk", "threshold")
QUANTIZERS = ("terngrad", "qsgd")
QUANTIZE = ("none", "int8")
SELECTIONS = ("full", "random", "random-online", "glister", "glister-pb", "glister-pc", "craig", "craig-pb",
              "craig-pc", "gradmatch", "gradmatch-pb", "gradmatch-pc")
# CORDS strategies that return per-sample weights (the loss uses them).
WEIGHTED_SELECTIONS = tuple(s for s in SELECTIONS if s.startswith(("craig", "gradmatch")))
# Strategies that look at the model (their first subset is random unless kappa > 0, as in CORDS).
MODEL_SELECTIONS = tuple(s for s in SELECTIONS if s.startswith(("glister", "craig", "gradmatch")))
GREEDY = {"glister": ("auto", "naive", "stochastic"), "craig": ("auto", "lazy", "naive", "stochastic")}


@dataclass
class DatasetConfig:
    name: str = spec("digits", choices=DATASETS)
    data_fraction: float = spec(1.0, low=0.0, high=1.0, low_open=True,
                                help="stratified share of the training set used")
    val_fraction: float = spec(0.1, low=0.0, high=0.5, low_open=True,
                               help="held-out validation share carved from the training set")
    split_seed: int = spec(0, low=0)
    image_size: int | None = spec(None, low=8, high=512,
                                  help="resize images to this side (digits defaults to 32)")
    flip: bool | None = spec(None, help="random horizontal flips (default: on for CIFAR only)")
    crop_padding: int = spec(2, low=0, high=16, help="random pad-and-crop; 0 switches it off")
    synthetic_size: int = spec(512, low=16, high=1_000_000,
                               help="number of images of the synthetic dataset")


@dataclass
class ModelConfig:
    name: str = spec("tiny-cnn", choices=MODELS)
    width: int = spec(0, low=0, high=1024, help="channels of the first layer (0: the model's default, "
                                                 "MODEL_WIDTHS)")


@dataclass
class OptimizerConfig:
    name: str = spec("sgd", choices=OPTIMIZERS)
    lr: float = spec(0.05, low=0.0, high=10.0, low_open=True)
    weight_decay: float = spec(5e-4, low=0.0, high=1.0)
    momentum: float = spec(0.9, low=0.0, high=1.0, high_open=True)
    nesterov: bool = spec(True)
    beta2: float = spec(0.999, low=0.0, high=1.0, low_open=True, high_open=True)
    scale_lr_with_batch: bool = spec(False, help="multiply lr by the effective batch / 128 (effective batch: "
                                                 "batch_size x accumulate x distributed.processes)")
    fused: bool | None = spec(None, help="one fused kernel per optimizer step (null: fused on CUDA, torch's "
                                         "default on CPU); sgd, adamw, kfac-sgd")
    kfac_damping: float = spec(1e-3, low=0.0, high=10.0, low_open=True,
                               help="kfac-sgd: Tikhonov damping added to the Kronecker-factored Fisher")
    kfac_update_every: int = spec(10, low=1, high=100_000,
                                  help="kfac-sgd: steps between Kronecker-factor (and inverse) updates")


@dataclass
class ScheduleConfig:
    name: str = spec("cosine", choices=SCHEDULES)
    warmup_fraction: float = spec(0.0, low=0.0, high=0.5, help="share of training spent warming up")
    milestones: list = spec(factory=lambda: [0.5, 0.75],
                            help="multistep: fractions of training where lr drops")
    gamma: float = spec(0.1, low=0.0, high=1.0, low_open=True)
    final_lr_fraction: float = spec(0.0, low=0.0, high=1.0, help="lr at the end / peak lr")


@dataclass
class SparsityConfig:
    target: float = spec(0.0, low=0.0, high=0.99, help="share of conv/linear weights set to zero")
    schedule: str = spec("polynomial", choices=("constant", "polynomial"))
    start: float = spec(0.1, low=0.0, high=1.0, high_open=True, help="fraction of training")
    end: float = spec(0.75, low=0.0, high=1.0, low_open=True, help="fraction of training")
    update_every: int = spec(20, low=1, high=100_000, help="steps between mask updates")


@dataclass
class SelectionConfig:
    strategy: str = spec("full", choices=SELECTIONS,
                         help="CORDS strategy; -pb per batch, -pc per class (see effsearch.trainer.selection)")
    fraction: float = spec(1.0, low=0.0, high=1.0, low_open=True, help="subset size / training set size")
    select_every: int = spec(5, low=1, high=10_000, help="epochs between selections")
    kappa: float = spec(0.0, low=0.0, high=1.0, high_open=True,
                        help="share of the budget trained on full data before selection starts (CORDS)")
    eta: float = spec(0.03, low=0.0, high=10.0, low_open=True, help="GLISTER one-step learning rate")
    lam: float = spec(0.5, low=0.0, high=100.0, help="GradMatch OMP regularisation (lambda)")
    greedy: str = spec("auto", choices=("auto", "naive", "stochastic", "lazy"),
                       help="GLISTER: naive or stochastic (auto: stochastic where it fits the data); "
                            "CRAIG: lazy (auto), naive or stochastic")
    omp_eps: float = spec(1e-100, low=0.0, high=1.0, help="GradMatch OMP tolerance")


@dataclass
class CompressionConfig:
    method: str = spec("none", choices=COMPRESSIONS, help="gradient compression as a DDP communication hook")
    ratio: float = spec(0.01, low=0.0, high=1.0, low_open=True,
                        help="topk, randomk: share of gradient entries sent")
    threshold: float = spec(1e-3, low=0.0, high=1e6, low_open=True,
                            help="threshold: entries with |g| >= this are sent")
    qstates: int = spec(255, low=1, high=32_767, help="qsgd: quantization levels s (sends log2(2s+1) bits an entry)")
    rank: int = spec(2, low=1, high=1024, help="powersgd: matrix approximation rank")
    granularity: str = spec("layerwise", choices=("layerwise", "entire-model"),
                            help="compress each layer's gradient, or all of them as one vector")
    error_feedback: bool = spec(False, help="keep what compression dropped and add it to the next gradient")


@dataclass
class DistributedConfig:
    processes: int = spec(1, low=1, high=1024, help="data-parallel processes (DDP); effsearch train starts them")
    backend: str = spec("auto", choices=BACKENDS, help="auto: nccl on CUDA, gloo on CPU")
    compression: CompressionConfig = spec(factory=CompressionConfig)


@dataclass
class TrainConfig:
    dataset: DatasetConfig = spec(factory=DatasetConfig)
    model: ModelConfig = spec(factory=ModelConfig)
    epochs: float = spec(5, low=0.0, high=10_000, low_open=True, help="training budget in epochs")
    batch_size: int = spec(128, low=1, high=65_536, help="per process and per micro-batch")
    accumulate: int = spec(1, low=1, high=1024, help="micro-batches per optimizer step (gradient accumulation)")
    optimizer: OptimizerConfig = spec(factory=OptimizerConfig)
    schedule: ScheduleConfig = spec(factory=ScheduleConfig)
    algorithms: dict = spec(factory=dict, help="Composer algorithm name -> its parameters")
    sparsity: SparsityConfig = spec(factory=SparsityConfig)
    selection: SelectionConfig = spec(factory=SelectionConfig)
    loader: str = spec("torch", choices=LOADERS)
    precision: str = spec("fp32", choices=PRECISIONS)
    compile: bool = spec(False, help="torch.compile the model (compile time counts as train time; "
                                     "also in final.compile_seconds)")
    compile_mode: str = spec("default", choices=COMPILE_MODES, help="torch.compile's mode, when compile is on")
    channels_last: bool = spec(False)
    device: str = spec("auto", choices=DEVICES)
    cudnn_benchmark: bool = spec(True, help="let cuDNN time its kernels for each new shape (CUDA only)")
    distributed: DistributedConfig = spec(factory=DistributedConfig)
    quantize: str = spec("none", choices=QUANTIZE, help="post-training int8 quantization of the delivered model, "
                                                        "measured after training (quantized_bytes, accuracies)")
    seed: int = spec(0, low=0)
    target_accuracy: float = spec(0.9, low=0.0, high=1.0)
    eval_every: float = spec(1.0, low=0.0, high=10_000, low_open=True,
                             help="epochs between evaluations (fractions allowed)")

    # -- I/O ---------------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)

    def hash(self) -> str:
        """Stable short hash of the config (same config -> same hash)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> TrainConfig:
        try:
            cfg = _build(cls, data, "")
            validate(cfg)
        except ConfigError as e:
            raise e.with_source(source) if source else e
        return cfg

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: list[str] | None = None) -> TrainConfig:
        data = read_yaml(path)
        for item in overrides or []:
            apply_override(data, item, source=str(path))
        return cls.from_dict(data, source=str(path))

    def dump(self, path: str | Path, header: str = "") -> None:
        text = self.to_yaml()
        if header:
            text = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines()) + text
        Path(path).write_text(text)

    def replace(self, **dotted: Any) -> TrainConfig:
        """Copy with dotted keys replaced, validated: ``cfg.replace(**{"optimizer.lr": 0.1})``."""
        data = self.to_dict()
        for key, value in dotted.items():
            _set_dotted(data, key, value)
        return TrainConfig.from_dict(data)


class Loader(yaml.SafeLoader):
    """SafeLoader that reads ``1e-3`` and ``5e-3`` as numbers (YAML 1.2), not strings.

    PyYAML follows YAML 1.1, whose float needs a dot (``5.0e-3``): ``lr: 5e-3`` would be the
    string '5e-3' and be refused as "must be a number". Every reader of user YAML uses this.
    """


Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"))


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader)


# What `read_yaml` says about an empty file, by what the file should be.
MINIMAL_TRAIN = "a minimal TrainConfig is `dataset: {name: digits}` (every other field has a default)"


def read_yaml(path: str | Path, minimal: str = MINIMAL_TRAIN) -> dict:
    p = Path(path)
    if not p.is_file():
        raise ConfigError("", f"no such file: {p}")
    try:
        data = load_yaml(p.read_text())
    except yaml.YAMLError as e:
        raise ConfigError("", f"not valid YAML: {e}", str(p)) from None
    if data is None:  # empty, or only comments: a mistake more often than a wish for all defaults
        raise ConfigError("", f"the file is empty; {minimal}", str(p))
    if not isinstance(data, dict):
        raise ConfigError("", f"expected a mapping at the top level, got {type(data).__name__}", str(p))
    return data


def apply_override(data: dict, item: str, source: str | None = None) -> None:
    """Apply one ``KEY=VALUE`` (dotted key, YAML value) to a raw config dict."""
    if "=" not in item:
        raise ConfigError("--set", f"expected KEY=VALUE, got {item!r}", source)
    key, raw = item.split("=", 1)
    try:
        value = load_yaml(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    _set_dotted(data, key.strip(), value)


def _set_dotted(data: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    node[parts[-1]] = value


# -- checking -----------------------------------------------------------------

def _type_name(tp) -> str:
    return getattr(tp, "__name__", str(tp)).replace("NoneType", "null")


def _build(cls, data: Any, prefix: str):
    if not isinstance(data, dict):
        raise ConfigError(prefix.rstrip(".") or "<root>",
                          f"expected a mapping, got {type(data).__name__} {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise ConfigError(prefix + str(unknown[0]),
                          f"unknown key; allowed keys here: {', '.join(fields)}")
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            continue
        kwargs[name] = _coerce(hints[name], data[name], prefix + name, f.metadata)
    return cls(**kwargs)


def _coerce(tp, value, name: str, meta):
    if dataclasses.is_dataclass(tp):
        return _build(tp, value if value is not None else {}, name + ".")
    args = typing.get_args(tp)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), tp) if args else tp
    if value is None:
        if optional:
            return None
        raise ConfigError(name, f"must be a {_type_name(base)}, got null")
    if base is bool:
        if not isinstance(value, bool):
            raise ConfigError(name, f"must be true or false, got {value!r}")
    elif base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise ConfigError(name, f"must be an integer, got {value!r}")
    elif base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(name, f"must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):  # NaN passes every range check (all comparisons are false)
            raise ConfigError(name, f"must be a finite number, got {value!r}")
    elif base is str:
        if not isinstance(value, str):
            raise ConfigError(name, f"must be a string, got {value!r}")
    elif base is dict:
        if not isinstance(value, dict):
            raise ConfigError(name, f"must be a mapping, got {value!r}")
        check_finite(value, name)
    elif base is list:
        if not isinstance(value, list):
            raise ConfigError(name, f"must be a list, got {value!r}")
        check_finite(value, name)
    choices = meta.get("choices")
    if choices and value not in choices:
        raise ConfigError(name, f"must be one of {', '.join(choices)}; got {value!r}")
    low, high = meta.get("low"), meta.get("high")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        bad_low = low is not None and (value <= low if meta.get("low_open") else value < low)
        bad_high = high is not None and (value >= high if meta.get("high_open") else value > high)
        if bad_low or bad_high:
            lo = "(" if meta.get("low_open") else "["
            hi = ")" if meta.get("high_open") else "]"
            raise ConfigError(name, f"must be in {lo}{low}, {high}{hi}; got {value!r}")
    return value


def check_finite(value: Any, name: str) -> None:
    """Refuse NaN and infinities anywhere inside ``value`` (algorithm parameters, milestones)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(name, f"must be a finite number, got {value!r}")
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, f"{name}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_finite(v, f"{name}[{i}]")


def _validate_selection(cfg: TrainConfig) -> None:
    sel = cfg.selection
    if cfg.loader != "torch":
        raise ConfigError("selection.strategy", f"{sel.strategy!r} needs loader 'torch' (it serves the "
                          f"subset through a sampler); loader is {cfg.loader!r}")
    family = sel.strategy.split("-")[0]
    if sel.greedy != "auto" and sel.greedy not in GREEDY.get(family, ()):
        where = "; ".join(f"{f}: {', '.join(g)}" for f, g in GREEDY.items())
        raise ConfigError("selection.greedy", f"{sel.greedy!r} does not apply to {sel.strategy!r} "
                          f"(greedy methods by strategy: {where}; others take 'auto')")
    if sel.strategy in MODEL_SELECTIONS and int(sel.kappa * cfg.epochs) == 0 \
            and sel.select_every >= math.ceil(cfg.epochs):
        raise ConfigError("selection.select_every",
                          f"{sel.strategy!r} would never run: without a warm start (int(kappa * epochs) = 0) "
                          f"the first subset is random, as in CORDS, and the strategy first selects after "
                          f"select_every = {sel.select_every} epochs, but training lasts {cfg.epochs:g} epochs; "
                          "lower selection.select_every or raise selection.kappa")


def effective_batch(cfg: TrainConfig) -> int:
    """Samples per optimizer step: batch_size x accumulate x processes (the lr rule reads this)."""
    return cfg.batch_size * cfg.accumulate * cfg.distributed.processes


def _validate_efficiency(cfg: TrainConfig) -> None:
    """Distributed training, compression, the optimizer's fused/K-FAC paths."""
    o, d = cfg.optimizer, cfg.distributed
    c = d.compression
    if o.fused and o.name not in FUSABLE:
        raise ConfigError("optimizer.fused", f"{o.name!r} has no fused step (Composer's DecoupledSGDW); "
                          f"fused applies to {', '.join(FUSABLE)}; set it to null or false")
    if o.name == "kfac-sgd":
        # K-FAC reads each layer's inputs and output gradients through module hooks.
        if cfg.compile:
            raise ConfigError("optimizer.name", "'kfac-sgd' cannot run with compile: its module hooks come and go "
                              "between steps and each change recompiles the model; set compile: false")
        if cfg.precision == "amp_fp16":
            raise ConfigError("optimizer.name", "'kfac-sgd' cannot run with precision amp_fp16: the loss scale "
                              "would enter its Fisher factors; use fp32 or amp_bf16")
        if "sam" in cfg.algorithms:
            raise ConfigError("algorithms.sam", "cannot be combined with optimizer 'kfac-sgd' (SAM wraps the "
                              "optimizer and runs two passes a step); pick one")
    if d.processes == 1:
        if c.method != "none":
            raise ConfigError("distributed.compression.method",
                              f"{c.method!r} compresses what processes exchange; distributed.processes is 1 "
                              "(raise it, or use method none)")
        return
    if d.backend == "nccl" and cfg.device == "cpu":
        raise ConfigError("distributed.backend", "'nccl' needs CUDA devices; device is 'cpu' (use gloo or auto)")
    if cfg.loader != "torch":
        raise ConfigError("loader", f"{cfg.loader!r} is not sharded across processes; with distributed.processes "
                                    "> 1 use loader torch")
    from effsearch.trainer.algorithms import ALGORITHMS

    for name in cfg.algorithms:
        if ALGORITHMS.get(name) and ALGORITHMS[name].needs_torch_loader:
            raise ConfigError(f"algorithms.{name}", "its per-image loader is not sharded across processes; "
                                                    "with distributed.processes > 1 leave it out")
        if name in ("layer_freezing", "stochastic_depth"):
            raise ConfigError(f"algorithms.{name}", "leaves parameters without gradients mid-training, which "
                              "DDP's reducer cannot wait for; with distributed.processes > 1 leave it out")
    if c.error_feedback and c.method in ("none", "fp16", "bf16"):
        raise ConfigError("distributed.compression.error_feedback",
                          f"applies to {', '.join(SPARSIFIERS + QUANTIZERS + ('powersgd',))}; method is {c.method!r}")
    if c.method == "powersgd" and c.granularity != "layerwise":
        raise ConfigError("distributed.compression.granularity",
                          "powersgd compresses each layer's gradient matrix; use layerwise")


def validate(cfg: TrainConfig) -> None:
    """Rules that span fields. Algorithm and device rules live with the trainer."""
    s = cfg.schedule
    if s.name == "multistep":
        ms = s.milestones
        if not ms or not all(isinstance(m, (int, float)) and 0 < m < 1 for m in ms):
            raise ConfigError("schedule.milestones", f"must be fractions in (0, 1); got {ms!r}")
    sp = cfg.sparsity
    if sp.target > 0 and sp.schedule == "polynomial" and sp.end <= sp.start:
        raise ConfigError("sparsity.end", f"must be after sparsity.start ({sp.start}); got {sp.end}")
    sel = cfg.selection
    if sel.strategy == "full" and sel.fraction != 1.0:
        raise ConfigError("selection.fraction",
                          "only applies with a selection strategy; set selection.strategy "
                          f"(one of {', '.join(SELECTIONS[1:])}) or fraction to 1.0")
    if sel.strategy != "full":
        _validate_selection(cfg)
    _validate_efficiency(cfg)
    # Algorithm names and parameters are checked against Composer's signatures.
    from effsearch.trainer.algorithms import check_algorithms
    check_algorithms(cfg)
