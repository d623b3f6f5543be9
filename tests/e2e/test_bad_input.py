"""Every class of bad input is refused before any work: exit code 2 and one line naming the field,
flag or file (never a traceback), with nothing trained, stored or written.

Each class has its own examples; the CLI runs in a subprocess in a fresh folder, as a user runs it,
so a traceback or a stray file (runs/, a journal) shows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from effsearch.config import ConfigError, TrainConfig
from tests.support.helpers import tiny

STUDY = {"base": {**tiny(), "epochs": 1}, "n_trials": 2, "space": {"include": ["optimizer"]}}

# After every test here `git status` and the data folder are as they were (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("untouched")


def effsearch(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "effsearch.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def refused(p: subprocess.CompletedProcess, *named: str, limit: int = 600) -> str:
    """Exit code 2, one short line naming each of ``named``, no traceback."""
    err = p.stderr
    assert p.returncode == 2, (p.returncode, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= limit, (len(lines), len(err), err[:2000])
    for name in named:
        assert name in err, (name, err)
    return err


def files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


# -- 1. files that are not UTF-8 ------------------------------------------------------------------------

LATIN1 = "dataset: {name: digits}  # r\xe9sum\xe9 of the run\nepochs: 1\n".encode("latin-1")
BINARY = bytes(range(128, 256)) * 4  # no valid UTF-8 start byte among them
NULS = b"dataset: {name: digits}\nepochs: 1\x00\x00\x00\n"  # valid UTF-8, but no YAML


@pytest.mark.parametrize(
    "content, words",
    [
        (LATIN1, "not UTF-8 text: byte 0xe9 on line 1"),
        (BINARY, "not UTF-8 text: byte 0x80 on line 1"),
        (NULS, "character #x00 at offset 33 is not allowed"),
    ],
    ids=["latin-1", "binary", "nul"],
)
def test_a_config_file_that_is_not_utf8_text_is_refused_naming_it(tmp_path, content, words):
    (tmp_path / "c.yaml").write_bytes(content)
    before = files(tmp_path)
    refused(effsearch(tmp_path, "train", "c.yaml"), "c.yaml", words)
    assert files(tmp_path) == before  # no runs/ folder


@pytest.mark.parametrize(
    "command", [["run"], ["space", "show"], ["status"], ["export", "-o", "f.csv"], ["best", "-o", "b.yaml"]]
)
def test_a_study_file_that_is_not_utf8_is_refused_by_every_command(tmp_path, command):
    study = tmp_path / "s.yaml"
    study.write_bytes(yaml.safe_dump(STUDY).encode() + "description: \xe9t\xe9\n".encode("latin-1"))
    before = files(tmp_path)
    refused(
        effsearch(
            tmp_path,
            *command[: 2 if command[0] == "space" else 1],
            "s.yaml",
            *command[2 if command[0] == "space" else 1 :],
        ),
        "s.yaml",
        "UTF-8",
    )
    assert files(tmp_path) == before  # no journal, no output file


def test_a_warm_start_config_that_is_not_utf8_is_refused(tmp_path):
    write(tmp_path / "s.yaml", STUDY)
    (tmp_path / "w.yaml").write_bytes(LATIN1)
    before = files(tmp_path)
    refused(effsearch(tmp_path, "run", "s.yaml", "--warm-start", "w.yaml"), "w.yaml", "UTF-8")
    assert files(tmp_path) == before


# -- 3. a key given twice ----------------------------------------------------------------------------------


def test_a_key_given_twice_in_a_config_is_refused_with_its_lines(tmp_path):
    write(tmp_path / "c.yaml", "dataset: {name: digits}\nepochs: 1\nbatch_size: 32\nepochs: 7\n")
    before = files(tmp_path)
    refused(effsearch(tmp_path, "train", "c.yaml"), "c.yaml", "epochs", "line 2", "line 4")
    assert files(tmp_path) == before
    # Nested, and in flow style: the same.
    write(tmp_path / "c.yaml", "dataset: {name: digits}\noptimizer:\n  lr: 0.1\n  name: sgd\n  lr: 0.3\n")
    with pytest.raises(ConfigError, match=r"c.yaml: optimizer.lr: given twice \(line 3 and line 5\)"):
        TrainConfig.from_yaml(tmp_path / "c.yaml")
    write(tmp_path / "c.yaml", "dataset: {name: digits, name: fashion-mnist}\n")
    with pytest.raises(ConfigError, match=r"dataset.name: given twice \(line 1 and line 1\)"):
        TrainConfig.from_yaml(tmp_path / "c.yaml")


def test_a_key_given_twice_in_a_study_file_is_refused(tmp_path):
    write(tmp_path / "s.yaml", yaml.safe_dump(STUDY) + "n_trials: 50\n")
    before = files(tmp_path)
    refused(effsearch(tmp_path, "run", "s.yaml"), "s.yaml", "n_trials: given twice")
    assert files(tmp_path) == before


def test_a_key_given_twice_in_a_set_value_is_refused_naming_set(tmp_path):
    write(tmp_path / "c.yaml", tiny())
    refused(
        effsearch(tmp_path, "train", "c.yaml", "--set", "algorithms={ema: {}, ema: {half_life: 2ba}}"),
        "--set",
        "algorithms.ema: given twice",
    )


def test_a_merge_key_overridden_once_is_not_a_duplicate(tmp_path):
    # `<<: *base` then a key of its own is YAML's way to override a merged key, not a repeat.
    text = "dataset: {name: digits}\noptimizer:\n  <<: {lr: 0.1, momentum: 0.8}\n  lr: 0.3\n"
    write(tmp_path / "c.yaml", text)
    cfg = TrainConfig.from_yaml(tmp_path / "c.yaml")
    assert (cfg.optimizer.lr, cfg.optimizer.momentum) == (0.3, 0.8)


# -- 7. values echoed whole ------------------------------------------------------------------------------


def laughs(levels: int = 9) -> str:
    """A 'billion laughs' list: each anchor repeats the one before nine times (9**levels strings)."""
    parts = ["&a [" + ", ".join(["lol"] * 9) + "]"]
    for i in range(1, levels):
        parts.append(f"&{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 9) + "]")
    return "[" + ", ".join(parts) + "]"


def test_an_alias_bomb_is_refused_naming_the_file(tmp_path):
    write(tmp_path / "c.yaml", f"dataset: {{name: digits}}\nepochs: {laughs()}\n")
    assert (tmp_path / "c.yaml").stat().st_size < 500
    before = files(tmp_path)
    refused(effsearch(tmp_path, "train", "c.yaml", timeout=60), "c.yaml", "aliases")
    assert files(tmp_path) == before
    write(tmp_path / "s.yaml", yaml.safe_dump(STUDY) + f"description: {laughs()}\n")
    refused(effsearch(tmp_path, "run", "s.yaml", timeout=60), "s.yaml", "aliases")
    write(tmp_path / "c.yaml", tiny())
    refused(
        effsearch(tmp_path, "train", "c.yaml", "--set", f"model.kwargs={{x: {laughs()}}}", timeout=60),
        "--set",
        "aliases",
    )


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path):
    write(tmp_path / "c.yaml", "dataset: {name: digits}\nschedule: {milestones: &m [0.5, *m]}\n")
    refused(effsearch(tmp_path, "train", "c.yaml"), "c.yaml", "alias")


def test_values_nested_hundreds_deep_are_refused(tmp_path):
    write(tmp_path / "c.yaml", "dataset: {name: digits}\nepochs: " + "[" * 3000 + "]" * 3000 + "\n")
    refused(effsearch(tmp_path, "train", "c.yaml"), "c.yaml", "nested more than 100 levels deep (line 2)")
    write(tmp_path / "s.yaml", {**STUDY, "name": "s"})
    write(tmp_path / "w.yaml", "".join("  " * i + "k:\n" for i in range(1000)) + "  " * 1000 + "1\n")
    refused(
        effsearch(tmp_path, "run", "s.yaml", "--warm-start", "w.yaml"),
        "w.yaml",
        "--warm-start",
        "more than 100 levels deep",
    )
    assert files(tmp_path) == ["c.yaml", "s.yaml", "w.yaml"]


def _deep(shape: str, n: int) -> str:
    """A YAML document whose values nest ``n`` levels deep."""
    return {
        "flow": "[" * n + "]" * n,
        "items": "[1, " * n + "]" * n,
        "mappings": "{a: " * n + "1" + "}" * n,
        "block": "".join("  " * i + "k:\n" for i in range(n)) + "  " * n + "1\n",
        "dashes": "- " * n + "1\n",
        "mixed": "a:\n  - " + "{b: " * (n - 2) + "1" + "}" * (n - 2),
    }[shape]


SHAPES = ["flow", "items", "mappings", "block", "dashes", "mixed"]


def _depth(value) -> int:
    inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    return 0 if inner is None else 1 + max(map(_depth, inner), default=0)


@pytest.mark.parametrize("shape", SHAPES)
def test_values_nest_up_to_the_depth_limit_and_no_deeper(shape):
    from effsearch.config.fields import DEPTH_LIMIT, load_yaml

    assert _depth(load_yaml(_deep(shape, DEPTH_LIMIT))) == DEPTH_LIMIT
    with pytest.raises(ConfigError) as e:
        load_yaml(_deep(shape, DEPTH_LIMIT + 1))
    assert e.value.message.startswith(f"values nested more than {DEPTH_LIMIT} levels deep (line ")


@pytest.mark.parametrize("shape", SHAPES)
def test_a_deep_document_is_refused_as_it_is_scanned_before_it_is_composed(shape, monkeypatch):
    """Refused where the scanner reaches the limit: composing stops there (PyYAML composes
    recursively), the recursive checks never run, and the scanner's work stays that of
    DEPTH_LIMIT levels, not of the document's 3,000 (on nested `[` it grows with the square of
    the depth: millions of simple-key checks, most of a refusal's time)."""
    from effsearch.config import fields as F

    work = {"compose_node": 0, "key_checks": 0, "walks": 0}
    compose, stale = yaml.composer.Composer.compose_node, yaml.scanner.Scanner.stale_possible_simple_keys

    def counted_compose(self, *args):
        work["compose_node"] += 1
        return compose(self, *args)

    def counted_stale(self):
        work["key_checks"] += len(self.possible_simple_keys)
        return stale(self)

    def walk(*args):
        work["walks"] += 1

    monkeypatch.setattr(yaml.composer.Composer, "compose_node", counted_compose)
    monkeypatch.setattr(yaml.scanner.Scanner, "stale_possible_simple_keys", counted_stale)
    monkeypatch.setattr(F, "check_aliases", walk)
    monkeypatch.setattr(F, "check_duplicates", walk)
    with pytest.raises(ConfigError, match=f"more than {F.DEPTH_LIMIT} levels deep"):
        F.load_yaml(_deep(shape, 3000))
    assert work["walks"] == 0
    assert work["compose_node"] <= 2 * F.DEPTH_LIMIT + 2  # a key and a value a level, at most
    assert work["key_checks"] <= 5 * F.DEPTH_LIMIT**2, work


