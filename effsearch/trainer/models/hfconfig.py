"""``model.name: hf:CONFIG_CLASS``: a transformers sequence classifier (or, on a language model's
corpus, a causal language model: ``build_causal``) built from a config class and ``model.kwargs``
(its fields), with fresh weights: never pretrained ones, never a download.

``transformers.AutoModelForSequenceClassification.from_config`` picks the model of the config's
family (``hf:BertConfig`` builds ``BertForSequenceClassification``); effsearch sets the
vocabulary (the tokenizer's), the labels (the data's) and the padding id, so ``model.kwargs``
may not.
"""

from __future__ import annotations

from typing import Any

import torch.nn as nn

from effsearch.config import ConfigError
from effsearch.trainer.data.tokenizer import CLS, SEP

TEXT_HINT = "needs the optional extra text (`uv sync --extra text`, or `pip install 'effsearch[text]'`)"
SET_HERE = ("vocab_size", "num_labels", "pad_token_id")


def _config_class(name: str, examples: str) -> tuple[Any, type]:
    """(the transformers module, its config class ``name``): ConfigError naming model.name when the
    extra is missing or transformers has no such config class (``examples``: what it does have)."""
    try:
        import transformers
    except ImportError:
        raise ConfigError("model.name", f"hf:{name} {TEXT_HINT}") from None
    cls = getattr(transformers, name, None)
    if not (isinstance(cls, type) and issubclass(cls, transformers.PretrainedConfig)):
        raise ConfigError("model.name", f"transformers has no config class {name!r} (e.g. {examples})")
    return transformers, cls


def build(name: str, kwargs: dict, vocab_size: int, num_classes: int) -> nn.Module:
    """The model ``hf:name`` (``name`` a transformers config class) with ``kwargs`` as its fields."""
    transformers, cls = _config_class(name, "hf:BertConfig, hf:DistilBertConfig, hf:RobertaConfig")
    taken = [k for k in SET_HERE if k in kwargs]
    if taken:
        raise ConfigError(
            "model.kwargs",
            f"{', '.join(taken)} {'is' if len(taken) == 1 else 'are'} set by effsearch (the tokenizer's vocabulary, "
            "the data's classes, padding id 0); leave them out",
        )
    config = _config(cls, name, kwargs, vocab_size, num_classes)
    if getattr(config, "is_encoder_decoder", False):
        # BART's classifier reads the hidden state at each row's last end-of-text token, T5's needs a
        # decoder's first token: rows here are [CLS] and the text, the same for every model.
        raise ConfigError(
            "model.name",
            f"hf:{name} builds an encoder-decoder (is_encoder_decoder), which is not trained as a classifier "
            "here: use an encoder's config (hf:BertConfig, hf:RobertaConfig) or a decoder's (hf:GPT2Config, "
            "hf:LlamaConfig)",
        )
    try:
        return transformers.AutoModelForSequenceClassification.from_config(config)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - a config of no sequence classifier, or fields that do not fit
        raise ConfigError(
            "model.name", _cannot(name, "sequence classifier", e, "hf:BertConfig, hf:LlamaConfig")
        ) from None


def _ends(cls: type, kwargs: dict, bos: int, eos: int) -> dict:
    """The bos and eos ids ``kwargs`` leaves out, inside this vocabulary: a config's own are its
    pretrained vocabulary's (GPT-2's 50256, ModernBERT's 50281), outside it (transformers warns).
    Likewise cls and sep where the config class has them (ModernBertConfig: 50281, 50282)."""
    ids = [("bos_token_id", bos), ("eos_token_id", eos)]
    ids += [(k, v) for k, v in (("cls_token_id", CLS), ("sep_token_id", SEP)) if hasattr(cls, k)]
    return {k: v for k, v in ids if k not in kwargs}


def _config(cls: type, name: str, kwargs: dict, vocab_size: int, num_classes: int) -> Any:
    # A classifier's text starts with CLS (tokenizer.rows); SEP ends a document.
    try:
        return cls(
            **kwargs, **_ends(cls, kwargs, CLS, SEP), vocab_size=vocab_size, num_labels=num_classes, pad_token_id=0
        )
    except Exception as e:  # noqa: BLE001 - a field the config class refuses
        raise ConfigError("model.kwargs", f"{name}({kwargs}) raised {type(e).__name__}: {e}"[:400]) from None


def build_causal(name: str, kwargs: dict, vocab_size: int) -> nn.Module:
    """A transformers causal language model (``AutoModelForCausalLM``) from the config ``hf:name``."""
    transformers, cls = _config_class(name, "hf:GPT2Config, hf:LlamaConfig")
    taken = [k for k in ("vocab_size", "pad_token_id") if k in kwargs]
    if taken:
        raise ConfigError(
            "model.kwargs",
            f"{', '.join(taken)}: set by effsearch (the tokenizer's vocabulary, padding id 0); leave out",
        )
    config = _causal_config(cls, name, kwargs, vocab_size)
    try:
        return transformers.AutoModelForCausalLM.from_config(config)
    except Exception as e:  # noqa: BLE001 - a config of no causal LM, or fields that do not fit
        raise ConfigError(
            "model.name", _cannot(name, "causal language model", e, "hf:GPT2Config, hf:LlamaConfig, hf:BertConfig")
        ) from None


def _cannot(name: str, what: str, e: Exception, examples: str) -> str:
    """Why ``transformers`` built no ``what`` from the config ``name``: a family with none (its
    Auto class lists every config it knows, hundreds: not repeated here), or the error."""
    if "Unrecognized configuration class" in str(e):
        return f"transformers has no {what} for {name} (e.g. {examples})"
    return f"transformers cannot build a {what} from {name}: {type(e).__name__}: {e}"[:400]


def _causal_config(cls: type, name: str, kwargs: dict, vocab_size: int) -> Any:
    # A document's end, SEP, is what GPT-2's <|endoftext|> stands for: it begins and ends one.
    try:
        config = cls(**kwargs, **_ends(cls, kwargs, SEP, SEP), vocab_size=vocab_size, pad_token_id=0)
    except Exception as e:  # noqa: BLE001 - a field the config class refuses
        raise ConfigError("model.kwargs", f"{name}({kwargs}) raised {type(e).__name__}: {e}"[:400]) from None
    # An encoder's config (BertConfig, RobertaConfig) builds a model that attends both ways unless
    # is_decoder is set: each position would see the token it is to predict. A decoder-only one
    # (GPT2Config, LlamaConfig) has no such field and is causal as built.
    if hasattr(config, "is_decoder") and "is_decoder" not in kwargs:
        config.is_decoder = True
    return config
