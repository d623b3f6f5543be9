"""One training run: each Composer algorithm does what it should, sparsity
reaches its target, train time excludes evaluation, faults end cleanly."""

import json
import time

import numpy as np
import pytest
import torch
from composer.core import Callback

from effsearch.config import TrainConfig
from effsearch.trainer.data.datasets import LOADERS
from effsearch.trainer.data.splits import load_splits, random_crop
from effsearch.trainer.result import RunResult
from effsearch.trainer.training import prepare, train
from tests.support.helpers import tiny


class Probe(Callback):
    """Records what the batch looks like when the forward pass sees it."""

    def __init__(self):
        self.inputs, self.targets, self.grads = [], [], []

    def before_forward(self, state, logger):
        self.inputs.append(state.batch[0].detach().clone())

    def before_loss(self, state, logger):
        self.targets.append(state.batch[1].detach().clone())

    def after_train_batch(self, state, logger):
        self.grads.append(max(p.grad.abs().max().item() for p in state.model.parameters() if p.grad is not None))


def built(overrides, fit=True):
    cfg = TrainConfig.from_dict(tiny(**overrides))
    probe = Probe()
    result = RunResult(status="running", config=cfg.to_dict())
    run = prepare(cfg, load_splits(cfg), "cpu", result, callbacks=[probe])
    if fit:
        run.fit()
    return run, probe, cfg


def modules(run):
    return [type(m).__name__ for m in run.state.model.modules()]


def algo(name, params=None, **more):
    return {"algorithms": {name: params or {}}, **more}


def test_blurpool_surgery():
    run, _, _ = built(algo("blurpool", {"min_channels": 1}))
    assert "BlurMaxPool2d" in modules(run) or "BlurConv2d" in modules(run)


def test_squeeze_excite_ghost_bn_and_weight_standardization_surgery():
    run, _, _ = built(
        {
            "algorithms": {
                "squeeze_excite": {"min_channels": 8, "latent_channels": 4},
                "ghost_batchnorm": {"ghost_batch_size": 8},
                "weight_standardization": {},
            }
        }
    )
    names = modules(run)
    assert "SqueezeExcite2d" in names or "SqueezeExciteConv2d" in names
    assert "GhostBatchNorm2d" in names
    assert "WeightStandardizer" in names


def test_ghost_batchnorm_trains_through_batches_smaller_than_a_ghost_batch():
    # 128 training images in batches of 48: the last batch has 32 < ghost_batch_size 40;
    # SelectiveBackprop then keeps a quarter of each batch (12 or 8 images).
    cfg = TrainConfig.from_dict(
        tiny(
            **{
                "dataset.synthetic_size": 160,
                "batch_size": 48,
                "epochs": 2,
                "algorithms": {
                    "ghost_batchnorm": {"ghost_batch_size": 40},
                    "selective_backprop": {"start": 0.0, "end": 1.0, "keep": 0.25, "interrupt": 1},
                },
            }
        )
    )
    result = train(cfg, progress=False)
    assert result.status == "completed", result.reason


def test_stochastic_depth_replaces_bottlenecks():
    run, _, _ = built(
        algo("stochastic_depth", {"drop_rate": 0.5}, **{"model.name": "resnet-bottleneck", "model.width": 4})
    )
    blocks = [m for m in run.state.model.modules() if type(m).__name__ == "Bottleneck"]
    # Composer rebinds each block's forward and gives it a drop rate, linear in depth.
    rates = [float(b.drop_rate) for b in blocks]
    assert len(blocks) == 6 and rates[-1] == pytest.approx(0.5) and rates[0] < rates[-1]
    assert all(b.forward.__func__.__name__.endswith("stochastic_forward") for b in blocks)


def test_channels_last():
    run, probe, _ = built(algo("channels_last"))
    conv = next(m for m in run.state.model.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)


def test_mixup_and_cutmix_mix_the_batch():
    for name in ("mixup", "cutmix"):
        run, probe, _ = built(algo(name, {"alpha": 1.0}))
        plain, _, _ = built({})
        # Same seed and data: without mixing the forward pass would see the same first batch.
        assert not torch.allclose(probe.inputs[0], _first_input(plain)), name


