"""Models by name: the built-ins (``vision``: CNNs and ResNets; ``text``: the text encoder; ``gpt``:
the language model), a
library's (``torchvision:``, ``timm:``, ``hf:`` through ``hfconfig``), or an import path's.

An image model is an ``nn.Module`` from a float batch ``(N, C, H, W)`` to logits ``(N, num_classes)``.
A text model takes token ids ``(N, L)`` and their mask (``text.TokenInput`` makes the mask, so the
trainer calls it with the ids alone); a factory's transformers model is called as one
(``_transformers``: ``TokenInput``'s hf style, or ``PixelValues`` for images). CORDS reads any model's embedding from the input of its final
``nn.Linear`` (``effsearch.trainer.data.selection.ModelView``), and :mod:`effsearch.trainer.probe`
checks it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch.nn as nn

from effsearch.config import MODEL_WIDTHS, ConfigError
from effsearch.config.choices import TEXT_ENCODER
from effsearch.config.imports import load_object
from effsearch.config.sources import hf_folder, model_kind
from effsearch.trainer.models.gpt import GPT, gpt
from effsearch.trainer.models.text import TextEncoder, TokenInput, encoder
from effsearch.trainer.models.vision import Classifier, PixelValues, RepeatChannels, build_model, tiny_cnn

if TYPE_CHECKING:
    from effsearch.config import ModelConfig
    from effsearch.trainer.data.tokenizer import TokenShape

__all__ = [
    "GPT",
    "Classifier",
    "PixelValues",
    "RepeatChannels",
    "TextEncoder",
    "TokenInput",
    "build_model",
    "build_network",
    "tiny_cnn",
]

TIMM_HINT = "timm: models need the optional extra timm (`uv sync --extra timm`, or `pip install 'effsearch[timm]'`)"
LM_ON_LABELS = (
    "'gpt' is a language model (it predicts each next token); the dataset's rows have labels: set "
    "dataset.label_column: null to train it on the texts, or use a classifier (text-encoder, hf:BertConfig)"
)
IMAGE_MODEL = (
    "{name!r} takes images; the dataset holds text: use text-encoder, hf:CONFIG_CLASS or a factory "
    "taking vocab_size, num_classes and max_length"
)


def build_network(model: ModelConfig, channels: int, num_classes: int, tokens: TokenShape | None = None) -> nn.Module:
    """The network ``model`` (a ModelConfig) names, for images of ``channels`` channels and
    ``num_classes`` classes, or, with ``tokens``, for text of that vocabulary and length (a
    ``TokenInput``). A name or builder that fails is a ConfigError naming the field."""
    if tokens is not None:
        return _text_network(model, num_classes, tokens)
    kind = model_kind(model.name)
    if kind == "hf":  # a vision config (ViTConfig) too: hf: builds text models only
        raise ConfigError(
            "model.name",
            "hf:CONFIG_CLASS and hf:FOLDER build transformers text models and the dataset holds images: for "
            "a transformers image model, return it from a factory of your own (package.module:callable, "
            "e.g. ViTForImageClassification(ViTConfig(...)))",
        )
    if model.name in ("text-encoder", "gpt"):
        raise ConfigError(
            "model.name",
            f"{model.name!r} takes token ids (text); the dataset holds images: use an image model "
            "(tiny-cnn, resnet9, torchvision:NAME, ...)",
        )
    if kind == "builtin":
        _no_kwargs(model)
        return build_model(model.name, channels, num_classes, model.width)
    name = model.name.split(":", 1)[1]
    _not_given(model, SET_HERE.get(kind, {}))
    if kind == "torchvision":
        import torchvision

        if name not in torchvision.models.list_models():
            raise ConfigError(
                "model.name",
                f"torchvision has no model {name!r} (torchvision.models.list_models(): "
                "e.g. resnet18, resnet50, mobilenet_v3_small, efficientnet_b0, vit_b_16)",
            )
        return _call(
            lambda: torchvision.models.get_model(name, weights=None, num_classes=num_classes, **model.kwargs),
            f"torchvision.models.get_model({name!r})",
        )
    if kind == "timm":
        try:
            import timm
        except ImportError:
            raise ConfigError("model.name", TIMM_HINT) from None
        if not timm.is_model(name):
            raise ConfigError("model.name", f"timm has no model {name!r} (timm.list_models())")
        return _call(
            lambda: timm.create_model(
                name, pretrained=False, num_classes=num_classes, in_chans=channels, **model.kwargs
            ),
            f"timm.create_model({name!r})",
        )
    net = _from_factory(model, {"num_classes": num_classes, "in_channels": channels})
    return PixelValues(net) if _transformers(net) else net


def _text_network(model: ModelConfig, num_classes: int, tokens: TokenShape) -> TokenInput:
    kind = model_kind(model.name)
    if tokens.causal:
        return _language_model(model, tokens)
    if model.name == "gpt":
        raise ConfigError("model.name", LM_ON_LABELS)
    if kind == "builtin":
        if model.name != "text-encoder":
            raise ConfigError("model.name", IMAGE_MODEL.format(name=model.name))
        _no_kwargs(model)
        net: nn.Module = encoder(
            tokens.vocab_size,
            num_classes,
            tokens.max_length,
            width=model.width or MODEL_WIDTHS["text-encoder"],
            depth=model.depth or TEXT_ENCODER["depth"],
            heads=model.heads or TEXT_ENCODER["heads"],
            pooling=model.pooling,
            dropout=model.dropout,
        )
        return TokenInput(net, "ids_mask")
    if kind == "hf":
        from effsearch.trainer.models import hfconfig

        folder = hf_folder(model.name)
        if folder is not None:
            net, own = hfconfig.pretrained(folder, model.kwargs, tokens, num_classes)
            return TokenInput(net, "hf", own)
        net = hfconfig.build(model.name.split(":", 1)[1], model.kwargs, tokens.vocab_size, num_classes)
        return TokenInput(net, "hf")
    if kind != "import":
        raise ConfigError("model.name", IMAGE_MODEL.format(name=model.name))
    base = {"vocab_size": tokens.vocab_size, "num_classes": num_classes, "max_length": tokens.max_length}
    net = _from_factory(model, base)
    return _factory_input(net, model, tokens, "ids_mask")


def _language_model(model: ModelConfig, tokens: TokenShape) -> TokenInput:
    """A causal language model: the built-in gpt, a transformers causal LM from a config, or a
    factory called with vocab_size and max_length; each maps ids (N, L) to logits (N, L, vocab)."""
    kind = model_kind(model.name)
    if model.name == "gpt":
        return TokenInput(gpt(tokens.vocab_size, tokens.max_length, model.kwargs), "causal")
    if kind == "hf":
        from effsearch.trainer.models import hfconfig

        folder = hf_folder(model.name)
        if folder is not None:
            net, own = hfconfig.pretrained(folder, model.kwargs, tokens, 0)
            return TokenInput(net, "hf", own, causal_logits=True)
        return TokenInput(hfconfig.build_causal(model.name.split(":", 1)[1], model.kwargs, tokens.vocab_size), "hf")
    if kind != "import":
        raise ConfigError(
            "model.name",
            f"{model.name!r} is no language model; the dataset is a language model's corpus (dataset.name text, "
            "or label_column null): use gpt, hf:GPT2Config (a causal LM from a config) or a factory taking "
            "vocab_size and max_length and returning logits (N, L, vocab_size)",
        )
    base = {"vocab_size": tokens.vocab_size, "max_length": tokens.max_length}
    net = _from_factory(model, base)
    return _factory_input(net, model, tokens, "causal")


def _factory_input(net: nn.Module, model: ModelConfig, tokens: TokenShape, style: str) -> TokenInput:
    """A factory's text model as called: a transformers model as one, reading its own tokenizer's
    ids where it was loaded with weights (``from_pretrained`` names where they came from)."""
    if not _transformers(net):
        return TokenInput(net, style)
    loaded_from = getattr(getattr(net, "config", None), "_name_or_path", "")
    if not loaded_from:
        return TokenInput(net, "hf")
    from effsearch.trainer.models import hfconfig

    hfconfig.require_own(tokens, f"{model.name!r} returned a pretrained model ({loaded_from})", loaded_from)
    return TokenInput(net, "hf", hfconfig.own_table(net, tokens, model.name), causal_logits=tokens.causal)


def _transformers(net: nn.Module) -> bool:
    """A factory's model is a transformers model: called as one (``input_ids``, ``attention_mask``
    or ``pixel_values``, its output's ``logits``)."""
    transformers = sys.modules.get("transformers")  # a transformers model was built: it is imported
    return transformers is not None and isinstance(net, transformers.PreTrainedModel)


