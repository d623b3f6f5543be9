"""The language model's space: what a run on a corpus searches beside the shared dimensions.

Only a language-model run (``readers.lm_run``: its data or its probed model says so) gets these;
an image or text-classification study's catalogue is untouched, so it samples as before. Added:
Muon as a switch on AdamW (gated on its rule: a model with hidden 2-d weights) and its lr, the
warmup-stable-decay schedule's cool-down, the batch-size ramp and the sequence-length warm-up
(``trainer/techniques/ramps.py``), and the switches of a model whose builder takes them (its facts'
``switches``: the built-in gpt's QK-norm, ReLU², untied head, zero-initialised projections). Left
out, each with its reason in ``space show``: what the rules refuse a language model (CORDS, the
per-label and image algorithms: ``rules.lm_refused``) and what this space does not search for one
(SGD and K-FAC, multistep, accumulation, sparsity; a study file's range searches those anyway).
"""

from __future__ import annotations

from effsearch.config import TrainConfig, rules
from effsearch.config.choices import GPT, GPT_SWITCHES
from effsearch.config.fields import get_path
from effsearch.config.readers import DEFAULTS, gpt_problem, optimizer
from effsearch.config.sources import facts
from effsearch.spaces.dims import Dim, gated, optimizer_switch

# The shapes a language model's schedule takes: cosine (the baseline's), warmup-stable-decay and one-cycle.
LM_SCHEDULES = ("cosine", "wsd", "onecycle")
RAMPS = (0.0, 0.1, 0.25, 0.5)  # shares of training a ramp lasts (0: off)
_NOT_SEARCHED = "not searched for a language model (a range in the study file searches it)"
# What the language model's space leaves at the base value, and why.
LEFT_OUT = {
    "optimizer.name": "a language model trains with adamw, or muon (optimizer.muon)",
    "optimizer.kfac": "SGD's; a language model trains with adamw or muon",
    "optimizer.kfac_damping": "SGD's; a language model trains with adamw or muon",
    "optimizer.kfac_update_every": "SGD's; a language model trains with adamw or muon",
    "optimizer.lr": "SGD's; a language model trains with adamw or muon",
    "optimizer.nesterov": "SGD's; a language model trains with adamw or muon",
    "schedule.gamma": "multistep is not among a language model's schedules",
    "accumulate": "batch_size and batch_ramp size a language model's steps; " + _NOT_SEARCHED,
    "sparsity": _NOT_SEARCHED,
    "sparsity.target": _NOT_SEARCHED,
    "sparsity.schedule": _NOT_SEARCHED,
}


def _subject(name: str) -> str:
    """The subject a dimension's rules are about: a parameter follows its switch's."""
    if name.startswith("selection."):
        return "selection.strategy"
    return ".".join(name.split(".")[:2]) if name.startswith("algorithms.") else name


def _switch_dim(name: str, choices: tuple) -> Dim:
    path = f"model.kwargs.{name}"
    return Dim(
        path,
        "model",
        "cat",
        choices=choices,
        getter=lambda cfg: {**GPT, **(get_path(cfg, "model.kwargs") or {})}[name],
        extra={"check": lambda v: gpt_problem({name: v})},
        help=f"the model's {name} (model.kwargs)",
    )


def _ramp(name: str, help_: str) -> Dim:
    """A ramp's share of training (0: off), gated on its rules (a language model, compile off)."""
    return Dim(name, "budget", "cat", choices=RAMPS, off=0.0, **gated(name), extra={"field": name}, help=help_)