def test_a_few_aliases_are_fine(tmp_path):
    write(
        tmp_path / "c.yaml",
        "dataset: &d {name: digits}\nmodel: {name: torchvision:resnet18, kwargs: {a: &l [1, 2, 3], b: *l}}\n",
    )
    assert TrainConfig.from_yaml(tmp_path / "c.yaml").model.kwargs == {"a": [1, 2, 3], "b": [1, 2, 3]}


@pytest.mark.parametrize("key", ["batch_size", "optimizer.name", "algorithms.mixup.alpha", "sampler", "seed"])
def test_a_huge_value_is_quoted_short(tmp_path, key):
    huge = "x" * 100_000
    if key in ("sampler", "seed"):  # a study file's
        write(tmp_path / "s.yaml", {**STUDY, key: huge})
        p = effsearch(tmp_path, "run", "s.yaml")
    else:
        write(tmp_path / "c.yaml", tiny(**{key: huge}))
        p = effsearch(tmp_path, "train", "c.yaml")
    err = refused(p, key)
    assert "xxx" in err and "100,000 characters" in err  # part of it, and how long it was


def test_a_huge_set_value_is_quoted_short(tmp_path):
    write(tmp_path / "c.yaml", tiny())
    refused(effsearch(tmp_path, "train", "c.yaml", "--set", "epochs=" + "9" * 50_000 + "x"), "epochs")
    refused(effsearch(tmp_path, "train", "c.yaml", "--set", "y" * 100_000), "--set", "KEY=VALUE")


