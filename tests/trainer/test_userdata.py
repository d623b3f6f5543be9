"""Datasets of the user's own (``effsearch/trainer/data/userdata.py``): an image folder, an .npz, a
saved Hugging Face dataset and a callable load with the right shapes, classes, channels and
stratified splits; an imagefolder's decoded images are cached on disk; a run trains on one
(also through FFCV); and every bad input is exit code 2 naming the field, with no traceback.

Every input is made here, small (3 classes of 12x12 images); nothing reads the network or ../shared.
"""

import json
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from effsearch.config import ConfigError, TrainConfig
from effsearch.trainer.data import memory
from effsearch.trainer.data.datasets import DataMissing
from effsearch.trainer.data.splits import _CACHE, Splits, data_dir, load_splits
from tests.support.helpers import logged_warnings, tiny


def write_images(folder: Path, classes=("a", "b", "c"), count=12, size=(12, 12), mode="RGB", seed=0) -> Path:
    """``count`` PNGs per class folder: a class colour plus noise (learnable, not trivial)."""
    rng = np.random.default_rng(seed)
    for k, name in enumerate(classes):
        (folder / name).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            shape = (size[1], size[0]) + ((3,) if mode == "RGB" else ())
            pixels = np.clip(40 + 80 * k + rng.normal(0, 30, shape), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / name / f"{i}.png")  # L or RGB, from the shape
    return folder


def cfg_of(dataset: dict, **over) -> TrainConfig:
    raw = tiny(**over)
    raw["dataset"] = {"crop_padding": 0, **dataset}
    return TrainConfig.from_dict(raw)


def load(dataset: dict, root=None) -> Splits:
    _CACHE.clear()  # the process cache would hide what the disk cache does
    return load_splits(cfg_of(dataset), root)


def stratified(y: torch.Tensor, classes: int) -> bool:
    counts = torch.bincount(y, minlength=classes)
    return int(counts.max() - counts.min()) <= 1


def test_imagefolder_loads_stratified_and_caches_the_decoded_images_on_disk(tmp_path, monkeypatch):
    root = write_images(tmp_path / "pets")
    s = load({"name": "imagefolder", "path": str(root)})
    assert s.train_x.dtype == torch.uint8 and s.channels == 3 and s.num_classes == 3
    assert s.train_x.shape[1:] == (3, 12, 12)
    assert len(s.test_y) == 8 and len(s.val_y) + len(s.train_y) == 28  # test_fraction 0.2 of 36
    assert all(stratified(y, 3) for y in (s.train_y, s.val_y, s.test_y))
    # Pixel-exact: every image is one of the files, under its class folder's label.
    files = {
        bytes(np.asarray(Image.open(p)).transpose(2, 0, 1).tobytes()): "abc".index(p.parent.name)
        for p in root.glob("*/*.png")
    }
    for x, y in zip(torch.cat([s.train_x, s.val_x, s.test_x]), torch.cat([s.train_y, s.val_y, s.test_y])):
        assert files[bytes(x.numpy().tobytes())] == int(y)
    cache = data_dir() / "imagefolder-cache"
    (key,) = [p for p in cache.iterdir() if not p.name.startswith(".")]
    assert sorted(p.name for p in key.iterdir()) == ["meta.json", "train_x.npy", "train_y.npy"]

    # A second load reads the cache: it never opens an image.
    def no_decoding(*_a, **_k):
        raise AssertionError("decoded again")

    with monkeypatch.context() as m:
        m.setattr(Image, "open", no_decoding)
        again = load({"name": "imagefolder", "path": str(root)})
        assert torch.equal(again.train_x, s.train_x) and torch.equal(again.test_y, s.test_y)
        # A touched file changes the key: the images are decoded again (here: refused, so seen).
        os.utime(root / "a" / "0.png", ns=(1, 1))
        with pytest.raises(ConfigError, match="decoded again"):
            load({"name": "imagefolder", "path": str(root)})
    write_images(root, classes=("a",), count=13, seed=1)  # and one more image, a/12.png
    grown = load({"name": "imagefolder", "path": str(root)})
    assert len(grown.train_y) + len(grown.val_y) + len(grown.test_y) == 37
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] != [key.name]  # the stale one went
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 1