def _no_kwargs(model: ModelConfig) -> None:
    if model.kwargs:
        raise ConfigError(
            "model.kwargs",
            f"the built-in model {model.name!r} takes none (its size is model.width); got {model.kwargs!r}",
        )


BY_SIGNATURE = ("in_channels", "max_length")  # what a factory is given only where it takes it


def _from_factory(model: ModelConfig, base: dict) -> nn.Module:
    """The user's factory called with ``base`` (what the data says), model.kwargs and model.width.
    ``in_channels`` and ``max_length`` go only to a factory that takes them (``_unwanted``)."""
    factory = load_object(model.name, "model.name")
    kwargs = {k: v for k, v in base.items() if k not in BY_SIGNATURE or _takes(factory, k)}
    kwargs.update(model.kwargs)
    if model.width:
        if "width" in model.kwargs:
            raise ConfigError(
                "model.width",
                f"given twice, as model.width ({model.width}) and model.kwargs.width "
                f"({model.kwargs['width']}); keep one",
            )
        if not _takes(factory, "width"):
            raise ConfigError(
                "model.width",
                f"{model.name!r} takes no width argument; set model.width to 0 (or give the factory a width parameter)",
            )
        kwargs["width"] = model.width
    return _call(lambda: _unwanted(factory, kwargs, set(BY_SIGNATURE) - set(model.kwargs)), model.name)


