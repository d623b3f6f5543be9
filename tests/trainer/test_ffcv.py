"""``loader: ffcv``: prepared files round-trip pixel-exact, a subset loader serves
exactly the chosen samples with their weights (without a new compiled pipeline),
and a run with it completes, is timed and sees the same batches as the PyTorch path.

Without ffcv these tests skip, except where ``EFFSEARCH_REQUIRE_FFCV=1`` (CI),
where they fail; the refusal test runs everywhere. Each ffcv ``Loader`` compiles
its pipeline (seconds on 2 cores), so the tests build few of them.
"""

import json
import sys

import numpy as np
import pytest
import torch
import yaml

import effsearch.trainer.data
from effsearch.config import ConfigError, TrainConfig
from effsearch.trainer.data.splits import data_dir, load_splits
from tests.support.helpers import tiny


def test_ffcv_missing_is_refused_with_the_install_line(monkeypatch, capsys):
    from effsearch.cli import main
    from effsearch.config.machine import check_runnable

    monkeypatch.setitem(sys.modules, "ffcv", None)  # `import ffcv` raises ImportError
    for name in ("ffcv_loader", "betons"):  # both import ffcv
        monkeypatch.delitem(sys.modules, f"effsearch.trainer.data.{name}", raising=False)
        monkeypatch.delattr(effsearch.trainer.data, name, raising=False)
    threads = torch.get_num_threads()
    with pytest.raises(ConfigError) as err:
        check_runnable(TrainConfig.from_dict(tiny(loader="ffcv")))
    assert err.value.field == "loader"
    assert "libturbojpeg0-dev" in str(err.value) and "uv sync --extra ffcv" in str(err.value)
    assert torch.get_num_threads() == threads
    assert main(["data", "prepare", "digits"]) == 2
    assert "uv sync --extra ffcv" in capsys.readouterr().err


