"""The dimensions of the default space that only a text run has: the length texts are cut to, and
the built-in text encoder's depth, dropout and pooling.

Each is gated like the others: the encoder's fields on the rules about them
(``effsearch.config.rules``: they apply to ``text-encoder`` only), the length on the run being on
text (the dataset's name or the probed model says so), its choices the ones the rules about it
leave (a length beyond the probed model's positions is left out, and ``space show`` says so).
``effsearch.spaces.default`` puts them
after the model's width, and marks them unavailable, with the reason, for an image run.
"""

from __future__ import annotations

from effsearch.config import TrainConfig, rules
from effsearch.config.choices import POOLINGS, TEXT_ENCODER
from effsearch.config.fields import get_path, set_path
from effsearch.config.readers import text_run
from effsearch.spaces.dims import Dim, gated

TEXT_ONLY = ("dataset.max_length", "model.depth", "model.dropout", "model.pooling")


def lengths(base: int) -> tuple:
    """Half, the base and double the base length: attention's cost grows with its square, a
    feed-forward's with it; each length is tokenized once, then read from the token cache."""
    return tuple(sorted({max(8, base // 2), base, 2 * base}))


def allowed_lengths(base: TrainConfig) -> tuple[tuple, str]:
    """The base's lengths (``lengths``) no rule about ``dataset.max_length`` refuses with the base's
    model (its probed positions), and what ``space show`` says: on text, and any left out and why."""
    cfg = base.to_dict()
    kept: list[int] = []
    out: list[int] = []
    why: list[str] = []
    for length in lengths(base.dataset.max_length):
        set_path(cfg, "dataset.max_length", length)
        broken = [r.when for r in rules.of("dataset.max_length") if r.broken(cfg)]
        (out if broken and length != base.dataset.max_length else kept).append(length)
        why += [w for w in broken if w not in why]
    if not out:
        return tuple(kept), "text"
    return tuple(kept), f"text ({', '.join(map(str, out))} left out: not {', '.join(why)})"


def depths(base: int) -> tuple:
    return tuple(sorted({max(1, base - 1), base, base + 1}))


def text_dims(base: TrainConfig) -> list[Dim]:
    depth = base.model.depth or TEXT_ENCODER["depth"]
    choices, when_text = allowed_lengths(base)
    return [
        Dim(
            "dataset.max_length",
            "budget",
            "cat",
            choices=choices,
            when=text_run,
            when_text=when_text,
            extra={"field": "dataset.max_length"},
            help="tokens a text is cut to (half, base and double the base length, within the model's positions)",
        ),
        Dim(
            "model.depth",
            "model",
            "cat",
            choices=depths(depth),
            getter=lambda cfg: get_path(cfg, "model.depth") or TEXT_ENCODER["depth"],  # 0: the default
            **gated("model.depth"),
            extra={"field": "model.depth"},
            help="transformer layers (one fewer, the base, one more)",
        ),
        Dim(
            "model.dropout",
            "model",
            "float",
            low=0.0,
            high=0.3,
            **gated("model.dropout"),
            help="dropout in attention and feed-forward",
        ),
        Dim("model.pooling", "model", "cat", choices=POOLINGS, **gated("model.pooling"), help="the text's embedding"),
    ]