# -- 2. values the schema took but the library receiving them does not -----------------------------------


@pytest.mark.parametrize(
    "item, field",
    [
        ("seed=4294967296", "seed"),
        ("seed=99999999999999999999999", "seed"),
        ("dataset.split_seed=4294967295", "dataset.split_seed"),
    ],
)
def test_a_seed_no_receiver_takes_is_refused_before_training(tmp_path, item, field):
    # Composer's seed_all, np.random.seed and scikit-learn's random_state take [0, 2**32 - 1]; the
    # data splits draw with split_seed + 1..3.
    write(tmp_path / "c.yaml", tiny())
    before = files(tmp_path)
    refused(effsearch(tmp_path, "train", "c.yaml", "--set", item), "--set", f"{field}: must be in [0, ")
    assert files(tmp_path) == before
    assert TrainConfig.from_dict(tiny(seed=2**32 - 1, **{"dataset.split_seed": 2**32 - 4})).seed == 2**32 - 1


def test_a_study_seed_optuna_cannot_take_is_refused_before_the_study_is_made(tmp_path):
    write(tmp_path / "s.yaml", {**STUDY, "seed": 2**32})
    before = files(tmp_path)
    refused(effsearch(tmp_path, "run", "s.yaml"), "s.yaml", "seed: must be in [0, 4294967295]")
    assert files(tmp_path) == before  # no journal: the study was never created


def test_phase_two_seeds_past_the_bound_are_refused(tmp_path):
    from effsearch.search.study import studyfile

    study = {**STUDY, "base": {**STUDY["base"], "seed": 2**32 - 2}, "tuning": {"name": "subset", "seeds": 3}}
    with pytest.raises(ConfigError, match=r"tuning.seeds: .*seeds base.seed \+ 0..2"):
        studyfile.from_mapping(study, tmp_path / "s.yaml")
    assert studyfile.from_mapping({**study, "tuning": {"name": "subset", "seeds": 2}}, tmp_path / "s.yaml")