def test_imagefolder_channels_sizes_and_train_val_test_folders(tmp_path):
    gray = write_images(tmp_path / "gray", mode="L")
    s = load({"name": "imagefolder", "path": str(gray)})
    assert s.channels == 1 and s.train_x.shape[1:] == (1, 12, 12)
    # One colour image among grayscale ones: all decoded as RGB. Mixed sizes: image_size resizes.
    write_images(gray, classes=("b",), count=1, size=(20, 16), mode="RGB", seed=2)
    s = load({"name": "imagefolder", "path": str(gray), "image_size": 10})
    assert s.channels == 3 and s.train_x.shape[1:] == (3, 10, 10)
    # train/ val/ test/: the given validation and test folders are used as they are.
    split = tmp_path / "split"
    write_images(split / "train", count=8)
    write_images(split / "val", count=2, seed=3)
    write_images(split / "test", classes=("a", "c"), count=3, seed=4)
    s = load({"name": "imagefolder", "path": str(split), "val_fraction": 0.3})
    assert torch.bincount(s.train_y).tolist() == [8, 8, 8]
    assert torch.bincount(s.val_y).tolist() == [2, 2, 2] and torch.bincount(s.test_y).tolist() == [3, 0, 3]
    val = {np.asarray(Image.open(p)).transpose(2, 0, 1).tobytes() for p in (split / "val").glob("*/*.png")}
    assert {x.numpy().tobytes() for x in s.val_x} == val
    assert len(load({"name": "imagefolder", "path": str(split), "val_subset": 0.5}).val_y) == 3


def test_an_imagefolder_validation_folder_may_be_named_valid_or_validation(tmp_path):
    """Kaggle's layouts name it valid/ or validation/ (as hf datasets' splits): it had been refused
    beside train/. Two validation folders are refused; at the top, valid/ is a class, as in valid/
    and invalid/."""
    for name in ("valid", "validation"):
        root = tmp_path / name
        write_images(root / "train", count=8)
        write_images(root / name, count=2, seed=3)
        s = load({"name": "imagefolder", "path": str(root)})
        assert torch.bincount(s.val_y).tolist() == [2, 2, 2] and len(s.train_y) + len(s.test_y) == 24
    write_images(tmp_path / "valid" / "val", count=2, seed=5)
    with pytest.raises(ConfigError, match="has val/ and valid/: one validation folder"):
        load({"name": "imagefolder", "path": str(tmp_path / "valid")})
    classes = write_images(tmp_path / "captchas", classes=("invalid", "valid"), count=20)
    assert load({"name": "imagefolder", "path": str(classes)}).num_classes == 2


def test_split_folders_are_named_in_any_case(tmp_path):
    """Train/, Validation/ and Test/ (as many downloaded datasets have them) had been two classes,
    "Train" and "Test", trained on at exit 0; they are the splits, as train/, validation/ and test/.
    Two folders of one split in two cases are refused."""
    root = tmp_path / "kaggle"
    write_images(root / "Train", count=8)
    write_images(root / "Validation", count=2, seed=3)
    write_images(root / "TEST", count=3, seed=4)
    s = load({"name": "imagefolder", "path": str(root)})
    assert s.num_classes == 3 and torch.bincount(s.train_y).tolist() == [8, 8, 8]
    assert torch.bincount(s.val_y).tolist() == [2, 2, 2] and torch.bincount(s.test_y).tolist() == [3, 3, 3]
    write_images(root / "train", count=1, seed=5)
    with pytest.raises(ConfigError, match="has Train/ and train/: one training folder"):
        load({"name": "imagefolder", "path": str(root)})


def test_16_bit_and_float_images_are_scaled_to_8_bits_not_clipped(tmp_path):
    """torchvision's convention (to_dtype, scale=True): 16 bits keep their high byte, floats are 0..1.
    PIL's convert clips: a 16-bit microscope image decoded nearly all 255, a 0..1 float TIFF all 0;
    the same in a folder decoded as RGB (one colour image among them)."""
    ramp = np.arange(0, 65536, 256, dtype=np.uint16).reshape(16, 16)  # 0, 256, ..., 65280
    for name in ("a", "b"):
        (tmp_path / "wide" / name).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(ramp).save(tmp_path / "wide" / name / f"{i}.png")  # mode I;16
            Image.fromarray((ramp / 65535).astype(np.float32)).save(tmp_path / "wide" / name / f"{i}.tiff")  # F
    s = load({"name": "imagefolder", "path": str(tmp_path / "wide"), "val_fraction": 0.25, "test_fraction": 0.25})
    want = (ramp >> 8).astype(np.uint8)  # 0..255 in steps of 1
    for x in s.train_x:
        assert np.abs(x[0].numpy().astype(int) - want).max() <= 1  # the float's rounding
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(tmp_path / "wide" / "a" / "colour.png")
    s = load({"name": "imagefolder", "path": str(tmp_path / "wide"), "val_fraction": 0.25, "test_fraction": 0.25})
    assert s.channels == 3 and any(np.abs(x[1].numpy().astype(int) - want).max() <= 1 for x in s.train_x)


