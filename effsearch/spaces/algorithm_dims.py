"""The algorithm dimensions of the default space: a switch per Composer algorithm the search
offers, gated on the rules about it (``effsearch.config.rules``), and its searched parameters.

``ALGO_PARAMS`` says which parameters are searched and over what range (inside the
algorithm table's own, ``effsearch.config.algorithms``); ``effsearch.spaces.default``
puts these dimensions after the system and optimizer choices the rules read.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from effsearch.config import TrainConfig, rules
from effsearch.config.algorithms import ALGORITHMS
from effsearch.config.rules import STRUCTURE, TAKES
from effsearch.config.sources import facts
from effsearch.spaces.dims import Dim, gated

# Each algorithm's searched parameters: name -> (kind, low, high, log) or ("cat", choices).
# Ranges stay inside ALGORITHMS' own ranges and away from Composer's cross-parameter
# rules (e.g. ProgressiveResizing needs delay_fraction + finetune_fraction <= 1).
ALGO_PARAMS: dict[str, dict] = {
    "label_smoothing": {"smoothing": ("float", 0.01, 0.3, False)},
    "mixup": {"alpha": ("float", 0.05, 1.0, True)},
    "cutmix": {"alpha": ("float", 0.1, 2.0, True)},
    "cutout": {"length": ("float", 0.1, 0.6, False)},
    "colout": {"p_row": ("float", 0.05, 0.3, False), "p_col": ("float", 0.05, 0.3, False)},
    "progressive_resizing": {
        "initial_scale": ("float", 0.3, 0.9, False),
        "finetune_fraction": ("float", 0.0, 0.4, False),
        "delay_fraction": ("float", 0.0, 0.6, False),
    },
    "ema": {"half_life": ("int", 10, 1000, True)},  # in batches
    "swa": {"swa_start": ("float", 0.5, 0.9, False)},  # fraction of training
    "sam": {"rho": ("float", 0.01, 0.5, True), "interval": ("int", 1, 10, False)},
    "selective_backprop": {"keep": ("float", 0.3, 0.9, False)},
    "layer_freezing": {"freeze_start": ("float", 0.3, 0.9, False), "freeze_level": ("float", 0.2, 1.0, False)},
    "stochastic_depth": {"drop_rate": ("float", 0.0, 0.5, False)},
    "gradient_clipping": {"clipping_threshold": ("float", 0.1, 10.0, True)},
    "randaugment": {"severity": ("int", 1, 10, False), "depth": ("int", 1, 3, False)},
    "augmix": {"severity": ("int", 1, 10, False)},
    "ghost_batchnorm": {"ghost_batch_size": ("cat", (16, 32, 64))},
    "blurpool": {},
    "squeeze_excite": {},
    "weight_standardization": {},
    # Transformers (the rules gate them on the probed model: token ids, layer norms, BERT's blocks).
    "seq_length_warmup": {"duration": ("float", 0.1, 0.5, False)},
    "low_precision_layernorm": {},
    "gated_linear_units": {},
    "alibi": {},
}
# Offered to no model, with the reason `space show --all` gives (its rule: config/rules.py).
BROKEN = {"alibi": "Composer's ALiBi is broken on transformers 5 (BERT: unexpected keyword 'cache'; GPT-2: no 'bias')"}
# Composer takes these as time strings; the search sees plain numbers.
TIME_PARAMS = {("ema", "half_life"): "ba", ("swa", "swa_start"): "dur"}
UNIT_WORDS = {"ba": "batches (20 is 20ba in a config)", "dur": "of training (0.5 is 0.5dur in a config)"}


def _switch(algo: str) -> Callable[[dict, bool], None]:
    def setter(cfg: dict, on: bool) -> None:
        algos = cfg.setdefault("algorithms", {})
        if on:
            algos.setdefault(algo, {})
        else:
            algos.pop(algo, None)

    return setter


def _has_algo(algo: str, cfg: dict) -> bool:
    return algo in (cfg.get("algorithms") or {})


def _time_string(unit: str) -> tuple[Callable[[Any], str], Callable[[Any], Any]]:
    def to_config(v: Any) -> str:
        return f"{int(v)}{unit}" if unit == "ba" else f"{float(v):g}{unit}"

    def from_config(s: Any) -> Any:
        if not isinstance(s, str) or not s.endswith(unit):
            raise ValueError(s)
        x = float(s[: -len(unit)])
        return int(x) if unit == "ba" else x

    return to_config, from_config


def algorithm_dims(base: dict, widths: tuple = ()) -> list[Dim]:
    """The algorithm switches and parameters; one the model's structure rules out (its facts:
    effsearch.config.sources) at the base and at every width in ``widths`` is unavailable."""
    model = base["model"]
    known = facts(model)
    dims = []
    for algo, params in ALGO_PARAMS.items():
        spec = ALGORITHMS[algo]
        gate = Dim(
            f"algorithms.{algo}",
            "algorithms",
            "cat",
            choices=(False, True),
            off=False,
            **gated(f"algorithms.{algo}"),
            help=spec.help or spec.composer_name,
            setter=_switch(algo),
            getter=partial(_has_algo, algo),
            extra={"algorithm": algo},
        )
        missing = bool(spec.needs_structure) and known is not None and not getattr(known, spec.needs_structure)
        if missing:
            gate.extra["unavailable"] = _why_not(algo, spec.needs_structure, model)
        elif _model_refuses(algo, base, widths):
            missing, gate.extra["unavailable"] = True, _model_refuses(algo, base, widths)
        elif algo in BROKEN:
            missing, gate.extra["unavailable"] = True, BROKEN[algo]
        gate.extra["model_bound"] = missing  # no range a study file gives can change the model
        dims.append(gate)
        for param, rng in params.items():
            to_cfg: Callable[[Any], Any] | None = None
            from_cfg: Callable[[Any], Any] | None = None
            if (algo, param) in TIME_PARAMS:
                to_cfg, from_cfg = _time_string(TIME_PARAMS[(algo, param)])
            default = spec.params[param]
            common: dict[str, Any] = dict(
                path=f"algorithms.{algo}.{param}",
                when=lambda cfg, a=algo: a in (cfg.get("algorithms") or {}),
                when_text=f"algorithms.{algo} on",
                parents=(f"algorithms.{algo}",),
                to_config=to_cfg,
                from_config=from_cfg,
                getter=lambda cfg, a=algo, p=param, d=default: (cfg.get("algorithms") or {}).get(a, {}).get(p, d),
                extra={"algorithm": algo, "param": param},
            )
            if (algo, param) in TIME_PARAMS:  # a number here, a time string in a config
                common["extra"]["unit"] = UNIT_WORDS[TIME_PARAMS[(algo, param)]]
            name = f"algorithms.{algo}.{param}"
            if rng[0] == "cat":
                dims.append(Dim(name, "algorithms", "cat", choices=rng[1], **common))
            else:
                kind, lo, hi, log = rng
                dims.append(Dim(name, "algorithms", kind, low=lo, high=hi, log=log, **common))
            if missing:
                dims[-1].extra.update(unavailable=gate.extra["unavailable"], model_bound=True)
    return dims


# What a rule may read for it to be about the model alone (its width is a dimension: every one is asked).
_MODEL_FIELDS = frozenset(("model.name", "model.kwargs", "model.width"))


def model_refuses(subject: str, on: dict, widths: tuple, also: tuple = ()) -> str | None:
    """Why ``subject``, on in the config ``on``, is refused at every width searched (None: at some it is
    not), by a rule that reads the model alone (and the fields in ``also``, such as the device)."""
    fields = _MODEL_FIELDS | set(also)
    model_rules = [r for r in rules.of(subject) if r.reads and set(r.reads) <= fields]
    for width in widths:
        if not any(r.broken({**on, "model": {**on["model"], "width": width}}) for r in model_rules):
            return None
    broken = [r for r in model_rules if r.broken(on)]
    return broken[0].error(on).message if broken else None


def _model_refuses(algo: str, base: dict, widths: tuple) -> str | None:
    """SqueezeExcite where no convolution has min_channels, at any width searched."""
    on = {**base, "algorithms": {algo: {}, **(base.get("algorithms") or {})}}
    return model_refuses(f"algorithms.{algo}", on, widths)


def _why_not(algo: str, need: str, model: dict) -> str:
    """Why ``algo`` is not offered on ``model``: what it needs that the model (its facts) has not."""
    name = model.get("name")
    if need in TAKES:
        other = "tokens" if need == "images" else "images"
        return f"model {name!r} takes {TAKES[other]}; {algo} works on {TAKES[need]}"
    return f"model {name!r} has no {STRUCTURE[need]}"


def fit_swa_start(dim: Dim, base: TrainConfig) -> None:
    """SWA's start is searched as a fraction of training: below the base's swa_end (the rules
    want it earlier, in the same unit), or not at all when that end is not a fraction."""
    end = (base.algorithms.get("swa") or {}).get("swa_end", ALGORITHMS["swa"].params["swa_end"])
    if not (isinstance(end, str) and end.endswith("dur")):
        dim.extra["unavailable"] = f"base's swa_end {end!r} is not a fraction of training (dur)"
        return
    assert dim.low is not None and dim.high is not None  # a float dimension
    dim.high = min(dim.high, float(end[:-3]) - 0.05)
    if dim.high <= dim.low:
        dim.extra["unavailable"] = f"base's swa_end {end!r} leaves no room after swa_start's low {dim.low:g}"