# Each: the parameters, and what the error says (None: allowed, and Composer builds it).
TIMES = [
    ("ema", {"half_life": "100xx"}, "a number and a unit"),
    ("ema", {"half_life": "1.5ba"}, "a whole number"),
    ("ema", {"half_life": "0ba"}, "must be more than 0"),
    ("ema", {"half_life": "10dur"}, "unit 'dur' is not allowed for half_life (allowed: ba batches, ep epochs)"),
    ("ema", {"half_life": "5ep", "update_interval": "1ba"}, "the same unit as half_life"),
    ("ema", {"update_interval": "3sp"}, "unit 'sp' is not allowed for update_interval"),
    ("ema", {"ema_start": "7tok"}, "unit 'tok'"),
    ("ema", {"ema_start": "1.5dur"}, "in [0, 1]"),
    ("ema", {"ema_start": "inf ba"}, "a number and a unit"),
    ("ema", {"smoothing": 0.99}, "half_life or smoothing, not both"),
    ("ema", {"half_life": None}, "half_life or smoothing"),
    ("ema", {"smoothing": 0.99, "half_life": None}, "needs update_interval"),
    ("ema", {"half_life": 100}, "must be a Composer time string"),
    ("swa", {"swa_start": "0.9dur", "swa_end": "0.8dur"}, "must be after swa_start"),
    ("swa", {"swa_start": "0.8dur", "swa_end": "0.8dur"}, "must be after swa_start"),
    ("swa", {"swa_start": "2ep", "swa_end": "0.9dur"}, "the same unit as swa_start"),
    ("swa", {"swa_start": "100ba", "swa_end": "200ba"}, "unit 'ba' is not allowed for swa_start"),
    ("swa", {"update_interval": "0.5dur"}, "unit 'dur' is not allowed for update_interval"),
    ("swa", {"anneal_steps": 0}, "must be in [1, "),
    ("ema", {"half_life": "1e3ba", "ema_start": "0.1dur"}, None),
    ("ema", {"half_life": "2ep", "update_interval": "1ep", "ema_start": "100sp"}, None),
    ("ema", {"smoothing": 0.99, "half_life": None, "update_interval": "1ep"}, None),
    ("swa", {"swa_start": "2ep", "swa_end": "4ep", "update_interval": "10ba"}, None),
    ("swa", {"swa_start": "0.5dur", "swa_end": "1dur"}, None),
]


@pytest.mark.parametrize("algo, params, message", TIMES)
def test_composer_time_strings_are_checked_at_load(algo, params, message):
    cfg = tiny(algorithms={algo: dict(params)})
    if message is None:
        assert TrainConfig.from_dict(cfg).algorithms[algo] == params
    else:
        with pytest.raises(ConfigError, match=rf"^algorithms\.{algo}(\.\w+)?: .*{re.escape(message)}"):
            TrainConfig.from_dict(cfg)


def test_what_the_check_allows_composer_builds_and_what_composer_refuses_the_check_refuses():
    """The time-string check agrees with Composer's own constructors, without importing Composer."""
    import composer.algorithms as ca

    from effsearch.config.algorithms import ALGORITHMS

    for algo, params, message in TIMES:
        spec = ALGORITHMS[algo]
        try:
            getattr(ca, spec.composer_name)(**{**spec.params, **params})
            built = True
        except (ValueError, TypeError, OverflowError, ZeroDivisionError, AttributeError):
            built = False
        if message is None or not built:  # ours may refuse more (a unit the loop never counts, a 0)
            assert built == (message is None), (algo, params)


def test_a_bad_time_string_in_a_warm_start_is_refused_at_load(tmp_path):
    write(tmp_path / "s.yaml", {**STUDY, "warm_start": [{"algorithms": {"ema": {"half_life": "100xx"}}}]})
    before = files(tmp_path)
    refused(effsearch(tmp_path, "run", "s.yaml"), "s.yaml", "warm_start[0].algorithms.ema.half_life")
    assert files(tmp_path) == before


def test_a_bad_time_string_is_refused_before_training(tmp_path):
    write(tmp_path / "c.yaml", tiny(algorithms={"swa": {"swa_start": "0.9dur", "swa_end": "0.5dur"}}))
    before = files(tmp_path)
    refused(effsearch(tmp_path, "train", "c.yaml"), "c.yaml", "algorithms.swa.swa_end")
    assert files(tmp_path) == before


# -- 4. output paths checked only after the work ----------------------------------------------------------


@pytest.mark.parametrize(
    "out, words",
    [("a-file", "a-file is a file"), ("a-file/run", "a-file is a file"), ("taken", "taken/result.json is a folder")],
)
def test_train_refuses_an_output_folder_it_cannot_write_before_training(tmp_path, out, words):
    write(tmp_path / "c.yaml", tiny())
    (tmp_path / "a-file").write_text("mine\n")
    (tmp_path / "taken" / "result.json").mkdir(parents=True)
    before = files(tmp_path)
    refused(effsearch(tmp_path, "train", "c.yaml", "--out", out), "--out", words)
    assert files(tmp_path) == before and (tmp_path / "a-file").read_text() == "mine\n"


def test_train_refuses_a_default_output_folder_it_cannot_write(tmp_path):
    write(tmp_path / "c.yaml", tiny())
    (tmp_path / "runs").write_text("not a folder\n")
    refused(effsearch(tmp_path, "train", "c.yaml"), "--out", "runs is a file")


def test_the_api_refuses_the_same_output_folders(tmp_path):
    import effsearch

    (tmp_path / "a-file").write_text("mine\n")
    for out in ("a-file", "a-file/run"):
        with pytest.raises(ConfigError, match=r"^out_dir: .*a-file is a file"):
            effsearch.train(tiny(), out_dir=tmp_path / out, progress=False)