def test_a_data_folder_that_cannot_be_written_decodes_in_memory(tmp_path, caplog):
    root = write_images(tmp_path / "pets")
    blocked = tmp_path / "data-is-a-file"
    blocked.write_text("")
    with caplog.at_level("WARNING", logger="effsearch"):
        s = load({"name": "imagefolder", "path": str(root)}, blocked)
    assert "decoding them in memory" in caplog.text  # logged, as the library's other warnings
    assert len(s.train_y) + len(s.val_y) + len(s.test_y) == 36 and s.channels == 3


@pytest.mark.parametrize("layout", ["NHWC", "NCHW", "NHW"])
def test_npz_layouts(tmp_path, layout):
    rng = np.random.default_rng(0)
    shape = {"NHWC": (12, 12, 3), "NCHW": (3, 12, 12), "NHW": (12, 12)}[layout]
    x = rng.integers(0, 256, (60, *shape), dtype=np.uint8)
    y = np.arange(60) % 4
    np.savez(tmp_path / "d.npz", x_train=x[:40], y_train=y[:40], x_test=x[40:], y_test=y[40:])
    s = load({"name": "npz", "path": str(tmp_path / "d.npz"), "val_fraction": 0.2})
    channels = 1 if layout == "NHW" else 3
    assert s.train_x.shape[1:] == (channels, 12, 12) and s.num_classes == 4
    assert len(s.train_y) == 32 and len(s.val_y) == 8 and len(s.test_y) == 20
    assert stratified(s.val_y, 4)
    first = torch.from_numpy(x[0] if layout == "NCHW" else x[0].transpose(2, 0, 1) if layout == "NHWC" else x[0][None])
    assert any(torch.equal(first, im) for im in torch.cat([s.train_x, s.val_x]))


