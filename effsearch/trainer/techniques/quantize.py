"""Post-training int8 quantization of the delivered model, with torch's own tooling.

FX graph mode (``torch.ao.quantization.quantize_fx``): ``prepare_fx`` folds each
Conv-BatchNorm(-ReLU) and puts observers in, a few hundred training images (no
augmentation) calibrate them, ``convert_fx`` writes int8 weights (per channel) and
activations (per tensor) with the backend's kernels (x86/fbgemm, else qnnpack). FX
rather than eager mode: the models need no QuantStub/DeQuantStub edits, and the
residual additions become quantized adds by themselves. Quantized kernels run on the
CPU, so this is measured on a CPU copy whatever the training device.

Sizes follow one rule for both models: the saved state dict (``torch.save``),
gzip-compressed, so the zeros sparsity leaves count as a file compressor sees them.
Measured after training, outside the train clock (``quantize_seconds``).

Deprecated upstream, kept on purpose: torch 2.15 warns that ``torch.ao.quantization``
and the quantized dtypes (quint8/qint8) are deprecated in favour of torchao, yet
2.15.0 still runs them and still meets the bars (docs/benchmarks.md, "int8
quantization after sparse training"). torchao's eager ``quantize_`` converts
``nn.Linear`` layers only (most of these models are convolutions) and its pt2e path
(``prepare_pt2e``/``convert_pt2e``) covers convolutions but delivers an exported
graph, not the module state dict ``quantized_size`` measures; either would add a
dependency on both ends of the torch range (2.7 to 2.15) for no gain on these bars.
The warnings are silenced here, by message, and nowhere else (``QUIET``).
"""

from __future__ import annotations

import copy
import gzip
import io
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

import torch

if TYPE_CHECKING:
    from effsearch.trainer.data.splits import Splits

CALIBRATION_IMAGES = 512
EVAL_BATCH = 1024
# Warnings torch raises about its own quantization tooling, not about our use of it:
# the default qconfig passes reduce_range to its observers (torch 2.7+), and torch
# 2.15 flags torch.ao.quantization and the quantized tensor dtypes as deprecated
# (module docstring: why this path stays).
QUIET = (
    ".*reduce_range will be deprecated.*",
    ".*torch.ao.quantization is deprecated.*",
    ".*quantized tensor creation functions.*are deprecated.*",
)


def saved_bytes(module: torch.nn.Module) -> int:
    """Bytes of ``torch.save(module.state_dict())``, gzip-compressed."""
    buf = io.BytesIO()
    torch.save(module.state_dict(), buf)
    return len(gzip.compress(buf.getvalue(), compresslevel=6))


def engine() -> str:
    supported = torch.backends.quantized.supported_engines
    for name in ("x86", "fbgemm", "qnnpack"):
        if name in supported:
            return name
    raise RuntimeError(f"no quantized engine in this torch build ({supported})")


def _plain(net: torch.nn.Module) -> torch.nn.Module:
    """The prediction path of an effsearch Classifier, traceable by FX (its ``forward``
    branches on CORDS's ``last``/``freeze`` arguments)."""
    if hasattr(net, "features") and hasattr(net, "linear"):
        return torch.nn.Sequential(cast(torch.nn.Module, net.features), cast(torch.nn.Module, net.linear))
    return net


@torch.no_grad()
def accuracy(
    model: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    normalise: Callable[[Sequence[torch.Tensor]], tuple[torch.Tensor, ...]],
) -> float:
    correct = 0
    for i in range(0, len(y), EVAL_BATCH):
        xb, yb = normalise((x[i : i + EVAL_BATCH], y[i : i + EVAL_BATCH]))
        correct += int((model(xb).argmax(1) == yb).sum())
    return correct / max(len(y), 1)


def measure(module: torch.nn.Module, splits: Splits, seed: int = 0) -> dict:
    """Quantize a copy of ``module`` (the delivered network) to int8; sizes and accuracies."""
    import warnings

    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    from effsearch.trainer.data.splits import BatchAugment

    t0 = time.perf_counter()
    for message in QUIET:
        warnings.filterwarnings("ignore", message=message)
    backend = engine()
    torch.backends.quantized.engine = backend
    fp32 = _plain(copy.deepcopy(module)).cpu().eval().to(memory_format=torch.contiguous_format)
    normalise = BatchAugment(splits.mean.cpu(), splits.std.cpu(), "cpu", flip=False, crop_padding=0, train=False)
    g = torch.Generator().manual_seed(seed + 31)
    pick = torch.randperm(len(splits.train_y), generator=g)[:CALIBRATION_IMAGES]
    calib_x = splits.train_x.cpu()[pick]
    calib_y = splits.train_y.cpu()[pick]
    example = normalise((calib_x[:2], calib_y[:2]))[0]
    prepared = prepare_fx(copy.deepcopy(fp32), get_default_qconfig_mapping(backend), (example,))
    with torch.no_grad():
        for i in range(0, len(calib_y), 128):
            prepared(normalise((calib_x[i : i + 128], calib_y[i : i + 128]))[0])
    q = convert_fx(prepared)
    val_x, val_y = splits.val_x.cpu(), splits.val_y.cpu()
    test_x, test_y = splits.test_x.cpu(), splits.test_y.cpu()
    return {
        "quantize_backend": backend,
        "fp32_bytes": saved_bytes(fp32),
        "quantized_bytes": saved_bytes(q),
        "quantized_val_accuracy": accuracy(q, val_x, val_y, normalise),
        "quantized_test_accuracy": accuracy(q, test_x, test_y, normalise),
        "quantize_seconds": time.perf_counter() - t0,
    }