def _first_input(run):
    return run.state.callbacks[-1].inputs[0]


def test_label_smoothing_smooths_targets():
    _, probe, _ = built(algo("label_smoothing", {"smoothing": 0.2}))
    t = probe.targets[0]
    assert t.dtype.is_floating_point and t.shape[1] == 10
    assert torch.allclose(t.max(1).values, torch.full((t.shape[0],), 0.8 + 0.2 / 10))
    assert torch.allclose(t.sum(1), torch.ones(t.shape[0]))


def test_cutout_zeroes_holes():
    _, probe, _ = built(algo("cutout", {"length": 0.5}))
    _, plain, _ = built({})
    assert (probe.inputs[0] == 0).float().mean() > 0.1
    assert (plain.inputs[0] == 0).float().mean() < 0.01


def test_colout_and_progressive_resizing_shrink_images():
    _, probe, _ = built(algo("colout", {"p_row": 0.25, "p_col": 0.25}))
    assert probe.inputs[0].shape[-1] < 16 and probe.inputs[0].shape[-2] < 16
    _, probe, _ = built(
        algo(
            "progressive_resizing",
            {"initial_scale": 0.5, "delay_fraction": 0.0, "finetune_fraction": 0.0, "size_increment": 2},
        )
    )
    assert probe.inputs[0].shape[-1] == 8 and probe.inputs[-1].shape[-1] > 8


def test_images_shrunk_below_the_poolings_train_padded():
    """Progressive resizing at 0.3 with ColOut at 0.3 leaves 2-6 pixels of 16 (or of CIFAR's 32 for
    ResNet-9's three poolings): the model pads them up to the side its poolings take, where its
    poolings had failed ("Output size is too small"). A full-size image is not touched."""
    from effsearch.trainer.models import build_model

    shrink = {
        "algorithms": {
            "colout": {"p_row": 0.3, "p_col": 0.3},
            "progressive_resizing": {
                "initial_scale": 0.3,
                "delay_fraction": 0.0,
                "finetune_fraction": 0.0,
                "size_increment": 1,
            },
        }
    }
    _, probe, _ = built(shrink)
    assert min(probe.inputs[0].shape[-2:]) < 4  # and it trained: a pooling error raises out of fit()
    torch.manual_seed(0)
    for name, side in (("tiny-cnn", 4), ("resnet9", 8)):
        model = build_model(name, 3, 10, width=4).eval()
        assert model(torch.randn(2, 3, side - 3, side - 2)).shape == (2, 10)
        x = torch.randn(2, 3, 32, 32)
        assert torch.equal(model(x), model.linear(model.features(x)))


def test_randaugment_and_augmix_transform_images():
    for name in ("randaugment", "augmix"):
        run, probe, _ = built(algo(name, {"severity": 3}))
        assert run.train_loader.dataset.transform is not None, name
        plain, plain_probe, _ = built({})
        assert not torch.allclose(probe.inputs[0], plain_probe.inputs[0]), name


def test_sam_wraps_the_optimizer():
    run, _, _ = built(algo("sam", {"rho": 0.1}))
    assert type(run.state.optimizers[0]).__name__ == "SAMOptimizer"


def test_ema_and_swa_keep_averaged_models():
    run, _, _ = built(algo("ema", {"half_life": "2ba"}))
    ema = next(a for a in run.state.algorithms if type(a).__name__ == "EMA")
    assert ema.ema_model is not None
    run, _, _ = built(algo("swa", {"swa_start": "0.25dur", "swa_end": "0.9dur", "update_interval": "1ba"}, epochs=4))
    swa = next(a for a in run.state.algorithms if type(a).__name__ == "SWA")
    assert swa.swa_started and swa.swa_model is not None


def test_selective_backprop_drops_samples():
    _, probe, _ = built(algo("selective_backprop", {"start": 0.0, "end": 1.0, "keep": 0.5, "interrupt": 0}))
    assert probe.inputs[0].shape[0] == 16  # half of batch_size=32