@pytest.fixture
def never_opened(monkeypatch):
    """The stored study, never read: the output is checked first."""
    from effsearch.search.results import lookup

    def refuse(*args, **kwargs):
        raise AssertionError("the study was read before the output path was checked")

    monkeypatch.setattr(lookup, "open_study", refuse)


@pytest.mark.parametrize(
    "command, out, words",
    [
        ("export", "a-file/front.csv", "a-file is a file"),
        ("export", "a-folder.csv", "a-folder.csv is a folder"),
        ("best", "a-file/best.yaml", "a-file is a file"),
        ("best", "a-folder.csv", "a-folder.csv is a folder"),
    ],
)
def test_export_and_best_refuse_an_output_file_before_reading_the_study(
    tmp_path, monkeypatch, capsys, never_opened, command, out, words
):
    from effsearch.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("mine\n")
    (tmp_path / "a-folder.csv").mkdir()
    assert main([command, "fake", "--storage", str(tmp_path / "s.journal"), "-o", out]) == 2
    err = capsys.readouterr().err
    assert "-o: " in err and words in err, err


# -- 5. no upper bound on workers ----------------------------------------------------------------------


def test_more_workers_than_cores_are_refused_naming_the_flag_or_the_field(tmp_path):
    from effsearch.config.machine import cpu_cores

    write(tmp_path / "s.yaml", STUDY)
    before = files(tmp_path)
    cores = cpu_cores()
    refused(
        effsearch(tmp_path, "run", "s.yaml", "--workers", str(cores + 1)),
        "--workers",
        f"must be at most {cores} here",
        f"got {cores + 1}",
    )
    write(tmp_path / "s.yaml", {**STUDY, "workers": 1000})
    refused(effsearch(tmp_path, "run", "s.yaml"), "s.yaml: workers: must be at most")
    assert files(tmp_path) == before


def test_workers_are_bounded_by_the_gpus_on_a_gpu_machine(tmp_path):
    """One worker per GPU (each pinned to its own), whatever the cores: a trial timed on a GPU
    another trial uses measures both (tests/search/test_devices.py has the rest)."""
    from effsearch.config.machine import Machine
    from effsearch.search.study import studyfile

    gpu = Machine("cuda", cores=4, gpus=8)
    assert studyfile.from_mapping({**STUDY, "workers": 8}, tmp_path / "s.yaml", machine=gpu).workers == 8
    assert studyfile.from_mapping(STUDY, tmp_path / "s.yaml", machine=gpu).workers == 8  # auto
    with pytest.raises(
        ConfigError, match=r"s.yaml: workers: 9 workers x one GPU a trial need 9 GPUs; this machine shows 8"
    ):
        studyfile.from_mapping(STUDY, tmp_path / "s.yaml", machine=gpu, workers=9)


# -- 6. messages that blame the wrong thing ------------------------------------------------------------


@pytest.mark.parametrize("item", ["=5", ".lr=0.1", "optimizer..lr=0.1", "optimizer lr=0.1"])
def test_a_malformed_set_names_set_not_the_file(tmp_path, item):
    write(tmp_path / "c.yaml", tiny())
    err = refused(effsearch(tmp_path, "train", "c.yaml", "--set", item), "--set", "dotted field name")
    assert "c.yaml" not in err


def test_a_bad_set_value_names_set_and_a_bad_file_value_names_the_file(tmp_path):
    write(tmp_path / "c.yaml", tiny(batch_size=0))
    refused(effsearch(tmp_path, "train", "c.yaml", "--set", "optimizer.lr=0.1"), "c.yaml: batch_size")
    write(tmp_path / "c.yaml", tiny())
    err = refused(effsearch(tmp_path, "train", "c.yaml", "--set", "batch_size=0"), "--set: batch_size")
    assert "c.yaml" not in err


ARGS = {"export": ["-o", "front.csv"], "best": ["-o", "best.yaml"]}


@pytest.mark.parametrize("command", ["status", "export", "best", "dashboard"])
def test_a_missing_storage_is_exit_2_in_every_command(tmp_path, command):
    before = files(tmp_path)
    refused(
        effsearch(tmp_path, command, "s", "--storage", "none.journal", *ARGS.get(command, [])),
        "--storage: no study storage at",
        "none.journal",
        "no studies there",
    )
    assert files(tmp_path) == before  # the journal was not made


@pytest.mark.parametrize("command", ["status", "export", "best", "dashboard"])
def test_an_unknown_study_name_is_exit_2_in_every_command_listing_the_studies(tmp_path, storage_path, command):
    refused(
        effsearch(tmp_path, command, "nope", "--storage", str(storage_path), *ARGS.get(command, [])),
        "study: no study 'nope'",
        "(studies there: fake, misses)",
    )
    refused(effsearch(tmp_path, command, "nope", *ARGS.get(command, [])), "study: 'nope' is neither a study file")
    assert files(tmp_path) == []


# -- 9. a read that writes --------------------------------------------------------------------------------


