"""K-FAC on the CPU where one of its factors takes too long to decompose: a step of it outlasts any
max_slowdown limit (checked between steps only). The probed fact, the rule on the device the config
runs on, the space's view of it."""

import pytest
import torch.nn as nn

from effsearch.config import ConfigError, TrainConfig
from effsearch.config.machine import resolve_device
from effsearch.config.readers import KFAC_CPU_FACTOR
from effsearch.config.sources import ModelFacts, remember
from effsearch.spaces import Machine, Space
from effsearch.trainer.probe import facts_of

CPU = Machine()
GPU = Machine("cuda", bf16=True, ffcv=True, compile=True)


def test_the_probe_reads_the_largest_factor_of_the_layers_kfac_preconditions():
    resnet18_last = nn.Sequential(nn.Conv2d(512, 512, 3, bias=False), nn.Flatten(), nn.Linear(512, 10))
    assert facts_of(resnet18_last).kfac_factor == 4608  # 512 x 3 x 3
    assert facts_of(nn.Sequential(nn.Linear(30, 700))).kfac_factor == 700  # G: its outputs
    assert facts_of(nn.Sequential(nn.Conv2d(64, 64, 3, groups=64), nn.Linear(8, 4))).kfac_factor == 9


def kfac(model: dict, device: str = "cpu") -> dict:
    return {"model": model, "optimizer": {"name": "kfac-sgd"}, "device": device}


def test_kfac_on_the_cpu_with_a_factor_over_the_bound_is_refused_naming_the_factor():
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict(kfac({"name": "resnet9"}))  # 8 x 64 channels x 3 x 3
    assert e.value.field == "optimizer.name" and "4608 x 4608" in e.value.message
    assert str(KFAC_CPU_FACTOR) in e.value.message
    TrainConfig.from_dict(kfac({"name": "resnet9"}, device="cuda"))  # a GPU decomposes it in time
    TrainConfig.from_dict(kfac({"name": "tiny-cnn", "width": 64}))  # 18 x 64 = 1152


def test_device_auto_on_a_machine_without_a_gpu_is_held_to_the_cpus_bound():
    cfg = TrainConfig.from_dict(kfac({"name": "resnet9"}, device="auto"))
    with pytest.raises(ConfigError, match="4608 x 4608"):
        resolve_device(cfg)


def test_a_probed_model_is_decided_from_its_facts_not_its_name():
    big = {"name": "tests.kfac_big:build"}
    remember(big, ModelFacts(bottleneck=False, batchnorm=True, downsamples=True, final_linear=True, kfac_factor=2305))
    with pytest.raises(ConfigError, match="2305 x 2305"):
        TrainConfig.from_dict(kfac(big))


def base() -> TrainConfig:
    return TrainConfig.from_dict({"model": {"name": "resnet9"}, "epochs": 4, "device": "auto"})


def test_the_space_on_the_cpu_leaves_kfac_out_with_the_reason_and_a_gpu_searches_it():
    rows = {r["dimension"]: r for r in Space.build(base(), {"include": "all"}, CPU).rows()}
    assert rows["optimizer.kfac"]["state"] == rows["optimizer.kfac_damping"]["state"] == "n/a"
    assert "4608 x 4608" in rows["optimizer.kfac"]["values"]
    assert "optimizer.kfac" in Space.build(base(), {"include": "all"}, GPU).active
    narrow = TrainConfig.from_dict({"model": {"name": "tiny-cnn"}, "epochs": 4, "device": "cpu"})
    assert "optimizer.kfac" in Space.build(narrow, {"include": "all"}, CPU).active


def test_a_study_naming_kfac_on_the_cpu_over_such_a_model_is_refused():
    with pytest.raises(ConfigError) as e:
        Space.build(base(), {"include": ["budget", "optimizer.kfac"]}, CPU)
    assert e.value.field == "space.include[1]" and "cannot be searched for this model" in e.value.message
    assert "4608 x 4608" in e.value.message