BN1D_PY = """
import torch.nn as nn


def head(num_classes, in_channels):
    return nn.Sequential(nn.Flatten(), nn.LazyLinear(16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, num_classes))
"""


@pytest.mark.parametrize("keep", [0.3, 0.5, 0.99])
@pytest.mark.parametrize("batch_size", [42, 25], ids=["last-2", "last-3"])
def test_selective_backprop_never_leaves_a_batch_under_two_samples(tmp_path, monkeypatch, keep, batch_size):
    """Selective backprop keeps int(keep * n) samples: of a last batch of 2 or 3, none (a nan loss,
    the run recorded as diverged) or one (batch norm over one sample raises). Such a batch trains
    whole; every other batch is still cut."""
    (tmp_path / "bn1d_head.py").write_text(BN1D_PY)
    monkeypatch.syspath_prepend(str(tmp_path))
    sb = {"start": 0.0, "end": 1.0, "keep": keep, "interrupt": 0}
    overrides = {"model": {"name": "bn1d_head:head"}, "batch_size": batch_size, "epochs": 2}
    run, probe, cfg = built(algo("selective_backprop", sb, **overrides))
    assert len(run.splits.train_y) % batch_size in (2, 3)  # the last batch
    sizes = [len(x) for x in probe.inputs]
    assert not run.loop.stop_reason, run.loop.stop_reason
    assert min(sizes) >= 2, sizes
    assert int(keep * cfg.batch_size) in sizes  # the full batches were cut


def test_layer_freezing_freezes_layers():
    run, _, _ = built(algo("layer_freezing", {"freeze_start": 0.0, "freeze_level": 1.0}, epochs=3))
    assert any(not p.requires_grad for p in run.state.model.parameters())


def test_gradient_clipping_bounds_gradients():
    _, probe, _ = built(algo("gradient_clipping", {"clipping_type": "value", "clipping_threshold": 1e-3}))
    assert max(probe.grads) <= 1e-3 + 1e-9
    _, plain, _ = built({})
    assert max(plain.grads) > 1e-2


@pytest.mark.parametrize("schedule", ["constant", "polynomial"])
def test_sparsity_reaches_target(schedule, tmp_path):
    cfg = TrainConfig.from_dict(
        tiny(
            **{
                "sparsity.target": 0.7,
                "sparsity.schedule": schedule,
                "sparsity.update_every": 1,
                "algorithms": {"ema": {"half_life": "3ba"}},
            }
        )
    )
    r = train(cfg, out_dir=tmp_path, progress=False)
    assert r.status == "completed"
    assert abs(r.final.sparsity - 0.7) < 0.005
    assert r.final.nonzero_params < r.final.params
    assert r.final.nonzero_param_bytes == 4 * r.final.nonzero_params


def test_sparsity_schedule_is_cubic():
    from effsearch.trainer.techniques.sparsity import sparsity_at

    assert sparsity_at(0.05, 0.8, "polynomial", 0.1, 0.5) == 0.0
    assert sparsity_at(0.3, 0.8, "polynomial", 0.1, 0.5) == pytest.approx(0.8 * (1 - 0.5**3))
    assert sparsity_at(0.6, 0.8, "polynomial", 0.1, 0.5) == 0.8
    assert sparsity_at(0.2, 0.8, "constant", 0.1, 0.5) == 0.8


