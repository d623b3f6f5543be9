"""What ``model.name`` and ``dataset.name`` may say, and what is known of a model's structure.

A name is a built-in (``choices.MODELS``, ``choices.DATASETS``), a library prefix
(``torchvision:resnet18``, ``timm:resnet18``, ``hf:BertConfig``, or ``hf:FOLDER``, a pretrained
transformers model saved there), a file format (``imagefolder``,
``npz``, ``hf``, ``jsonl``, ``csv``, which read ``dataset.path``) or an import path
``package.module:callable`` (the user's own factory). An import path is code: a config or study
file that names one runs it, as a Python script would.

``ModelFacts`` is what the rules need to know of a model's structure (what it takes: images or
token ids; bottleneck blocks for StochasticDepth, batch norm for GhostBatchNorm, layer norms for
LowPrecisionLayerNorm, BERT's feed-forward layers for GatedLinearUnits, a final linear layer for
CORDS's embeddings).
The built-ins' facts are written here; any other model's come from a probe of the model as
built (``effsearch.trainer.probe``), which records them with :func:`remember`. Validation,
the space's gates and ``space show`` read :func:`facts`; a model not yet probed has no facts,
and the rules about structure wait for the probe (the trainer probes before it trains).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from effsearch.config.choices import DATASETS, GPT_SWITCHES, MODEL_WIDTHS, MODELS

MODEL_LIBRARIES = ("torchvision", "timm", "hf")
FILE_DATASETS = ("imagefolder", "npz", "hf", "jsonl", "csv", "text")  # read from dataset.path
TEXT_FILES = ("jsonl", "csv", "text")  # always text; hf and an import path hold text or images
IMAGE_SOURCES = ("builtin", "imagefolder", "npz")  # always images
# ``package.module:callable`` (dotted names on both sides of one colon).
IMPORT_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
LIBRARY_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
CONFIG_CLASS = re.compile(r"^[A-Za-z_]\w*Config$")  # hf:BertConfig; any other hf:NAME is a saved model's folder


def hf_folder(name: str) -> str | None:
    """The folder ``hf:FOLDER`` names (a pretrained model ``save_pretrained`` wrote, fine-tuned
    from its weights), or None: ``name`` is no ``hf:`` name, or names a config class (fresh weights)."""
    prefix, _, rest = name.partition(":")
    return rest if prefix == "hf" and rest and not CONFIG_CLASS.match(rest) else None


def model_kind(name: str) -> str:
    """``builtin``, ``torchvision``, ``timm``, ``hf`` or ``import``."""
    if name in MODELS:
        return "builtin"
    prefix = name.split(":", 1)[0]
    return prefix if prefix in MODEL_LIBRARIES else "import"


def dataset_kind(name: str) -> str:
    """``builtin``, ``imagefolder``, ``npz``, ``hf``, ``jsonl``, ``csv``, ``text`` or ``import``."""
    if name in DATASETS:
        return "builtin"
    return name if name in FILE_DATASETS else "import"


def check_model_name(name: str) -> str | None:
    """Why ``name`` cannot be a model name (None: it can)."""
    if name in MODELS:
        return None
    prefix, _, rest = name.partition(":")
    if prefix in MODEL_LIBRARIES:
        return (
            None
            if rest and (LIBRARY_NAME.match(rest) or hf_folder(name))
            else f"{prefix}: needs a {'config class' if prefix == 'hf' else 'model'} name after the colon "
            f"(e.g. {prefix}:{'BertConfig' if prefix == 'hf' else 'resnet18'}); got {name!r}"
        )
    if IMPORT_PATH.match(name):
        return None
    return (
        f"must be a built-in model ({', '.join(MODELS)}), torchvision:NAME, timm:NAME, hf:CONFIG_CLASS, hf:FOLDER or an "
        "import path "
        f"package.module:callable; got {name!r}"
    )


def check_dataset_name(name: str) -> str | None:
    """Why ``name`` cannot be a dataset name (None: it can)."""
    if name in DATASETS or name in FILE_DATASETS or IMPORT_PATH.match(name):
        return None
    return (
        f"must be a built-in dataset ({', '.join(DATASETS)}), one read from dataset.path "
        f"({', '.join(FILE_DATASETS)}) or an import path package.module:callable; got {name!r}"
    )


def data_modality(name: str) -> str | None:
    """What the dataset ``name`` holds as far as its name says: ``images``, ``tokens`` (text, fed
    to a model as token ids), or None (hf and an import path hold either: known once read)."""
    kind = dataset_kind(name)
    if kind in TEXT_FILES:
        return "tokens"
    return "images" if kind in IMAGE_SOURCES else None


@dataclass(frozen=True)
class ModelFacts:
    """What the rules read of a model's structure."""

    bottleneck: bool  # torchvision Bottleneck blocks (Composer's StochasticDepth replaces them)
    batchnorm: bool  # BatchNorm layers (GhostBatchNorm replaces them)
    downsamples: bool  # strided convolutions or max-pools (BlurPool blurs them)
    final_linear: bool  # ends in an nn.Linear, whose input is CORDS's embedding
    in_channels: int | None = None  # the first convolution's input channels (None: no convolution)
    params: int = 0
    weight_bytes: int = 0  # its parameters' bytes as built (the dtype its builder gave them)
    modality: str = "images"  # what it takes: "images" (N,C,H,W floats) or "tokens" (N,L token ids)
    layernorm: bool = False  # nn.LayerNorm layers (LowPrecisionLayerNorm replaces them)
    attention: bool = False  # self-attention layers
    bert: bool = False  # BERT's feed-forward blocks (GatedLinearUnits replaces them)
    positions: int | None = None  # the longest sequence its position embeddings take (None: any)
    causal: bool = False  # a language model: logits for every position (N, L, vocabulary), not one per text
    matrices: bool = False  # 2-d weights besides its embeddings and output layer (what Muon updates)
    switches: tuple[str, ...] = ()  # the model.kwargs switches its builder takes (GPT_SWITCHES: the built-in gpt's)
    # The widest convolution by its narrower side, max of min(in, out) channels (None: no convolution):
    # Composer's SqueezeExcite adds a block only after a Conv2d where that is at least min_channels.
    conv_channels: int | None = None
    # The largest K-FAC factor: max over its Linear and ungrouped Conv2d layers of in*kh*kw (+1 with a
    # bias) and out; each update eigendecomposes one that size (trainer/techniques/kfac.py).
    kfac_factor: int = 0
    # Takes images of other sizes: a forward on a smaller, non-square batch gave logits of the same
    # shape (trainer/probe.py). False: one size only (a Flatten into nn.Linear, position embeddings of
    # one grid), which progressive resizing, ColOut and selective backprop's scale_factor break.
    resizable: bool = True
    # What Composer's BlurPool replaces: every nn.MaxPool2d, and each strided Conv2d of at least its
    # min_channels input channels (strided_channels: the widest such input; None: no strided Conv2d).
    # A ViT's patch embedding on 1-3 channels and no max-pool: BlurPool would change nothing.
    maxpools: bool = True
    strided_channels: int | None = None
    # Weights loaded from a checkpoint (a transformers model's config names where they came from):
    # an algorithm that builds layers afresh would throw them away.
    pretrained: bool = False

    @property
    def images(self) -> bool:
        return self.modality == "images"

    @property
    def tokens(self) -> bool:
        return self.modality == "tokens"


