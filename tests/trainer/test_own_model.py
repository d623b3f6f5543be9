"""Your own model: torchvision:, timm: and import-path models train, the rules about structure read
the model as built (not its name), CORDS takes a plain nn.Module's embedding from its final
linear layer, and every bad model is exit code 2 naming the field, with nothing written."""

import json

import pytest
import yaml

from effsearch import cli
from effsearch.config import ConfigError, TrainConfig
from effsearch.config.sources import facts

MODELS_PY = '''
import torch
import torch.nn as nn


def block(cin, cout):
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


def cnn(num_classes, in_channels, width=8):
    """A plain nn.Module (the built-in tiny CNN's layout): no CORDS interface, a final linear layer."""
    return nn.Sequential(*block(in_channels, width), nn.MaxPool2d(2), *block(width, 2 * width), nn.MaxPool2d(2),
                         *block(2 * width, 4 * width), nn.AdaptiveMaxPool2d(1), nn.Flatten(),
                         nn.Linear(4 * width, num_classes))


def doubled(num_classes, in_channels):
    return cnn(num_classes, in_channels).double()


def no_bn(num_classes, in_channels):
    return nn.Sequential(nn.Conv2d(in_channels, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, num_classes))


def conv_head(num_classes, in_channels):
    """Ends in a convolution, not a linear layer: no embedding for CORDS."""
    return nn.Sequential(nn.Conv2d(in_channels, num_classes, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten())


def raises(num_classes, in_channels):
    raise RuntimeError("out of coffee")


def not_a_module(num_classes, in_channels):
    return "a string"


def wrong_width(num_classes, in_channels):
    return nn.Sequential(nn.Flatten(), nn.LazyLinear(num_classes + 3))


class RGBNet(nn.Module):
    """Takes num_classes only, as torchvision's model classes (3-channel images)."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.net = nn.Sequential(*block(3, 8), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, num_classes))

    def forward(self, x):
        return self.net(x)


def rgb_builder(**kwargs):
    """As torchvision's builders (resnet18(*, weights=None, progress=True, **kwargs)): keywords passed on."""
    return RGBNet(**kwargs)


def needs_kwarg(num_classes, in_channels, depth):
    return cnn(num_classes, in_channels, width=depth)


class Constant(nn.Module):
    """Logits of the right shape, and not one parameter: nothing for an optimizer to train."""

    def __init__(self, num_classes):
        super().__init__()
        self.num_classes = num_classes

    def forward(self, x):
        return x.new_zeros(x.shape[0], self.num_classes)


def no_parameters(num_classes, in_channels):
    return Constant(num_classes)


class HeadFirst(nn.Module):
    """The output layer registered first, a hidden linear layer after it and, last, a projection
    the forward never calls (a head for another loss): the last nn.Linear registered is not the output."""

    def __init__(self, num_classes, in_channels, width=8):
        super().__init__()
        self.head = nn.Linear(width, num_classes)
        self.body = nn.Sequential(*block(in_channels, width), nn.AdaptiveMaxPool2d(1), nn.Flatten())
        self.hidden = nn.Linear(width, width)
        self.projection = nn.Linear(width, 3)

    def forward(self, x):
        return self.head(self.hidden(self.body(x)).relu())


def head_first(num_classes, in_channels):
    return HeadFirst(num_classes, in_channels)


def flat(num_classes, in_channels):
    """An MLP on the flattened pixels of the synthetic set's 16x16 images: it takes that size only."""
    return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * 16 * 16, 32), nn.ReLU(), nn.Linear(32, num_classes))


def fixed_width(num_classes, in_channels, **kwargs):
    """Sets a keyword of its own over the user's, as timm's mixer_s16_224 sets patch_size."""
    return cnn(num_classes, in_channels, **dict(width=8, **kwargs))


class AuxHeads(nn.Module):
    """As torchvision's googlenet: an auxiliary head's logits beside the logits, in training only."""

    def __init__(self, num_classes, in_channels, aux_logits=True):
        super().__init__()
        self.aux_logits = aux_logits
        self.body = nn.Sequential(*block(in_channels, 8), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head, self.aux = nn.Linear(8, num_classes), nn.Linear(8, num_classes)

    def forward(self, x):
        z = self.body(x)
        return (self.head(z), self.aux(z)) if self.training and self.aux_logits else self.head(z)


def aux_heads(num_classes, in_channels, aux_logits=True):
    return AuxHeads(num_classes, in_channels, aux_logits)


class PairInTraining(AuxHeads):
    """The same outputs, and no aux_logits switch to name."""

    def __init__(self, num_classes, in_channels):
        super().__init__(num_classes, in_channels)
        del self.aux_logits

    def forward(self, x):
        z = self.body(x)
        return (self.head(z), self.aux(z)) if self.training else self.head(z)


def pair_in_training(num_classes, in_channels):
    return PairInTraining(num_classes, in_channels)


class WithFeatures(AuxHeads):
    def forward(self, x):
        z = self.body(x)
        return self.head(z), z


def with_features(num_classes, in_channels):
    return WithFeatures(num_classes, in_channels)


class ReadsAValueInTraining(AuxHeads):
    """Reads a value of its input in training only (a check on the host): no forward on the meta device."""

    def forward(self, x):
        if self.training and float(x.abs().max()) > 1e9:
            x = x * 0
        return self.head(self.body(x))


def reads_a_value_in_training(num_classes, in_channels):
    return ReadsAValueInTraining(num_classes, in_channels)


class Patches(nn.Module):
    """Position embeddings for one grid, sized by image_size (224 by default, as torchvision's ViT)."""

    def __init__(self, num_classes, in_channels, image_size=224):
        super().__init__()
        self.embed = nn.Conv2d(in_channels, 8, 8, stride=8)
        self.positions = nn.Parameter(torch.zeros(1, 8, image_size // 8, image_size // 8))
        self.head = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.head((self.embed(x) + self.positions).mean((2, 3)))


def patches(num_classes, in_channels, **kwargs):
    return Patches(num_classes, in_channels, **kwargs)


class PatchesDistilled(Patches):
    """A subclass passing its arguments on (timm's LevitDistilled): image_size is its parent's."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)


def patches_distilled(num_classes, in_channels, **kwargs):
    return PatchesDistilled(num_classes, in_channels, **kwargs)


def shrinks(num_classes, in_channels):
    """Three strided convolutions and a pool: 16x16 images are 1x1 before the pool (48 leave 5x5)."""
    convs = [nn.Conv2d(in_channels if i == 0 else 4, 4, 3, stride=2) for i in range(3)]
    return nn.Sequential(*convs, nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, num_classes))


def softmax_end(num_classes, in_channels):
    """Ends in a softmax, as a Keras model would: probabilities, not logits."""
    return nn.Sequential(*cnn(num_classes, in_channels), nn.Softmax(dim=1))


def frozen(num_classes, in_channels):
    net = cnn(num_classes, in_channels)
    net.requires_grad_(False)
    return net
'''

