"""The probe: what a model is made of, read from the model as built (not from its name).

The rules about structure (StochasticDepth needs bottleneck blocks, GhostBatchNorm batch
norm, BlurPool downsampling, LowPrecisionLayerNorm layer norms, GatedLinearUnits BERT's
feed-forward blocks, CORDS's model-based strategies a final ``nn.Linear``, an image algorithm a
model of images) read these facts (``effsearch.config.sources``). A model takes token ids when it
embeds its input (an ``nn.Embedding`` or ``nn.EmbeddingBag``) and has no 2-d convolution. A study probes its base model
once, on the meta device (no memory, no weights initialised), before it builds its space; the
trainer checks the network it is about to train: its logits' width and its input channels, or
for text its answer to a batch of token ids.
"""

from __future__ import annotations

import inspect
import logging
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.nn as nn

from effsearch.config import ConfigError
from effsearch.config.choices import SPECIAL_TOKENS
from effsearch.config.sources import ModelFacts, facts, key, model_kind, remember
from effsearch.trainer.data.tokenizer import CLS
from effsearch.trainer.models.text import EMBEDDINGS

if TYPE_CHECKING:
    from effsearch.config import ModelConfig, TrainConfig
    from effsearch.trainer.data.tokenizer import TokenShape


log = logging.getLogger(__name__)


def facts_of(net: nn.Module, causal: bool = False) -> ModelFacts:
    """``causal``: the model was built as a language model (for a language model's corpus)."""
    modules = list(net.modules())
    convs = [m for m in modules if isinstance(m, nn.Conv2d)]
    linears = [m for m in modules if isinstance(m, nn.Linear)]
    tokens = any(isinstance(m, EMBEDDINGS) for m in modules) and not convs
    weights = sized(net)
    # Only a model built after torchvision's ResNet module was imported can hold its Bottleneck:
    # no import here (torchvision's takes seconds, and bad input is refused before it).
    resnet = sys.modules.get("torchvision.models.resnet")
    return ModelFacts(
        bottleneck=resnet is not None and any(isinstance(m, resnet.Bottleneck) for m in modules),
        batchnorm=any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in modules),
        downsamples=any(isinstance(m, nn.MaxPool2d) for m in modules) or any(max(c.stride) > 1 for c in convs),
        final_linear=bool(linears),
        in_channels=convs[0].in_channels if convs else None,
        params=sum(p.numel() for p in weights),
        weight_bytes=sum(p.numel() * p.element_size() for p in weights),
        modality="tokens" if tokens else "images",
        layernorm=any(map(plain_layernorm, modules)),
        attention=any(isinstance(m, nn.MultiheadAttention) or type(m).__name__.endswith("Attention") for m in modules),
        bert=_bert_blocks(modules),
        positions=_positions(modules),
        causal=causal,
        matrices=bool(hidden_matrices(net)),
        conv_channels=max((min(c.in_channels, c.out_channels) for c in convs), default=None),
        kfac_factor=max((_factor(m) for m in modules if isinstance(m, (nn.Linear, nn.Conv2d))), default=0),
        maxpools=any(isinstance(m, nn.MaxPool2d) for m in modules),
        strided_channels=max((c.in_channels for c in convs if max(c.stride) > 1), default=None),
        pretrained=any(getattr(getattr(m, "config", None), "_name_or_path", "") for m in modules),
    )


def sized(net: nn.Module) -> list[nn.Parameter]:
    """Its parameters that have a size (a lazy module's have none until its first forward)."""
    return [p for p in net.parameters() if not isinstance(p, nn.parameter.UninitializedParameter)]


def _factor(m: nn.Linear | nn.Conv2d) -> int:
    """The larger of the K-FAC factors of a layer (trainer/techniques/kfac.py: A is its input
    patch and a bias column, G its outputs; a grouped convolution is not preconditioned)."""
    if isinstance(m, nn.Linear):
        return max(m.in_features + (m.bias is not None), m.out_features)
    if m.groups != 1:
        return 0
    kh, kw = m.kernel_size
    return max(m.in_channels * kh * kw + (m.bias is not None), m.out_channels)


