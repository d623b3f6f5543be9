"""BlurPool where it changes nothing: Composer replaces every MaxPool2d, but a strided Conv2d only
from min_channels input channels, so a patch embedding on an image's few channels (a ViT, an
MLP-Mixer) is skipped and the trial would train the model unchanged. The probed fact, the rule,
the space's view of it, and Composer's own surgery on the same model."""

import pytest
import torch.nn as nn

from effsearch.config import ConfigError, TrainConfig
from effsearch.config.sources import remember
from effsearch.spaces import Machine, Space
from effsearch.trainer.probe import facts_of


class Patches(nn.Module):
    """A ViT's stem: a patch embedding (a Conv2d of stride = kernel), then tokens into a head."""

    def __init__(self, in_channels: int = 1, pool: bool = False):
        super().__init__()
        self.embed = nn.Conv2d(in_channels, 32, 8, stride=8)
        self.pool = nn.MaxPool2d(2) if pool else nn.Identity()
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.pool(self.embed(x)).flatten(2).mean(-1))


def probed(name: str, net: nn.Module) -> dict:
    model = {"name": name}
    remember(model, facts_of(net))
    return model


def cfg(model: dict, **blur) -> dict:
    return {"model": model, "algorithms": {"blurpool": blur}, "device": "cpu"}


def test_the_probe_reads_max_pools_and_the_widest_strided_convolutions_input():
    found = facts_of(Patches(3))
    assert (found.downsamples, found.maxpools, found.strided_channels) == (True, False, 3)
    assert facts_of(Patches(3, pool=True)).maxpools
    assert facts_of(nn.Sequential(nn.Conv2d(3, 8, 3), nn.Conv2d(8, 40, 3, stride=2))).strided_channels == 8


def test_composer_replaces_nothing_where_the_rule_refuses_and_something_where_it_allows():
    from composer.algorithms.blurpool import apply_blurpool

    def blurred(net: nn.Module, **kw) -> int:
        before = {type(m) for m in net.modules()}
        apply_blurpool(net, **kw)
        return len({type(m) for m in net.modules()} - before)

    assert blurred(Patches(1), min_channels=16) == 0
    assert blurred(Patches(1), min_channels=1) == 1
    assert blurred(Patches(1, pool=True), min_channels=16) == 1


def test_a_config_asking_for_blurpool_where_it_replaces_nothing_is_refused_naming_the_fix():
    model = probed("tests.blur_patches:vit", Patches(1))
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict(cfg(model))
    assert e.value.field == "algorithms.blurpool"
    assert "replaces no layer" in e.value.message and "min_channels to 1" in e.value.message
    TrainConfig.from_dict(cfg(model, min_channels=1))
    TrainConfig.from_dict(cfg(probed("tests.blur_patches:pooled", Patches(1, pool=True))))


def test_the_space_leaves_it_out_with_the_reason():
    model = probed("tests.blur_patches:space", Patches(3))
    base = TrainConfig.from_dict({"model": model, "epochs": 2, "device": "cpu"})
    space = Space.build(base, {"include": "all"}, Machine())
    assert "algorithms.blurpool" not in space.active
    row = next(r for r in space.rows() if r["dimension"] == "algorithms.blurpool")
    assert row["state"] == "n/a" and "replaces no layer" in row["values"]


def test_the_built_in_resnets_keep_it_at_their_default_width_and_lose_it_when_narrow():
    TrainConfig.from_dict(cfg({"name": "resnet20"}))  # 2 x 16 = 32 inputs: blurred
    with pytest.raises(ConfigError, match="at most 8 input channels"):
        TrainConfig.from_dict(cfg({"name": "resnet20", "width": 4}))
    TrainConfig.from_dict(cfg({"name": "tiny-cnn", "width": 4}))  # max-pools
