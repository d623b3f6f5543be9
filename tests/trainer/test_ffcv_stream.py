"""An image folder larger than memory trains with loader: ffcv: its training images stay in the
disk cache, FFCV writes them JPEG-compressed a row at a time and streams batches; validation and
test are all that must fit. Without ffcv these tests skip, except where EFFSEARCH_REQUIRE_FFCV=1 (CI)."""

import json

import numpy as np
import yaml

from effsearch.config import TrainConfig
from effsearch.trainer.data import memory
from effsearch.trainer.data.splits import _CACHE, DiskImages, load_splits


def colour_folder(root, per_class: int = 40, side: int = 24):
    """Three classes told apart by colour and a stripe, RGB PNGs."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for k, name in enumerate(("red", "green", "blue")):
        folder = root / name
        folder.mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.normal(60, 30, (side, side, 3))
            pixels[..., k] += 120
            pixels[k * 6 : k * 6 + 4] += 60
            Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(folder / f"{i}.png")
    return root


def config(folder, tmp_path, loader: str) -> TrainConfig:
    return TrainConfig.from_dict(
        {
            "dataset": {"name": "imagefolder", "path": str(folder)},
            "loader": loader,
            "model": {"name": "tiny-cnn", "width": 8},
            "epochs": 2,
            "batch_size": 16,
            "target_accuracy": 0.6,
            "device": "cpu",
        }
    )


def test_the_training_split_stays_on_disk_and_ffcv_streams_it_jpeg_compressed(B, F, tmp_path, monkeypatch):
    folder = colour_folder(tmp_path / "images")
    monkeypatch.setenv("EFFSEARCH_DATA_DIR", str(tmp_path / "data"))
    _CACHE.clear()
    splits = load_splits(config(folder, tmp_path, "ffcv"))
    assert splits.streamed and isinstance(splits.train_x, DiskImages)
    assert splits.train_x.shape == (len(splits.train_y), 3, 24, 24)
    in_memory = load_splits(config(folder, tmp_path, "torch"))
    assert not in_memory.streamed
    # The same images either way: rows read from the disk cache are the pixels the torch path holds.
    assert np.array_equal(splits.train_x[np.arange(5)].numpy(), in_memory.train_x[:5].numpy())
    prepared = B.ensure_betons(config(folder, tmp_path, "ffcv"), splits)
    meta = json.loads((prepared.folder / "meta.json").read_text())
    assert meta["dataset"]["train_images"] == "jpg"
    from ffcv.reader import Reader

    # JPEG-compressed training images; validation and test (held in memory) stay raw, pixel-exact.
    assert type(Reader(str(prepared.path("train"))).handlers["image"]).__name__ == "RGBImageField"
    assert type(Reader(str(prepared.path("val"))).handlers["image"]).__name__ == "NDArrayField"
    # FFCV decodes them back as N,C,H,W: each image's channel means survive JPEG (its pixel noise
    # does not, quality 90 with chroma subsampling); a channel or axis mix-up would move them by ~100.
    loader = F.FFCVTrainLoader(prepared.path("train"), len(splits.train_y), 16, jpeg=True)
    loader.sampler = range(len(splits.train_y))  # stored order
    x, y = next(iter(loader))
    assert x.shape == (16, 3, 24, 24) and x.dtype == splits.train_x.dtype
    assert y.tolist() == splits.train_y[:16].tolist()
    means = x.float().mean(dim=(2, 3)) - splits.train_x[np.arange(16)].float().mean(dim=(2, 3))
    assert means.abs().max() < 6, means


def test_a_folder_larger_than_memory_trains_with_ffcv_and_is_refused_without(F, tmp_path, monkeypatch, capsys):
    from effsearch.cli import main

    folder = colour_folder(tmp_path / "images")
    monkeypatch.setenv("EFFSEARCH_DATA_DIR", str(tmp_path / "data"))
    _CACHE.clear()
    load_splits(config(folder, tmp_path, "torch"))  # decode once into the disk cache
    _CACHE.clear()
    # Memory for the validation and test images, not for the training ones (120 images of 3x24x24).
    monkeypatch.setattr(memory, "memory_limit", lambda: 60 * 3 * 24 * 24)
    cfg = tmp_path / "c.yaml"
    raw = config(folder, tmp_path, "torch").to_dict()
    cfg.write_text(yaml.safe_dump(raw))
    assert main(["train", str(cfg), "--out", str(tmp_path / "torch"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "dataset.image_size:" in err and "loader: ffcv (it streams the training images from disk)" in err
    assert main(["train", str(cfg), "--set", "loader=ffcv", "--out", str(tmp_path / "ffcv"), "--quiet"]) == 0
    result = json.loads((tmp_path / "ffcv" / "result.json").read_text())
    assert result["status"] == "completed" and result["final"]["val_accuracy"] > 0.6


def test_data_prepare_writes_an_image_folders_files_and_a_run_reuses_them(B, tmp_path, capsys):
    from effsearch.cli import main

    folder = colour_folder(tmp_path / "images")
    data = tmp_path / "data"
    assert main(["data", "prepare", "imagefolder", "--path", str(folder), "--data-dir", str(data)]) == 0
    assert "wrote" in capsys.readouterr().err
    _CACHE.clear()
    cfg = config(folder, tmp_path, "ffcv")
    prepared = B.ensure_betons(cfg, load_splits(cfg, data), data_root=data)
    assert not prepared.written  # up to date: the run's split settings are the command's defaults
    assert main(["data", "prepare", "imagefolder", "--data-dir", str(data)]) == 2
    assert "dataset.path:" in capsys.readouterr().err


def test_data_prepare_reads_an_hf_dataset_s_image_column_from_its_flag(B, tmp_path, capsys):
    """--image-column: an hf folder whose images are not in a column named image (the flag was
    missing: only --config could say it)."""
    import pytest

    datasets = pytest.importorskip("datasets", reason="needs the optional extra hf (uv sync --extra hf)")
    from PIL import Image

    from effsearch.cli import main

    r = np.random.default_rng(0)
    rows = {"img": [Image.fromarray(r.integers(0, 256, (12, 12, 3), dtype=np.uint8)) for _ in range(30)]}
    datasets.Dataset.from_dict({**rows, "label": [i % 3 for i in range(30)]}).save_to_disk(str(tmp_path / "saved"))
    args = ["data", "prepare", "hf", "--path", str(tmp_path / "saved"), "--data-dir", str(tmp_path / "data")]
    assert main(args) == 2 and "dataset.image_column:" in capsys.readouterr().err
    assert main([*args, "--image-column", "img"]) == 0
    assert "wrote" in capsys.readouterr().err
