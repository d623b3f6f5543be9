"""config/rules.py on raw config dicts: each rule refuses what it says, with its field and words,
reads the schema's defaults where a level is missing, and lets the valid neighbour through; and
the space's view of the rules (of, blockers, reads, when_text)."""

import ast
from pathlib import Path

import pytest

from effsearch.config import ConfigError, TrainConfig, readers, rules
from effsearch.config.fields import get_path
from effsearch.config.sources import ModelFacts, remember
from effsearch.spaces import algorithm_dims
from effsearch.spaces import default as default_space

# A model probed as having none of the structures algorithms need (what the trainer's probe
# would record for a plain MLP).
BARE = {"name": "tests.rules_bare:build"}
remember(BARE, ModelFacts(bottleneck=False, batchnorm=False, downsamples=False, final_linear=False))


def refused(cfg: dict) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        rules.check(cfg)
    return e.value


@pytest.mark.parametrize(
    "cfg",
    [
        {},  # every level missing: the schema's defaults, which are valid
        {"dataset": {"name": "imagefolder", "path": "/data/x"}},
        {"model": {"name": "resnet9", "width": 16}},
        {"schedule": {"name": "multistep", "milestones": [0.3, 0.6]}},
        {"schedule": {"name": "multistep"}},  # the default milestones
        {"schedule": {"milestones": [2.0]}},  # not multistep: milestones unread
        {"sparsity": {"target": 0.5, "start": 0.2, "end": 0.3}},
        {"sparsity": {"target": 0.5, "schedule": "constant", "start": 0.5, "end": 0.5}},
        {"sparsity": {"target": 0.0, "start": 0.5, "end": 0.5}},
        {"selection": {"strategy": "random", "fraction": 0.3}},
        {"selection": {"strategy": "craig-pb", "greedy": "lazy"}},
        {"selection": {"strategy": "random", "greedy": "auto"}},
        {"selection": {"strategy": "glister", "select_every": 4}, "epochs": 5},
        {"selection": {"strategy": "glister", "select_every": 5, "kappa": 0.2}, "epochs": 5},
        {"selection": {"strategy": "glister", "select_every": None}, "epochs": 1},
        {"selection": {"strategy": "glister", "select_every": 4}, "epochs": 4.5},
        {"selection": {"strategy": "glister", "select_every": 4}},  # epochs default 5
        {"optimizer": {"fused": True}},  # sgd by default
        {"optimizer": {"name": "adam", "fused": False}},
        {"optimizer": {"name": "kfac-sgd"}, "precision": "amp_bf16", "device": "cuda"},
        {"algorithms": {"ema": {}}},  # half_life 1000ba by default
        {"algorithms": {"ema": {"half_life": None, "smoothing": 0.99, "update_interval": "1ba"}}},
        {"algorithms": {"ema": {"half_life": "10ep", "update_interval": "2ep"}}},
        {"algorithms": {"swa": {"swa_start": "2ep", "swa_end": "3ep"}}},
        {"algorithms": {"swa": {}}},
        {"algorithms": {"swa": {"swa_start": 0.9, "swa_end": 0.5}}},  # no time strings: no unit to compare in
        {"algorithms": {"sam": {}}},
        {"distributed": {"processes": 2, "compression": {"method": "topk", "error_feedback": True}}},
        {"distributed": {"processes": None}, "loader": "ffcv"},  # null: one process
        {"distributed": {"processes": 2, "backend": "nccl"}, "device": "cuda"},
        {"distributed": {"processes": 1, "compression": {"granularity": "entire-model", "method": "none"}}},
        {"distributed": {"processes": 2, "compression": {"granularity": "entire-model", "method": "topk"}}},
        {"algorithms": {"stochastic_depth": {}}, "model": {"name": "resnet-bottleneck"}},
        {"algorithms": {"blurpool": {}}, "model": {"name": "tests.unprobed:build"}},  # waits for its probe
        {"selection": {"strategy": "random"}, "model": BARE},
        {"algorithms": {"selective_backprop": {}}, "selection": {"strategy": "glister"}},
        {"precision": "amp_fp16", "device": "cuda"},
        {"precision": "amp_bf16"},  # device auto: resolved on the machine
    ],
)
def test_a_valid_config_passes(cfg):
    rules.check(cfg)