def _unwanted(factory: Callable[..., Any], kwargs: dict, optional: set[str]) -> Any:
    """``factory(**kwargs)``, made again without an ``optional`` argument it refuses as unexpected.
    torchvision's builders (``resnet18(*, weights, progress, **kwargs)``) pass their keywords on to
    the class, so only the call says that ``in_channels`` is not taken (a 3-channel model on
    1-channel images is then adapted: ``probe``'s ``_adapt_channels``)."""
    try:
        return factory(**kwargs)
    except TypeError as e:
        refused = [k for k in optional if k in kwargs and f"unexpected keyword argument '{k}'" in str(e)]
        if not refused:
            raise
        return _unwanted(factory, {k: v for k, v in kwargs.items() if k != refused[0]}, optional - {refused[0]})


def _takes(fn: Callable[..., Any], name: str) -> bool:
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


# The library builders' keywords effsearch sets itself, and to what.
SET_HERE = {
    "torchvision": {"num_classes": "from the data's classes", "weights": "None: fresh weights, no download"},
    "timm": {
        "num_classes": "from the data's classes",
        "pretrained": "False: fresh weights, no download",
        "in_chans": "from the data's channels",
    },
}


def _not_given(model: ModelConfig, set_here: dict[str, str]) -> None:
    """A library's builder keyword that effsearch sets itself: given in model.kwargs too, it was the
    builder's 'got multiple values for keyword argument' blamed on model.name."""
    for key, by in set_here.items():
        if key in model.kwargs:
            raise ConfigError(f"model.kwargs.{key}", f"is set by effsearch ({by}) for {model.name!r}; leave it out")


def _call(make: Callable[[], Any], what: str) -> nn.Module:
    try:
        net = make()
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - the builder's own error, shown with what raised it
        text = str(e)
        text = text if len(text) <= 300 else text[:300] + "..."
        raise ConfigError("model.name", f"{what} raised {type(e).__name__}: {text}") from None
    if not isinstance(net, nn.Module):
        raise ConfigError("model.name", f"{what} returned a {type(net).__name__}, not a torch.nn.Module")
    return net
