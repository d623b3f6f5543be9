"""PyTorch datasets from an import path's callable (``effsearch/trainer/data/torchsets.py``):
torchvision's ImageFolder with ToTensor, a Dataset of PIL images (grayscale and colour mixed), a
DataLoader, a lone training Dataset (test carved), a mapping by split name, a Hugging Face
DatasetDict, lists of PIL images, texts for a classifier and a language model load as the arrays
would; what cannot be read is exit 2 naming the field.

Every input is made here, small; nothing reads the network or ../shared.
"""

import importlib.util
import json
import sys
import textwrap

import pytest
import torch

from effsearch.config import TrainConfig
from effsearch.trainer.data.splits import _CACHE, load_splits
from tests.support.helpers import logged_warnings
from tests.support.text import lm_config, texts
from tests.trainer.test_userdata import cfg_of, load, run_cli, stratified, write_images

MODULE = """
import numpy as np, torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

class Pictures(Dataset):
    # 3 classes of 12x12 images, every third grayscale (PIL "L"), the rest RGB.
    def __init__(self, n, seed=0, transform=None):
        r = np.random.default_rng(seed)
        self.pixels = [np.clip(40 + 80 * (i % 3) + r.normal(0, 30, (12, 12, 3)), 0, 255).astype(np.uint8) for i in range(n)]
        self.transform = transform

    def __len__(self):
        return len(self.pixels)

    def __getitem__(self, i):
        im = Image.fromarray(self.pixels[i])
        im = im.convert("L") if i % 3 == 0 else im
        return (self.transform(im) if self.transform else im), i % 3

def pair():
    return Pictures(36), Pictures(12, seed=1)

def loaders():
    return DataLoader(Pictures(36), batch_size=5, shuffle=True), DataLoader(Pictures(12, seed=1), batch_size=5)

def lone():
    return Pictures(60)

def by_name():
    return {"train": Pictures(36), "validation": Pictures(9, seed=2), "test": Pictures(12, seed=1)}
"""