def _muon_dims() -> list[Dim]:
    """Muon as a switch on AdamW (gated on its rule: hidden 2-d weights), and its lr."""
    switch = Dim(
        "optimizer.muon",
        "optimizer",
        "cat",
        choices=(False, True),
        **gated(
            "optimizer.muon",
            also=lambda cfg: optimizer(cfg) in ("adamw", "muon"),
            also_text="optimizer adamw",
            also_parents=("optimizer.name",),
        ),
        off=False,
        setter=optimizer_switch("muon", "adamw"),
        getter=lambda cfg: optimizer(cfg) == "muon",
        extra={"field": "optimizer.name"},
        help="Muon for the hidden 2-d weights, AdamW for the rest (optimizer muon)",
    )
    lr = Dim(
        "optimizer.lr@muon",
        "optimizer",
        "float",
        low=3e-4,
        high=3e-2,
        log=True,
        path="optimizer.lr",
        when=lambda cfg: optimizer(cfg) == "muon",
        when_text="optimizer muon",
        parents=("optimizer.name",),
        help="peak lr (Muon, scaled to AdamW's update size)",
    )
    return [switch, lr]


def lm_dims() -> dict[str, list[Dim]]:
    """The language model's dimensions, each list to be sampled right after the dimension it is keyed on."""
    switch, lr = _muon_dims()
    cooldown = Dim(
        "schedule.cooldown_fraction",
        "schedule",
        "float",
        low=0.1,
        high=0.6,
        when=lambda cfg: get_path(cfg, "schedule.name") == "wsd",
        when_text="schedule wsd",
        parents=("schedule.name",),
        off=DEFAULTS["schedule.cooldown_fraction"],  # another schedule: the field as it must be then
        help="wsd: the last share of training, where the lr cools down",
    )
    return {
        "batch_size": [_ramp("batch_ramp", "share of training over which the batch grows from a quarter")],
        "dataset.max_length": [_ramp("length_warmup", "share of training over which the windows grow from a quarter")],
        "model.pooling": [_switch_dim(name, choices) for name, choices in GPT_SWITCHES.items()],
        "optimizer.name": [switch],
        "optimizer.lr@adamw": [lr],
        "schedule.warmup_fraction": [cooldown],
    }


def language_model(dims: list[Dim], base: TrainConfig) -> list[Dim]:
    """``dims`` (the shared catalogue, in sampling order) as a language model's space: its own
    dimensions inserted, and the shared ones it samples differently changed."""
    by_name = {d.name: d for d in dims}
    by_name["schedule.name"].choices = LM_SCHEDULES
    shapes = ("cosine", "linear", "onecycle", "wsd")
    final = by_name["schedule.final_lr_fraction"]
    final.when, final.when_text = (
        (lambda cfg: get_path(cfg, "schedule.name") in shapes),
        "schedule cosine, onecycle or wsd",
    )
    # AdamW's lr and weight decay around a language model's (the lr is at batch 128 where the batch is searched).
    by_name["optimizer.lr@adamw"].low, by_name["optimizer.lr@adamw"].high = 3e-4, 3e-2
    decay = by_name["optimizer.weight_decay"]
    decay.low, decay.high = 1e-3, 0.3
    out = []
    added = lm_dims()
    for d in dims:
        out.append(d)
        out += added.get(d.name, [])
    return out


def leave_out(by_name: dict[str, Dim], base: TrainConfig) -> None:
    """Mark what a language model's space does not search, with the reason: the rules' refusals
    (no range can change the model: ``model_bound``), this space's choices, and the switches the
    model's builder does not take."""
    known = facts(base.to_dict()["model"])
    for name, d in by_name.items():
        why = rules.lm_refused(_subject(name))
        if why and not d.extra.get("unavailable"):
            d.extra.update(unavailable=why, model_bound=True)
        elif name in LEFT_OUT:
            d.extra["unavailable"] = LEFT_OUT[name]
        elif name.startswith("model.kwargs.") and (known is None or name.rsplit(".", 1)[1] not in known.switches):
            why_not = f"model.name {base.model.name!r} takes no such switch (the built-in gpt's)"
            d.extra.update(unavailable=why_not, model_bound=True)
    muon = by_name["optimizer.muon"]
    blocked = rules.blockers("optimizer.muon", {**base.to_dict(), "optimizer": {"name": "muon"}})
    if blocked:
        muon.extra.update(unavailable=blocked[0].error(base.to_dict()).message, model_bound=True)