def test_result_file_and_time_accounting(tmp_path, monkeypatch):
    """Evaluation time is kept apart: a slow evaluation must not inflate train seconds."""
    import types

    from effsearch.trainer import loop as L

    cfg = TrainConfig.from_dict(tiny(epochs=3, target_accuracy=0.0))
    # Each evaluation pass takes SLOW seconds on the loop's clock (a clock that jumps, not a
    # sleep: the margin is then far above any slowness of a loaded machine, at no cost).
    slow, skew = 1000.0, [0.0]
    monkeypatch.setattr(L, "time", types.SimpleNamespace(perf_counter=lambda: time.perf_counter() + skew[0]))
    original = L.Loop.score  # every pass: the points' and the final ones

    def slow_eval(self, *args, **kwargs):
        skew[0] += slow
        return original(self, *args, **kwargs)

    monkeypatch.setattr(L.Loop, "score", slow_eval)
    train(cfg, out_dir=tmp_path, progress=False)
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["status"] == "completed"
    assert [p["epoch"] for p in saved["history"]] == [1.0, 2.0, 3.0]
    assert saved["history"][-1]["samples_seen"] == 3 * 128
    assert saved["final"]["eval_seconds"] >= 3 * slow  # the three points' passes, inside the fit
    # Train seconds count training only: each gap between points is one epoch of training, and the
    # whole run three, where counting any evaluation would add at least SLOW.
    seconds = [p["train_seconds"] for p in saved["history"]]
    assert all(0 < b - a < slow for a, b in zip(seconds, seconds[1:])), seconds
    assert 0 < saved["final"]["train_seconds"] < slow
    assert saved["time_to_target"] == saved["history"][0]["train_seconds"]
    for key in ("val_accuracy", "test_accuracy", "train_seconds", "eval_seconds", "sparsity", "nonzero_params"):
        assert key in saved["final"]
    assert saved["versions"]["mosaicml"] == "0.32.1"


def test_time_to_target_is_first_crossing():
    from effsearch.trainer.result import EvalPoint, time_to_target

    h = [EvalPoint(epoch=e, train_seconds=e, val_accuracy=a) for e, a in ((1, 0.5), (2, 0.91), (3, 0.8), (4, 0.95))]
    assert time_to_target(h, 0.9) == 2
    assert time_to_target(h, 0.99) is None


CONSTANT_PY = """
import torch


class Constant(torch.nn.Module):
    \"\"\"Always class 0, and a parameter whose gradient is 0: every evaluation scores the same.\"\"\"

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))

    def forward(self, x):
        return torch.tensor([1.0, 0.0], device=x.device).expand(len(x), 2) + 0 * self.w


def make(num_classes, in_channels):
    return Constant()
"""


def test_a_validation_accuracy_equal_to_the_target_has_reached_it(tmp_path, monkeypatch):
    """Validation accuracies are fractions k/n, so one equal to the target is common: 114 of 120
    right is 0.95 exactly. A run scoring that at every evaluation reached a 0.95 target at its
    first one, and its delivered model (also 0.95) earned it: time to target is that point's."""
    (tmp_path / "constant_model.py").write_text(CONSTANT_PY)
    monkeypatch.syspath_prepend(str(tmp_path))
    x = np.zeros((160, 1, 8, 8), np.uint8)
    y_val = np.array([0] * 114 + [1] * 6)
    np.savez(
        tmp_path / "d.npz",
        x_train=x[:30],
        y_train=np.arange(30) % 2,
        x_test=x[:10],
        y_test=np.arange(10) % 2,
        x_val=x[:120],
        y_val=y_val,
    )
    cfg = TrainConfig.from_dict(
        tiny(
            **{
                "dataset": {"name": "npz", "path": str(tmp_path / "d.npz")},
                "model": {"name": "constant_model:make"},
                "target_accuracy": 0.95,
            }
        )
    )
    r = train(cfg, progress=False)
    assert r.status == "completed", r.reason
    assert r.final.val_accuracy == 0.95 and [p.val_accuracy for p in r.history] == [0.95, 0.95]
    assert r.time_to_target is not None and r.time_to_target == r.history[0].train_seconds


def test_divergence_stops_with_status(tmp_path, monkeypatch):
    """A non-finite loss stops the run at once with status diverged."""
    from effsearch.trainer.composer.model import EffModel

    calls = []
    original = EffModel.loss

    def exploding(self, outputs, batch, *a, **k):
        calls.append(1)
        loss = original(self, outputs, batch, *a, **k)
        return loss * float("inf") if len(calls) >= 3 else loss

    monkeypatch.setattr(EffModel, "loss", exploding)
    cfg = TrainConfig.from_dict(tiny(epochs=6))
    r = train(cfg, out_dir=tmp_path, progress=False)
    assert r.status == "diverged" and "batch 3" in r.reason
    assert len(calls) == 3  # stopped at the batch that diverged
    assert json.loads((tmp_path / "result.json").read_text())["status"] == "diverged"