def plain_layernorm(m: nn.Module) -> bool:
    """An ``nn.LayerNorm`` running nn.LayerNorm's own forward: what Composer's LowPrecisionLayerNorm
    may replace. A subclass with a forward of its own (torchvision's ConvNeXt ``LayerNorm2d``
    permutes NCHW to normalise channels) would lose it: the replacement normalises the last dim."""
    return isinstance(m, nn.LayerNorm) and type(m).forward is nn.LayerNorm.forward


def hidden_matrices(net: nn.Module) -> list[nn.Parameter]:
    """The trainable 2-d weights besides the embeddings' and the output layer's (what Muon
    orthogonalises; the output layer is tied to the embedding in a gpt)."""
    skip = {id(m.weight) for m in net.modules() if isinstance(m, EMBEDDINGS)}
    head = final_linear(net)
    if head is not None:
        skip.add(id(head.weight))
    return [p for p in net.parameters() if p.requires_grad and p.dim() == 2 and id(p) not in skip]


def _bert_blocks(modules: list[nn.Module]) -> bool:
    """transformers' BertIntermediate and BertOutput (what Composer's GatedLinearUnits replaces)."""
    bert = sys.modules.get("transformers.models.bert.modeling_bert")  # a BERT was built: it is imported
    return bert is not None and any(isinstance(m, (bert.BertIntermediate, bert.BertOutput)) for m in modules)


def _positions(modules: list[nn.Module]) -> int | None:
    """A transformers model's position embeddings (its config's max_position_embeddings)."""
    for m in modules:
        found = getattr(getattr(m, "config", None), "max_position_embeddings", None)
        if isinstance(found, int):
            return found
    return None


def final_linear(net: nn.Module) -> nn.Linear | None:
    """The model's last ``nn.Linear`` (by registration order): its input is CORDS's embedding."""
    last = None
    for m in net.modules():
        if isinstance(m, nn.Linear):
            last = m
    return last


def called_last(net: nn.Module, sample: torch.Tensor) -> nn.Linear | None:
    """The ``nn.Linear`` a forward on ``sample`` calls last (no gradients): the output layer,
    whatever order the model registered its layers in (None: it calls none)."""
    called: list[nn.Module] = []
    hooks = [
        m.register_forward_hook(lambda m, _i, _o: called.append(m)) for m in net.modules() if isinstance(m, nn.Linear)
    ]
    try:
        with torch.no_grad():
            net(sample)
    finally:
        for h in hooks:
            h.remove()
    return cast("nn.Linear", called[-1]) if called else None


# A builder that failed on the meta device is built again on the CPU after its handler, not inside
# it: inside one, CPython 3.11 reports a duplicate keyword (timm's ``dict(patch_size=16, **kwargs)``
# given model.kwargs.patch_size) as a bare ``KeyError: 'patch_size'``, not the TypeError that names it.


def probe(model: ModelConfig, channels: int = 3, num_classes: int = 10, tokens: TokenShape | None = None) -> ModelFacts:
    """Build the model a ModelConfig names on the meta device (on the CPU if its builder cannot),
    for images, or for text of ``tokens``, record its facts for the rules, and return them.
    Built-ins are known without building."""
    from effsearch.trainer.models import build_network

    model_dict = {"name": model.name, "kwargs": model.kwargs}
    known = facts(model_dict)
    if known is not None:
        return known
    meta: nn.Module | None = None
    try:
        with torch.device("meta"):
            meta = build_network(model, channels, num_classes, tokens)
    except Exception:  # noqa: BLE001 - a ConfigError too (build_network names the builder's error): a
        pass  # builder may read tensor values (torchvision's RegNet), which meta tensors have none of
    # On the CPU, outside the handler (the note above probe): the model's own error, if any.
    net = meta if meta is not None else build_network(model, channels, num_classes, tokens)
    found = facts_of(net) if tokens is None else _text_facts(net, model, tokens, num_classes)
    remember(model_dict, found)
    return found


def _text_facts(net: nn.Module, model: ModelConfig, tokens: TokenShape, num_classes: int) -> ModelFacts:
    """A text model's facts. A factory is given ``max_length``: where its positions grow with it
    (built again on the meta device for twice the length), they are no limit (read as one, they
    refused every longer trial after the first shorter one); a cap of its own stays one."""
    from effsearch.trainer.models import build_network

    found = facts_of(net, causal=tokens.causal)
    if model_kind(model.name) != "import" or found.positions != tokens.max_length:
        return found
    longer = replace(tokens, max_length=2 * tokens.max_length)
    try:
        with torch.device("meta"):
            grown = _positions(list(build_network(model, 0, num_classes, longer).modules()))
    except Exception:  # noqa: BLE001 - a factory that cannot build it: the positions stay a limit
        return found
    return replace(found, positions=None) if grown == longer.max_length else found


