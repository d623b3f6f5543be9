"""Architectures effsearch was not tuned on (benchmarks/space_sweep.py --each on each): what the
space offers them trains. Each model is built here, small, from torch's own layers."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from effsearch.trainer.probe import facts_of


class ChannelsLayerNorm(nn.LayerNorm):
    """A layer norm over the channels of NCHW (torchvision's ConvNeXt LayerNorm2d): a forward of its own."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


def convnext_like(plain: bool) -> nn.Module:
    """Channel layer norms in the stem; ``plain``: a plain nn.LayerNorm on the pooled features too."""
    return nn.Sequential(
        nn.Conv2d(1, 8, 2, 2),
        ChannelsLayerNorm(8),
        nn.Conv2d(8, 8, 3, padding=1, groups=8),
        nn.GELU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.LayerNorm(8) if plain else nn.Identity(),
        nn.Linear(8, 3),
    )


def test_low_precision_layernorm_is_offered_for_plain_layer_norms_only():
    """Composer's LPLayerNorm normalises the last dimension: a channels layer norm is not one to replace."""
    assert not facts_of(convnext_like(plain=False)).layernorm
    assert facts_of(convnext_like(plain=True)).layernorm


@pytest.mark.parametrize("plain", [False, True])
def test_low_precision_layernorm_leaves_a_layer_norm_of_another_forward_alone(plain):
    from composer.algorithms.low_precision_layernorm.low_precision_layernorm import (
        LPLayerNorm,
        apply_low_precision_layernorm,
    )
    from composer.core import Precision

    from effsearch.trainer.composer import compat as composer_compat

    composer_compat.apply()
    net = convnext_like(plain)
    apply_low_precision_layernorm(net, Precision.AMP_BF16, optimizers=None)
    assert isinstance(net[1], ChannelsLayerNorm) and not isinstance(net[1], LPLayerNorm)
    assert isinstance(net[6], LPLayerNorm) == plain
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert net(torch.zeros(2, 1, 8, 8)).shape == (2, 3)  # the old surgery: "expected input with shape [*, 8]"


READS_VALUES_PY = '''
import torch
import torch.nn as nn


def reads_values(num_classes, in_channels):
    """Its width read from a tensor (torchvision's RegNet rounds its widths so): no value on meta tensors."""
    width = int(torch.tensor(7.6).round().item())
    return nn.Sequential(nn.Conv2d(in_channels, width, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, num_classes))
'''


def test_a_builder_that_reads_tensor_values_is_probed_on_the_cpu(tmp_path, monkeypatch):
    """The study probes on the meta device; a builder that cannot build there was refused, exit 2."""
    from effsearch.config import TrainConfig
    from effsearch.trainer.probe import probe

    (tmp_path / "values_models.py").write_text(READS_VALUES_PY)
    monkeypatch.syspath_prepend(str(tmp_path))
    found = probe(TrainConfig.from_dict({"model": {"name": "values_models:reads_values"}}).model, channels=1)
    assert found.in_channels == 1 and found.final_linear and found.params == 8 * 9 + 8 + 8 * 10 + 10