def other_database(path: Path) -> Path:
    import sqlite3

    con = sqlite3.connect(path)
    con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    con.execute("INSERT INTO invoices (total) VALUES (12.5)")
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("command", ["status", "export", "best", "dashboard"])
def test_a_database_that_is_no_study_storage_is_refused_and_left_as_it_was(tmp_path, command):
    import sqlite3

    db = other_database(tmp_path / "books.db")
    data, mtime = db.read_bytes(), db.stat().st_mtime_ns
    refused(
        effsearch(tmp_path, command, "s", "--storage", "books.db", *ARGS.get(command, [])),
        "--storage",
        "books.db is a database but no study storage",
        "no Optuna tables",
    )
    assert db.read_bytes() == data and db.stat().st_mtime_ns == mtime
    con = sqlite3.connect(db)
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["invoices"]
    con.close()
    assert files(tmp_path) == ["books.db"]


def test_a_file_that_is_no_database_is_refused_naming_storage(tmp_path):
    (tmp_path / "notes.db").write_text("shopping: eggs, milk\n")
    refused(
        effsearch(tmp_path, "status", "s", "--storage", "notes.db"),
        "--storage",
        "cannot read",
        "notes.db as an SQLite database",
    )
    assert (tmp_path / "notes.db").read_text() == "shopping: eggs, milk\n"


def test_an_optuna_sqlite_storage_still_opens(tmp_path):
    import optuna

    url = f"sqlite:///{tmp_path / 'ok.db'}"
    optuna.create_study(study_name="s", storage=url, directions=["minimize", "maximize"])
    p = effsearch(tmp_path, "status", "s", "--storage", url)
    assert p.returncode == 0, p.stderr


# -- 8. switches: null and false turn an algorithm off ------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "value, on",
    [("null", False), ("~", False), ("false", False), ("{}", True), ("true", True), ("{smoothing: 0.2}", True)],
)
def test_null_and_false_turn_an_inherited_algorithm_off(value, on):
    base = ROOT / "configs" / "quickstart.yaml"
    assert "label_smoothing" in TrainConfig.from_yaml(base).algorithms  # on in the file
    cfg = TrainConfig.from_yaml(base, [f"algorithms.label_smoothing={value}"])
    assert ("label_smoothing" in cfg.algorithms) == on, cfg.algorithms
    if value in ("{}", "true"):
        assert cfg.algorithms["label_smoothing"] == {}  # on, with Composer's defaults


def test_a_baseline_or_warm_start_turns_off_what_base_has(tmp_path):
    from effsearch.search.study import studyfile

    study = {
        **STUDY,
        "base": {**STUDY["base"], "algorithms": {"label_smoothing": {}, "blurpool": {}}},
        "baseline": {"algorithms.blurpool": None},
        "warm_start": [{"algorithms.label_smoothing": False}],
    }
    spec = studyfile.from_mapping(study, tmp_path / "s.yaml")
    assert set(spec.base.algorithms) == {"label_smoothing", "blurpool"}
    assert set(spec.baseline.algorithms) == {"label_smoothing"}
    assert set(spec.warm_start[0][1].algorithms) == {"blurpool"}


def test_an_unknown_algorithm_turned_off_is_still_refused():
    with pytest.raises(ConfigError, match="algorithms.blurpol: unknown algorithm"):
        TrainConfig.from_dict(tiny(algorithms={"blurpol": None}))


def test_the_help_and_the_guide_say_how_to_turn_one_off():
    help_text = effsearch(ROOT, "train", "--help").stdout
    assert "algorithms.NAME=null" in " ".join(help_text.split())
    guide = (ROOT / "docs" / "guide.md").read_text()
    row = next(line for line in guide.splitlines() if line.startswith("| `algorithms`"))
    assert "null" in row and "{}" in row


# -- 10. a second Ctrl-C while the partial result is written ---------------------------------------------


def partial_result():
    from effsearch.trainer.result import RunResult

    return RunResult(
        status="interrupted",
        config=tiny(),
        reason="interrupted by the user (Ctrl-C)",
        history=[{"epoch": 1.0, "train_seconds": 2.5, "val_accuracy": 0.4}],
    )