@pytest.mark.parametrize(
    "cfg, field, words",
    [
        ({"dataset": {"name": "npz"}}, "dataset.path", "dataset.name 'npz' reads its data from dataset.path; set it"),
        (
            {"dataset": {"path": "/x"}},
            "dataset.path",
            "only applies to dataset.name imagefolder, npz, hf, jsonl, csv, text; dataset.name is 'digits'",
        ),
        (
            {"model": {"name": "timm:resnet18", "width": 8}},
            "model.width",
            "'timm:resnet18' takes its size from its name",
        ),
        (
            {"schedule": {"name": "multistep", "milestones": [0.5, 1.0]}},
            "schedule.milestones",
            "must be fractions in (0, 1); got [0.5, 1.0]",
        ),
        ({"schedule": {"name": "multistep", "milestones": [0.0]}}, "schedule.milestones", "must be fractions"),
        ({"schedule": {"name": "multistep", "milestones": []}}, "schedule.milestones", "got []"),
        ({"schedule": {"name": "multistep", "milestones": ["half"]}}, "schedule.milestones", "got ['half']"),
        (
            {"sparsity": {"target": 0.5, "start": 0.4, "end": 0.4}},
            "sparsity.end",
            "must be after sparsity.start (0.4); got 0.4",
        ),
        ({"sparsity": {"target": 0.5, "end": 0.05}}, "sparsity.end", "must be after sparsity.start (0.1); got 0.05"),
        ({"sparsity": {"target": 0.5, "start": 0.8}}, "sparsity.end", "must be after sparsity.start (0.8); got 0.75"),
        ({"selection": {"fraction": 0.5}}, "selection.fraction", "only applies with a selection strategy"),
        (
            {"selection": {"strategy": "glister-pc", "greedy": "lazy"}},
            "selection.greedy",
            "'lazy' does not apply to 'glister-pc' (greedy methods by strategy: glister: auto, naive, stochastic; "
            "craig: auto, lazy, naive, stochastic; others take 'auto')",
        ),
        ({"selection": {"strategy": "random-online", "greedy": "naive"}}, "selection.greedy", "does not apply"),
        (
            {"selection": {"strategy": "gradmatch", "select_every": 5}},
            "selection.select_every",
            "'gradmatch' would never run: without a warm start (int(kappa * epochs) = 0) the first subset is random, "
            "as in CORDS, and the strategy first selects after select_every = 5 epochs, but training lasts 5 epochs",
        ),
        (
            {"selection": {"strategy": "glister", "select_every": 3, "kappa": 0.1}, "epochs": 2.5},
            "selection.select_every",
            "but training lasts 2.5 epochs",
        ),
        ({"optimizer": {"name": "adam", "fused": True}}, "optimizer.fused", "'adam' has no fused step"),
        ({"optimizer": {"name": "kfac-sgd"}, "compile": True}, "optimizer.name", "cannot run with compile"),
        ({"optimizer": {"name": "kfac-sgd"}, "precision": "amp_fp16"}, "optimizer.name", "precision amp_fp16"),
        (
            {"algorithms": {"ema": {"smoothing": 0.9}}},
            "algorithms.ema.smoothing",
            "give half_life or smoothing, not both",
        ),
        (
            {"algorithms": {"ema": {"half_life": None}}},
            "algorithms.ema.smoothing",
            "give half_life or smoothing (both are null)",
        ),
        (
            {"algorithms": {"ema": {"half_life": None, "smoothing": 0.9}}},
            "algorithms.ema.update_interval",
            "Composer's EMA needs update_interval",
        ),
        (
            {"algorithms": {"ema": {"half_life": "10ba", "update_interval": "1ep"}}},
            "algorithms.ema.update_interval",
            "must be in the same unit as half_life ('10ba'); got '1ep'",
        ),
        (
            {"algorithms": {"swa": {"swa_start": "2ep", "swa_end": "30ba"}}},
            "algorithms.swa.swa_end",
            "must be in the same unit as swa_start ('2ep'); got '30ba'",
        ),
        (
            {"algorithms": {"swa": {"swa_start": "3ep", "swa_end": "3ep"}}},
            "algorithms.swa.swa_end",
            "must be after swa_start ('3ep'); got '3ep'",
        ),
        (
            {"algorithms": {"swa": {"swa_end": "0.5dur"}}},
            "algorithms.swa.swa_end",
            "must be after swa_start ('0.7dur'); got '0.5dur'",
        ),
        ({"algorithms": {"sam": {}}, "optimizer": {"name": "kfac-sgd"}}, "algorithms.sam", "optimizer 'kfac-sgd'"),
        (
            {"distributed": {"compression": {"method": "qsgd"}}},
            "distributed.compression.method",
            "'qsgd' compresses what processes exchange; distributed.processes is 1",
        ),
        ({"distributed": {"processes": 2, "backend": "nccl"}, "device": "cpu"}, "distributed.backend", "needs CUDA"),
        ({"distributed": {"processes": 2}, "loader": "ffcv"}, "loader", "'ffcv' is not sharded across processes"),
        ({"distributed": {"processes": 2}, "algorithms": {"augmix": {}}}, "algorithms.augmix", "not sharded"),
        (
            {"distributed": {"processes": 2}, "algorithms": {"layer_freezing": {}}},
            "algorithms.layer_freezing",
            "DDP's reducer",
        ),
        (
            {"distributed": {"processes": 2, "compression": {"method": "fp16", "error_feedback": True}}},
            "distributed.compression.error_feedback",
            "method is 'fp16'",
        ),
        (
            {"distributed": {"processes": 2, "compression": {"error_feedback": True}}},
            "distributed.compression.error_feedback",
            "method is 'none'",
        ),
        (
            {"distributed": {"processes": 2, "compression": {"method": "powersgd", "granularity": "entire-model"}}},
            "distributed.compression.granularity",
            "use layerwise",
        ),
        (
            {"algorithms": {"stochastic_depth": {}}},
            "algorithms.stochastic_depth",
            "needs a model with bottleneck blocks (torchvision's Bottleneck); model.name 'tiny-cnn' has none",
        ),
        (
            {"algorithms": {"ghost_batchnorm": {}}, "model": BARE},
            "algorithms.ghost_batchnorm",
            "needs a model with batch norm layers; model.name 'tests.rules_bare:build' has none",
        ),
        ({"algorithms": {"blurpool": {}}, "model": BARE}, "algorithms.blurpool", "strided convolutions or max-pools"),
        (
            {"algorithms": {"blurpool": {}}, "model": {"name": "resnet20", "width": 4}},
            "algorithms.blurpool",
            "BlurPool replaces no layer",
        ),
        (
            {"selection": {"strategy": "craig"}, "model": BARE},
            "selection.strategy",
            "'craig' takes its embeddings from the input of the model's final nn.Linear",
        ),
        ({"algorithms": {"randaugment": {}}, "loader": "ffcv"}, "algorithms.randaugment", "loader is 'ffcv'"),
        ({"algorithms": {"mixup": {}, "cutmix": {}}}, "algorithms.mixup", "cannot be combined with cutmix"),
        ({"algorithms": {"ema": {}, "swa": {}}}, "algorithms.swa", "cannot be combined with ema"),
        (
            {"algorithms": {"selective_backprop": {}}, "selection": {"strategy": "gradmatch-pc"}},
            "algorithms.selective_backprop",
            "selection.strategy 'gradmatch-pc'",
        ),
        ({"algorithms": {"colout": {}}, "compile": True}, "algorithms.colout", "cannot be combined with compile"),
        ({"algorithms": {"sam": {}}, "precision": "amp_fp16"}, "algorithms.sam", "Composer's SAM cannot run with"),
        ({"precision": "amp_bf16", "device": "cpu"}, "precision", "'amp_bf16' needs a CUDA device"),
    ],
)
def test_each_rule_refuses_naming_its_field(cfg, field, words):
    e = refused(cfg)
    assert e.field == field and words in e.message, (e.field, e.message)