def test_ctrl_c_writes_partial_result(tmp_path):
    cfg = TrainConfig.from_dict(tiny(epochs=5))
    calls = []

    def hook(point):
        calls.append(point)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(cfg, out_dir=tmp_path, progress=False, on_eval=hook)
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["status"] == "interrupted"
    assert len(saved["history"]) == 2


def count_passes(monkeypatch) -> list[int]:
    """The sizes of the evaluation passes a run makes (``Loop.score``: points, final, test)."""
    from effsearch.trainer.loop import Loop

    passes, score = [], Loop.score
    monkeypatch.setattr(
        Loop, "score", lambda self, x, y, enough=None: passes.append(len(x)) or score(self, x, y, enough)
    )
    return passes


def test_on_eval_hook_can_stop_a_run(monkeypatch):
    passes = count_passes(monkeypatch)
    cfg = TrainConfig.from_dict(tiny(epochs=5))
    r = train(cfg, progress=False, on_eval=lambda p: "weak" if p.epoch >= 2 else None)
    assert r.status == "pruned" and r.reason == "weak"
    assert len(r.history) == 2
    # No evaluation after the rung: the one that pruned it scored the same delivered model, and
    # nobody reads a pruned trial's test score.
    assert len(passes) == 2 and r.final.test_accuracy is None
    assert r.final.val_accuracy == r.history[-1].val_accuracy and r.final.val_loss == r.history[-1].val_loss


def test_a_run_without_test_scores_validation_only(monkeypatch):
    passes = count_passes(monkeypatch)
    cfg = TrainConfig.from_dict(tiny(epochs=2))
    full, calls = train(cfg, progress=False), len(passes)
    short = train(cfg, progress=False, test=False)
    assert full.final.test_accuracy is not None and short.final.test_accuracy is None
    # the same run otherwise: two evaluations, the final validation pass, and no test pass
    assert (calls, len(passes) - calls) == (4, 3) and passes[2] == passes[3 + 2]
    assert short.final.val_accuracy == full.final.val_accuracy and short.reached_target == full.reached_target
    assert [p.val_accuracy for p in short.history] == [p.val_accuracy for p in full.history]


def test_every_model_has_the_cords_interface():
    from effsearch.trainer.models import build_model

    for name in ("tiny-cnn", "resnet9", "resnet20", "resnet56", "resnet-bottleneck"):
        m = build_model(name, 3, 10, 8 if name in ("tiny-cnn", "resnet9") else 4)
        x = torch.randn(2, 3, 16, 16)
        out, emb = m(x, last=True, freeze=True)
        assert out.shape == (2, 10) and emb.shape == (2, m.get_embedding_dim())
        assert not emb.requires_grad
        assert m(x).shape == (2, 10)


def test_digits_and_fashion_mnist_load(fashion_dir):
    cfg = TrainConfig.from_dict(tiny(**{"dataset": {"name": "digits", "val_fraction": 0.2}}))
    s = load_splits(cfg)
    assert s.train_x.dtype == torch.uint8 and s.train_x.shape[-1] == 32
    assert len(s.val_y) == pytest.approx(0.2 * (len(s.val_y) + len(s.train_y)), abs=2)
    # Training and validation partition the source's training set, no image in both: train_index
    # holds distinct positions, and validation is exactly the rest (its labels line up with theirs).
    source_y = LOADERS["digits"](None, cfg)[1]
    train = s.train_index
    rest = np.setdiff1d(np.arange(len(source_y)), train)
    assert len(set(train.tolist())) == len(train) == len(s.train_y)
    assert s.train_y.tolist() == source_y[train].tolist()
    assert len(s.val_y) == len(rest) and s.val_y.tolist() == source_y[rest].tolist()
    cfg = TrainConfig.from_dict(tiny(**{"dataset": {"name": "fashion-mnist", "data_fraction": 0.05}}))
    s = load_splits(cfg, fashion_dir)
    assert s.train_x.shape[1:] == (1, 28, 28)
    assert len(s.train_y) == 0.05 * 3600  # 4,000 training images, 400 of them for validation
    assert torch.bincount(s.train_y).tolist() == [18] * 10  # stratified
    assert len(s.test_y) == 1000