def key(model: dict) -> str:
    """The facts' key for a ``model`` mapping (name and kwargs: the built model's identity)."""
    return json.dumps({"name": model.get("name"), "kwargs": model.get("kwargs") or {}}, sort_keys=True, default=str)


_BUILTIN = {
    "tiny-cnn": ModelFacts(bottleneck=False, batchnorm=True, downsamples=True, final_linear=True),
    "resnet9": ModelFacts(bottleneck=False, batchnorm=True, downsamples=True, final_linear=True),
    "resnet20": ModelFacts(bottleneck=False, batchnorm=True, downsamples=True, final_linear=True, maxpools=False),
    "resnet56": ModelFacts(bottleneck=False, batchnorm=True, downsamples=True, final_linear=True, maxpools=False),
    "resnet-bottleneck": ModelFacts(
        bottleneck=True, batchnorm=True, downsamples=True, final_linear=True, maxpools=False
    ),
    # Built for dataset.max_length: its position embeddings take any length the dataset asks for.
    "text-encoder": ModelFacts(
        bottleneck=False,
        batchnorm=False,
        downsamples=False,
        final_linear=True,
        modality="tokens",
        layernorm=True,
        attention=True,
        matrices=True,
    ),
    "gpt": ModelFacts(
        bottleneck=False,
        batchnorm=False,
        downsamples=False,
        final_linear=True,
        modality="tokens",
        layernorm=True,
        attention=True,
        causal=True,
        matrices=True,
        switches=tuple(GPT_SWITCHES),
    ),
}
_PROBED: dict[str, ModelFacts] = {}
# Each built-in CNN's conv_channels and kfac_factor per unit of model.width (trainer/models/vision.py:
# tiny-cnn's widest conv is 2w->4w, resnet9's residual 8w->8w, the CIFAR ResNets' 4w->4w,
# resnet-bottleneck's last downsample 8w->16w; the largest factor is a 3x3 conv's input, 9 x its
# in channels); tests/spaces/test_squeeze_excite.py builds each to hold it true.
CONV_PER_WIDTH = {"tiny-cnn": 2, "resnet9": 8, "resnet20": 4, "resnet56": 4, "resnet-bottleneck": 8}
FACTOR_PER_WIDTH = {"tiny-cnn": 18, "resnet9": 72, "resnet20": 36, "resnet56": 36, "resnet-bottleneck": 36}
# Their widest strided convolution's input per unit of width (tiny-cnn and resnet9 max-pool instead:
# none; the CIFAR ResNets' first downsample 2w, resnet-bottleneck's 8w).
STRIDED_PER_WIDTH = {"resnet20": 2, "resnet56": 2, "resnet-bottleneck": 8}


def facts(model: dict) -> ModelFacts | None:
    """The facts of the model a config names (None: not probed yet in this process)."""
    name = model.get("name", "tiny-cnn")
    if name in CONV_PER_WIDTH:
        width = model.get("width") or MODEL_WIDTHS[name]
        strided = STRIDED_PER_WIDTH[name] * width if name in STRIDED_PER_WIDTH else None
        return replace(
            _BUILTIN[name],
            conv_channels=CONV_PER_WIDTH[name] * width,
            kfac_factor=FACTOR_PER_WIDTH[name] * width,
            strided_channels=strided,
        )
    if name in _BUILTIN:
        return _BUILTIN[name]
    return _PROBED.get(key(model))


def remember(model: dict, found: ModelFacts) -> None:
    """Record a probe's facts for the model ``model`` names (read by the rules from then on)."""
    _PROBED[key(model)] = found