@pytest.fixture
def python_ctrl_c():
    """Python's own SIGINT handler (KeyboardInterrupt), as a run has it (Composer's import, earlier in
    this session, puts in one that exits)."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_during_the_write_leaves_result_json_and_no_temporary_file(tmp_path, monkeypatch, python_ctrl_c):
    import os
    import signal
    import tempfile

    from effsearch.trainer.result import RunResult

    made = tempfile.mkstemp

    def then_ctrl_c(*args, **kwargs):  # the temporary file is there, empty, when Ctrl-C comes
        out = made(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return out

    monkeypatch.setattr(tempfile, "mkstemp", then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):  # it still interrupts: once the file is in place
        partial_result().save(tmp_path / "run" / "result.json")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["result.json"]
    assert RunResult.load(tmp_path / "run" / "result.json").status == "interrupted"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C is itself again


def test_a_keyboard_interrupt_raised_inside_the_write_still_leaves_result_json(tmp_path, monkeypatch):
    import os

    from effsearch.trainer.result import RunResult

    renamed = os.replace
    calls = []

    def interrupted_once(src, dst):  # as a Ctrl-C handled just before the hold began would
        calls.append(src)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return renamed(src, dst)

    monkeypatch.setattr(os, "replace", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        partial_result().save(tmp_path / "result.json")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]
    assert RunResult.load(tmp_path / "result.json").history[0].val_accuracy == 0.4


# -- bad input that writes: a data folder that is not there --------------------------------------------


def test_a_missing_data_dir_is_refused_leaving_no_folders(tmp_path):
    """Fashion-MNIST is not in --data-dir and cannot be downloaded (the tests run offline):
    refused naming the folder, and the folders torchvision made for its download are gone."""
    write(tmp_path / "c.yaml", {**tiny(), "dataset": {"name": "fashion-mnist"}})
    missing = tmp_path / "nodir" / "sub"

    def refused_data(*args):  # (train prints the run's header line first)
        p = effsearch(tmp_path, "train", "c.yaml", *args)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
        assert "dataset.name: Fashion-MNIST not found in" in p.stderr.splitlines()[-1], p.stderr
        return p.stderr

    assert str(missing) in refused_data("--data-dir", str(missing))
    assert files(tmp_path) == ["c.yaml"]
    (tmp_path / "mine").mkdir()  # an existing folder keeps what it had, and gains nothing
    (tmp_path / "mine" / "mine.txt").write_text("a user's file")
    refused_data("--data-dir", "mine")
    assert files(tmp_path) == ["c.yaml", "mine", "mine/mine.txt"]


# -- misleading messages: a dashboard --host that names no address --------------------------------------


def test_a_dashboard_host_that_does_not_resolve_is_the_flags_error_before_anything_is_printed(tmp_path, storage_path):
    p = effsearch(tmp_path, "dashboard", "fake", "--storage", str(storage_path), "--host", "no-such-host.invalid")
    refused(p, "--host", "no-such-host.invalid")
    assert p.stdout == ""  # no header, no "Listening on"


# -- refused before the expensive set-up, with nothing imported that the refusal did not need -----------

HEAVY = ("torch", "torchvision", "composer", "sklearn", "ffcv")
IMPORTED = """
import sys
import effsearch
from effsearch.config import ConfigError
try:
    {call}
except ConfigError as e:
    print("refused", e)
print(sorted(m for m in {heavy!r} if m in sys.modules))
"""


def imported_at_refusal(cwd: Path, call: str) -> tuple[str, list[str]]:
    """Run ``call`` in a fresh Python: (its ConfigError, the heavy modules imported by then)."""
    p = subprocess.run(
        [sys.executable, "-c", IMPORTED.format(call=call, heavy=HEAVY)], cwd=cwd, capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr[-2000:]
    refusal, modules = p.stdout.strip().splitlines()[-2:]
    return refusal, eval(modules)


def test_each_refusal_comes_before_the_imports_it_does_not_need(tmp_path):
    """A model path that does not resolve: before torch; a user's data that is bad, or a model that
    does not fit the data: before torchvision (it imports torch._dynamo) and Composer; a study
    file's bad number: before torch (the machine) and FFCV (the space)."""
    import numpy as np

    (tmp_path / "empty_model.py").write_text(
        "import torch\n\nclass Empty(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x.new_zeros(len(x), 10)\n\ndef make(num_classes, in_channels):\n    return Empty()\n"
    )
    x = np.zeros((30, 12, 12, 3), np.uint8)
    np.savez(tmp_path / "d.npz", x_train=x[:20], y_train=np.arange(20) % 3, x_test=x[20:])
    write(tmp_path / "s.yaml", {**STUDY, "n_trials": 0})
    train = "effsearch.train({{'dataset': {dataset}, 'model': {{'name': {model!r}}}, 'device': 'cpu'}}, progress=False)"
    cases = [
        (train.format(dataset="{'name': 'synthetic'}", model="no_such_module:cnn"), "model.name", []),
        (train.format(dataset="{'name': 'npz', 'path': 'd.npz'}", model="tiny-cnn"), "y_test", ["torch"]),
        (train.format(dataset="{'name': 'synthetic'}", model="empty_model:make"), "no parameters", ["torch"]),
        ("effsearch.run_study('s.yaml')", "n_trials", []),
    ]
    for call, words, heavy in cases:
        refusal, modules = imported_at_refusal(tmp_path, call)
        assert refusal.startswith("refused") and words in refusal, (call, refusal)
        assert modules == heavy, (call, modules)


def test_a_model_without_parameters_is_refused_naming_the_field(tmp_path):
    """Right logits, and nothing to train: refused as the model's fault (it trained ~20 s, then
    the optimizer raised on an empty parameter list, exit 1 with a traceback and a failed result)."""
    (tmp_path / "empty_model.py").write_text(
        "import torch\n\nclass Empty(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x.new_zeros(len(x), 10)\n\ndef make(num_classes, in_channels):\n    return Empty()\n"
    )
    write(tmp_path / "c.yaml", tiny(model={"name": "empty_model:make"}))
    before = files(tmp_path)
    refused(effsearch(tmp_path, "train", "c.yaml"), "c.yaml: model.name: ", "has no parameters to train")
    assert [f for f in files(tmp_path) if "__pycache__" not in f] == before  # no runs/, no result.json


