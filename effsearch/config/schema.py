"""The TrainConfig's fields: a tree of plain dataclasses, each field's constraints declared once
(``spec``), and their YAML dump.

A leaf: it imports no rule. ``effsearch.config.trainconfig.TrainConfig`` builds one from a mapping or
a YAML file, checking every field (``effsearch.config.fields``) and then every rule across fields
(``effsearch.config.rules``); ``effsearch.config.readers`` reads its defaults from here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from effsearch.config.choices import (
    BACKENDS,
    COMPILE_MODES,
    COMPRESSIONS,
    DATASETS,
    DEVICES,
    GRANULARITIES,
    LOADERS,
    MODELS,
    OPTIMIZERS,
    POOLINGS,
    PRECISIONS,
    QUANTIZE,
    SCHEDULES,
    SELECTIONS,
    SPARSITY_SCHEDULES,
    TEXT_ENCODER,
    TOKENIZERS,
)
from effsearch.config.fields import SEED_MAX, spec
from effsearch.config.metrics import METRICS
from effsearch.config.sources import check_dataset_name, check_model_name


@dataclass
class TokenizerConfig:
    name: str = spec(
        "bpe",
        choices=TOKENIZERS,
        help="bytes: UTF-8 bytes, no training, no dependency; bpe: byte-level BPE; wordpiece: BERT's "
        "(bpe and wordpiece: extra text, trained on the training split only, never validation or test); "
        "file: your own tokenizer.json, read from dataset.tokenizer.path (extra text)",
    )
    vocab_size: int = spec(
        8192,
        low=1,
        high=1_000_000,
        help="bpe, wordpiece: tokens in the vocabulary, its 4 special tokens included (at least 260: "
        "every byte has one); bytes always has 260; file: the file's vocabulary and 4",
    )
    path: str | None = spec(
        None,
        help="file: a Hugging Face tokenizers JSON file (the tokenizer.json save_pretrained writes for a "
        "fast tokenizer, or the folder holding it); its ids move up by 4 past effsearch's special tokens (a "
        "pretrained model, hf:FOLDER, gets them back as its own), its padding and truncation are not used, "
        "its template's first and last tokens are effsearch's CLS and SEP; a relative path is read from the "
        "current folder, as dataset.path",
    )


@dataclass
class DatasetConfig:
    name: str = spec(
        "digits",
        check=check_dataset_name,
        help=f"a built-in ({', '.join(DATASETS)}); imagefolder, npz or hf (read from dataset.path); "
        "text: jsonl or csv (read from dataset.path), hf text, text (plain text files, a language model's "
        "corpus); or an import path "
        "package.module:callable returning x_train, y_train, x_test, y_test (a mapping may leave out the test "
        "split: carved; images, or lists of "
        "strings: text), or PyTorch datasets of (x, label) items: (train, test), (train, val, test) "
        "or one to carve (runs that code)",
    )
    path: str | None = spec(
        None,
        help="imagefolder: a folder of class folders (or train/, val/, test/ of them); "
        "npz: a .npz file; hf: a folder written by datasets' save_to_disk, or parquet files (a .parquet "
        "file, or a folder of them named by split: data/train-00000-of-00001.parquet); jsonl: a file of one JSON "
        "object a line (.gz read as gzip); csv: a file with a header row (.tsv: tab-separated; a header of semicolons, no comma: by semicolons); text: a text file (its "
        "paragraphs are the documents) or a folder of them (each file a document). A relative path "
        "is read from the current folder, not the config's (the configs under configs/ are run from "
        "the repository's root)",
    )
    kwargs: dict = spec(
        factory=dict,
        help="an import path's callable: the keyword arguments it is called with (a path, a subset's "
        "name), as model.kwargs are its builder's",
    )
    test_fraction: float = spec(
        0.2,
        low=0.0,
        high=0.5,
        low_open=True,
        help="held-out test share carved (stratified) from a source with no test split (an imagefolder without test/)",
    )
    image_column: str = spec("image", help="hf: the column of images")
    label_column: str | None = spec(
        "label",
        help="hf, jsonl, csv: the column of class labels (strings, integers or booleans, mapped in sorted order); null: "
        "the rows are documents of a language model's corpus (no labels), as dataset.name text is",
    )
    text_column: str = spec("text", help="jsonl, csv, hf text: the column of texts")
    split_column: str | None = spec(
        "split",
        help="jsonl, csv: the column naming each row's split (train, validation or val, test), used "
        "where the rows have it (null: never); without it the splits are carved (test_fraction, val_fraction)",
    )
    group_column: str | None = spec(
        None,
        help="jsonl, csv: a column of groups (e.g. a source package) kept whole on one side when test and "
        "validation are carved, so near-copies of a training text are not scored as unseen (a row without a "
        "value is carved alone; null: every row is)",
    )
    classes: list | None = spec(
        None,
        help="text: keep only the rows of these labels, class i being the i-th (null: every label of "
        "the training split, sorted)",
    )
    tokenizer: TokenizerConfig = spec(factory=TokenizerConfig)
    max_length: int = spec(
        128,
        low=1,
        high=65_536,
        help="text: tokens a text is cut to, the classifier's first token included (a batch pads to its "
        "longest); a language model: the window of the token stream it reads and predicts",
    )
    val_tokens: int | None = spec(
        None,
        low=1,
        high=1_000_000_000,
        help="a language model: the held-out tokens every evaluation scores, the same for every trial (the "
        "first ones of the validation stream; null: all of it)",
    )
    data_fraction: float = spec(1.0, low=0.0, high=1.0, low_open=True, help="stratified share of the training set used")
    val_fraction: float = spec(
        0.1, low=0.0, high=0.5, low_open=True, help="held-out validation share carved from the training set"
    )
    val_subset: float = spec(
        1.0,
        low=0.0,
        high=1.0,
        low_open=True,
        help="stratified share of the validation split evaluated (cheaper, noisier "
        "evaluations; the tuning phase's val_subset sets it)",
    )
    # The splits draw with split_seed + 1..3 too (a subset of the data, of validation; a test split).
    split_seed: int = spec(0, low=0, high=SEED_MAX - 3, help="seed of the train/validation/test split")
    image_size: int | None = spec(
        None,
        low=8,
        high=512,
        help="resize images to this side (digits defaults to 32; an imagefolder whose images differ in size needs it)",
    )
    flip: bool | None = spec(None, help="random horizontal flips (default: on for CIFAR only)")
    crop_padding: int = spec(2, low=0, high=16, help="random pad-and-crop; 0 switches it off")
    synthetic_size: int = spec(512, low=16, high=1_000_000, help="number of images of the synthetic dataset")


@dataclass
class ModelConfig:
    name: str = spec(
        "tiny-cnn",
        check=check_model_name,
        help=f"a built-in ({', '.join(MODELS)}); torchvision:NAME; timm:NAME (extra timm); hf:CONFIG_CLASS, "
        "a transformers sequence classifier built from that config with model.kwargs, fresh weights; "
        "hf:FOLDER, the pretrained model save_pretrained wrote there, fine-tuned from its weights with "
        "its own tokenizer (dataset.tokenizer file), never a download (extra text); or an import path "
        "package.module:callable, called as callable(num_classes=..., "
        "in_channels=..., **model.kwargs) for images, callable(vocab_size=..., num_classes=..., "
        "max_length=..., **model.kwargs) for text (in_channels and max_length left out where it refuses "
        "them), and returning an nn.Module (runs that code)",
    )
    width: int = spec(
        0,
        low=0,
        high=1024,
        help="channels of the first layer, text-encoder: embedding width (0: the model's default, "
        "MODEL_WIDTHS); built-in models, or a factory that takes width",
    )
    depth: int = spec(0, low=0, high=64, help=f"text-encoder: transformer layers (0: {TEXT_ENCODER['depth']})")
    heads: int = spec(
        0, low=0, high=64, help=f"text-encoder: attention heads, dividing model.width (0: {TEXT_ENCODER['heads']})"
    )
    pooling: str = spec(
        "mean",
        choices=POOLINGS,
        help="text-encoder: the text's embedding: the mean over its tokens, or its first ([CLS]) token",
    )
    dropout: float = spec(0.1, low=0.0, high=0.9, help="text-encoder: dropout in attention and feed-forward")
    kwargs: dict = spec(
        factory=dict, help="keyword arguments passed to the model's builder (hf: the config class's fields)"
    )


@dataclass
class OptimizerConfig:
    name: str = spec(
        "sgd",
        choices=OPTIMIZERS,
        help="sgdw: Composer's decoupled weight decay; kfac-sgd: SGD preconditioned by K-FAC (conv and linear layers); "
        "muon: Muon for the hidden 2-d weights (momentum orthogonalised), AdamW for the rest, one lr",
    )
    lr: float = spec(0.05, low=0.0, high=10.0, low_open=True, help="peak learning rate")
    weight_decay: float = spec(5e-4, low=0.0, high=1.0, help="L2 penalty (adamw, sgdw: decoupled)")
    momentum: float = spec(0.9, low=0.0, high=1.0, high_open=True, help="SGD momentum; adamw: beta1")
    nesterov: bool = spec(True, help="Nesterov momentum (SGD, when momentum > 0)")
    beta2: float = spec(0.999, low=0.0, high=1.0, low_open=True, high_open=True, help="adamw: beta2")
    scale_lr_with_batch: bool = spec(
        False,
        help="multiply lr by the effective batch / 128 (effective batch: "
        "batch_size x accumulate x distributed.processes)",
    )
    fused: bool | None = spec(
        None,
        help="one fused kernel per optimizer step (null: fused on CUDA, torch's default on CPU); sgd, adamw, kfac-sgd",
    )
    kfac_damping: float = spec(
        1e-3,
        low=0.0,
        high=10.0,
        low_open=True,
        help="kfac-sgd: Tikhonov damping added to the Kronecker-factored Fisher",
    )
    kfac_update_every: int = spec(
        10, low=1, high=100_000, help="kfac-sgd: steps between Kronecker-factor (and inverse) updates"
    )


@dataclass
class ScheduleConfig:
    name: str = spec(
        "cosine", choices=SCHEDULES, help="learning-rate schedule over the whole budget, after the warm-up"
    )
    warmup_fraction: float = spec(0.0, low=0.0, high=0.5, help="share of training spent warming up")
    milestones: list = spec(factory=lambda: [0.5, 0.75], help="multistep: fractions of training where lr drops")
    gamma: float = spec(0.1, low=0.0, high=1.0, low_open=True, help="multistep: lr factor at each milestone")
    final_lr_fraction: float = spec(0.0, low=0.0, high=1.0, help="lr at the end / peak lr")
    cooldown_fraction: float = spec(
        0.2,
        low=0.0,
        high=1.0,
        low_open=True,
        help="wsd (warmup-stable-decay): the last share of training, where the lr falls linearly to "
        "final_lr_fraction (the speedrun's long cool-down); before it the lr holds at its peak",
    )


@dataclass
class SparsityConfig:
    target: float = spec(0.0, low=0.0, high=0.99, help="share of conv/linear weights set to zero")
    schedule: str = spec(
        "polynomial",
        choices=SPARSITY_SCHEDULES,
        help="how the zeroed share grows from start to end (gradual magnitude pruning)",
    )
    start: float = spec(0.1, low=0.0, high=1.0, high_open=True, help="fraction of training")
    end: float = spec(0.75, low=0.0, high=1.0, low_open=True, help="fraction of training")
    update_every: int = spec(20, low=1, high=100_000, help="steps between mask updates")


@dataclass
class SelectionConfig:
    strategy: str = spec(
        "full",
        choices=SELECTIONS,
        help="CORDS strategy; -pb per batch, -pc per class (see effsearch.trainer.data.selection)",
    )
    fraction: float = spec(1.0, low=0.0, high=1.0, low_open=True, help="subset size / training set size")
    select_every: int | None = spec(
        None,
        low=1,
        high=10_000,
        help="epochs between selections (null: 5, held below the epochs so that "
        "a strategy that looks at the model selects at least once)",
    )
    kappa: float = spec(
        0.0,
        low=0.0,
        high=1.0,
        high_open=True,
        help="share of the budget trained on full data before selection starts (CORDS)",
    )
    eta: float = spec(0.03, low=0.0, high=10.0, low_open=True, help="GLISTER one-step learning rate")
    lam: float = spec(0.5, low=0.0, high=100.0, help="GradMatch OMP regularisation (lambda)")
    greedy: str = spec(
        "auto",
        choices=("auto", "naive", "stochastic", "lazy"),
        help="GLISTER: naive or stochastic (auto: stochastic where it fits the data); "
        "CRAIG: lazy (auto), naive or stochastic",
    )
    omp_eps: float = spec(1e-100, low=0.0, high=1.0, help="GradMatch OMP tolerance")


@dataclass
class CompressionConfig:
    method: str = spec("none", choices=COMPRESSIONS, help="gradient compression as a DDP communication hook")
    ratio: float = spec(0.01, low=0.0, high=1.0, low_open=True, help="topk, randomk: share of gradient entries sent")
    threshold: float = spec(1e-3, low=0.0, high=1e6, low_open=True, help="threshold: entries with |g| >= this are sent")
    qstates: int = spec(255, low=1, high=32_767, help="qsgd: quantization levels s (sends log2(2s+1) bits an entry)")
    rank: int = spec(2, low=1, high=1024, help="powersgd: matrix approximation rank")
    granularity: str = spec(
        "layerwise", choices=GRANULARITIES, help="compress each layer's gradient, or all of them as one vector"
    )
    error_feedback: bool = spec(False, help="keep what compression dropped and add it to the next gradient")


@dataclass
class DistributedConfig:
    processes: int = spec(1, low=1, high=1024, help="data-parallel processes (DDP); effsearch train starts them")
    backend: str = spec("auto", choices=BACKENDS, help="auto: nccl on CUDA, gloo on CPU")
    compression: CompressionConfig = spec(factory=CompressionConfig)


@dataclass
class TargetConfig:
    metric: str = spec(
        "val_accuracy",
        choices=tuple(METRICS),
        help="the validation metric whose first crossing is the time to target: val_accuracy (higher is "
        "better), val_loss or val_bpb (bits per byte of held-out text; lower is better)",
    )
    value: float | None = spec(
        None,
        help="the target on that metric, reached at or past it in the metric's direction (a loss: at or "
        "below it); null: target_accuracy is the target (on val_accuracy)",
    )


@dataclass
class TrainFields:
    """Every field of a training run; ``TrainConfig`` (config/trainconfig.py) is this, built and checked."""

    dataset: DatasetConfig = spec(factory=DatasetConfig)
    model: ModelConfig = spec(factory=ModelConfig)
    epochs: float = spec(5, low=0.0, high=10_000, low_open=True, help="training budget in epochs")
    batch_size: int = spec(128, low=1, high=65_536, help="per process and per micro-batch")
    accumulate: int = spec(1, low=1, high=1024, help="micro-batches per optimizer step (gradient accumulation)")
    batch_ramp: float = spec(
        0.0,
        low=0.0,
        high=1.0,
        high_open=True,
        help="language models: the first share of training over which the batch grows linearly from a "
        "quarter of batch_size to batch_size (0: off); the steps stay as many, so early ones see fewer windows",
    )
    length_warmup: float = spec(
        0.0,
        low=0.0,
        high=1.0,
        high_open=True,
        help="language models: the first share of training over which the windows grow linearly from a "
        "quarter of dataset.max_length (at least 8 tokens) to it (0: off); the speedrun's sequence-length warm-up",
    )
    optimizer: OptimizerConfig = spec(factory=OptimizerConfig)
    schedule: ScheduleConfig = spec(factory=ScheduleConfig)
    algorithms: dict = spec(
        factory=dict,
        help="Composer algorithm name -> its parameters ({} or true: on with "
        "defaults; null or false: off, e.g. to drop one a base file has)",
    )
    sparsity: SparsityConfig = spec(factory=SparsityConfig)
    selection: SelectionConfig = spec(factory=SelectionConfig)
    loader: str = spec(
        "torch", choices=LOADERS, help="ffcv: FFCV's loader (extra ffcv); streams an imagefolder larger than memory"
    )
    precision: str = spec("fp32", choices=PRECISIONS, help="automatic mixed precision in fp16 or bf16 (CUDA)")
    compile: bool = spec(
        False, help="torch.compile the model (compile time counts as train time; also in final.compile_seconds)"
    )
    compile_mode: str = spec("default", choices=COMPILE_MODES, help="torch.compile's mode, when compile is on")
    channels_last: bool = spec(False, help="NHWC memory layout (faster convolutions on tensor cores)")
    device: str = spec("auto", choices=DEVICES, help="auto: cuda when a GPU is visible, else cpu")
    # Off by default: on an H100 the timing costs 1-6 s for each new shape (layout, dtype, batch size)
    # and gained 0-10% a step on the tiny CNN, and a study's worker pays it only in its first
    # trial of each shape, so trials would not be timed alike (docs/benchmarks.md).
    cudnn_benchmark: bool = spec(
        False, help="let cuDNN time its kernels for each new shape (CUDA only; pays for itself in long runs)"
    )
    distributed: DistributedConfig = spec(factory=DistributedConfig)
    quantize: str = spec(
        "none",
        choices=QUANTIZE,
        help="post-training int8 quantization of the delivered model, "
        "measured after training (quantized_bytes, accuracies)",
    )
    seed: int = spec(0, low=0, high=SEED_MAX, help="seed of the weights, data order and augmentation")
    target_accuracy: float = spec(
        0.9,
        low=0.0,
        high=1.0,
        help="validation accuracy whose first crossing is the time to target (short for target: "
        "{metric: val_accuracy, value: ...}; unused where target.value is given)",
    )
    target: TargetConfig = spec(factory=TargetConfig)
    eval_every: float = spec(
        1.0, low=0.0, high=10_000, low_open=True, help="epochs between evaluations (fractions allowed)"
    )

    # -- I/O ---------------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)

    def hash(self) -> str:
        """Stable short hash of the config (same config -> same hash)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def dump(self, path: str | Path, header: str = "") -> None:
        text = self.to_yaml()
        if header:
            text = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines()) + text
        Path(path).write_text(text)


def effective_batch(cfg: TrainFields) -> int:
    """Samples per optimizer step: batch_size x accumulate x processes (the lr rule reads this)."""
    return cfg.batch_size * cfg.accumulate * cfg.distributed.processes


SELECT_EVERY = 5  # CORDS's default period, in epochs


def select_every(cfg: TrainFields) -> int:
    """``selection.select_every`` with null resolved: 5 epochs, held below the epochs (at least 1)
    so that a strategy which looks at the model selects at least once before training ends."""
    every = cfg.selection.select_every
    if every is not None:
        return every
    return max(1, min(SELECT_EVERY, math.ceil(cfg.epochs) - 1))
