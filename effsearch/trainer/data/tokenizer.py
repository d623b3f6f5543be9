"""Tokenizers, trained offline on a training split and saved as JSON beside the token cache.

``dataset.tokenizer.name``:

* ``bytes``: a text's UTF-8 bytes, each one token (id 4 + its value): no training, no dependency,
  260 tokens, and sequences about four times as long as BPE's;
* ``bpe``: byte-level BPE (GPT-2's scheme, Hugging Face ``tokenizers``, extra text): every byte
  is in its alphabet, so any text round-trips exactly and no token is unknown;
* ``wordpiece``: BERT's WordPiece (lower-cased, split on whitespace and punctuation; characters
  outside its alphabet are ``[UNK]``);
* ``file``: the user's own ``tokenizer.json`` (``dataset.tokenizer.path``, what Hugging Face's
  ``save_pretrained`` writes for a fast tokenizer), read, not trained. Its ids move up by 4 past
  effsearch's special tokens; a pretrained model reads them through :func:`own_ids`, the table
  back to the file's numbers (its own ``[CLS]``, ``[SEP]`` and padding in place of effsearch's).

Every tokenizer's ids 0-3 are the special tokens (``config.choices.SPECIAL_TOKENS``): ``PAD``
(batches pad with it; models mask it), ``CLS`` (the first token of a text a classifier reads),
``SEP`` (the end of a document, for language models packing texts into one stream) and ``UNK``.
:meth:`Tokenizer.encode` adds none of them: the caller lays texts out (``rows``, a classifier's).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from effsearch.config import ConfigError
from effsearch.config.choices import MIN_VOCAB, SPECIAL_TOKENS

PAD, CLS, SEP, UNK = range(len(SPECIAL_TOKENS))
BYTE_OFFSET = len(SPECIAL_TOKENS)
TEXT_HINT = (
    "needs the optional extra text (`uv sync --extra text`, or `pip install 'effsearch[text]'`); "
    "tokenizer bytes needs nothing"
)


@dataclass(frozen=True)
class TokenShape:
    """What a text model is built for: the tokenizer's vocabulary, the longest sequence, the padding
    id, whether it is a language model (``causal``: logits for every position of a window), and,
    for a tokenizer file, its own ids of PAD, CLS, SEP and UNK (``own``: None where it has none),
    which a pretrained model reads in their place."""

    vocab_size: int
    max_length: int
    pad_id: int = PAD
    causal: bool = False
    own: tuple[int | None, int | None, int | None, int | None] | None = None


class Tokenizer:
    """A trained tokenizer: ``encode`` texts to ids (no special tokens), ``decode`` them back."""

    name = ""

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        raise NotImplementedError

    def decode(self, ids: Sequence[int]) -> str:
        raise NotImplementedError

    def to_json(self) -> str:
        raise NotImplementedError

    def token_bytes(self) -> np.ndarray:
        """Bytes of text each id stands for (what bits per byte divide by): a document's end (SEP)
        counts one, as the line break between two documents would; the other special ids none."""
        raise NotImplementedError


def _specials(n: int) -> np.ndarray:
    out = np.zeros(n, np.int64)
    out[SEP] = 1
    return out


class ByteTokenizer(Tokenizer):
    name = "bytes"

    @property
    def vocab_size(self) -> int:
        return MIN_VOCAB

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.frombuffer(t.encode("utf-8"), np.uint8).astype(np.int32) + BYTE_OFFSET for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(int(i) - BYTE_OFFSET for i in ids if int(i) >= BYTE_OFFSET).decode("utf-8", "replace")

    def to_json(self) -> str:
        return json.dumps({"effsearch": "bytes"})

    def token_bytes(self) -> np.ndarray:
        out = _specials(MIN_VOCAB)
        out[BYTE_OFFSET:] = 1
        return out


class TrainedTokenizer(Tokenizer):
    """A ``tokenizers.Tokenizer`` (bpe, wordpiece)."""

    def __init__(self, name: str, tok: Any) -> None:
        self.name, self.tok = name, tok

    @property
    def vocab_size(self) -> int:
        return int(self.tok.get_vocab_size())

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        out = [np.asarray(e.ids, np.int32) for e in self.tok.encode_batch(list(texts), add_special_tokens=False)]
        for ids in out:  # a text that spells "[PAD]" or "[CLS]" gets the token: it means no padding there
            ids[ids < UNK] = UNK
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tok.decode([int(i) for i in ids], skip_special_tokens=True))

    def to_json(self) -> str:
        return json.dumps({"effsearch": self.name, "tokenizer": json.loads(self.tok.to_str())})

    def token_bytes(self) -> np.ndarray:
        """Byte-level BPE: each token's characters map back to one byte each (GPT-2's byte alphabet).
        WordPiece lower-cases and drops spaces, so its tokens have no byte count: a ValueError."""
        if self.name != "bpe":
            raise ValueError(f"{self.name} tokens do not map back to the text's bytes")
        alphabet = _byte_alphabet()
        out = _specials(self.vocab_size)
        for token, i in self.tok.get_vocab().items():
            if i >= len(SPECIAL_TOKENS):
                out[i] = sum(1 for ch in token if ch in alphabet)
        return out


class FileTokenizer(Tokenizer):
    """The user's ``tokenizers.Tokenizer`` read from a file: its id ``i`` is ``BYTE_OFFSET + i`` here,
    so ids 0-3 stay effsearch's special tokens and none of the file's (its own ``[CLS]`` or
    ``<s>``) is confused with them. Its padding, truncation and post-processing are turned off:
    rows lay texts out (``rows``), the same for every tokenizer."""

    name = "file"

    def __init__(self, tok: Any) -> None:
        padding = tok.padding
        self.pad_token = padding.get("pad_token") if padding else None
        tok.no_padding()
        tok.no_truncation()
        self.tok = tok

    def template(self) -> tuple[list[int], list[int]]:
        """The file's own ids its post-processor puts before and after a text (BERT's ``[CLS]`` and
        ``[SEP]``, RoBERTa's ``<s>`` and ``</s>``; none for GPT-2's)."""
        bare = self.tok.encode("a", add_special_tokens=False).ids
        full = self.tok.encode("a", add_special_tokens=True).ids
        for start in range(len(full) - len(bare) + 1):
            if full[start : start + len(bare)] == bare:
                return full[:start], full[start + len(bare) :]
        return [], []

    @property
    def ends_with_sep(self) -> bool:
        """A text of this file ends with SEP: its post-processor closes a text with a token."""
        return bool(self.template()[1])

    def own(self) -> tuple[int | None, int | None, int | None, int | None]:
        """The file's own ids of PAD, CLS, SEP and UNK (None where it has none): its padding token
        or one named as padding usually is; the first and last tokens of its template; the unknown
        token of its model."""
        vocab = self.tok.get_vocab(with_added_tokens=True)
        pad = next((vocab[t] for t in (self.pad_token, *PAD_NAMES) if t in vocab), None)
        before, after = self.template()
        unk = json.loads(self.tok.to_str())["model"].get("unk_token")
        return pad, before[0] if before else None, after[-1] if after else None, vocab.get(unk)

    @property
    def vocab_size(self) -> int:
        return BYTE_OFFSET + int(self.tok.get_vocab_size(with_added_tokens=True))

    @property
    def model(self) -> str:
        """The file's model type (``BPE``, ``WordPiece``, ``Unigram``, ``WordLevel``)."""
        return str(json.loads(self.tok.to_str())["model"].get("type", ""))

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        encoded = self.tok.encode_batch(list(texts), add_special_tokens=False)
        return [np.asarray(e.ids, np.int32) + BYTE_OFFSET for e in encoded]

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tok.decode([int(i) - BYTE_OFFSET for i in ids if int(i) >= BYTE_OFFSET]))

    def to_json(self) -> str:
        return json.dumps({"effsearch": self.name, "tokenizer": json.loads(self.tok.to_str())})

    def token_bytes(self) -> np.ndarray:
        """Each token's bytes of text: exact for a byte-level BPE (GPT-2's alphabet) and for
        SentencePiece's byte tokens (``<0x0A>``); otherwise its characters, ``▁`` counted as the
        space it stands for. The file's own special tokens count none."""
        data = json.loads(self.tok.to_str())
        byte_level = "ByteLevel" in json.dumps(data.get("decoder"))
        specials = {t["content"] for t in data.get("added_tokens") or [] if t.get("special")}
        alphabet = _byte_alphabet()
        out = _specials(self.vocab_size)
        for token, i in self.tok.get_vocab(with_added_tokens=True).items():
            out[BYTE_OFFSET + i] = 0 if token in specials else _piece_bytes(token, byte_level, alphabet)
        return out


