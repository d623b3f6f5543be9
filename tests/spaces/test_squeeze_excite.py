"""SqueezeExcite where it changes nothing: Composer adds its block only after a Conv2d whose in and
out channels both reach min_channels, so on a model without one the trial would train the model
unchanged. The probed fact (the built-ins' written down), the rule, the space's view of it."""

import pytest
import torch.nn as nn

from effsearch.config import ConfigError, TrainConfig
from effsearch.config.sources import CONV_PER_WIDTH, ModelFacts, facts, remember
from effsearch.spaces import Machine, Space
from effsearch.trainer.models.vision import build_model
from effsearch.trainer.probe import facts_of

CPU = Machine()


@pytest.mark.parametrize("name", sorted(CONV_PER_WIDTH))
@pytest.mark.parametrize("width", [0, 8, 24])
def test_the_built_ins_written_conv_channels_are_those_of_the_model_as_built(name, width):
    built, written = facts_of(build_model(name, 3, 10, width)), facts({"name": name, "width": width})
    assert written is not None
    fields = ("conv_channels", "kfac_factor", "bottleneck", "batchnorm", "downsamples", "final_linear")
    fields += ("maxpools", "strided_channels")
    assert [getattr(written, f) for f in fields] == [getattr(built, f) for f in fields]


def test_the_probe_reads_the_widest_convolution_by_its_narrower_side():
    net = nn.Sequential(nn.Conv2d(3, 200, 3), nn.Conv2d(200, 96, 3), nn.Conv2d(96, 300, 1))
    assert facts_of(net).conv_channels == 96
    assert facts_of(nn.Sequential(nn.Flatten(), nn.Linear(4, 2))).conv_channels is None


def cfg(model: dict, **se) -> dict:
    return {"model": model, "algorithms": {"squeeze_excite": se}, "device": "cpu"}


def test_a_config_asking_for_squeeze_excite_where_it_adds_no_block_is_refused():
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict(cfg({"name": "tiny-cnn", "width": 16}))
    assert e.value.field == "algorithms.squeeze_excite"
    assert "at most 32 channels" in e.value.message and "min_channels to 32" in e.value.message
    TrainConfig.from_dict(cfg({"name": "tiny-cnn", "width": 16}, min_channels=32))
    TrainConfig.from_dict(cfg({"name": "tiny-cnn", "width": 64}))  # 2 x 64 = 128: a block
    TrainConfig.from_dict(cfg({"name": "resnet9"}))


def test_a_probed_model_without_a_wide_convolution_is_decided_from_its_facts_not_its_name():
    narrow = {"name": "tests.se_narrow:build"}
    remember(
        narrow, ModelFacts(bottleneck=False, batchnorm=True, downsamples=True, final_linear=True, conv_channels=64)
    )
    with pytest.raises(ConfigError, match="at most 64 channels"):
        TrainConfig.from_dict(cfg(narrow))
    TrainConfig.from_dict(cfg(narrow, min_channels=64))


def base(width: int) -> TrainConfig:
    return TrainConfig.from_dict({"model": {"name": "tiny-cnn", "width": width}, "epochs": 4, "device": "cpu"})


def test_the_space_leaves_it_out_with_the_reason_when_no_searched_width_has_a_block():
    space = Space.build(base(16), {"exclude": ["model.width"]}, CPU)  # widths 8, 16, 32: at most 64
    assert "algorithms.squeeze_excite" not in space.active
    row = next(r for r in space.rows() if r["dimension"] == "algorithms.squeeze_excite")
    assert row["state"] == "n/a" and "adds no block" in row["values"]
    assert "squeeze_excite" in space.table(show_all=True)


def test_a_study_naming_it_in_a_range_on_such_a_model_is_refused():
    section = {"include": ["algorithms"], "ranges": {"algorithms.squeeze_excite": [False, True]}}
    with pytest.raises(ConfigError) as e:
        Space.build(base(16), section, CPU)
    assert e.value.field == "space.ranges.algorithms.squeeze_excite"
    assert "cannot be searched for this model" in e.value.message and "adds no block" in e.value.message


def test_where_only_a_wider_model_has_a_block_it_is_searched_at_that_width_only():
    space = Space.build(base(32), {"include": "all"}, CPU)  # widths 16, 32, 64: 2 x 64 = 128
    assert {"algorithms.squeeze_excite", "model.width"} <= space.active
    import optuna

    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(60):
        trial = study.ask()
        c = space.config(trial)
        seen.add((c.model.width, "squeeze_excite" in c.algorithms))
        study.tell(trial, 0.0)
    assert (64, True) in seen and (32, True) not in seen and (16, True) not in seen