def test_val_subset_evaluates_a_stratified_part_of_the_same_validation_split(fashion_dir):
    from effsearch.config.options import check_tuning
    from effsearch.search.study import phases

    full = TrainConfig.from_dict(tiny(**{"dataset": {"name": "fashion-mnist", "data_fraction": 0.05}}))
    part = full.replace(**{"dataset.val_subset": 0.2})
    a, b = load_splits(full, fashion_dir), load_splits(part, fashion_dir)
    assert len(a.val_y) == 400 and len(b.val_y) == 80
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_y, b.test_y)  # only validation shrinks
    assert torch.bincount(b.val_y).tolist() == [8] * 10  # stratified
    whole = {bytes(x.numpy()) for x in a.val_x}
    assert all(bytes(x.numpy()) in whole for x in b.val_x)  # a part of the same split, not new images
    # The tuning phase's val_subset is what phase 1 trains with; phase 2 evaluates the whole split.
    tuning = check_tuning({"name": "subset", "data_fraction": 0.2, "val_subset": 0.25})
    assert phases.shrink(full, tuning).dataset.val_subset == 0.25
    assert phases.shrink(full, check_tuning({"name": "subset"})).dataset.val_subset == 1.0


def test_missing_data_names_the_folder(tmp_path):
    from effsearch.config import ConfigError

    cfg = TrainConfig.from_dict(tiny(**{"dataset.name": "fashion-mnist"}))
    with pytest.raises(ConfigError, match=f"Fashion-MNIST not found in {tmp_path}"):
        load_splits(cfg, tmp_path)


def test_random_crop_is_a_shifted_window():
    x = torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).view(2, 1, 6, 6)
    g = torch.Generator().manual_seed(0)
    y = random_crop(x, 2, g)
    assert y.shape == x.shape
    padded = torch.nn.functional.pad(x, (2, 2, 2, 2), mode="reflect")
    for i in range(2):
        assert any(torch.equal(y[i], padded[i, :, a : a + 6, b : b + 6]) for a in range(5) for b in range(5))


def test_a_ctrl_c_while_the_result_is_being_finished_still_leaves_result_json(tmp_path, monkeypatch):
    """A second Ctrl-C lands in train's finally, before the partial result is saved: it waits for
    the write, then interrupts (without the hold, it skipped the write)."""
    import os
    import signal

    from effsearch.trainer import training as R

    finish = R._finish

    def interrupted(*args):
        os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C (again) right here
        finish(*args)

    monkeypatch.setattr(R, "_finish", interrupted)
    with pytest.raises(KeyboardInterrupt):
        R.train(TrainConfig.from_dict(tiny(epochs=1)), out_dir=tmp_path, progress=False)
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["history"] and saved["config"]["epochs"] == 1


def test_sigterm_mid_run_ends_it_interrupted_with_its_result(tmp_path):
    """SIGTERM (a scheduler, `kill`) is a Ctrl-C with its own reason: under Composer's handler it
    was sys.exit(143), and result.json said "failed" with no reason."""
    import os
    import signal

    from effsearch.trainer import training as R

    before = signal.getsignal(signal.SIGTERM)
    evals = []

    def term_at_the_second_evaluation(point):
        evals.append(point)
        if len(evals) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    try:
        with pytest.raises(KeyboardInterrupt):
            R.train(
                TrainConfig.from_dict(tiny(epochs=4, eval_every=1)),
                out_dir=tmp_path,
                progress=False,
                on_eval=term_at_the_second_evaluation,
            )
    finally:
        signal.signal(signal.SIGTERM, before)
    saved = json.loads((tmp_path / "result.json").read_text())
    assert (saved["status"], saved["reason"]) == ("interrupted", "stopped by SIGTERM")
    assert len(saved["history"]) == 2