@pytest.mark.parametrize(
    "stop_in, written",
    [("load_splits", False), ("_quiet_composer", True)],
    ids=["loading the data", "importing Composer"],
)
def test_ctrl_c_says_what_it_wrote(tmp_path, monkeypatch, capsys, python_ctrl_c, stop_in, written):
    """Ctrl-C while the data loads: no result yet, and the message says so (it said a partial result
    was written); later in the set-up the run writes one, status interrupted, and says where."""
    from effsearch.cli import main
    from effsearch.trainer import training

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(training, stop_in, ctrl_c)
    write(tmp_path / "c.yaml", tiny())
    out = tmp_path / "run"
    assert main(["train", str(tmp_path / "c.yaml"), "--out", str(out), "--quiet"]) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    if written:
        assert err == f"interrupted: partial result written to {out / 'result.json'}"
        assert json.loads((out / "result.json").read_text())["status"] == "interrupted"
    else:
        assert err == "interrupted: nothing was written" and not out.exists()
        out.mkdir()
        (out / "result.json").write_text("{}")  # an earlier run's, left as it was
        assert main(["train", str(tmp_path / "c.yaml"), "--out", str(out), "--quiet"]) == 130
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err == f"interrupted: nothing was written ({out / 'result.json'} is an earlier run's)"
        assert (out / "result.json").read_text() == "{}"


def test_a_study_that_asked_only_for_recipes_this_machine_skips_warns_on_stderr(tmp_path):
    """bf16 needs a GPU: on this CPU the only recipe asked for is skipped, and the study would
    queue nothing of what it was asked to; it says so as a warning, not only as a header's note."""
    write(tmp_path / "s.yaml", {**STUDY, "warm_start": ["recipe:bf16-channels-last"]})
    p = effsearch(tmp_path, "space", "show", "s.yaml")
    assert p.returncode == 0, p.stderr[-2000:]
    warning = [line for line in p.stderr.splitlines() if line.startswith("warning: warm_start: ")]
    assert len(warning) == 1 and "recipe:bf16-channels-last skipped" in warning[0], p.stderr
    write(tmp_path / "s.yaml", {**STUDY, "warm_start": ["recipe:bf16-channels-last", "recipe:one-cycle"]})
    assert "warning" not in effsearch(tmp_path, "space", "show", "s.yaml").stderr  # one of them runs


def test_a_plugin_flag_error_names_the_flag(tmp_path):
    write(tmp_path / "c.yaml", tiny())
    write(tmp_path / "s.yaml", STUDY)
    for command in (["train", "c.yaml"], ["run", "s.yaml"], ["space", "show", "s.yaml"]):
        err = refused(effsearch(tmp_path, *command, "--plugin", "no_such_plugin"), "--plugin: no module named")
        assert "plugins[" not in err


# -- train's refusals found in set-up, and a study file given to train -------------------------------


def test_a_refusal_found_when_the_data_is_read_names_the_config_file_and_says_nothing_was_written(tmp_path):
    """A refusal found after the file was read (the data's path, here) named no file, and came after
    a line `effsearch train: c.yaml -> runs/.../result.json` that suggested a result was written."""
    write(tmp_path / "c.yaml", tiny(dataset={"name": "npz", "path": "nowhere.npz"}))
    before = files(tmp_path)
    err = refused(effsearch(tmp_path, "train", "c.yaml"), "effsearch: error: c.yaml: dataset.path: ", "does not exist")
    assert "result.json" not in err, err
    assert files(tmp_path) == before


def test_a_study_file_given_to_train_is_said_to_be_one(tmp_path):
    """Its keys read as unknown (`name: unknown key; allowed keys here: dataset, ...`)."""
    write(tmp_path / "s.yaml", {"name": "mine", **STUDY})
    err = refused(effsearch(tmp_path, "train", "s.yaml"), "s.yaml: ", "is a study file", "effsearch run")
    assert "unknown key" not in err, err
    from effsearch.api import load_config

    with pytest.raises(ConfigError, match="is a study file"):
        load_config(tmp_path / "s.yaml")


def test_one_string_where_the_api_takes_a_list_is_refused_with_the_list_to_write(tmp_path):
    """Its characters had been read one by one: `--set: expected KEY=VALUE, got 'e'`, a plugin `j`."""
    import effsearch

    with pytest.raises(ConfigError) as e:
        effsearch.load_config({"epochs": 1}, "epochs=2")
    assert e.value.field == "overrides" and "(write ['epochs=2'])" in e.value.message, e.value
    assert effsearch.load_config({"epochs": 1}, ["epochs=2"]).epochs == 2
    with pytest.raises(ConfigError, match=r"^plugins: must be a list of module names; got the string 'json'"):
        effsearch.train({"epochs": 1}, plugins="json")
    with pytest.raises(ConfigError, match=r"^warm_start: must be a list"):
        effsearch.run_study({"base": {"epochs": 1}}, warm_start="best.yaml", folder=tmp_path)
    assert not list(tmp_path.iterdir())