def check_config(cfg: TrainConfig, unknown_shape: bool = False) -> None:
    """A model not built in, checked before the data is read, and the rules about structure on
    what it is made of: a text model probed on the meta device (before any text is tokenized into
    the cache), any other run on a batch of two shaped like the data (:func:`preflight`, which also
    learns whether it takes other sizes) where that shape is known without loading it. Where it is
    not (a callable's data: images or texts), nothing is checked here (the trainer checks the model
    on the loaded data), unless ``unknown_shape``: then its structure is probed as a study's space
    needs it, built for the data's kind as far as the dataset's name tells."""
    if model_kind(cfg.model.name) == "builtin":
        _check_builtin_fits(cfg)
        return
    from effsearch.config import rules
    from effsearch.trainer.data.splits import shape_of
    from effsearch.trainer.data.text import text_source, token_shape

    if text_source(cfg.dataset):
        _check_fits(cfg, probe(cfg.model, tokens=token_shape(cfg.dataset)))
    else:
        shape = shape_of(cfg.dataset)
        if shape is not None:
            found = preflight(cfg.model, *shape)
            if found is not None:
                _check_fits(cfg, found)
        elif unknown_shape:
            _check_fits(cfg, probe(cfg.model, tokens=token_shape(cfg.dataset)))
        else:
            return
    rules.check(cfg.to_dict())


def _check_builtin_fits(cfg: TrainConfig) -> None:
    """A built-in sized by model.kwargs (a gpt's n_embd has no bound) has weights that fit the
    device's memory: built on the meta device (its first build imports torch._dynamo, 1.3 s: not
    for a built-in sized by model.width and depth alone, whose bounds keep its weights under 13 GiB,
    resnet56's at width 1024), for the text asked for, or for images (their channels and classes
    hardly change its size). A text model on data whose kind is not known yet is left to the trainer."""
    if not cfg.model.kwargs:  # every trial of a built-in passes here: nothing read for it
        return
    from effsearch.trainer.data.text import text_source, token_shape
    from effsearch.trainer.models import build_network

    tokens = token_shape(cfg.dataset) if text_source(cfg.dataset) else None
    known = facts({"name": cfg.model.name})
    if tokens is None and known is not None and known.tokens:
        return
    with torch.device("meta"):
        net = build_network(cfg.model, 3, 10, tokens)
    _check_fits(cfg, facts_of(net))


def _check_fits(cfg: TrainConfig, found: ModelFacts) -> None:
    from effsearch.config.machine import check_weights_fit, resolve_device

    field = "model.kwargs" if cfg.model.kwargs else "model.width" if cfg.model.width else "model.name"
    check_weights_fit(found.params, found.weight_bytes, field, cfg, resolve_device(cfg))


def check_network(
    net: nn.Module, model: ModelConfig, channels: int, num_classes: int, image_size: tuple[int, ...], device: str
) -> tuple[nn.Module, str]:
    """The network ready to train on images of ``channels`` channels: its logits checked on a
    batch of two (eval mode, no gradients), a 1-channel input repeated where its first
    convolution takes more, and something to train. Returns it and a note on what was adapted
    ('' if nothing)."""
    net, note = _adapt_channels(net, model, channels, image_size, device)
    try:
        out = _run(net, channels, image_size, device)
    except Exception as e:  # noqa: BLE001 - the user's forward failed on a batch shaped like the data
        raise ConfigError(
            "model.name",
            f"{model.name!r} failed on a batch of 2 images {channels}x{image_size[0]}x"
            f"{image_size[1]}: {type(e).__name__}: {str(e)[:300]}{_size_hint(net, model, image_size)}"
            f"{_larger_hint(e, net, channels, image_size, device)}{_dtype_hint(net)}",
        ) from None
    _check_built(net, out, model, num_classes, resizable(net, channels, num_classes, image_size, device))
    try:
        trained = _training_output(net, channels, image_size, device)
    except Exception as e:  # noqa: BLE001 - as above: the forward only training runs (an auxiliary head) failed
        fix = _aux_fix(net)
        raise ConfigError(
            "model.name",
            f"{model.name!r} failed in training mode on a batch of 2 images {channels}x{image_size[0]}x"
            f"{image_size[1]}: {type(e).__name__}: {str(e)[:300]}" + (f" ({fix})" if fix else ""),
        ) from None
    _check_training_output(net, model, trained)
    return net, note