PAD_NAMES = ("[PAD]", "<pad>", "<|pad|>", "<|padding|>")


def own_ids(t: Any) -> tuple[int | None, int | None, int | None, int | None] | None:
    """``dataset.tokenizer`` (``t``) names a file: its own ids of PAD, CLS, SEP and UNK; else None."""
    return from_file(t.path).own() if t.name == "file" else None


_BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def _piece_bytes(token: str, byte_level: bool, alphabet: set[str]) -> int:
    if byte_level:
        return sum(1 for ch in token if ch in alphabet)
    if _BYTE_PIECE.fullmatch(token):
        return 1
    return len(token.removeprefix("##").replace("\u2581", " ").encode("utf-8"))


def from_file(path: str) -> FileTokenizer:
    """The tokenizer saved at ``path`` (``dataset.tokenizer.path``); ConfigError naming that field
    when it is missing or not a ``tokenizers`` JSON file."""
    file, data = _read(path)
    t = _tokenizers("file")
    try:
        tok = t.Tokenizer.from_str(data.decode("utf-8"))
    except Exception as e:  # noqa: BLE001 - tokenizers raises its own kinds for a file it cannot read
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(
            "dataset.tokenizer.path",
            f"{file} is not a tokenizer JSON file (Hugging Face tokenizers' tokenizer.json: {first})"
            + _sentencepiece_hint([file]),
        ) from None
    return FileTokenizer(tok)