def test_rules_read_the_defaults_where_a_level_is_missing():
    # processes: a missing level or null is 1; the optimizer is sgd; the model tiny-cnn.
    assert not rules.blockers("distributed.processes", {})
    assert rules.blockers("distributed.processes", {"distributed": {"processes": 2}, "loader": "ffcv"})
    assert rules.blockers("algorithms.stochastic_depth", {"model": {}})
    assert rules.blockers("algorithms.stochastic_depth", {"model": None})
    assert not rules.blockers("algorithms.sam", {"optimizer": {}})
    assert rules.blockers("algorithms.sam", {"optimizer": {"name": "kfac-sgd"}})


def test_the_defaults_the_rules_read_are_the_schemas():
    """readers.DEFAULTS retypes the schema's defaults (the schema validates with the rules, which
    read them, so they cannot read it): each must equal the schema's."""
    schema = TrainConfig().to_dict()
    assert {path: get_path(schema, path, "(no such field)") for path in readers.DEFAULTS} == readers.DEFAULTS


@pytest.mark.parametrize("module", [readers, rules, default_space, algorithm_dims])
def test_no_reader_types_a_default_of_its_own(module):
    """A default read from a raw dict comes from readers.DEFAULTS (readers.value), never a literal
    passed to get_path, which could drift from the schema."""
    tree = ast.parse(Path(module.__file__).read_text())
    # A mutation run (benchmarks/mutation.sh) imports a rewritten copy whose mutants (functions
    # named *__mutmut_N) may pass anything: the module's own code is what this holds.
    mutants = {
        n for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and "__mutmut_" in f.name for n in ast.walk(f)
    }
    own = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and node not in mutants
        and getattr(node.func, "id", getattr(node.func, "attr", None)) == "get_path"
        and (len(node.args) > 2 or node.keywords)
        and not (isinstance(node.args[2], ast.Subscript) and getattr(node.args[2].value, "id", "") == "DEFAULTS")
    ]
    assert own == []