@pytest.fixture
def module(tmp_path, monkeypatch):
    (tmp_path / "mysets.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("mysets", None)
    yield tmp_path
    sys.modules.pop("mysets", None)


def test_torchvision_imagefolder_with_to_tensor_reads_the_pixels_of_the_files(tmp_path, monkeypatch):
    """ToTensor's floats in [0, 1] come back as the files' uint8 pixels, its C,H,W kept."""
    write_images(tmp_path / "pets" / "train")
    write_images(tmp_path / "pets" / "test", count=4, seed=1)
    (tmp_path / "tvsets.py").write_text(
        textwrap.dedent(f"""
        from torchvision import datasets, transforms

        def make():
            t = transforms.ToTensor()
            return (datasets.ImageFolder("{tmp_path}/pets/train", transform=t),
                    datasets.ImageFolder("{tmp_path}/pets/test", transform=t))
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    s = load({"name": "tvsets:make", "val_fraction": 0.25})
    own = load({"name": "imagefolder", "path": str(tmp_path / "pets"), "val_fraction": 0.25})
    assert s.channels == 3 and s.num_classes == 3 and s.train_x.shape[1:] == (3, 12, 12)
    assert torch.equal(s.test_x, own.test_x) and torch.equal(s.test_y, own.test_y)  # the same images, 0..255


def test_a_dataset_of_pil_images_a_dataloader_and_a_mapping_load_alike(module):
    a, b = load({"name": "mysets:pair", "val_fraction": 0.25}), load({"name": "mysets:loaders", "val_fraction": 0.25})
    assert a.train_x.shape[1:] == (3, 12, 12) and a.num_classes == 3 and len(a.test_y) == 12
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.val_y, b.val_y)  # a loader's dataset, read in order
    gray = a.test_x[0]  # item 0 was grayscale: its three channels are one
    assert torch.equal(gray[0], gray[1]) and torch.equal(gray[1], gray[2])
    c = load({"name": "mysets:by_name"})
    assert len(c.val_y) == 9 and len(c.test_y) == 12 and len(c.train_y) == 36  # its own splits, none carved


def test_a_hugging_face_datasetdict_is_read_by_its_columns_as_a_saved_one_is(module, caplog):
    """load_dataset's DatasetDict returned as it is: rows read by image_column and label_column; a
    split of another name and a test split without labels (-1 throughout, as GLUE's) left out
    with a warning, the test carved instead (as for dataset.name hf)."""
    pytest.importorskip("datasets", reason="needs the optional extra hf (uv sync --extra hf)")
    (module / "hfsets.py").write_text(
        textwrap.dedent("""
        import datasets, numpy as np
        from PIL import Image

        def rows(n, seed, label=None):
            r = np.random.default_rng(seed)
            return {"img": [Image.fromarray(r.integers(0, 256, (12, 12, 3), dtype=np.uint8)) for _ in range(n)],
                    "y": [label if label is not None else i % 3 for i in range(n)]}

        def make():
            features = datasets.Features({"img": datasets.Image(), "y": datasets.ClassLabel(names=["a", "b", "c"])})
            split = lambda *a: datasets.Dataset.from_dict(rows(*a), features=features)
            return datasets.DatasetDict({"train": split(45, 0), "extra": split(6, 1), "test": split(9, 2, -1)})
    """)
    )
    s = load({"name": "hfsets:make", "image_column": "img", "label_column": "y", "test_fraction": 0.2})
    assert s.channels == 3 and s.num_classes == 3 and len(s.test_y) == 9 and stratified(s.test_y, 3)
    said = logged_warnings(caplog)
    assert (
        "the extra split of hfsets:make() is not read" in said
        and "the test split of hfsets:make() has no labels" in said
    )


def test_lists_of_images_and_labels_load_as_arrays_would(tmp_path, monkeypatch):
    """What a loop collects (a list of PIL images, a list of ints), or a DataFrame's columns of
    them: each had been refused as "a list" (or an object array)."""
    (tmp_path / "listsets.py").write_text(
        textwrap.dedent("""
        import numpy as np
        from PIL import Image

        r = np.random.default_rng(0)
        PIXELS = r.integers(0, 256, (40, 10, 10, 3), dtype=np.uint8)
        IMAGES, LABELS = [Image.fromarray(p) for p in PIXELS], [i % 4 for i in range(40)]

        def lists():
            return IMAGES[:32], LABELS[:32], IMAGES[32:], LABELS[32:]

        def arrays():
            return PIXELS[:32], np.array(LABELS[:32]), PIXELS[32:], np.array(LABELS[32:])

        def frame():
            import pandas as pd
            df = pd.DataFrame({"image": IMAGES, "label": LABELS})
            return {"x_train": df.image[:32], "y_train": df.label[:32], "x_test": df.image[32:], "y_test": df.label[32:]}
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    a, b = (
        load({"name": "listsets:lists", "val_fraction": 0.25}),
        load({"name": "listsets:arrays", "val_fraction": 0.25}),
    )
    assert a.train_x.shape[1:] == (3, 10, 10) and a.num_classes == 4
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_x, b.test_x) and torch.equal(a.val_y, b.val_y)
    if importlib.util.find_spec("pandas"):
        c = load({"name": "listsets:frame", "val_fraction": 0.25})
        assert torch.equal(c.train_x, b.train_x) and torch.equal(c.test_y, b.test_y)


def test_a_lone_dataset_is_the_training_split_and_test_is_carved(module):
    s = load({"name": "mysets:lone", "val_fraction": 0.2, "test_fraction": 0.2})
    assert len(s.test_y) == 12 and stratified(s.test_y, 3) and len(s.train_y) + len(s.val_y) == 48


def test_a_random_transform_is_said_to_be_frozen(module, caplog, monkeypatch):
    (module / "augsets.py").write_text(
        "from torchvision import transforms\nfrom mysets import Pictures\n\n"
        "def make():\n    return Pictures(36, transform=transforms.RandomHorizontalFlip()), Pictures(12)\n\n"
        "def split():  # random_split's Subsets: the transform is their dataset's\n"
        "    import torch\n"
        "    both = Pictures(48, transform=transforms.RandomHorizontalFlip())\n"
        "    return tuple(torch.utils.data.random_split(both, [36, 12], torch.Generator().manual_seed(0)))\n"
    )
    load({"name": "augsets:make", "val_fraction": 0.25})
    said = logged_warnings(caplog)
    assert "the train dataset of augsets:make()" in said and "augmentations frozen" in said, said
    assert "the test dataset" not in said  # no transform there
    caplog.clear()
    load({"name": "augsets:split", "val_fraction": 0.25})
    said = logged_warnings(caplog)
    assert "the train dataset of augsets:split()" in said and "the test dataset of augsets:split()" in said, said


def test_datasets_of_texts_train_a_classifier_and_a_language_model(tmp_path, monkeypatch):
    xs, ys = texts(120)
    (tmp_path / "textsets.py").write_text(
        textwrap.dedent(f"""
        from torch.utils.data import Dataset

        class Texts(Dataset):
            def __init__(self, rows, labelled=True):
                self.rows, self.labelled = rows, labelled
            def __len__(self):
                return len(self.rows)
            def __getitem__(self, i):
                return self.rows[i] if self.labelled else self.rows[i][0]

        ROWS = list(zip({xs!r}, {ys!r}))

        def classes():
            return Texts(ROWS[:96]), Texts(ROWS[96:])

        def corpus():
            return Texts(ROWS * 4, labelled=False)

        def hf_rows():  # a Hugging Face Dataset's rows: read by text_column and label_column
            import datasets
            return datasets.Dataset.from_dict({{"text": [x for x, _ in ROWS], "label": [y for _, y in ROWS]}})
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    text = {"max_length": 16, "tokenizer": {"name": "bytes"}, "val_fraction": 0.25}
    _CACHE.clear()
    s = load_splits(cfg_of({"name": "textsets:classes", **text}, model={"name": "text-encoder", "width": 16}))
    assert len(s.test_y) == 24 and len(s.train_y) + len(s.val_y) == 96 and s.num_classes == len(set(ys))
    if importlib.util.find_spec("datasets"):
        _CACHE.clear()
        rows = load_splits(cfg_of({"name": "textsets:hf_rows", **text}, model={"name": "text-encoder", "width": 16}))
        assert len(rows.test_y) == 24 and len(rows.train_y) + len(rows.val_y) == 96  # test carved from the 120
        assert rows.num_classes == s.num_classes
    _CACHE.clear()
    raw = lm_config(tmp_path, **{"dataset.name": "textsets:corpus"})
    del raw["dataset"]["path"]
    raw["dataset"]["label_column"] = None  # a corpus: its items are texts alone
    lm = load_splits(TrainConfig.from_dict(raw))
    assert lm.train_x.numel() > 0 and lm.val_x.numel() > 0


BAD = {  # what the callable returns -> a phrase of the message (the field is dataset.name)
    "a Normalize transform": (
        "import torch\nfrom torchvision import transforms\n\nclass D(torch.utils.data.Dataset):\n"
        "    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.2,) * 3)])\n"
        "    def __len__(self): return 6\n"
        "    def __getitem__(self, i): return self.transform(torch.rand(8, 8, 3).numpy()), i % 2\n\n"
        "def make():\n    return D()\n",
        "leave Normalize out",
    ),
    "images of two sizes": (
        "from PIL import Image\nimport torch\n\nclass D(torch.utils.data.Dataset):\n"
        "    def __len__(self): return 6\n"
        "    def __getitem__(self, i): return Image.new('RGB', (12, 12 + (i == 4))), i % 2\n\n"
        "def make():\n    return D(), D()\n",
        "item 4 of the train dataset of badsets:make() is 3x13x12 but item 0 is 3x12x12",
    ),
    "rows without the columns": (
        "import torch\n\nclass D(torch.utils.data.Dataset):\n    def __len__(self): return 4\n"
        "    def __getitem__(self, i): return {'img': torch.zeros(3, 8, 8), 'y': i % 2}\n\n"
        "def make():\n    return D()\n",
        "dataset.image_column: item 0 of the train dataset of badsets:make() has the columns img, y",
    ),
    "an iterable dataset": (
        "import torch\n\nclass D(torch.utils.data.IterableDataset):\n"
        "    def __iter__(self): return iter([])\n\ndef make():\n    return D(), D()\n",
        "is an IterableDataset",
    ),
    "an item that raises": (
        "import torch\n\nclass D(torch.utils.data.Dataset):\n    def __len__(self): return 4\n"
        "    def __getitem__(self, i):\n        if i == 2: raise FileNotFoundError('img_2.png')\n"
        "        return torch.zeros(3, 8, 8), 0\n\ndef make():\n    return D()\n",
        "reading item 2 of the train dataset of badsets:make() raised FileNotFoundError: img_2.png",
    ),
    "four datasets": (
        "from mysets import Pictures\n\ndef make():\n    return Pictures(6), Pictures(6), Pictures(6), Pictures(6)\n",
        "returned 4 datasets",
    ),
    "a text among images": (
        "import torch\n\nclass D(torch.utils.data.Dataset):\n    def __len__(self): return 4\n"
        "    def __getitem__(self, i): return ('a caption' if i == 3 else torch.zeros(3, 8, 8)), i % 2\n\n"
        "def make():\n    return D()\n",
        "item 3 of the train dataset of badsets:make() is a str but item 0 is an image",
    ),
    "images without labels": (
        "import torch\n\nclass D(torch.utils.data.Dataset):\n    def __len__(self): return 4\n"
        "    def __getitem__(self, i): return torch.zeros(3, 8, 8)\n\ndef make():\n    return D()\n",
        "images without labels",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_what_cannot_be_read_is_exit_2_naming_the_field(case, module, capsys, untouched):
    body, phrase = BAD[case]
    (module / "badsets.py").write_text(body)
    sys.modules.pop("badsets", None)
    code, err = run_cli(module, capsys, {"name": "badsets:make"})
    assert code == 2, err
    assert ("dataset.name:" in err or "_column:" in phrase) and phrase in err, err
    assert "Traceback" not in err and not (module / "run" / "result.json").exists()


def test_a_training_run_on_a_dataset_of_pil_images(module, capsys):
    code, err = run_cli(module, capsys, {"name": "mysets:pair", "val_fraction": 0.25}, epochs=1, batch_size=8)
    assert code == 0, err
    assert json.loads((module / "run" / "result.json").read_text())["status"] == "completed"


def test_images_that_would_not_fit_in_memory_are_refused_after_the_first_item(module, capsys, monkeypatch, untouched):
    """Refused from item 0's size before the rest are read (ImageNet in a Dataset would have been
    read to the end first)."""
    from effsearch.trainer.data import memory

    monkeypatch.setattr(memory, "memory_limit", lambda: 36 * 12 * 12 - 1)  # item 0 is grayscale
    code, err = run_cli(module, capsys, {"name": "mysets:pair"})
    assert code == 2 and "dataset.name:" in err, err
    assert "the 36 images of the train dataset of mysets:pair() (1x12x12) take" in err and "a Resize" in err, err


def test_whether_a_callable_returns_texts_is_read_from_its_first_item_only(module):
    """The model's probe asks it before the run reads the data: it had read every item of every
    split, once for each config a study probes."""
    from effsearch.trainer.data.text import token_shape

    (module / "countsets.py").write_text(
        "from mysets import Pictures\n\nREAD = []\n\nclass Counted(Pictures):\n"
        "    def __getitem__(self, i):\n        READ.append(i)\n        return super().__getitem__(i)\n\n"
        "def make():\n    return Counted(36), Counted(12)\n"
    )
    import countsets

    assert token_shape(cfg_of({"name": "countsets:make"}).dataset) is None  # images
    assert countsets.READ == [0]