def _sentencepiece_hint(files: list[Path]) -> str:
    """How to get a tokenizer.json from a SentencePiece model (``*.model``, a protobuf file Llama,
    T5 and many others ship), when ``files`` holds one; else nothing."""
    models = [f for f in files if f.suffix == ".model" and f.is_file()]
    if not models:
        return ""
    return (
        f"; {models[0].name} looks like a SentencePiece model, which effsearch does not read: write its "
        "tokenizer.json first, e.g. transformers.AutoTokenizer.from_pretrained(FOLDER).save_pretrained(OUT) "
        "(converting needs the sentencepiece package), and give that"
    )


def _file(path: str) -> Path:
    """``path``, or the tokenizer.json inside it (the folder ``save_pretrained`` wrote); a refusal
    naming dataset.tokenizer.path where there is no such file."""
    given = Path(path).expanduser()
    file = given / "tokenizer.json" if given.is_dir() else given
    if not file.is_file():
        where = "" if file.is_absolute() else f" (read from the current folder, {Path.cwd()})"
        beside = sorted(given.glob("*.model")) if given.is_dir() else []
        raise ConfigError(
            "dataset.tokenizer.path", f"{file.absolute()} is not a file{where}" + _sentencepiece_hint(beside)
        )
    return file


def _read(path: str) -> tuple[Path, bytes]:
    """The tokenizer file ``path`` names and its bytes; one that cannot be read (permissions, a
    disk error) is a ConfigError naming dataset.tokenizer.path, never a traceback."""
    file = _file(path)
    try:
        return file, file.read_bytes()
    except OSError as e:
        raise ConfigError("dataset.tokenizer.path", f"cannot read {file}: {e.strerror or e}") from None


def settings(t: Any) -> list:
    """What a token cache's key holds of ``dataset.tokenizer`` (``t``): a file tokenizer's content
    (wherever the file lies; an edited file makes a new cache) and its rows' layout (a text ends
    with SEP where the file's template closes one), else the name and vocabulary."""
    if t.name == "file":
        return ["file", hashlib.sha256(_read(t.path)[1]).hexdigest(), "sep-end"]
    return [t.name, t.vocab_size]


