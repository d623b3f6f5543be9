"""docs/fields.md is what `python -m effsearch.reference` writes from the declarations, and
every field and study-file key carries its help there."""

import dataclasses
import re
import typing
from pathlib import Path

from effsearch import reference
from effsearch.config import TrainConfig, options
from effsearch.search.pruners import PRUNER_OPTIONS
from effsearch.search.study import studyfile
from effsearch.search.study.samplers import SAMPLER_OPTIONS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "fields.md"


def test_the_committed_page_is_what_the_declarations_write():
    assert PAGE.read_text() == reference.render(), (
        "docs/fields.md is stale: run `python -m effsearch.reference > docs/fields.md`"
    )


def _leaves(cls, prefix=""):
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            yield from _leaves(hints[f.name], f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f


def test_every_field_and_key_has_a_row_with_its_help():
    page = reference.render()
    classes = [
        TrainConfig,
        options.StudyNumbers,
        options.Heartbeat,
        *SAMPLER_OPTIONS.values(),
        *PRUNER_OPTIONS.values(),
        *options.TUNING.values(),
    ]
    for cls in classes:
        for name, f in _leaves(cls):
            assert f.metadata.get("help"), f"{cls.__name__}.{name} has no help= in its spec"
            shown = f.metadata["help"].replace("|", "\\|")[:40]  # the page escapes a table's bars
            row = re.search(rf"^\| `{re.escape(name)}` \|.*\| {re.escape(shown)}", page, re.M)
            assert row, name
    for key in studyfile.KEYS:
        assert key in studyfile.KEY_HELP or hasattr(options.StudyNumbers, key), key
        assert re.search(rf"^\| `{key}` \|", page, re.M), key


def test_a_row_shows_type_default_and_the_allowed_range():
    page = reference.render()
    assert "| `optimizer.momentum` | float | `0.9` | [0, 1) |" in page
    assert "| `dataset.split_seed` | int | `0` | [0, 4294967292] |" in page
    assert "| `n_trials` | int or null | `20` | >= 1 |" in page
    assert "| `precision` | str | `fp32` | fp32, amp_fp16, amp_bf16 |" in page