def test_a_callable_returns_the_arrays(tmp_path, monkeypatch):
    (tmp_path / "mydata.py").write_text(
        textwrap.dedent("""
        import numpy as np, torch

        def as_mapping():
            x = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (50, 10, 10, 3), dtype=np.uint8))
            y = torch.arange(50) % 5
            return {"x_train": x[:40], "y_train": y[:40], "x_test": x[40:], "y_test": y[40:]}

        def as_tuple():
            d = as_mapping()
            return d["x_train"].numpy(), d["y_train"].numpy(), d["x_test"].numpy(), d["y_test"].numpy()

        def training_only():
            d = as_mapping()
            return {"x_train": d["x_train"], "y_train": d["y_train"]}

        def test_without_labels():
            return {k: v for k, v in as_mapping().items() if k != "y_test"}
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    a = load({"name": "mydata:as_mapping", "val_fraction": 0.25})
    b = load({"name": "mydata:as_tuple", "val_fraction": 0.25})
    assert a.train_x.shape == (30, 3, 10, 10) and a.num_classes == 5 and len(a.test_y) == 10
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.val_y, b.val_y) and stratified(a.val_y, 5)
    # A training split alone: test and validation carved from it, as from one training Dataset.
    c = load({"name": "mydata:training_only", "val_fraction": 0.25, "test_fraction": 0.2})
    assert len(c.train_y) + len(c.val_y) + len(c.test_y) == 40 and len(c.test_y) == 8 and stratified(c.test_y, 5)
    with pytest.raises(ConfigError, match="x_test and y_test go together") as e:
        load({"name": "mydata:test_without_labels"})
    assert e.value.field == "dataset.name"


def test_hf_dataset_saved_to_disk(tmp_path):
    datasets = pytest.importorskip("datasets", reason="needs the optional extra hf (uv sync --extra hf)")

    def rows(n, seed):
        r = np.random.default_rng(seed)
        return {
            "img": [Image.fromarray(r.integers(0, 256, (12, 12), dtype=np.uint8)) for _ in range(n)],
            "y": [i % 3 for i in range(n)],
        }

    datasets.Dataset.from_dict(rows(30, 1)).save_to_disk(str(tmp_path / "plain"))
    s = load({"name": "hf", "path": str(tmp_path / "plain"), "image_column": "img", "label_column": "y"})
    assert s.channels == 1 and s.num_classes == 3 and len(s.test_y) == 6 and stratified(s.test_y, 3)
    assert list((data_dir() / "hf-cache").glob("*/train_x.npy"))
    both = datasets.DatasetDict(
        {"train": datasets.Dataset.from_dict(rows(24, 2)), "validation": datasets.Dataset.from_dict(rows(6, 3))}
    )
    both.save_to_disk(str(tmp_path / "dict"))
    s = load({"name": "hf", "path": str(tmp_path / "dict"), "image_column": "img", "label_column": "y"})
    assert len(s.val_y) == 6 and len(s.train_y) + len(s.test_y) == 24  # validation given, test carved


def test_a_hf_image_split_with_no_labels_is_left_out_and_carved_instead(tmp_path):
    """A test split whose ClassLabel is -1 throughout (no labels, as in GLUE's) is left out and a
    test split carved from the training rows, as for text."""
    datasets = pytest.importorskip("datasets", reason="needs the optional extra hf (uv sync --extra hf)")
    features = datasets.Features({"img": datasets.Image(), "y": datasets.ClassLabel(names=["a", "b", "c"])})
    r = np.random.default_rng(0)

    def split(ys):
        pixels = [Image.fromarray(r.integers(0, 256, (12, 12), dtype=np.uint8)) for _ in ys]
        return datasets.Dataset.from_dict({"img": pixels, "y": ys}, features=features)

    datasets.DatasetDict({"train": split([i % 3 for i in range(30)]), "test": split([-1] * 9)}).save_to_disk(
        str(tmp_path / "glue")
    )
    s = load({"name": "hf", "path": str(tmp_path / "glue"), "image_column": "img", "label_column": "y"})
    assert s.num_classes == 3 and len(s.test_y) == 6 and stratified(s.test_y, 3)


def _hf_named(tmp_path, train, test) -> dict:
    """A saved DatasetDict of 12x12 images whose labels are strings (no ClassLabel feature)."""
    datasets = pytest.importorskip("datasets", reason="needs the optional extra hf (uv sync --extra hf)")

    def split(names):
        r = np.random.default_rng(len(names))
        pixels = [Image.fromarray(r.integers(0, 256, (12, 12), dtype=np.uint8)) for _ in names]
        return datasets.Dataset.from_dict({"image": pixels, "label": names})

    datasets.DatasetDict({"train": split(train), "validation": split(train), "test": split(test)}).save_to_disk(
        str(tmp_path / "named")
    )
    return {"name": "hf", "path": str(tmp_path / "named")}


def test_integer_and_unit_float_image_arrays_are_read_as_the_uint8_ones(tmp_path):
    """Arrays made from Python lists are int64, Keras' x / 255 float in [0, 1]: both had been refused
    ("images must be uint8"). They read as the uint8 images they stand for."""
    x = np.random.default_rng(0).integers(0, 256, (30, 12, 12, 3), dtype=np.uint8)
    kinds = {"uint8": x, "int64": x.astype(np.int64), "unit": x.astype(np.float32) / 255}
    got = {}
    for kind, a in kinds.items():
        (tmp_path / kind).mkdir()
        got[kind] = load({**_npz(tmp_path / kind, x_train=a[:20], x_test=a[20:]), "val_fraction": 0.3})
    for kind in ("int64", "unit"):
        assert torch.equal(got[kind].train_x, got["uint8"].train_x), kind
        assert torch.equal(got[kind].test_x, got["uint8"].test_x), kind


def test_npz_string_labels_are_the_training_labels_in_sorted_order(tmp_path):
    """As hf's and a text dataset's: y arrays of names (np.array(["cat", ...])) had been refused as
    "labels must be integers"."""
    names = np.array(["zebra"] * 6 + ["ant"] * 8 + ["moth"] * 6)
    data = {
        **_npz(tmp_path, y_train=names, y_test=np.array(["moth", "ant", "zebra"] * 3 + ["ant"])),
        "val_fraction": 0.3,
    }
    s = load(data)
    assert s.num_classes == 3 and s.test_y.tolist() == [1, 0, 2] * 3 + [0]
    assert sorted(torch.cat([s.train_y, s.val_y]).tolist()) == [0] * 8 + [1] * 6 + [2] * 6


def test_hf_string_labels_are_the_training_labels_in_sorted_order(tmp_path):
    """As a text dataset's: a class is its label's place among the training split's labels, sorted."""
    names = ["zebra"] * 6 + ["ant"] * 12 + ["moth"] * 18
    s = load(_hf_named(tmp_path, names, ["moth", "ant", "zebra"]))
    assert s.num_classes == 3
    assert torch.bincount(s.train_y).tolist() == [12, 18, 6]  # ant, moth, zebra
    assert s.test_y.tolist() == [1, 0, 2]


def run_cli(tmp_path, capsys, dataset: dict, **over) -> tuple[int, str]:
    from effsearch.cli import main

    raw = tiny(**over)
    raw["dataset"] = {"crop_padding": 0, **dataset}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(raw))
    _CACHE.clear()
    code = main(["train", str(path), "--out", str(tmp_path / "run")])
    return code, capsys.readouterr().err


def test_train_json_prints_the_result_alone_on_stdout_for_a_pipe(tmp_path, capsys):
    from effsearch.cli import main

    root = write_images(tmp_path / "pets")
    raw = {**tiny(epochs=1, batch_size=8), "dataset": {"name": "imagefolder", "path": str(root), "crop_padding": 0}}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(raw))
    _CACHE.clear()
    assert main(["train", str(tmp_path / "cfg.yaml"), "--out", str(tmp_path / "run"), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == json.loads((tmp_path / "run" / "result.json").read_text())  # one line, nothing else
    assert "status: completed" in err


def test_train_on_an_imagefolder_from_the_cli(tmp_path, capsys):
    root = write_images(tmp_path / "pets")
    code, err = run_cli(tmp_path, capsys, {"name": "imagefolder", "path": str(root)}, epochs=1, batch_size=8)
    assert code == 0, err
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "completed" and len(result["history"]) == 1


def test_ffcv_trains_on_an_imagefolder_in_a_folder_of_its_own(B, tmp_path):
    from effsearch.trainer.training import train

    root = write_images(tmp_path / "pets")
    cfg = cfg_of({"name": "imagefolder", "path": str(root)}, epochs=1, batch_size=8, loader="ffcv")
    _CACHE.clear()
    result = train(cfg, progress=False)
    assert result.status == "completed", result.reason
    (folder,) = (data_dir() / "ffcv").iterdir()
    assert folder.name.startswith("imagefolder-pets-") and list(folder.glob("*/train.beton"))
    names = {
        B.dataset_folder(cfg_of({"name": n, "path": p}))
        for n, p in [
            ("imagefolder", str(root)),
            ("imagefolder", str(tmp_path)),
            ("pkg.mod:make", None),
            ("npz", "x.npz"),
        ]
    }
    assert len(names) == 4 and not any(c in n for n in names for c in ":/")
    assert B.dataset_folder(cfg_of({"name": "digits"})) == "digits"


def _bad_images(tmp_path):
    root = write_images(tmp_path / "pets")
    (root / "b" / "broken.png").write_bytes(b"not a png")
    return {"name": "imagefolder", "path": str(root)}


def _npz(tmp_path, **change):
    x = np.zeros((30, 12, 12, 3), np.uint8)
    arrays = {"x_train": x[:20], "y_train": np.arange(20) % 3, "x_test": x[20:], "y_test": np.arange(10) % 3}
    arrays.update(change)
    np.savez(tmp_path / "d.npz", **{k: v for k, v in arrays.items() if v is not None})
    return {"name": "npz", "path": str(tmp_path / "d.npz")}


def _module(tmp_path, monkeypatch, body):
    (tmp_path / "baddata.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("baddata", None)
    return {"name": "baddata:make"}


def _no_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
    (tmp_path / "saved").mkdir()
    return {"name": "hf", "path": str(tmp_path / "saved")}


def _too_big(tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "memory_limit", lambda: 1000)
    return {"name": "imagefolder", "path": str(write_images(tmp_path / "pets"))}


def _one_bad_file(tmp_path, name: str, data: bytes) -> dict:
    root = write_images(tmp_path / "pets")
    (root / "b" / name).write_bytes(data)
    return {"name": "imagefolder", "path": str(root)}


def _truncated(tmp_path):
    """A PNG cut short: its header reads, its pixels do not (found while decoding into the cache)."""
    root = write_images(tmp_path / "pets")
    whole = (root / "b" / "0.png").read_bytes()
    (root / "b" / "cut.png").write_bytes(whole[: len(whole) // 2])
    return {"name": "imagefolder", "path": str(root)}


def _png_header(width: int, height: int) -> bytes:
    """A PNG that says it is ``width`` x ``height`` (8-bit grey), with one empty row of pixels."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0")) + chunk(b"IEND", b"")


def _link(tmp_path, target: str) -> dict:
    root = write_images(tmp_path / "pets")
    (root / "b" / "link.png").symlink_to(target)
    return {"name": "imagefolder", "path": str(root)}


def _not_saved(tmp_path, monkeypatch):
    pytest.importorskip("datasets", reason="needs the optional extra hf (uv sync --extra hf)")
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "notes.txt").write_text("not a dataset\n")
    return {"name": "hf", "path": str(tmp_path / "saved")}


BAD = {  # what is wrong: (make the input -> dataset mapping, the field named, a phrase of the message)
    "no path": (lambda t, m: {"name": "imagefolder"}, "dataset.path", "set it"),
    "path missing": (lambda t, m: {"name": "npz", "path": str(t / "nowhere.npz")}, "dataset.path", "does not exist"),
    "no class folders": (
        lambda t, m: {"name": "imagefolder", "path": str(write_images(t / "p", ("a",), 2) / "a")},
        "dataset.path",
        "no class folders",
    ),
    "one class": (
        lambda t, m: {"name": "imagefolder", "path": str(write_images(t / "p", ("a",), 2))},
        "dataset.path",
        "one class folder",
    ),
    "corrupt image": (lambda t, m: _bad_images(t), "dataset.path", "broken.png"),
    "mixed sizes": (
        lambda t, m: {
            "name": "imagefolder",
            "path": str(write_images(write_images(t / "p"), ("c",), 1, size=(16, 16), seed=1)),
        },
        "dataset.image_size",
        "16x16",
    ),
    "npz array missing": (lambda t, m: _npz(t, y_test=None), "dataset.path", "'y_test'"),
    "npz negative label": (lambda t, m: _npz(t, y_train=np.arange(20) % 3 - 1), "dataset.path", "label -1"),
    "npz label out of range": (lambda t, m: _npz(t, y_test=np.arange(10) % 5), "dataset.path", "go up to 4"),
    # Below the top label: was scored as a class the model never saw, silently.
    "npz test label not trained": (
        lambda t, m: _npz(t, y_train=np.arange(20) % 3 * 2, y_test=np.arange(10) % 5),
        "dataset.path",
        "label 1 is in the test split",
    ),
    "npz labels not integers": (lambda t, m: _npz(t, y_train=np.arange(20) / 2), "dataset.path", "integers"),
    "npz bad shape": (
        lambda t, m: _npz(t, x_train=np.zeros((20, 12, 12, 5), np.uint8)),
        "dataset.path",
        "(20, 12, 12, 5)",
    ),
    "npz lengths differ": (lambda t, m: _npz(t, y_train=np.arange(19) % 3), "dataset.path", "19 labels"),
    "npz normalised images": (
        lambda t, m: _npz(t, x_train=np.full((20, 12, 12, 3), -0.5, np.float32)),
        "dataset.path",
        "x_train of",
    ),
    # Each told what its pixels are (all were told to undo a normalisation).
    "npz floats of 0..255": (
        lambda t, m: _npz(t, x_train=np.full((20, 12, 12, 3), 200.0, np.float32)),
        "dataset.path",
        "floats of 0..255: give x.astype(np.uint8), or x / 255",
    ),
    "npz boolean pixels": (
        lambda t, m: _npz(t, x_train=np.ones((20, 12, 12, 3), bool)),
        "dataset.path",
        "booleans: give x.astype(np.uint8) * 255",
    ),
    "npz a NaN pixel": (
        lambda t, m: _npz(
            t,
            x_train=np.where(np.arange(20)[:, None, None, None] == 3, np.nan, 0.5)
            * np.ones((20, 12, 12, 3), np.float32),
        ),
        "dataset.path",
        "holding NaN (first in image 3)",
    ),
    "npz label name only in test": (
        lambda t, m: _npz(t, y_train=np.array(["ant", "bee"] * 10), y_test=np.array(["ant", "cat"] * 5)),
        "dataset.path",
        "label 'cat' of the y arrays of",
    ),
    "missing extra": (_no_extra, "dataset.name", "uv sync --extra hf"),
    "callable raises": (
        lambda t, m: _module(t, m, "def make():\n    raise OSError('disk on fire')\n"),
        "dataset.name",
        "OSError: disk on fire",
    ),
    "callable returns junk": (
        lambda t, m: _module(t, m, "def make():\n    return 42\n"),
        "dataset.name",
        "returned int 42",
    ),
    "too big for memory": (_too_big, "dataset.image_size", "lower dataset.image_size"),
    "truncated image": (lambda t, m: _truncated(t), "dataset.path", "cut.png"),
    "zero-byte image": (lambda t, m: _one_bad_file(t, "empty.png", b""), "dataset.path", "empty.png"),
    "196-megapixel image": (
        lambda t, m: _one_bad_file(t, "huge.png", _png_header(14_000, 14_000)),
        "dataset.path",
        "huge.png",
    ),
    "hf folder not saved by datasets": (_not_saved, "dataset.path", "save_to_disk"),
    "a class of one image": (
        lambda t, m: _npz(t, y_train=np.array([0] * 9 + [1] * 10 + [2])),
        "dataset.val_fraction",
        "class 2 has one member: a stratified split needs two a class; give the dataset x_val and y_val",
    ),
    "fewer held out than classes": (
        lambda t, m: _npz(t, y_train=np.arange(20) % 5),
        "dataset.val_fraction",
        "0.1 of them is 2, fewer than the 5 classes (one a class each side); give the dataset x_val and y_val "
        "in the .npz, raise dataset.val_fraction to at least 0.25",
    ),
    "hf string label only in test": (
        lambda t, m: _hf_named(t, ["ant", "moth"] * 6, ["ant", "bee"]),
        "dataset.label_column",
        "'bee'",
    ),
    "broken file link": (lambda t, m: _link(t, "gone.png"), "dataset.path", "link.png"),
    "file link to itself": (lambda t, m: _link(t, "link.png"), "dataset.path", "leads back to itself"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_exit_2_naming_the_field(case, tmp_path, monkeypatch, capsys, untouched):
    """Refused, and nothing written: no result, and no cache folder or lock in the data folder
    (``untouched``), although some are found bad only while the images decode into the cache."""
    make, field, phrase = BAD[case]
    code, err = run_cli(tmp_path, capsys, make(tmp_path, monkeypatch))
    assert code == 2, err
    assert f"{field}:" in err and phrase in err, err
    assert "Traceback" not in err and not (tmp_path / "run" / "result.json").exists()


def test_a_relative_path_that_is_missing_names_the_current_folder(tmp_path, monkeypatch):
    """A relative dataset.path is read from the current folder: where it was looked for is said."""
    monkeypatch.chdir(tmp_path)
    for name, model in (("npz", "tiny-cnn"), ("jsonl", "text-encoder"), ("text", "gpt")):
        _CACHE.clear()
        with pytest.raises(ConfigError) as e:
            load_splits(cfg_of({"name": name, "path": "data/nowhere"}, model={"name": model}))
        assert e.value.field == "dataset.path", e.value
        said = f"{tmp_path}/data/nowhere does not exist ('data/nowhere' is read from the current folder, {tmp_path})"
        assert said in str(e.value), e.value
    with pytest.raises(ConfigError) as e:
        load({"name": "npz", "path": str(tmp_path / "gone.npz")})
    assert str(e.value).endswith("gone.npz does not exist"), e.value  # an absolute path needs no folder


def test_a_folder_link_is_not_followed_a_loop_included_and_each_is_named(tmp_path, caplog):
    """A link back up the tree (a loop), one to a folder beside it and one out of it: none is
    followed (the loop was listed until ELOOP), one warning names them, the images are the real ones."""
    root = write_images(tmp_path / "pets")
    write_images(tmp_path / "elsewhere", ("x",), 5)
    (root / "a" / "loop").symlink_to("..")
    (root / "b" / "again").symlink_to("../a")
    (root / "c" / "out").symlink_to(tmp_path / "elsewhere" / "x")
    s = load({"name": "imagefolder", "path": str(root)})
    said = logged_warnings(caplog).splitlines()
    assert len(said) == 1 and "skipped 3 symbolic link" in said[0], said
    for link in ("a/loop", "b/again", "c/out"):
        assert str(root / link) in said[0]
    assert s.num_classes == 3 and len(s.train_y) + len(s.val_y) + len(s.test_y) == 36


def test_a_cache_folder_is_kept_for_good_input_and_removed_with_its_lock_after_a_refusal(tmp_path):
    """The helper every cache is made through: what it made goes when the block raises (and only
    that: a folder that was there stays); a block that ends well keeps the folder and lock."""
    from effsearch.trainer.data.cachefolder import locked

    with pytest.raises(ConfigError), locked(tmp_path / "data" / "some-cache", "k"):
        assert (tmp_path / "data" / "some-cache" / ".k.lock").is_file()
        raise ConfigError("dataset.path", "refused")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.txt").write_text("a user's")
    with pytest.raises(KeyboardInterrupt), locked(tmp_path / "data" / "some-cache", "k"):
        raise KeyboardInterrupt
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["mine.txt"]
    with locked(tmp_path / "data" / "some-cache", "k"):
        (tmp_path / "data" / "some-cache" / "k").mkdir()
    assert sorted(p.name for p in (tmp_path / "data" / "some-cache").iterdir()) == [".k.lock", "k"]


def test_a_run_refused_after_its_cache_was_written_removes_that_cache_and_keeps_earlier_ones(tmp_path):
    """The images were good and are cached, then the run is refused (they do not fit in memory, say):
    the entry written inside ``removed_on_refusal`` goes, with its lock and folders; one that was
    there before stays, and so does everything when nothing is refused."""
    from effsearch.trainer.data.cachefolder import locked, removed_on_refusal

    cache = tmp_path / "data" / "c"

    def fill(key):
        with locked(cache, key) as lock:
            if not lock.entry.exists():
                lock.entry.mkdir()

    with pytest.raises(ConfigError), removed_on_refusal():
        fill("new")
        raise ConfigError("dataset.image_size", "too big")
    assert not (tmp_path / "data").exists()
    fill("old")
    with pytest.raises(ConfigError), removed_on_refusal():
        fill("old")
        fill("new")
        raise ConfigError("dataset.image_size", "too big")
    assert sorted(p.name for p in cache.iterdir()) == [".old.lock", "old"]
    with removed_on_refusal():
        fill("new")
    assert sorted(p.name for p in cache.iterdir()) == [".new.lock", ".old.lock", "new", "old"]


def test_a_lock_removed_by_a_refused_holder_is_taken_afresh(tmp_path):
    """A second process that waited on the lock of a refused first: once the first removed the lock
    file, the second locks the file now at that path, so a third cannot hold the key beside it."""
    import fcntl

    from effsearch.trainer.data.cachefolder import locked

    first, second = locked(tmp_path / "c", "k"), locked(tmp_path / "c", "k")
    with pytest.raises(ConfigError), first:
        raise ConfigError("dataset.path", "refused")
    assert not (tmp_path / "c").exists()
    with second:  # its file was unlinked under it: it makes the folder and the lock again
        assert (tmp_path / "c" / ".k.lock").is_file()
        with open(tmp_path / "c" / ".k.lock") as third, pytest.raises(BlockingIOError):
            fcntl.flock(third, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_data_fraction_leaving_fewer_than_ten_images_a_class_warns_once(caplog):
    from effsearch.trainer.data import splits

    splits._WARNED.clear()
    small = TrainConfig.from_dict(tiny(**{"dataset.data_fraction": 0.1}))  # 128 training images: 1-2 a class
    _CACHE.clear()
    load_splits(small)
    _CACHE.clear()
    load_splits(small)  # a second load (a study's next trial with the cache cleared): no second warning
    said = [line for line in logged_warnings(caplog).splitlines() if "data_fraction" in line]
    assert len(said) == 1 and "fewer than 10" in said[0], said
    _CACHE.clear()
    load_splits(TrainConfig.from_dict(tiny()))  # all of it: 13 a class, and no data_fraction to blame
    assert len([line for line in logged_warnings(caplog).splitlines() if "data_fraction" in line]) == 1


def test_fashion_mnist_says_why_the_download_failed(tmp_path, monkeypatch):
    import torchvision

    def offline(*_a, **_k):
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz\nmore lines")

    monkeypatch.setattr(torchvision.datasets, "FashionMNIST", offline)
    with pytest.raises(
        DataMissing,
        match=r"could not be downloaded \(RuntimeError: Error downloading "
        r"train-images-idx3-ubyte.gz\)",
    ):
        load({"name": "fashion-mnist"}, tmp_path)


def test_integer_labels_with_a_class_no_training_sample_has_are_trained_with_a_warning(tmp_path, caplog):
    """Labels 1 and 2: a model of three outputs, one never learned; said, not refused (K is the top
    label + 1, and labels 1..K are common)."""
    with caplog.at_level("WARNING"):
        s = load(_npz(tmp_path, y_train=np.arange(20) % 2 + 1, y_test=np.arange(10) % 2 + 1))
    assert s.num_classes == 3
    assert "no training sample has label 0 of 0..2: the model gets 1 output(s) it never learns" in caplog.text


MAKER = """
import numpy as np


def make(n=30, classes=3):
    x, y = np.zeros((n, 8, 8), np.uint8), np.arange(n) % classes
    return x, y, x[:9], y[:9]
"""


def test_an_import_path_dataset_is_called_with_dataset_kwargs(tmp_path, monkeypatch):
    d = _module(tmp_path, monkeypatch, MAKER)
    small, large = load({**d, "kwargs": {"n": 30}}), load({**d, "kwargs": {"n": 60, "classes": 4}})
    assert len(small.train_y) + len(small.val_y) == 30 and small.num_classes == 3
    assert len(large.train_y) + len(large.val_y) == 60 and large.num_classes == 4
    _CACHE.clear()
    from effsearch.trainer.data.splits import load_splits

    cfg = cfg_of({**d, "kwargs": {"n": 30}})
    assert load_splits(cfg) is not load_splits(cfg_of({**d, "kwargs": {"n": 60}}))  # kwargs are in the cache key


@pytest.mark.parametrize(
    "dataset, field, words",
    [
        ({"kwargs": {"size": 3}}, "dataset.kwargs", "baddata:make() cannot take ['size']"),
        ({"name": "npz", "path": "d.npz", "kwargs": {"n": 3}}, "dataset.kwargs", "only applies to an import path"),
    ],
)
def test_dataset_kwargs_a_callable_cannot_take_or_on_other_data_are_refused(
    tmp_path, monkeypatch, dataset, field, words
):
    d = {**_module(tmp_path, monkeypatch, MAKER), **dataset}
    with pytest.raises(ConfigError) as e:
        load(d)
    assert e.value.field == field and words in e.value.message, e.value