def test_prepare_round_trips_fashion_mnist_pixel_exact_and_notices_stale_files(B, F, fashion_dir, tmp_path, capsys):
    from effsearch.cli import main

    out = tmp_path / "fm"
    assert main(["data", "prepare", "fashion-mnist", "--data-dir", str(fashion_dir), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().err
    cfg = TrainConfig.from_dict({"dataset": {"name": "fashion-mnist"}})
    splits = load_splits(cfg, fashion_dir)
    arrays = {
        "train": (splits.train_x, splits.train_y),
        "val": (splits.val_x, splits.val_y),
        "test": (splits.test_x, splits.test_y),
    }
    for name, (x, y) in arrays.items():
        bx, by, bi = F.read_beton(out / f"{name}.beton")
        assert bx.dtype == torch.uint8 and bx.shape == x.shape
        assert torch.equal(bx, x) and torch.equal(by, y), name
        assert torch.equal(bi, torch.arange(len(y))), name
    meta = json.loads((out / "meta.json").read_text())
    assert meta["dataset"]["split_seed"] == 0 and meta["splits"]["train"]["count"] == len(splits.train_y)

    # Reused as they are; rewritten for another split seed; a damaged file is noticed.
    assert main(["data", "prepare", "fashion-mnist", "--data-dir", str(fashion_dir), "--out", str(out)]) == 0
    assert "up to date" in capsys.readouterr().err
    assert (
        main(
            ["data", "prepare", "fashion-mnist", "--data-dir", str(fashion_dir), "--out", str(out), "--split-seed", "1"]
        )
        == 0
    )
    assert "split_seed 0 (now 1)" in capsys.readouterr().err
    assert json.loads((out / "meta.json").read_text())["dataset"]["split_seed"] == 1
    with open(out / "val.beton", "ab") as f:
        f.write(b"x")
    other = TrainConfig.from_dict({"dataset": {"name": "fashion-mnist", "split_seed": 1}})
    assert "val.beton has" in B.stale_reason(out, B.expected_meta(other, load_splits(other, fashion_dir)))


@pytest.mark.timeout(300)
def test_subset_loader_serves_exactly_the_chosen_samples_with_their_weights(B, F, tmp_path):
    cfg = TrainConfig.from_dict(tiny(**{"dataset.synthetic_size": 400}))  # 3x16x16, 320 train images
    splits = load_splits(cfg)
    info = B.ensure_betons(cfg, splits, folder=tmp_path / "b")
    assert info.written and not B.ensure_betons(cfg, splits, folder=tmp_path / "b").written
    with pytest.raises(RuntimeError, match="writing"):  # a failing writer raises, it does not hang
        B.write_beton(tmp_path / "bad.beton", splits.train_x[:10], splits.train_y[:12])
    n = len(splits.train_y)
    loader = F.FFCVTrainLoader(info.path("train"), n, batch_size=32, seed=0)
    pipeline, compiled = loader.loader, loader.loader.code

    # Full data: a permutation of all n, in the PyTorch path's order, last short batch kept.
    batches = list(loader)
    torch_order = list(torch.utils.data.RandomSampler(range(n), generator=torch.Generator().manual_seed(0)))
    xs = torch.cat([b[0].clone() for b in batches])
    assert len(batches) == len(loader) == -(-n // 32) and len(xs) == n
    assert torch.equal(xs, splits.train_x[torch_order])
    assert torch.equal(torch.cat([b[1] for b in batches]), splits.train_y[torch_order])

    def epoch():
        seen, images, labels = [], [], []
        for x, y, w in loader:
            seen.append(w.clone())  # weights are 1 + index/2: exact in float32, name the sample
            images.append(x.clone())
            labels.append(y.clone())
        w = torch.cat(seen)
        return ((w - 1) * 2).round().long(), w, torch.cat(images), torch.cat(labels)

    rng = np.random.default_rng(3)
    for size in (45, 101):  # not multiples of the batch size
        chosen = torch.as_tensor(rng.choice(n, size, replace=False))
        loader.set_subset(chosen, 1 + chosen.float() / 2)
        assert len(loader) == -(-size // 32)
        for _ in range(2):  # and again next epoch, in a new order
            idx, w, x, y = epoch()
            assert sorted(idx.tolist()) == sorted(chosen.tolist())  # each chosen sample exactly once
            assert torch.equal(w, 1 + idx.float() / 2)
            assert torch.equal(x, splits.train_x[idx]) and torch.equal(y, splits.train_y[idx])
    # A repeated index is served once with its summed weight.
    loader.set_subset([5, 9, 5], [1.0, 2.0, 0.5])
    x, y, w = next(iter(loader))
    assert sorted(w.tolist()) == [1.5, 2.0] and len(x) == 2
    loader.close()
    assert loader.loader is pipeline and loader.loader.code is compiled  # nothing was rebuilt

    # A failure in ffcv's pipeline thread ends the epoch with an error (ffcv alone would wait forever).
    def broken(**_):
        raise ValueError("boom")

    loader.loader.code = ([(broken, [])], [])
    with pytest.raises(RuntimeError, match="boom"):
        list(loader)


def test_ffcv_run_completes_timed_and_sees_the_torch_batches(F, tmp_path):
    from effsearch.trainer.training import train

    # 128 training images in batches of 24: a short last batch, as in most real runs.
    over = {"dataset.crop_padding": 2, "dataset.flip": True, "epochs": 3, "batch_size": 24}
    results = {}
    for loader in ("torch", "ffcv"):
        cfg = TrainConfig.from_dict(tiny(loader=loader, **over))
        results[loader] = train(cfg, out_dir=tmp_path / loader, progress=False)
    ffcv_run, torch_run = results["ffcv"], results["torch"]
    assert ffcv_run.status == "completed", ffcv_run.reason
    f = ffcv_run.final
    assert f.train_seconds > 0 and f.setup_seconds > 0 and len(ffcv_run.history) == 3
    assert (tmp_path / "ffcv" / "result.json").is_file()
    # The run wrote its .beton files next to the dataset first.
    assert list((data_dir() / "ffcv" / "synthetic").glob("*/train.beton"))
    # Same order, same augmentation: the same training, up to float rounding.
    for a, b in zip(ffcv_run.history, torch_run.history):
        assert a.val_loss == pytest.approx(b.val_loss, rel=1e-4, abs=1e-5)
        assert a.val_accuracy == pytest.approx(b.val_accuracy, abs=1e-6)


def test_ffcv_run_with_cords_selection(F):
    from composer.core import Callback

    from effsearch.trainer.result import RunResult
    from effsearch.trainer.training import prepare

    class Served(Callback):
        def __init__(self):
            self.epochs = []

        def epoch_start(self, state, logger):
            self.epochs.append([])

        def after_dataloader(self, state, logger):
            self.epochs[-1].append(state.batch[2].clone())

    cfg = TrainConfig.from_dict(
        tiny(
            epochs=3,
            loader="ffcv",
            **{"selection.strategy": "craig-pb", "selection.fraction": 0.5, "selection.select_every": 1},
        )
    )
    served = Served()
    result = RunResult(status="running", config=cfg.to_dict())
    run = prepare(cfg, load_splits(cfg), "cpu", result, callbacks=[served])
    assert isinstance(run.train_loader, F.FFCVTrainLoader) and run.selection.dataset is run.train_loader
    run.fit()
    assert run.selection.selections == 3
    subset = run.train_loader.sampler.subset
    weights = run.train_loader.weights
    assert len(subset) <= 64 + 32  # half of 128, up to one batch more (per-batch CRAIG)
    # The last epoch served the last subset, each sample with the weight the selection gave it.
    last = torch.cat(served.epochs[-1])
    assert len(last) == min(len(subset), 64)  # an oversized subset: a random part of it each epoch
    chosen = sorted(weights[subset].tolist())
    if len(subset) <= 64:
        assert sorted(last.tolist()) == pytest.approx(chosen)
    else:
        assert all(min(abs(w - c) for c in chosen) < 1e-6 for w in last.tolist())
    assert (weights[subset] > 0).all() and weights.sum() == pytest.approx(float(weights[subset].sum()))


def test_gradmatch_subset_trains_through_ffcv_from_a_config_file(F, tmp_path, capsys):
    """Subset selection x FFCV, written in a config file and run by the CLI: the combination
    effsearch exists for (a weighted, per-batch CORDS strategy on FFCV's loader)."""
    from effsearch.cli import main

    path = tmp_path / "gm.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "dataset": {"name": "digits", "data_fraction": 0.3, "crop_padding": 0},
                "model": {"name": "tiny-cnn", "width": 8},
                "epochs": 2,
                "batch_size": 64,
                "schedule": {"name": "constant"},
                "loader": "ffcv",
                "device": "cpu",
                "selection": {"strategy": "gradmatch-pb", "fraction": 0.3, "select_every": 1},
                "target_accuracy": 0.5,
            }
        )
    )
    assert main(["train", str(path), "--out", str(tmp_path / "run")]) == 0, capsys.readouterr().err
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "completed", result.get("reason")
    assert result["config"]["loader"] == "ffcv" and result["config"]["selection"]["strategy"] == "gradmatch-pb"
    # Epoch 0 trains a random subset (no warm start), epoch 1 GradMatch's weighted one.
    assert result["final"]["selection_seconds"] > 0
    n_train = result["history"][-1].get("subset_size")
    assert n_train is not None and n_train < 0.5 * 1797 * 0.3
