"""docs/own-model-and-data.md runs as written: each block in order, in a fresh folder.

A ``<!-- file: NAME -->`` line before a block writes the block to NAME; a ``bash`` block's
lines are effsearch commands (``uv run effsearch ...``), each must exit 0; a ``python`` block
without a file is executed."""

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from effsearch import cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "own-model-and-data.md"
BLOCK = re.compile(r"(?:<!-- file: (?P<file>\S+) -->\n)?```(?P<lang>\w+)\n(?P<body>.*?)```", re.S)


def blocks():
    return [(m["file"], m["lang"], m["body"]) for m in BLOCK.finditer(DOC.read_text())]


def test_the_walkthrough_has_its_parts():
    kinds = [(bool(f), lang) for f, lang, _ in blocks()]
    assert (True, "python") in kinds and (True, "yaml") in kinds and (False, "bash") in kinds
    assert (False, "python") in kinds


@pytest.mark.slow
def test_the_walkthrough_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in ("mymodels", "textmodels", "topics"):  # the page's modules, not ones imported before
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setenv("EFFSEARCH_DATA_DIR", str(tmp_path / "cache"))
    ran = []
    for file, lang, body in blocks():
        if file:
            Path(file).write_text(body)
        elif lang == "bash":
            for line in body.splitlines():
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                words = shlex.split(line, comments=True)
                assert words[:3] == ["uv", "run", "effsearch"], line
                code = cli.main(words[3:])
                out = capsys.readouterr()
                assert code == 0, f"{line}\n{out.err[-2000:]}"
                ran.append(words[3])
        elif lang == "python":
            exec(compile(body, f"{DOC.name} block", "exec"), {"__name__": "walkthrough"})
    assert ran == ["train", "train", "space", "run", "status", "export", "best", "train", "data", "train", "train"]
    assert Path("best.yaml").is_file() and Path("front.csv").is_file()
    # The pattern images are grayscale: ResNet-18's 3-channel stem gets them repeated, and says so.
    resnet = json.loads(Path("runs/resnet18/result.json").read_text())
    assert "1-channel images are repeated to the 3 channels" in resnet["final"]["input_adapted"]
    best = json.loads(Path("runs/best/result.json").read_text())
    assert best["status"] == "completed" and best["config"]["model"]["name"] == "mymodels:small_cnn"
    # Text: the built-in encoder and the page's own model, on the tokens `data prepare` cached.
    for run in ("text", "bag"):
        text = json.loads(Path(f"runs/{run}/result.json").read_text())
        assert text["status"] == "completed" and text["final"]["val_accuracy"] > 0.6, (run, text["final"])
    assert list(Path("cache/text-cache").iterdir())
