"""The allowed values of TrainConfig's fields, by name (read by the schema, the rules and the space)."""

from __future__ import annotations

DATASETS = ("digits", "fashion-mnist", "cifar10", "cifar100", "synthetic")
MODELS = ("tiny-cnn", "resnet9", "resnet20", "resnet56", "resnet-bottleneck", "text-encoder", "gpt")
# Each model's channel width at ``model.width: 0`` (the text encoder's: its embedding width).
MODEL_WIDTHS = {
    "tiny-cnn": 32,
    "resnet9": 64,
    "resnet20": 16,
    "resnet56": 16,
    "resnet-bottleneck": 16,
    "text-encoder": 128,
}
# The text encoder's layers and attention heads at ``model.depth: 0`` and ``model.heads: 0``.
TEXT_ENCODER = {"depth": 2, "heads": 4}
POOLINGS = ("mean", "cls")
# The built-in gpt's model.kwargs and their defaults (nanoGPT's shape, shrunk; the speedrun's switches).
GPT = {
    "n_layer": 2,
    "n_head": 4,
    "n_embd": 128,
    "qk_norm": False,  # RMS-normalised queries and keys (the speedrun's QK-norm)
    "activation": "gelu",  # gelu, or relu2 (ReLU squared, the speedrun's)
    "tied": True,  # the output layer shares the token embedding's weights
    "zero_init": False,  # attention and MLP output projections start at zero
}
GPT_ACTIVATIONS = ("gelu", "relu2")
# The switches of those kwargs, each with the values a search tries (the default first).
GPT_SWITCHES = {
    "qk_norm": (False, True),
    "activation": GPT_ACTIVATIONS,
    "tied": (True, False),
    "zero_init": (False, True),
}
# The algorithms a language model trains with: they change the optimisation, not a per-example loss
# (MixUp, label smoothing, selective backprop: one label per text) or the input (images, a sequence length).
LM_ALGORITHMS = ("ema", "sam", "gradient_clipping")
TOKENIZERS = ("bytes", "bpe", "wordpiece", "file")
# Every tokenizer's ids 0-3 are its special tokens (padding, the classifier's first token, the end
# of a document, unknown); bytes are 4 + their value, so 260 is the smallest vocabulary.
SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]")
MIN_VOCAB = 256 + len(SPECIAL_TOKENS)
OPTIMIZERS = ("sgd", "adamw", "sgdw", "kfac-sgd", "muon")
# Optimizers torch can step with one fused kernel (Composer's DecoupledSGDW has no fused path).
FUSABLE = ("sgd", "adamw", "kfac-sgd")
SCHEDULES = ("constant", "multistep", "cosine", "linear", "onecycle", "wsd")
SPARSITY_SCHEDULES = ("constant", "polynomial")
PRECISIONS = ("fp32", "amp_fp16", "amp_bf16")
DEVICES = ("auto", "cpu", "cuda")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs")
LOADERS = ("torch", "ffcv")
BACKENDS = ("auto", "gloo", "nccl")
COMPRESSIONS = ("none", "fp16", "bf16", "powersgd", "topk", "randomk", "threshold", "terngrad", "qsgd")
# Methods error feedback does not apply to: nothing is dropped (none), or a plain cast.
NO_FEEDBACK = ("none", "fp16", "bf16")
GRANULARITIES = ("layerwise", "entire-model")
# Methods effsearch writes as DDP hooks (the others are torch's own hooks); error feedback applies to these
# and to PowerSGD (torch's own residual memory).
SPARSIFIERS = ("topk", "randomk", "threshold")
QUANTIZERS = ("terngrad", "qsgd")
QUANTIZE = ("none", "int8")
SELECTIONS = (
    "full",
    "random",
    "random-online",
    "glister",
    "glister-pb",
    "glister-pc",
    "craig",
    "craig-pb",
    "craig-pc",
    "gradmatch",
    "gradmatch-pb",
    "gradmatch-pc",
)
# CORDS strategies that return per-sample weights (the loss uses them).
WEIGHTED_SELECTIONS = tuple(s for s in SELECTIONS if s.startswith(("craig", "gradmatch")))
# Strategies that look at the model (their first subset is random unless kappa > 0, as in CORDS).
MODEL_SELECTIONS = tuple(s for s in SELECTIONS if s.startswith(("glister", "craig", "gradmatch")))
GREEDY = {"glister": ("auto", "naive", "stochastic"), "craig": ("auto", "lazy", "naive", "stochastic")}