# (model, data shape) checked by preflight in this process: the facts of its meta build (None: built
# on the CPU, where its weights were allocated, so they fit)
_CHECKED: dict[tuple, ModelFacts | None] = {}


def preflight(model: ModelConfig, channels: int, num_classes: int, image_size: tuple[int, int]) -> ModelFacts | None:
    """Check the model ``model`` names as :func:`check_network` does, before the data is loaded:
    built and run on the meta device (no memory, no weights initialised), or on the CPU where it
    cannot run there (a builder or forward that reads values). Once per model and shape a process.
    Returns the meta build's facts (None: built on the CPU, or a built-in)."""
    if model_kind(model.name) == "builtin":
        return None
    from effsearch.trainer.models import build_network

    checked = (key({"name": model.name, "kwargs": model.kwargs}), model.width, channels, num_classes, image_size)
    if checked in _CHECKED:
        return _CHECKED[checked]
    on_meta = True
    try:
        with torch.device("meta"):
            net = build_network(model, channels, num_classes)
        net, _ = _adapt_channels(net, model, channels, image_size, "meta")
        out = _run(net, channels, image_size, "meta")
        trained = _training_output(net, channels, image_size, "meta")
    except Exception:  # noqa: BLE001 - a ConfigError too: the builder may fail on meta tensors only
        on_meta = False
    if on_meta:
        _check_built(net, out, model, num_classes, resizable(net, channels, num_classes, image_size, "meta"))
        _check_training_output(net, model, trained)
    else:  # on the CPU, outside the handler (the note above probe): the model's own error, if any
        net = build_network(model, channels, num_classes)
        check_network(net, model, channels, num_classes, image_size, "cpu")
    _CHECKED[checked] = facts_of(net) if on_meta else None
    return _CHECKED[checked]


def _adapt_channels(
    net: nn.Module, model: ModelConfig, channels: int, image_size: tuple[int, ...], device: str
) -> tuple[nn.Module, str]:
    """``net``, wrapped to repeat 1-channel images where its first convolution takes more; a note.
    A model whose first convolution takes other channels than its input (a stem that folds pixels
    into channels first: timm's TResNet, SpaceToDepth 3 -> 48) and runs on the data's is left alone."""
    from effsearch.trainer.models import RepeatChannels

    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    wanted = convs[0].in_channels if convs else None
    if wanted is None or wanted == channels or _runs(net, channels, image_size, device):
        return net, ""
    if channels == 1 and wanted != 3 and _runs(RepeatChannels(net, 3), 1, image_size, device):
        wanted = 3  # such a stem on RGB: three channels, not its first convolution's
    if channels != 1:
        raise ConfigError(
            "model.name",
            f"{model.name!r} takes {wanted}-channel images; the dataset's have "
            f"{channels} (an image folder converts to one channel count; "
            "pass in_channels through model.kwargs where the builder takes it)",
        )
    note = f"the dataset's 1-channel images are repeated to the {wanted} channels {model.name!r} takes"
    return RepeatChannels(net, wanted), note


def _runs(net: nn.Module, channels: int, image_size: tuple[int, ...], device: str) -> bool:
    try:
        _run(net, channels, image_size, device)
    except Exception:  # noqa: BLE001 - any error: it does not take that many channels
        return False
    return True


def _run(net: nn.Module, channels: int, image_size: tuple[int, ...], device: str) -> Any:
    """``net``'s output on a batch of two zero images (eval mode, no gradients)."""
    was_training = net.training
    net.eval()
    try:
        with torch.no_grad():  # also gives lazy modules their parameters
            return net(torch.zeros(2, channels, *image_size, device=device))
    finally:
        net.train(was_training)


