"""``model.name: hf:CONFIG_CLASS``: a transformers sequence classifier (or, on a language model's
corpus, a causal language model: ``build_causal``) built from a config class and ``model.kwargs``
(its fields), with fresh weights; or ``hf:FOLDER`` (``pretrained``): the model ``save_pretrained``
wrote there, fine-tuned from its weights (a classifier's head fresh where its labels differ),
read from that folder only, never a download.

``transformers.AutoModelForSequenceClassification.from_config`` picks the model of the config's
family (``hf:BertConfig`` builds ``BertForSequenceClassification``); effsearch sets the
vocabulary (the tokenizer's), the labels (the data's) and the padding id, so ``model.kwargs``
may not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.nn as nn

from effsearch.config import ConfigError
from effsearch.config.imports import check_hf_folder
from effsearch.trainer.data.tokenizer import BYTE_OFFSET, CLS, SEP

if TYPE_CHECKING:
    from effsearch.trainer.data.tokenizer import TokenShape

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
        config = cls(
            **kwargs, **_ends(cls, kwargs, CLS, SEP), vocab_size=vocab_size, num_labels=num_classes, pad_token_id=0
        )
    except Exception as e:  # noqa: BLE001 - a field the config class refuses
        raise ConfigError("model.kwargs", f"{name}({kwargs}) raised {type(e).__name__}: {e}"[:400]) from None
    _own_fields(name, cls, config, kwargs)
    return config


def _own_fields(name: str, cls: type, config: Any, kwargs: dict) -> None:
    """``_no_stray`` on the kwargs the built ``config`` kept though the class's default instance
    has no such field (a field the class consumes, as ``attn_implementation``, is kept by neither)."""
    default = cls()
    _no_stray(name, default, [k for k in kwargs if not hasattr(default, k) and hasattr(config, k)])


def _no_stray(name: str, default: Any, stray: list[str]) -> None:
    """A ConfigError naming the first of ``stray``, kwargs a config class kept as attributes of no
    field of its own (a typo: transformers stores any keyword and builds the default instead, a
    12-layer BERT for ``num_hiden_layers: 1``), with the field it may have meant."""
    if not stray:
        return
    import difflib

    fields = sorted({*default.to_dict(), *getattr(default, "attribute_map", {})})
    near = difflib.get_close_matches(stray[0], fields, n=1)
    raise ConfigError(
        f"model.kwargs.{stray[0]}",
        f"{name} has no field {stray[0]!r}"
        + (f" (did you mean {near[0]!r}?)" if near else "")
        + "; transformers would keep it unused and build its default",
    )


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


def _first(e: Exception) -> str:
    """An exception's first sentence: transformers' can run to paragraphs of advice."""
    text = str(e).strip().split("\n")[0]
    return f"{type(e).__name__}: {text.split('. ')[0]}"[:300]


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
    _own_fields(name, cls, config, kwargs)
    # An encoder's config (BertConfig, RobertaConfig) builds a model that attends both ways unless
    # is_decoder is set: each position would see the token it is to predict. A decoder-only one
    # (GPT2Config, LlamaConfig) has no such field and is causal as built.
    if hasattr(config, "is_decoder") and "is_decoder" not in kwargs:
        config.is_decoder = True
    return config


def pretrained(folder: str, kwargs: dict, tokens: TokenShape, num_classes: int) -> tuple[nn.Module, torch.Tensor]:
    """The model saved in ``folder`` (a sequence classifier, or a causal LM on a language model's
    corpus) with ``kwargs`` overriding its config's fields, and the table from effsearch's ids to
    its tokenizer's (:func:`own_table`). On the meta device (the probe: structure only) its
    weights are not read."""
    path = check_hf_folder(folder)
    require_own(tokens, f"hf:{folder} is a pretrained model", folder)
    taken = [k for k in SET_HERE if k in kwargs]
    if taken:
        raise ConfigError("model.kwargs", f"{', '.join(taken)}: set by the saved model and the data; leave out")
    try:
        import transformers
    except ImportError:
        raise ConfigError("model.name", f"hf:{folder} {TEXT_HINT}") from None
    auto = transformers.AutoModelForCausalLM if tokens.causal else transformers.AutoModelForSequenceClassification
    labels = {} if tokens.causal else {"num_labels": num_classes}
    try:
        saved, stray = transformers.AutoConfig.from_pretrained(
            path, local_files_only=True, return_unused_kwargs=True, **kwargs
        )
    except Exception as e:  # noqa: BLE001 - a config.json transformers cannot read
        raise ConfigError("model.name", f"hf:{folder}: transformers cannot read its config.json: {_first(e)}") from None
    _no_stray(f"hf:{folder} ({type(saved).__name__})", saved, list(stray))
    try:
        # Quiet: "newly initialized: classifier.weight", "num_labels incompatible with id2label": the
        # head is the data's, as the docs say.
        with _quiet(transformers):
            if torch.get_default_device().type == "meta":
                config = transformers.AutoConfig.from_pretrained(path, local_files_only=True, **kwargs, **labels)
                net = auto.from_config(config)
            else:
                net = auto.from_pretrained(
                    path,
                    local_files_only=True,
                    **kwargs,
                    **labels,
                    **({} if tokens.causal else {"ignore_mismatched_sizes": True}),
                )
    except Exception as e:  # noqa: BLE001 - a folder transformers cannot read, or fields it refuses
        raise ConfigError(
            "model.name",
            _cannot(
                f"hf:{folder}",
                "causal language model" if tokens.causal else "sequence classifier",
                e,
                "BERT's, GPT-2's",
            ),
        ) from None
    return net, own_table(net, tokens, folder)


def require_own(tokens: TokenShape, subject: str, saved: str) -> None:
    """A pretrained model (``subject`` says which) reads its own tokenizer's ids: a ConfigError
    naming dataset.tokenizer.name unless the tokenizer is a file (``tokens.own``)."""
    if tokens.own is None:
        raise ConfigError(
            "dataset.tokenizer.name",
            f"{subject}, which reads its own tokenizer's ids: set dataset.tokenizer: {{name: file, path: {saved}}} "
            "(the tokenizer.json saved with it)",
        )


def own_table(net: nn.Module, tokens: TokenShape, where: str) -> torch.Tensor:
    """Effsearch's ids to a pretrained model's (``tokens.own``: its tokenizer file's PAD, CLS, SEP and
    UNK): a file id moves back down by 4, and effsearch's specials become the model's own (padding
    its config's, else the file's, else the end of text; CLS the template's first token, else the
    config's start of text; SEP the template's last, else the end of text; a language model's
    document end is its end of text). A model without a padding id gets one: a decoder classifier
    finds each text's last token by it."""
    assert tokens.own is not None
    own_pad, own_cls, own_sep, own_unk = tokens.own
    config: Any = getattr(net, "config")  # noqa: B009 - a transformers model's, typed as a module attribute

    def first(*ids: Any) -> int:
        return next(int(i) for i in (*ids, 0) if isinstance(i, int))

    eos, bos = getattr(config, "eos_token_id", None), getattr(config, "bos_token_id", None)
    eos = eos[0] if isinstance(eos, list) and eos else eos
    pad = first(getattr(config, "pad_token_id", None), own_pad, eos)
    if getattr(config, "pad_token_id", None) is None:
        config.pad_token_id = pad
    cls = first(own_cls, bos, getattr(config, "cls_token_id", None), pad)
    sep = first(eos, own_sep, pad) if tokens.causal else first(own_sep, getattr(config, "sep_token_id", None), eos, pad)
    unk = first(own_unk, pad)
    words = tokens.vocab_size - BYTE_OFFSET
    embedded = getattr(net, "get_input_embeddings")().num_embeddings  # noqa: B009 - as config above
    if words > embedded:
        raise ConfigError(
            "dataset.tokenizer.path",
            f"its tokenizer has {words} tokens and hf:{where} embeds {embedded}: give the tokenizer.json saved "
            "with that model",
        )
    return torch.tensor([pad, cls, sep, unk, *range(words)], dtype=torch.long)


@contextlib.contextmanager
def _quiet(transformers: Any) -> Iterator[None]:
    logging = transformers.utils.logging
    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)