def test_the_space_reads_the_same_rules():
    sam = rules.of("algorithms.sam")
    assert [r.when for r in sam] == ["optimizer not kfac-sgd", "precision != amp_fp16"]
    assert rules.reads("algorithms.sam") == ("optimizer.name", "precision")
    assert rules.when_text("algorithms.sam") == "optimizer not kfac-sgd, precision != amp_fp16"
    assert rules.reads("optimizer.kfac") == (
        "compile",
        "precision",
        "model.name",
        "model.kwargs",
        "model.width",
        "device",
    )
    assert rules.when_text("precision") == "a CUDA device"
    assert rules.of("no such subject") == [] and rules.reads("no such subject") == ()
    blocked = rules.blockers("algorithms.sam", {"optimizer": {"name": "kfac-sgd"}, "precision": "amp_fp16"})
    assert blocked == sam
    assert rules.blockers("algorithms.sam", {"precision": "amp_fp16"}) == sam[1:]
    # A subject's rules read the fields named once each, in order.
    assert rules.reads("algorithms.stochastic_depth") == (
        "distributed.processes",
        "model.name",
        "model.kwargs",
        "dataset.name",  # a language model's rules: its data or its model says it is one
        "dataset.label_column",
    )


def test_check_reports_the_first_broken_rule_of_those_given():
    cfg = {"algorithms": {"sam": {}}, "optimizer": {"name": "kfac-sgd"}, "precision": "amp_fp16"}
    assert refused(cfg).field == "optimizer.name"  # K-FAC's precision rule comes first in RULES
    rules.check(cfg, [])  # no rules: nothing to break
    with pytest.raises(ConfigError) as e:
        rules.check(cfg, rules.of("algorithms.sam"))
    assert e.value.field == "algorithms.sam" and "kfac-sgd" in e.value.message
    rule = rules.of("precision")[0]
    assert rule.broken({"precision": "amp_fp16", "device": "cpu"})
    assert not rule.broken({"precision": "fp32", "device": "cpu"}) and not rule.broken({"precision": "amp_fp16"})
    error = rule.error({"precision": "amp_fp16"})
    assert (error.field, error.message) == ("precision", "'amp_fp16' needs a CUDA device; on CPU use fp32")
    fixed = rules.of("distributed.backend")[0].error({})
    assert (fixed.field, fixed.message) == (
        "distributed.backend",
        "'nccl' needs CUDA devices; device is 'cpu' (use gloo or auto)",
    )


def test_validate_checks_algorithm_names_then_every_rule():
    cfg = TrainConfig.from_dict({"dataset": {"name": "digits"}})
    rules.validate(cfg)
    cfg.algorithms = {"sam": {}}
    cfg.optimizer.name = "kfac-sgd"
    with pytest.raises(ConfigError) as e:
        rules.validate(cfg)
    assert e.value.field == "algorithms.sam"
    cfg.algorithms = {"blurpol": {}}
    with pytest.raises(ConfigError) as e:
        rules.validate(cfg)
    assert e.value.field == "algorithms.blurpol" and "unknown algorithm" in e.value.message


def test_a_machine_says_what_it_offers_in_words():
    """`space show` and `run` head their lines with the machine: its extras spelled out, not field
    names (a user read "cpu (selection)" as nothing they could act on)."""
    from effsearch.config.machine import Machine

    assert Machine("cpu", selection=True).describe() == "cpu with CORDS subset selection"
    assert Machine("cpu", selection=False).describe() == "cpu"
    # A space that uses none of it (a language model's: no selection dimension) is not told of it.
    assert Machine("cpu", selection=True).describe(["optimizer.lr", "batch_size"]) == "cpu"
    assert Machine("cpu", selection=True).describe(["selection.strategy"]) == "cpu with CORDS subset selection"
    gpu = Machine("cuda", bf16=True, ffcv=True, compile=True, selection=True, gpus=1)
    assert gpu.describe() == "cuda with bf16, FFCV, torch.compile, CORDS subset selection"