def shape_of(t: Any, max_length: int, causal: bool = False) -> TokenShape:
    """What a text model for ``dataset.tokenizer`` (``t``) is built for, before any text is
    tokenized: the vocabulary it makes and, for a file (read once), its own special ids."""
    if t.name == "file":
        file = from_file(t.path)
        return TokenShape(file.vocab_size, max_length, causal=causal, own=file.own())
    return TokenShape(MIN_VOCAB if t.name == "bytes" else int(t.vocab_size), max_length, causal=causal)


def _byte_alphabet() -> set[str]:
    """The 256 characters byte-level BPE writes bytes as (GPT-2's bytes_to_unicode): printable
    bytes as themselves, the others shifted past U+0100."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [256 + i for i in range(256 - len(keep))]
    return {chr(c) for c in keep + shifted}


def _tokenizers(name: str) -> Any:
    try:
        import tokenizers
    except ImportError:
        raise ConfigError("dataset.tokenizer.name", f"{name!r} {TEXT_HINT}") from None
    return tokenizers


def made(name: str, vocab_size: int, texts: Sequence[str], path: str | None = None) -> Tokenizer:
    """The tokenizer ``name`` trained on ``texts`` (the training split's, never validation or test),
    or read from ``path`` (name ``file``)."""
    if name == "file":
        assert path is not None  # config.rules: a file tokenizer names its path
        return from_file(path)
    return train(name, vocab_size, texts)


def train(name: str, vocab_size: int, texts: Sequence[str]) -> Tokenizer:
    """The tokenizer ``name`` trained on ``texts`` (the training split's, never validation or test)."""
    if name == "bytes":
        return ByteTokenizer()
    t = _tokenizers(name)
    if name == "bpe":
        tok = t.Tokenizer(t.models.BPE())
        tok.pre_tokenizer = t.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = t.decoders.ByteLevel()
        trainer = t.trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=t.pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    else:
        tok = t.Tokenizer(t.models.WordPiece(unk_token=SPECIAL_TOKENS[UNK]))
        tok.normalizer = t.normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = t.pre_tokenizers.BertPreTokenizer()
        tok.decoder = t.decoders.WordPiece()
        # The alphabet (whole characters) takes at most half the vocabulary: the rest are words and
        # their pieces. Rarer characters are [UNK].
        trainer = t.trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            special_tokens=list(SPECIAL_TOKENS),
            limit_alphabet=max(1, (vocab_size - BYTE_OFFSET) // 2),
            show_progress=False,
        )
    tok.train_from_iterator(texts, trainer)
    return TrainedTokenizer(name, tok)


def load(text: str) -> Tokenizer:
    """A tokenizer from its :meth:`Tokenizer.to_json`; ValueError if the text is not one."""
    data = json.loads(text)
    name = data.get("effsearch") if isinstance(data, dict) else None
    if name == "bytes":
        return ByteTokenizer()
    if name not in ("bpe", "wordpiece", "file"):
        raise ValueError(f"not an effsearch tokenizer (effsearch: {name!r})")
    tok = _tokenizers(name).Tokenizer.from_str(json.dumps(data["tokenizer"]))
    return FileTokenizer(tok) if name == "file" else TrainedTokenizer(name, tok)


def rows(ids: Sequence[np.ndarray], max_length: int, first: int = CLS, last: int | None = None) -> np.ndarray:
    """Texts' ids as one int32 array (N, max_length): ``first`` ([CLS]) then the text, cut to fit,
    then ``last`` if given (a file's template closes a text with [SEP]), then PAD. Every row has
    at least ``first``."""
    out = np.full((len(ids), max_length), PAD, np.int32)
    out[:, 0] = first
    end = last if max_length > 1 else None  # a row of one token holds only ``first``
    keep = max_length - 1 - (end is not None)
    for i, seq in enumerate(ids):
        seq = seq[:keep]
        out[i, 1 : 1 + len(seq)] = seq
        if end is not None:
            out[i, 1 + len(seq)] = end
    return out


def rows_of(tok: Tokenizer, texts: Sequence[str], max_length: int) -> np.ndarray:
    """``texts`` laid out as a classifier reads them with ``tok``: :func:`rows`, closed with SEP
    where ``tok`` is a file whose template closes a text."""
    last = SEP if isinstance(tok, FileTokenizer) and tok.ends_with_sep else None
    return rows(tok.encode(texts), max_length, last=last)