def resizable(net: nn.Module, channels: int, num_classes: int, image_size: tuple[int, ...], device: str) -> bool:
    """Whether ``net`` gives its logits for images smaller than the data's, and not square: what
    progressive resizing (half the side by default), ColOut (rows and columns dropped) and selective
    backprop's scale_factor feed it. A Flatten into nn.Linear or position embeddings of one grid
    take one size only."""
    h, w = image_size[0], image_size[1]
    try:
        out = _run(net, channels, (max(1, h // 2), max(1, (3 * w) // 4)), device)
    except Exception:  # noqa: BLE001 - the model's own error on another size: it takes one size
        return False
    return isinstance(out, torch.Tensor) and tuple(out.shape) == (2, num_classes)


def _unwrapped(net: nn.Module) -> nn.Module:
    """The user's model under RepeatChannels, where the channel check wrapped it."""
    from effsearch.trainer.models import RepeatChannels

    return net.module if isinstance(net, RepeatChannels) else net


def _dtype_hint(net: nn.Module) -> str:
    """A builder that returned weights in another dtype than float32 (``.double()``, ``.half()``):
    batches come as float32, and `precision` (amp_bf16, amp_fp16) is how a run trains in less."""
    kinds = {p.dtype for p in sized(net)} - {torch.float32}
    if not kinds:
        return ""
    return (
        f" (its weights are {', '.join(sorted(map(str, kinds)))}: return a float32 model; "
        "precision: amp_bf16 or amp_fp16 trains in less)"
    )


def _size_hint(net: nn.Module, model: ModelConfig, image_size: tuple[int, ...]) -> str:
    """Where the model's class is sized by an image-size argument the user left at its default
    (torchvision's ViT: image_size, 224; MaxViT: input_size; timm's: img_size), how to size it to the data."""
    params: set[str] = set()
    for cls in type(_unwrapped(net)).__mro__:  # a subclass's (*args, **kwargs) passes them on: timm's LevitDistilled
        if cls is nn.Module:
            break
        try:
            params |= set(inspect.signature(vars(cls).get("__init__", object.__init__)).parameters)
        except (TypeError, ValueError):
            continue
    name = next((p for p in ("image_size", "img_size", "input_size") if p in params), None)
    if name is None or name in model.kwargs:
        return ""
    size = f"[{image_size[0]}, {image_size[1]}]" if name == "input_size" else str(image_size[0])  # MaxVit: (H, W)
    patch = _patch(_unwrapped(net))
    if patch and name != "input_size" and image_size[0] % patch:  # a ViT's patches must tile the image
        side = -(-image_size[0] // patch) * patch
        return (
            f" (its model takes {name} in whole patches of {patch}: dataset.image_size: {side} with "
            f"model.kwargs.{name}: {side} sizes both to fit)"
        )
    return f" (its model takes {name}: model.kwargs.{name}: {size} sizes it to the data)"


def _patch(net: nn.Module) -> int | None:
    """A vision transformer's patch side (torchvision's ``patch_size``, timm's ``patch_embed.patch_size``)."""
    found = getattr(net, "patch_size", None) or getattr(getattr(net, "patch_embed", None), "patch_size", None)
    if isinstance(found, (tuple, list)) and found:
        found = found[0]
    return found if isinstance(found, int) and found > 1 else None


# What a forward raises where the image shrinks to nothing inside it (a pool or convolution larger
# than what is left): torch's own words.
TOO_SMALL = ("output size is too small", "kernel size can't be greater", "input image is too small")
LARGER = (48, 64, 96, 128, 160, 224, 299)


def _larger_hint(e: Exception, net: nn.Module, channels: int, image_size: tuple[int, ...], device: str) -> str:
    """Where the images are too small for the model's downsampling, the smallest of a few common
    sizes it runs on (torchvision's AlexNet: 63; Inception v3: 75), for dataset.image_size."""
    if not any(w in str(e).lower() for w in TOO_SMALL):
        return ""
    fits = next((s for s in LARGER if s > max(image_size[:2]) and _runs(net, channels, (s, s), device)), None)
    what = f"dataset.image_size: {fits} runs it" if fits else "raise dataset.image_size"
    return f" (images of {image_size[0]}x{image_size[1]} shrink to nothing inside it: {what})"


def _training_output(net: nn.Module, channels: int, image_size: tuple[int, ...], device: str) -> Any:
    """``net``'s output in training mode on a batch of two zero images, changing nothing the run
    sees: buffers (batch norm's statistics) are put back and the random state (dropout's draws) is
    forked. The model's own error, if any, is raised."""
    saved = [b.clone() for b in net.buffers()]
    was_training = net.training
    forked = [torch.device(device).index or 0] if torch.device(device).type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=forked), torch.no_grad():
            net.train()
            return net(torch.zeros(2, channels, *image_size, device=device))
    finally:
        net.train(was_training)
        with torch.no_grad():
            for b, s in zip(net.buffers(), saved):
                b.copy_(s)


def _aux_fix(net: nn.Module) -> str | None:
    """How to build the model without auxiliary heads, where it has torchvision's switch for them."""
    if isinstance(getattr(_unwrapped(net), "aux_logits", None), bool):
        return "set model.kwargs.aux_logits: false (it builds the model without them)"
    return None


def _check_training_output(net: nn.Module, model: ModelConfig, out: Any) -> None:
    """Refuse a model whose training-mode forward returns more than its logits (torchvision's
    googlenet and inception_v3 add auxiliary heads' logits in a tuple): the loss takes one tensor."""
    if isinstance(out, torch.Tensor):
        return
    raise ConfigError(
        "model.name",
        f"{model.name!r} returns {type(out).__name__} in training mode, not one logits tensor (auxiliary "
        f"heads' outputs beside its logits?); the loss takes the logits alone: "
        f"{_aux_fix(net) or 'return them alone'}",
    )


def _check_built(net: nn.Module, out: Any, model: ModelConfig, num_classes: int, any_size: bool) -> None:
    """Record ``net``'s facts (``any_size``: it takes images of other sizes); refuse logits of the
    wrong shape, or nothing to train."""
    remember({"name": model.name, "kwargs": model.kwargs}, replace(facts_of(net), resizable=any_size))
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[1] != num_classes:
        got = _returned(out, (2, num_classes))
        raise ConfigError(
            "model.name",
            f"{model.name!r} must map a batch (N, C, H, W) to logits (N, {num_classes}) "
            f"for the dataset's {num_classes} classes; it returned {got}",
        )
    _check_trainable(net, model)
    _warn_probabilities(out, model)


def _warn_probabilities(out: torch.Tensor, model: ModelConfig) -> None:
    """Say so where the logits (rows of the last dim) are probabilities: a softmax at the model's end."""
    if out.device.type == "meta" or out.shape[-1] < 2:
        return
    rows = out.detach().float().flatten(0, -2)
    if bool((rows >= 0).all()) and torch.allclose(rows.sum(1), torch.ones_like(rows[:, 0]), atol=1e-4):
        log.warning(
            "%r returns rows that are non-negative and sum to 1: probabilities, not logits (a softmax at its "
            "end?); the loss takes logits and applies log-softmax itself, so training on these learns "
            "slowly or not at all: leave the softmax out",
            model.name,
        )


def _check_trainable(net: nn.Module, model: ModelConfig) -> None:
    if not any(p.requires_grad for p in net.parameters()):
        raise ConfigError(
            "model.name",
            f"{model.name!r} has no parameters to train (no nn.Parameter that requires grad); "
            "the optimizer would be given an empty list",
        )


def _takes(net: nn.Module, args: int) -> bool:
    """The forward (of the model itself, under TokenInput's wrapper) takes ``args`` positional arguments."""
    inner = getattr(net, "net", net)
    try:
        inspect.signature(inner.forward).bind(*range(args))
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): say nothing of the call
        return True
    return True


def _about_length(e: Exception) -> bool:
    """The error is what too long a row raises: an embedding's index past its table (IndexError,
    CUDA's device-side assert) or tensors of two lengths, not any error of a forward."""
    words = str(e).lower()
    return isinstance(e, IndexError) or any(
        w in words for w in ("index out of range", "out of bounds", "size of tensor", "position")
    )


def check_text_network(
    net: nn.Module, model: ModelConfig, tokens: TokenShape, num_classes: int, device: str
) -> nn.Module:
    """The text network ready to train: its facts recorded, its logits checked on two token rows of
    the full ``dataset.max_length`` (a classifier's second one padded from its middle; a language
    model's two windows alike up to their middle, then different), eval mode, no gradients; a
    language model's logits before the middle the same in both (no position sees a later token),
    and something to train."""
    remember({"name": model.name, "kwargs": model.kwargs}, _text_facts(net, model, tokens, num_classes))
    length = tokens.max_length
    ids = _token_rows(tokens, device)
    was_training = net.training
    net.eval()
    try:
        with torch.no_grad():
            out = net(ids)
    except Exception as e:  # noqa: BLE001 - the user's forward failed on a batch shaped like the data
        hint = (
            f"a text model is called as {'module(ids)' if tokens.causal else 'module(ids, mask)'}, ids (N, L) "
            "token ids" + ("" if tokens.causal else ", mask True at a text's tokens")
            if not _takes(net, 1 if tokens.causal else 2)
            else "a model takes as many tokens as its positions, less any it keeps for padding: lower "
            "dataset.max_length or give it more positions"
            if _about_length(e)
            else ""
        )
        raise ConfigError(
            "model.name",
            f"{model.name!r} failed on a batch of 2 token rows of dataset.max_length {length}"
            f"{'' if tokens.causal else ' (ids and mask)'}: {type(e).__name__}: {str(e)[:300]}"
            + (f" ({hint})" if hint else ""),
        ) from None
    finally:
        net.train(was_training)
    want = (2, length, num_classes) if tokens.causal else (2, num_classes)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != want:
        got = _returned(out, want)
        what = (
            f"token ids (N, L) to logits (N, L, {num_classes}), one row a position, for the tokenizer's "
            f"{num_classes} tokens"
            if tokens.causal
            else f"token ids (N, L) and their mask to logits (N, {num_classes}) for the dataset's {num_classes} classes"
        )
        raise ConfigError("model.name", f"{model.name!r} must map {what}; it returned {got}")
    if tokens.causal:
        _check_causal(out, model, length)
    _check_trainable(net, model)
    _warn_probabilities(out, model)
    return net


def _returned(out: Any, want: tuple[int, ...]) -> str:
    """What a model returned instead of logits of shape ``want``, with what to change where it is a
    common shape: a tuple (nanoGPT's ``(logits, loss)``, logits and features), and a language
    model's logits of the last position alone (nanoGPT's without targets)."""
    if isinstance(out, tuple | list) and out and isinstance(out[0], torch.Tensor):
        return f"a {type(out).__name__} of {len(out)} (return the logits alone), the first {_returned(out[0], want)}"
    if not isinstance(out, torch.Tensor):
        return type(out).__name__
    got = tuple(out.shape)
    if len(want) == 3 and got == (want[0], 1, want[2]):
        return f"{got}, the last position's alone (a language model learns from every position's logits)"
    return str(got)


def _token_rows(tokens: TokenShape, device: str) -> torch.Tensor:
    """Two rows of ``max_length`` ids drawn from the vocabulary's ordinary tokens (a fixed seed):
    a classifier's first token CLS and its second row padded from the middle; a language model's
    rows the same before the middle and different from it on."""
    length, vocab = tokens.max_length, tokens.vocab_size
    first = len(SPECIAL_TOKENS) if vocab > len(SPECIAL_TOKENS) else 0
    draw = torch.Generator().manual_seed(0)
    ids = torch.randint(first, vocab, (2, length), generator=draw, dtype=torch.int64).to(torch.int32)
    half = max(1, length // 2)
    if tokens.causal:
        ids[1, :half] = ids[0, :half]
    else:
        ids[:, 0] = CLS
        ids[1, half:] = tokens.pad_id
    return ids.to(device)


def _check_causal(out: torch.Tensor, model: ModelConfig, length: int) -> None:
    """Refuse a language model whose logits before the middle differ between two windows that
    differ only from the middle on: a position that sees a later token sees what it is to predict."""
    half = max(1, length // 2)
    if length < 2 or half >= length:
        return
    early = out[:, :half].float()
    scale = float(early.abs().max()) or 1.0
    if torch.allclose(early[0], early[1], rtol=0.0, atol=1e-4 * scale):
        return
    raise ConfigError(
        "model.name",
        f"{model.name!r} is not causal: its logits at the first {half} positions of a window change when a "
        "later token changes, so each position would see the token it is to predict. A language model must "
        "attend only to earlier tokens (hf: leave model.kwargs.is_decoder unset, or take a decoder's config "
        "such as GPT2Config or LlamaConfig; an own model: a causal attention mask)",
    )