IMPORT_FAILS_PY = "import a_module_nobody_has\n"


@pytest.fixture
def models(tmp_path, monkeypatch):
    """A module of model factories in a folder on the path (spawned children inherit sys.path)."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "own_test_models.py").write_text(MODELS_PY)
    (code / "broken_models.py").write_text(IMPORT_FAILS_PY)
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_config(folder, **changes) -> str:
    cfg = {
        "dataset": {"name": "synthetic", "synthetic_size": 96},
        "epochs": 1,
        "batch_size": 32,
        "target_accuracy": 0.2,
        "device": "cpu",
    }
    for key, value in changes.items():
        node = cfg
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    path = folder / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def train(folder, capsys, **changes):
    out = folder / "run"
    code = cli.main(["train", write_config(folder, **changes), "--out", str(out), "--quiet"])
    captured = capsys.readouterr()
    result = json.loads((out / "result.json").read_text()) if (out / "result.json").exists() else None
    return code, captured.err, result


def test_an_importable_plain_module_trains_with_a_model_based_cords_strategy(models, capsys):
    code, err, result = train(
        models,
        capsys,
        **{
            "model.name": "own_test_models:cnn",
            "epochs": 3,
            "selection.strategy": "gradmatch-pb",
            "selection.fraction": 0.5,
            "selection.select_every": 1,
        },
    )
    assert code == 0, err
    assert result["status"] == "completed"
    # GradMatch chose subsets from the model's embeddings (epochs 2 and 3), not only the random first one.
    assert max(p["selections"] for p in result["history"]) >= 2
    assert result["final"]["selection_seconds"] > 0


def test_cords_takes_the_embedding_of_the_linear_layer_called_last_not_registered_last(models, capsys):
    # Registration order took the projection, which no forward calls: "list index out of range".
    changes = {
        "epochs": 3,
        "selection.strategy": "gradmatch-pb",
        "selection.fraction": 0.5,
        "selection.select_every": 1,
    }
    code, err, result = train(models, capsys, **{"model.name": "own_test_models:head_first", **changes})
    assert code == 0 and result["status"] == "completed", (err, result and result.get("reason"))
    assert max(p["selections"] for p in result["history"]) >= 2


def test_the_embedding_of_a_model_registering_its_output_layer_first(models):
    import own_test_models
    import torch

    from effsearch.trainer.data.selection import ModelView

    net = own_test_models.head_first(5, 3).eval()
    x = torch.randn(4, 3, 12, 12)
    out, emb = ModelView(net, x[:2])(x, last=True)
    assert torch.allclose(net.head(emb), out)  # the output layer applied to the embedding gives the logits


def test_the_embedding_is_the_input_of_the_final_linear_layer(models):
    import own_test_models
    import torch

    from effsearch.trainer.data.selection import ModelView

    net = own_test_models.cnn(5, 3).eval()
    view = ModelView(net)
    x = torch.randn(4, 3, 12, 12)
    out, emb = view(x, last=True)
    assert view.get_embedding_dim() == 32 and emb.shape == (4, 32)  # 4 x width 8
    assert torch.allclose(net[-1](emb), out)  # the final layer applied to the embedding gives the logits


def test_torchvision_resnet18_trains_on_one_channel_images_repeated_to_three(models, capsys):
    code, err, result = train(
        models, capsys, **{"model.name": "torchvision:resnet18", "dataset.name": "digits", "dataset.data_fraction": 0.1}
    )
    assert code == 0, err
    assert result["status"] == "completed"
    assert "repeated to the 3 channels" in result["final"]["input_adapted"]
    assert "note: the dataset's 1-channel images are repeated" in err


def test_a_builder_that_passes_keywords_to_a_class_without_in_channels_trains(models, capsys):
    """As torchvision.models:resnet18 named by import path: its signature takes **kwargs, its class
    refuses in_channels (it had been refused with that TypeError); on 1-channel digits, repeated."""
    code, err, result = train(models, capsys, **{"model.name": "own_test_models:rgb_builder", "dataset.name": "digits"})
    assert code == 0, err
    assert result["status"] == "completed" and "repeated to the 3 channels" in result["final"]["input_adapted"]


def test_a_timm_model_trains(models, capsys):
    pytest.importorskip("timm", reason="the timm extra (`uv sync --extra timm`); CI installs every extra")
    code, err, result = train(models, capsys, **{"model.name": "timm:resnet10t"})
    assert code == 0, err
    assert result["status"] == "completed"


def test_model_kwargs_reach_the_factory(models, capsys):
    code, err, result = train(
        models, capsys, **{"model.name": "own_test_models:needs_kwarg", "model.kwargs": {"depth": 6}}
    )
    assert code == 0, err
    # width 6: three convolutions (3->6->12->24), their batch norms, a linear layer 24->10
    assert result["final"]["params"] == 3 * 6 * 9 + 6 * 12 * 9 + 12 * 24 * 9 + 2 * (6 + 12 + 24) + 24 * 10 + 10


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"model.name": "nomodule:cnn"}, "model.name", "no module named 'nomodule'"),
        ({"model.name": "own_test_models:nothing"}, "model.name", "has no attribute 'nothing'"),
        ({"model.name": "broken_models:cnn"}, "model.name", "a_module_nobody_has"),
        ({"model.name": "own_test_models:raises"}, "model.name", "RuntimeError: out of coffee"),
        ({"model.name": "own_test_models:not_a_module"}, "model.name", "returned a str, not a torch.nn.Module"),
        ({"model.name": "own_test_models:wrong_width"}, "model.name", "logits (N, 10)"),
        ({"model.name": "own_test_models:with_features"}, "model.name", "a tuple of 2 (return the logits alone)"),
        ({"model.name": "own_test_models:needs_kwarg"}, "model.name", "depth"),
        ({"model.name": "own_test_models:no_parameters"}, "model.name", "has no parameters to train"),
        ({"model.name": "own_test_models:frozen"}, "model.name", "has no parameters to train"),
        (
            {"model.name": "own_test_models:fixed_width", "model.kwargs": {"width": 4}},
            "model.name",
            "raised TypeError: dict() got multiple values for keyword argument 'width'",
        ),
        (
            {"model.name": "own_test_models:cnn", "model.width": 16, "model.kwargs": {"width": 4}},
            "model.width",
            "given twice",
        ),
        ({"model.name": "own_test_models:no_bn", "model.width": 8}, "model.width", "takes no width argument"),
        ({"model.name": "torchvision:resnet18", "model.width": 8}, "model.width", "takes its size from its name"),
        ({"model.name": "torchvision:resnet_nineteen"}, "model.name", "torchvision has no model 'resnet_nineteen'"),
        ({"model.name": "tiny-cnn", "model.kwargs": {"depth": 3}}, "model.kwargs", "takes none"),
        ({"model.name": "my models:cnn"}, "model.name", "must be a built-in model"),
        (
            {"model.name": "own_test_models:aux_heads"},
            "model.name",
            "returns tuple in training mode, not one logits tensor (auxiliary heads' outputs beside its logits?); "
            "the loss takes the logits alone: set model.kwargs.aux_logits: false",
        ),
        ({"model.name": "own_test_models:pair_in_training"}, "model.name", "logits alone: return them alone"),
        (
            {"model.name": "own_test_models:patches"},
            "model.name",
            "(its model takes image_size: model.kwargs.image_size: 16 sizes it to the data)",
        ),
        (
            {"model.name": "own_test_models:patches_distilled"},
            "model.name",
            "(its model takes image_size: model.kwargs.image_size: 16 sizes it to the data)",
        ),
        (
            {"model.name": "own_test_models:shrinks"},
            "model.name",
            "(images of 16x16 shrink to nothing inside it: dataset.image_size: 48 runs it)",
        ),
        (
            {"model.name": "own_test_models:no_bn", "algorithms": {"ghost_batchnorm": {}}},
            "algorithms.ghost_batchnorm",
            "needs a model with batch norm layers",
        ),
        (  # image_size: 12, as the data, would not tile in patches of 16: the next refusal had no advice
            {"model.name": "torchvision:vit_b_16", "dataset.image_size": 12},
            "model.name",
            "(its model takes image_size in whole patches of 16: dataset.image_size: 16 with "
            "model.kwargs.image_size: 16 sizes both to fit)",
        ),
        (  # was torch's dtype mismatch alone
            {"model.name": "own_test_models:doubled"},
            "model.name",
            "(its weights are torch.float64: return a float32 model; precision: amp_bf16 or amp_fp16",
        ),
        (  # an image config: was "takes token ids (text)"
            {"model.name": "hf:ViTConfig"},
            "model.name",
            "build transformers text models and the dataset holds images: for a transformers image model",
        ),
        (  # set by effsearch too: was the builder's "multiple values for keyword" blamed on model.name
            {"model.name": "torchvision:resnet18", "model.kwargs": {"num_classes": 10}},
            "model.kwargs.num_classes",
            "is set by effsearch (from the data's classes) for 'torchvision:resnet18'; leave it out",
        ),
        (
            {"model.name": "timm:resnet18", "model.kwargs": {"pretrained": True}},
            "model.kwargs.pretrained",
            "is set by effsearch (False: fresh weights, no download)",
        ),
        (  # 44,000 GiB of weights, counted on the meta device: not the allocator's error, or the OOM killer
            {"model.name": "torchvision:resnet50", "model.kwargs": {"width_per_group": 65536}},
            "model.kwargs",
            "parameters: its weights alone take 44,243.8 GiB, more than this machine's",
        ),
        (
            {"model.name": "torchvision:resnet18", "algorithms": {"stochastic_depth": {}}},
            "algorithms.stochastic_depth",
            "needs a model with bottleneck blocks",
        ),
        (
            {
                "model.name": "own_test_models:conv_head",
                "selection.strategy": "craig-pb",
                "selection.fraction": 0.5,
                "selection.select_every": 1,
                "epochs": 2,
            },
            "selection.strategy",
            "does not end in one",
        ),
    ],
)
def test_a_bad_model_is_exit_2_naming_the_field_and_writes_nothing(models, capsys, untouched, changes, field, words):
    code, err, result = train(models, capsys, **changes)
    assert code == 2, err
    assert f"{field}:" in err and words in err, err
    assert "Traceback" not in err
    assert result is None and not (models / "run").exists()


def _pets(folder):
    from tests.trainer.test_userdata import write_images

    return {"name": "imagefolder", "path": str(write_images(folder / "pets", count=4))}


def _arrays(folder):
    import numpy as np

    x, y = np.zeros((24, 12, 12, 3), np.uint8), np.arange(24) % 3
    np.savez(folder / "d.npz", x_train=x, y_train=y, x_test=x[:6], y_test=y[:6])
    return {"name": "npz", "path": str(folder / "d.npz")}


@pytest.mark.parametrize("name", ["own_test_models:wrong_width", "own_test_models:no_parameters"])
@pytest.mark.parametrize("data", [lambda f: {"name": "synthetic"}, _pets, _arrays], ids=["builtin", "folder", "npz"])
def test_a_bad_model_is_refused_before_the_data_is_loaded(models, monkeypatch, name, data):
    """Checked on a batch shaped like the data, where the data's shape is known without loading it
    (a built-in's; a folder's or an npz's headers): a model's error does not wait for the data."""
    from effsearch.trainer import training

    monkeypatch.setattr(training, "load_splits", lambda *a, **k: pytest.fail("the data was loaded first"))
    cfg = TrainConfig.from_dict({"dataset": data(models), "model": {"name": name}, "epochs": 1, "device": "cpu"})
    with pytest.raises(ConfigError, match="^model.name: "):
        training.train(cfg, progress=False)


def test_a_bad_model_on_data_of_unknown_shape_is_refused_before_composer(models, monkeypatch):
    """A dataset whose shape shows only once loaded (a callable's): the model is checked right after
    the load, before Composer's import (18 s once) and the rest of the set-up."""
    from effsearch.trainer import training

    (models / "code" / "own_data.py").write_text(
        "import numpy as np\n\ndef make():\n    x, y = np.zeros((30, 8, 8), np.uint8), np.arange(30) % 3\n"
        "    return x, y, x[:9], y[:9]\n"
    )
    monkeypatch.setattr(training, "_quiet_composer", lambda: pytest.fail("Composer came first"))
    cfg = TrainConfig.from_dict(
        {"dataset": {"name": "own_data:make"}, "model": {"name": "own_test_models:no_parameters"}, "device": "cpu"}
    )
    with pytest.raises(ConfigError, match="has no parameters to train"):
        training.train(cfg, progress=False)


def test_a_timm_name_without_the_extra_names_the_extra(models, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "timm", None)  # `import timm` raises ImportError
    code, err, _ = train(models, capsys, **{"model.name": "timm:resnet10t"})
    assert code == 2 and "model.name:" in err and "optional extra timm" in err


def test_the_probe_reads_the_model_as_built_and_the_rules_follow_it(models):
    from effsearch.trainer.probe import probe

    cfg = TrainConfig.from_dict({"model": {"name": "torchvision:resnet50"}})
    assert facts(cfg.to_dict()["model"]) is None  # not probed: the structure rules wait
    found = probe(cfg.model)
    assert found.bottleneck and found.batchnorm and found.downsamples and found.final_linear
    assert found.in_channels == 3 and found.params > 20_000_000  # built on the meta device: no memory
    TrainConfig.from_dict({"model": {"name": "torchvision:resnet50"}, "algorithms": {"stochastic_depth": {}}})
    probe(TrainConfig.from_dict({"model": {"name": "own_test_models:no_bn"}}).model)
    with pytest.raises(ConfigError, match="algorithms.ghost_batchnorm: needs a model with batch norm"):
        TrainConfig.from_dict({"model": {"name": "own_test_models:no_bn"}, "algorithms": {"ghost_batchnorm": {}}})


@pytest.mark.parametrize(
    "algorithms, field",
    [
        ({"progressive_resizing": {}}, "algorithms.progressive_resizing"),
        ({"colout": {}}, "algorithms.colout"),
        ({"selective_backprop": {"scale_factor": 0.5}}, "algorithms.selective_backprop.scale_factor"),
    ],
)
def test_an_algorithm_that_shrinks_images_is_refused_on_a_model_of_one_size(models, capsys, algorithms, field):
    """A Flatten into nn.Linear takes the data's image size only: a resized batch failed in its
    forward with a traceback mid-run. The probe's forward on smaller images tells, before the data."""
    code, err, result = train(models, capsys, **{"model.name": "own_test_models:flat", "algorithms": algorithms})
    assert code == 2 and result is None
    assert f"{field}: " in err and "takes images of one size only" in err and "Traceback" not in err


def test_a_model_of_one_size_trains_with_selective_backprop_at_the_data_s_size(models, capsys):
    code, err, result = train(
        models, capsys, **{"model.name": "own_test_models:flat", "algorithms": {"selective_backprop": {}}}
    )
    assert code == 0, err
    assert facts({"name": "own_test_models:flat"}).resizable is False
    code, err, result = train(models, capsys, **{"model.name": "own_test_models:cnn", "algorithms": {"colout": {}}})
    assert code == 0, err  # a global pool: any size
    assert facts({"name": "own_test_models:cnn"}).resizable is True


def test_a_model_of_one_size_on_data_of_unknown_shape_is_refused_once_the_data_is_loaded(models, monkeypatch):
    """A callable's data shows its shape only once loaded: the check on the loaded batch refuses it
    (a ConfigError, not the model's error at the first resized batch)."""
    from effsearch.config import sources
    from effsearch.trainer import training

    monkeypatch.setattr(sources, "_PROBED", {})  # not probed by an earlier test in this process

    (models / "code" / "own_data16.py").write_text(
        "import numpy as np\n\ndef make():\n    x, y = np.zeros((60, 16, 16), np.uint8), np.arange(60) % 3\n"
        "    return x, y, x[:9], y[:9]\n"
    )
    cfg = TrainConfig.from_dict(
        {
            "dataset": {"name": "own_data16:make"},
            "model": {"name": "own_test_models:flat"},
            "algorithms": {"progressive_resizing": {}},
            "device": "cpu",
        }
    )
    with pytest.raises(ConfigError, match="^algorithms.progressive_resizing: .*one size only"):
        training.train(cfg, progress=False)


def study_file(folder, base_model: dict, **keys) -> str:
    # The plain CNN reaches 0.8 on these 512 images in 3 epochs (about 2 s on a CPU core).
    study = {
        "name": "own",
        "base": {
            "dataset": {"name": "synthetic", "synthetic_size": 512},
            "model": base_model,
            "epochs": 3,
            "batch_size": 32,
            "optimizer": {"lr": 0.05},
            "target_accuracy": 0.4,
            "device": "cpu",
        },
        "n_trials": 3,
        "max_slowdown": None,
        **keys,
    }
    path = folder / "own.yaml"
    path.write_text(yaml.safe_dump(study))
    return str(path)


def test_space_show_and_the_space_read_the_probed_model(models, capsys):
    import optuna

    from effsearch.config.machine import Machine
    from effsearch.search.study.studyfile import load

    path = study_file(models, {"name": "own_test_models:conv_head"})
    assert cli.main(["space", "show", path, "--all"]) == 0
    shown = capsys.readouterr().out
    line = next(x for x in shown.splitlines() if x.startswith("algorithms.stochastic_depth "))
    assert "n/a" in line and "has no bottleneck blocks" in line
    strategies = next(x for x in shown.splitlines() if x.startswith("selection.strategy "))
    choices, _, left_out = strategies.partition("} (")  # the searched choices, then why some are left out
    assert "random" in choices and "gradmatch" not in choices and "craig" not in choices
    assert "gradmatch-pb" in left_out and "no nn.Linear" in left_out
    spec = load(path, machine=Machine(cores=1))
    study = optuna.create_study(directions=["minimize", "maximize"], sampler=optuna.samplers.RandomSampler(seed=0))
    for i in range(60):
        trial = study.ask()
        cfg = spec.space.config(trial)
        assert "stochastic_depth" not in cfg.algorithms
        assert cfg.selection.strategy in ("full", "random", "random-online")
        study.tell(trial, [float(i), 0.5])


def test_a_study_names_a_builder_s_duplicate_keyword_as_python_does_not_as_a_key_error(models, capsys):
    """The probe's second build (on the CPU, after the meta device failed) runs outside the first's
    handler: inside one, CPython 3.11 reports the duplicate as a bare KeyError: 'width'."""
    path = study_file(models, {"name": "own_test_models:fixed_width", "kwargs": {"width": 4}})
    assert cli.main(["space", "show", path]) == 2
    err = capsys.readouterr().err
    assert "base.model.name:" in err and "multiple values for keyword argument 'width'" in err, err
    assert "KeyError" not in err and "Traceback" not in err


def test_the_space_leaves_out_what_shrinks_images_for_a_model_of_one_size(models, capsys):
    path = study_file(models, {"name": "own_test_models:flat"})
    assert cli.main(["space", "show", path, "--all"]) == 0
    shown = capsys.readouterr().out.splitlines()
    for name in ("progressive_resizing", "colout"):
        line = next(x for x in shown if x.startswith(f"algorithms.{name} "))
        assert "n/a" in line and "takes images of one size only" in line
    line = next(x for x in shown if x.startswith("algorithms.mixup "))
    assert "n/a" not in line
    path = study_file(models, {"name": "own_test_models:flat"}, space={"include": ["algorithms.colout"]})
    assert cli.main(["space", "show", path]) == 2
    assert "algorithms.colout cannot be searched for this model" in capsys.readouterr().err


def test_a_warm_start_the_model_cannot_take_is_refused_when_the_study_loads(models, capsys):
    path = study_file(models, {"name": "own_test_models:no_bn"}, warm_start=[{"algorithms": {"ghost_batchnorm": {}}}])
    assert cli.main(["space", "show", path]) == 2
    err = capsys.readouterr().err
    assert "warm_start[0].algorithms.ghost_batchnorm: needs a model with batch norm" in err


def pattern_folder(root, per_class: int = 60):
    """An image folder of three learnable classes (stripes across, stripes down, checks), 16 px, grey."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    y, x = np.mgrid[:16, :16]
    for name, pattern in {"across": (y // 2) % 2, "down": (x // 2) % 2, "checks": ((x // 4) + (y // 4)) % 2}.items():
        folder = root / name
        folder.mkdir(parents=True)
        for i in range(per_class):
            pixels = np.clip(pattern * 160 + 40 + rng.normal(0, 50, (16, 16)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{i}.png")
    return root


PLUGIN_PY = """
import os
import pathlib

# Each process that imports the plugin leaves its pid: the test counts them.
pathlib.Path(os.environ["PLUGIN_MARKS"], str(os.getpid())).touch()
"""


@pytest.mark.slow
def test_a_two_worker_study_on_an_importable_model_imports_its_plugin_in_every_worker(models, capsys, monkeypatch):
    (models / "code" / "myplugin.py").write_text(PLUGIN_PY)
    marks = models / "marks"
    marks.mkdir()
    monkeypatch.setenv("PLUGIN_MARKS", str(marks))
    monkeypatch.delenv("EFFSEARCH_PLUGINS", raising=False)
    path = study_file(models, {"name": "own_test_models:cnn"}, plugins=["myplugin"], n_trials=4)
    study = yaml.safe_load(open(path))
    study["base"]["dataset"] = {"name": "imagefolder", "path": str(pattern_folder(models / "images"))}
    study["base"]["target_accuracy"] = 0.5
    open(path, "w").write(yaml.safe_dump(study))
    code = cli.main(["run", path, "--workers", "2"])
    err = capsys.readouterr().err
    assert code == 0, err[-3000:]
    import optuna

    from effsearch.search.results.lookup import open_study

    study, _ = open_study(path)
    from tests.support.helpers import ran

    states = [t.state for t in ran(study.trials)]
    assert len(states) == 4 and all(s == optuna.trial.TrialState.COMPLETE for s in states), states
    assert study.trials[0].user_attrs["reached_target"] is True  # the baseline learned the folder
    assert len(list(marks.iterdir())) >= 3  # this process and both workers imported it


def test_a_plugin_that_does_not_import_is_exit_2_naming_the_field(models, capsys):
    path = study_file(models, {"name": "tiny-cnn"}, plugins=["no_such_plugin"])
    assert cli.main(["space", "show", path]) == 2
    err = capsys.readouterr().err
    assert "plugins[0]: no module named 'no_such_plugin'" in err  # the study file's list
    for command in (["train", write_config(models)], ["space", "show", path], ["run", path]):
        assert cli.main([*command, "--plugin", "no_such_plugin"]) == 2
        err = capsys.readouterr().err
        assert "error: --plugin: no module named 'no_such_plugin'" in err and "plugins[" not in err, err


def test_the_python_api_runs_a_study_from_a_mapping_and_reads_its_front(models):
    import effsearch

    study = effsearch.run_study(
        {
            "name": "api",
            "base": {
                "dataset": {"name": "synthetic", "synthetic_size": 512},
                "model": {"name": "own_test_models:cnn"},
                "epochs": 3,
                "batch_size": 32,
                "optimizer": {"lr": 0.05},
                "target_accuracy": 0.4,
                "device": "cpu",
            },
            "n_trials": 3,
            "max_slowdown": None,
        },
        quiet=True,
    )
    assert study.study_name == "api" and len(study.trials) == 3
    rows = effsearch.pareto_front(study)
    assert rows and all(r["reached_target"] for r in rows)
    again = effsearch.load_study("api", storage=str(models / "api.journal"))  # the journal beside the cwd
    assert effsearch.pareto_front(again) == rows
    cfg = effsearch.best_config(study, pick="fastest")
    assert isinstance(cfg, TrainConfig) and cfg.model.name == "own_test_models:cnn"
    assert cfg.to_dict() == yaml.safe_load(study.trials[rows[0]["trial"]].user_attrs["config"])
    with pytest.raises(effsearch.NothingToPick):
        effsearch.best_config(study, pick="fastest-above:1.0")
    with pytest.raises(ConfigError, match="^pick: "):
        effsearch.best_config(study, pick="fastest-above:2")
    result = effsearch.train(cfg, overrides=["epochs=1"], progress=False)
    assert result.status == "completed" and result.config["epochs"] == 1


def test_the_python_api_raises_where_the_cli_exits(models):
    import effsearch

    with pytest.raises(ConfigError, match="model.name: no module named 'nomodule'"):
        effsearch.train({"model": {"name": "nomodule:cnn"}, "dataset": {"name": "synthetic"}}, progress=False)
    with pytest.raises(ConfigError, match="n_trials"):
        effsearch.run_study({"base": {"dataset": {"name": "digits"}}, "n_trials": -1}, quiet=True)
    with pytest.raises(effsearch.StudyFailed, match="could not do its work"):
        effsearch.run_study(
            {
                "name": "broken",
                "base": {
                    "dataset": {"name": "synthetic", "synthetic_size": 96},
                    "model": {"name": "own_test_models:cnn"},
                    "epochs": 1,
                    "device": "cpu",
                },
                "n_trials": 2,
                "timeout": 0.001,
            },
            quiet=True,
        )


def test_a_model_with_auxiliary_heads_switched_off_trains_and_the_check_changes_nothing_the_run_sees(models, capsys):
    """The training-mode forward that looks for auxiliary outputs puts batch norm's statistics back
    and forks the random state: the run starts from the network and the draws it had before."""
    import torch
    import torch.nn as nn

    from effsearch.config import ModelConfig
    from effsearch.trainer.probe import check_network

    code, err, result = train(
        models, capsys, **{"model.name": "own_test_models:aux_heads", "model.kwargs": {"aux_logits": False}}
    )
    assert code == 0 and result["status"] == "completed", err
    code, err, result = train(
        models, capsys, **{"model.name": "own_test_models:patches", "model.kwargs": {"image_size": 16}}
    )
    assert code == 0 and result["status"] == "completed", err  # sized as the refusal said
    # A training forward the meta device cannot run is checked on the CPU, not refused.
    code, err, result = train(models, capsys, **{"model.name": "own_test_models:reads_a_value_in_training"})
    assert code == 0 and result["status"] == "completed", err
    net = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Dropout(0.5), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)
    )
    with torch.no_grad():
        net[1].running_mean.fill_(0.25)
    before = [b.clone() for b in net.buffers()]
    torch.manual_seed(0)
    check_network(net, ModelConfig(name="own_test_models:cnn"), 3, 3, (8, 8), "cpu")
    drawn = torch.rand(3)
    torch.manual_seed(0)
    assert torch.equal(drawn, torch.rand(3))  # no draw was spent
    assert all(torch.equal(a, b) for a, b in zip(before, net.buffers())) and net.training


def test_a_model_ending_in_a_softmax_is_warned_of_once_it_is_built(models, caplog):
    """Probabilities in place of logits train (the loss takes them as logits), slowly or not at all:
    the check of the built network says so, naming the model; a model of logits is not warned of."""
    import logging

    import own_test_models

    from effsearch.config import ModelConfig
    from effsearch.trainer.probe import check_network

    with caplog.at_level(logging.WARNING, logger="effsearch"):
        for name in ("softmax_end", "cnn"):
            net = getattr(own_test_models, name)(3, 3)
            check_network(net, ModelConfig(name=f"own_test_models:{name}"), 3, 3, (8, 8), "cpu")
    assert "'own_test_models:softmax_end' returns rows that are non-negative and sum to 1" in caplog.text
    assert "'own_test_models:cnn'" not in caplog.text


def test_a_stem_that_folds_pixels_into_channels_takes_the_data_s_channels():
    """Its first convolution takes 4 x 3 channels (nn.PixelUnshuffle first, as timm's TResNet folds
    3 into 48): RGB data runs as it is (it had been refused as "takes 12-channel images"), and
    grayscale is repeated to the 3 channels the model takes, not to 12."""
    import torch
    import torch.nn as nn

    from effsearch.config import ModelConfig
    from effsearch.trainer.probe import check_network

    def folded():
        return nn.Sequential(
            nn.PixelUnshuffle(2), nn.Conv2d(12, 8, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3)
        )

    model = ModelConfig(name="own_test_models:folded")
    net, note = check_network(folded(), model, 3, 3, (8, 8), "cpu")
    assert note == "" and isinstance(net, nn.Sequential)
    net, note = check_network(folded(), model, 1, 3, (8, 8), "cpu")
    assert "repeated to the 3 channels" in note and net(torch.zeros(2, 1, 8, 8)).shape == (2, 3)


HF_VISION = """
from transformers import ViTConfig, ViTForImageClassification

def vit(num_classes, in_channels, image_size=8):
    config = ViTConfig(image_size=image_size, patch_size=4, num_channels=in_channels, hidden_size=16,
                       num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, num_labels=num_classes)
    return ViTForImageClassification(config)
"""


def test_a_factory_returning_a_transformers_image_classifier_is_called_as_one(tmp_path, monkeypatch):
    """pixel_values in, its output's logits out: it had been refused as returning ImageClassifierOutput."""
    pytest.importorskip("transformers")
    import torch

    from effsearch.config import ModelConfig
    from effsearch.trainer.models import build_network
    from effsearch.trainer.probe import check_network

    (tmp_path / "hfvision.py").write_text(HF_VISION)
    monkeypatch.syspath_prepend(str(tmp_path))
    model = ModelConfig(name="hfvision:vit")
    net, _ = check_network(build_network(model, 3, 4), model, 3, 4, (8, 8), "cpu")
    with torch.no_grad():
        assert net.eval()(torch.rand(2, 3, 8, 8)).shape == (2, 4)


def test_weights_that_fit_once_are_refused_when_each_cpu_process_holds_a_copy(monkeypatch):
    from effsearch.config import machine

    monkeypatch.setattr(machine, "memory_bytes", lambda device: 10 * 2**30)
    one = TrainConfig.from_dict({"model": {"name": "tiny-cnn"}})
    two = TrainConfig.from_dict({"model": {"name": "tiny-cnn"}, "distributed": {"processes": 2}})
    machine.check_weights_fit(10, 6 * 2**30, "model.kwargs", one, "cpu")
    machine.check_weights_fit(10, 6 * 2**30, "model.kwargs", two, "cuda")  # a GPU of its own each
    with pytest.raises(ConfigError, match=r"^model.kwargs: .* 6.0 GiB in each of 2 processes, more than this"):
        machine.check_weights_fit(10, 6 * 2**30, "model.kwargs", two, "cpu")
