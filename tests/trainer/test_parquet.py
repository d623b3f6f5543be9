"""dataset.name hf reads parquet files as a Hugging Face hub dataset is downloaded (a .parquet file,
or a folder of them named by split): images and text, features from the files' metadata (or an
image column of {bytes, path} written without it), nothing cached but the decoded images; a
folder with no training file and a file that is not parquet refused naming dataset.path."""

import io
import logging

import numpy as np
import pytest
import torch
from PIL import Image

import effsearch
from effsearch.config import ConfigError, TrainConfig
from effsearch.trainer.data.splits import load_splits
from tests.support.text import texts, tiny_text

datasets = pytest.importorskip("datasets", reason="needs the optional extra hf (uv sync --extra hf)")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

FEATURES = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=["dark", "light"])})


def images(n, seed):
    r = np.random.default_rng(seed)
    ys = [i % 2 for i in range(n)]
    pixels = [Image.fromarray(r.integers(0, 100, (12, 12, 3), dtype=np.uint8) + 150 * y) for y in ys]
    return datasets.Dataset.from_dict({"image": pixels, "label": ys}, features=FEATURES)


def image_config(path, **extra):
    return {
        "dataset": {"name": "hf", "path": str(path), **extra},
        "model": {"name": "tiny-cnn"},
        "epochs": 2,
        "batch_size": 16,
        "device": "cpu",
        "target_accuracy": 0.9,
    }


def test_a_hub_download_of_image_parquet_files_trains_with_its_own_test_split(tmp_path):
    hub = tmp_path / "hub"
    (hub / "data").mkdir(parents=True)
    images(60, 0).to_parquet(hub / "data" / "train-00000-of-00002.parquet")
    images(40, 1).to_parquet(hub / "data" / "train-00001-of-00002.parquet")
    images(20, 2).to_parquet(hub / "data" / "test-00000-of-00001.parquet")
    (hub / "README.md").write_text("a dataset card")
    s = load_splits(TrainConfig.from_dict(image_config(hub)), tmp_path / "data")
    assert len(s.test_y) == 20 and len(s.train_y) + len(s.val_y) == 100  # both train shards, the test file as is
    assert s.num_classes == 2 and s.train_x.shape[1:] == (3, 12, 12)
    result = effsearch.train(image_config(hub), data_dir=tmp_path / "data", progress=False)
    assert result.status == "completed" and result.final.val_accuracy > 0.9
    assert not list(tmp_path.glob("**/cache-*.arrow"))  # no datasets cache beside the files or the data


def test_an_image_column_written_without_its_metadata_is_read_as_images(tmp_path):
    """A parquet file another tool wrote: the image column a struct of {bytes, path}, labels ints."""
    r = np.random.default_rng(0)
    cells = []
    for _ in range(40):
        buf = io.BytesIO()
        Image.fromarray(r.integers(0, 256, (10, 10), dtype=np.uint8)).save(buf, format="PNG")
        cells.append({"bytes": buf.getvalue(), "path": None})
    table = pa.table({"img": cells, "y": [i % 4 for i in range(40)]})
    pq.write_table(table, tmp_path / "plain.parquet")
    s = load_splits(
        TrainConfig.from_dict(image_config(tmp_path / "plain.parquet", image_column="img", label_column="y")),
        tmp_path / "data",
    )
    assert s.num_classes == 4 and s.channels == 1 and len(s.train_y) + len(s.val_y) + len(s.test_y) == 40


def test_text_in_split_folders_of_parquet_trains_a_classifier(tmp_path):
    xs, ys = texts(240)
    for split, part in (("train", slice(0, 200)), ("validation", slice(200, 240))):
        (tmp_path / "topics" / split).mkdir(parents=True)
        pq.write_table(pa.table({"text": xs[part], "label": ys[part]}), tmp_path / "topics" / split / "0000.parquet")
    cfg = tiny_text(tmp_path / "topics", epochs=4, **{"dataset.name": "hf"})
    s = load_splits(TrainConfig.from_dict(cfg), tmp_path / "data")
    assert s.tokens is not None and len(s.val_y) == 40 and len(s.train_y) + len(s.test_y) == 200
    result = effsearch.train(cfg, data_dir=tmp_path / "data", progress=False)
    assert result.status == "completed" and result.final.val_accuracy > 0.6
    one = tmp_path / "one.parquet"  # a lone file: training rows, validation and test carved from it
    pq.write_table(pa.table({"text": xs, "label": ys}), one)
    s = load_splits(TrainConfig.from_dict(tiny_text(one, **{"dataset.name": "hf"})), tmp_path / "data")
    assert torch.is_tensor(s.train_x) and len(s.train_y) + len(s.val_y) + len(s.test_y) == 240


def test_a_split_of_another_name_is_left_out_with_a_warning(tmp_path, caplog):
    hub = tmp_path / "mnli"
    hub.mkdir()
    xs, ys = texts(120)
    for name in ("train-00000-of-00001", "validation_matched-00000-of-00001"):
        pq.write_table(pa.table({"text": xs, "label": ys}), hub / f"{name}.parquet")
    with caplog.at_level(logging.WARNING):
        s = load_splits(TrainConfig.from_dict(tiny_text(hub, **{"dataset.name": "hf"})), tmp_path / "data")
    assert "the validation_matched split" in caplog.text and len(s.train_y) + len(s.val_y) + len(s.test_y) == 120


@pytest.mark.parametrize(
    "files, words",
    [
        ({"mydata.parquet": "table"}, "has no training parquet file"),
        ({"train-0.parquet": "not parquet"}, "is not a parquet file"),
        (
            {"cola/train-0.parquet": "table", "sst2/train-0.parquet": "table"},
            "holds train files in 2 folders (cola/, sst2/)",
        ),
    ],
)
def test_parquet_files_it_cannot_read_are_refused_naming_dataset_path(tmp_path, files, words):
    xs, ys = texts(60)
    folder = tmp_path / "broken"
    folder.mkdir()
    for name, what in files.items():
        (folder / name).parent.mkdir(exist_ok=True)
        if what == "table":
            pq.write_table(pa.table({"text": xs, "label": ys}), folder / name)
        else:
            (folder / name).write_text(what)
    with pytest.raises(ConfigError) as e:
        effsearch.train(tiny_text(folder, **{"dataset.name": "hf"}), data_dir=tmp_path / "data", progress=False)
    assert e.value.field == "dataset.path" and words in e.value.message, e.value.message
    assert not (tmp_path / "data" / "text-cache").exists() or not list((tmp_path / "data" / "text-cache").glob("[!.]*"))


def test_split_names_are_read_in_any_case(tmp_path):
    """Train-….parquet and a Test/ folder are the train and test splits (Test had been left out with
    a warning, a split effsearch does not read, and Train's file read as a split named Train)."""
    hub = tmp_path / "hub"
    (hub / "Test").mkdir(parents=True)
    images(60, 0).to_parquet(hub / "Train-00000-of-00001.parquet")
    images(20, 2).to_parquet(hub / "Test" / "0000.parquet")
    s = load_splits(TrainConfig.from_dict(image_config(hub)), tmp_path / "data")
    assert len(s.test_y) == 20 and len(s.train_y) + len(s.val_y) == 60
