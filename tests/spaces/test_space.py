"""The search space: conditional sampling, compatibility rules, checks of the
``space:`` section. No training: configs are sampled and validated only."""

import optuna
import pytest

from effsearch.config import MODEL_WIDTHS, ConfigError, TrainConfig
from effsearch.config.algorithms import CONFLICTS
from effsearch.config.sources import facts
from effsearch.spaces import Machine, Space

optuna.logging.set_verbosity(optuna.logging.ERROR)
CPU = Machine()
GPU = Machine("cuda", bf16=True, ffcv=True, compile=True)


def base(**kw):
    d = {"model": {"name": "tiny-cnn"}, "epochs": 8, "device": "cpu"}
    d.update(kw)
    return TrainConfig.from_dict(d)


def sample(space, n, sampler=None):
    study = optuna.create_study(
        directions=["minimize", "maximize"], sampler=sampler or optuna.samplers.RandomSampler(seed=0)
    )
    out = []
    for i in range(n):
        trial = study.ask()
        cfg = space.config(trial)  # raises ConfigError on an invalid combination
        out.append((dict(trial.params), cfg))
        study.tell(trial, [float(i % 7), cfg.optimizer.lr])
    return out


def assert_conditional(params, cfg):
    """A child dimension is in a trial's params exactly when its parent is on."""
    for name in ("mixup", "cutmix", "ema", "sam", "progressive_resizing"):
        children = [p for p in params if p.startswith(f"algorithms.{name}.")]
        assert bool(children) == bool(params.get(f"algorithms.{name}")), (name, params)
        assert (name in cfg.algorithms) == bool(params.get(f"algorithms.{name}", False))
    assert ("optimizer.lr" in params) == (params["optimizer.name"] in ("sgd", "sgdw"))
    assert ("optimizer.lr@adamw" in params) == (params["optimizer.name"] == "adamw")
    assert ("schedule.gamma" in params) == (params["schedule.name"] == "multistep")
    assert ("selection.fraction" in params) == (params.get("selection.strategy", "full") != "full")
    assert ("sparsity.target" in params) == params["sparsity"] == (cfg.sparsity.target > 0)
    if "batch_size" in params:  # lr is "lr at batch 128": the batch dimension scales it
        assert cfg.optimizer.scale_lr_with_batch


def test_children_are_sampled_only_when_their_parent_is_on():
    space = Space.build(base(), {}, CPU)
    for params, cfg in sample(space, 300):
        assert_conditional(params, cfg)


@pytest.mark.parametrize(
    "machine, model, epochs",
    [
        (CPU, "tiny-cnn", 8),
        (GPU, "resnet-bottleneck", 3),
        (Machine("cuda"), "resnet9", 1.5),
        (Machine("cuda", ffcv=True), "resnet20", 2),
    ],
)
def test_invalid_combinations_are_never_sampled(machine, model, epochs):
    space = Space.build(base(model={"name": model}, epochs=epochs, device="auto"), {}, machine)
    seen = set()
    for _, cfg in sample(space, 250):
        on = set(cfg.algorithms)
        seen |= on | {cfg.precision, cfg.loader, cfg.selection.strategy}
        if cfg.loader == "ffcv" and cfg.selection.strategy != "full":
            seen.add("ffcv x selection")
        assert not any(pair <= on for pair in CONFLICTS)
        assert cfg.precision in machine.precisions()
        assert not ("sam" in on and cfg.precision == "amp_fp16")
        assert "stochastic_depth" not in on or facts({"name": model}).bottleneck
        if cfg.loader == "ffcv":
            assert not on & {"randaugment", "augmix"}
    # ...while the space still covers what the machine can do.
    assert {"mixup", "cutmix", "sam", "ema"} <= seen
    assert ("amp_fp16" in seen) == (machine.device == "cuda")
    assert ("ffcv" in seen) == machine.ffcv
    assert ("ffcv x selection" in seen) == machine.ffcv  # FFCV serves CORDS subsets: the space samples both
    assert ("stochastic_depth" in seen) == facts({"name": model}).bottleneck


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_tpe_and_nsga2_sample_valid_configs_too():
    """The model-based samplers propose from what they learnt (TPE's groups, NSGA-II's crossover of
    parents with different conditional params), not only at random: the same invariants hold."""
    space = Space.build(base(), {"exclude": ["data"]}, CPU)
    for sampler in (
        optuna.samplers.TPESampler(seed=1, multivariate=True, group=True, n_startup_trials=5),
        optuna.samplers.NSGAIISampler(seed=1, population_size=6),
    ):
        drawn = sample(space, 25, sampler)  # past TPE's 5 random trials and NSGA-II's first generation
        for params, cfg in drawn:
            assert_conditional(params, cfg)
            assert not any(pair <= set(cfg.algorithms) for pair in CONFLICTS)
            assert cfg.precision in CPU.precisions()
        # Proposals that vary: a sampler stuck on one point would pass the checks above vacuously.
        assert len({str(sorted(params.items())) for params, _ in drawn[6:]}) > 10
        assert len({name for _, cfg in drawn for name in cfg.algorithms}) >= 3


def test_include_exclude_ranges_and_fixed():
    section = {
        "include": ["budget", "optimizer", "algorithms.mixup"],
        "exclude": ["optimizer.momentum"],
        "ranges": {"optimizer.lr": {"low": 0.01, "high": 0.2}, "batch_size": [32, 64]},
        "fixed": {"optimizer.name": "sgd", "algorithms.mixup.alpha": 0.3},
    }
    space = Space.build(base(), section, CPU)
    assert space.active == {
        "epochs",
        "batch_size",
        "optimizer.lr",
        "optimizer.lr@adamw",
        "optimizer.weight_decay",
        "optimizer.nesterov",
        "algorithms.mixup",
        "optimizer.kfac",
        "optimizer.kfac_damping",
        "optimizer.kfac_update_every",
        "accumulate",
    }  # optimizer.fused: not on a CPU (slower there)
    for params, cfg in sample(space, 60):
        # K-FAC is a switch on SGD (its own dimension, optimizer.kfac)
        assert cfg.optimizer.name == ("kfac-sgd" if params.get("optimizer.kfac") else "sgd")
        assert "optimizer.name" not in params
        assert 0.01 <= cfg.optimizer.lr <= 0.2 and cfg.batch_size in (32, 64)
        assert cfg.optimizer.momentum == 0.9  # excluded: the base value
        if "mixup" in cfg.algorithms:
            assert cfg.algorithms["mixup"] == {"alpha": 0.3}
    table = space.table()
    assert "optimizer.lr" in table and "[0.01, 0.2]" in table and "fixed" in table


def test_encode_reproduces_the_baseline():
    b = base(
        batch_size=64,
        optimizer={"name": "adamw", "lr": 0.002, "scale_lr_with_batch": True},
        algorithms={"mixup": {"alpha": 0.4}, "ema": {"half_life": "100ba"}},
        sparsity={"target": 0.5},
    )
    space = Space.build(base(), {"exclude": ["data"]}, CPU)
    params = space.encode(b)
    assert params["optimizer.name"] == "adamw" and params["optimizer.lr@adamw"] == 0.002
    assert params["algorithms.mixup"] is True and params["algorithms.mixup.alpha"] == 0.4
    assert params["algorithms.ema.half_life"] == 100 and params["algorithms.sam"] is False
    assert "algorithms.cutmix" not in params  # never sampled while mixup is on
    study = optuna.create_study(directions=["minimize", "maximize"])
    study.enqueue_trial(params)
    cfg = space.config(study.ask())
    assert cfg.optimizer.name == "adamw" and cfg.optimizer.lr == 0.002 and cfg.batch_size == 64
    assert cfg.algorithms["mixup"]["alpha"] == 0.4 and cfg.algorithms["ema"]["half_life"] == "100ba"
    assert cfg.sparsity.target == 0.5


@pytest.mark.parametrize(
    "section, field, words",
    [
        ({"bogus": 1}, "space.bogus", "allowed keys here: include, exclude, ranges, fixed"),
        ({"include": ["optimiser"]}, "space.include[0]", "unknown group or dimension"),
        ({"ranges": {"optimizer.lr": {"low": 0.5, "high": 0.1}}}, "space.ranges.optimizer.lr", "empty range"),
        ({"ranges": {"batch_size": {"choices": []}}}, "space.ranges.batch_size.choices", "empty range"),
        (
            {"ranges": {"batch_size": {"choices": 32}}},
            "space.ranges.batch_size.choices",
            "must be a list ([32]); got 32",
        ),
        ({"ranges": {"optimizer.lr": {"low": 0.1, "high": 20}}}, "space.ranges.optimizer.lr.high", "(0.0, 10.0]"),
        (
            {"ranges": {"schedule.name": ["cosine", "exponential"]}},
            "space.ranges.schedule.name.choices[1]",
            "constant, multistep",
        ),
        ({"ranges": {"optimizer.lrate": [0.1, 0.2]}}, "space.ranges.optimizer.lrate", "did you mean optimizer.lr"),
        ({"fixed": {"precision": "amp_fp16"}}, "space.fixed.precision", "runs fp32"),
        ({"fixed": {"algorithms.stochastic_depth": True}}, "space.fixed.algorithms.stochastic_depth", "needs"),
        (
            {"fixed": {"algorithms.mixup": True, "algorithms.cutmix": True}},
            "space.fixed.algorithms.cutmix",
            "not mixup",
        ),
        ({"fixed": {"algorithms.mixup.alpha": -1}}, "space.fixed.algorithms.mixup.alpha", "must be in"),
        ({"fixed": {"dataset.name": "digits"}}, "space.fixed.dataset.name", "set in `base`"),
        # a range or a lone include that no trial would sample: refused, not silently idle
        (
            {"include": ["optimizer.lr@adamw"], "ranges": {"optimizer.lr": {"low": 0.01, "high": 0.1}}},
            "space.ranges.optimizer.lr",
            "has a range but is not searched: space.include names neither it nor its group (optimizer)",
        ),
        (
            {"exclude": ["optimizer"], "ranges": {"optimizer.lr": {"low": 0.01, "high": 0.1}}},
            "space.ranges.optimizer.lr",
            "space.exclude names it or its group",
        ),
        ({"include": ["sparsity", "batch_size"], "exclude": ["batch_size"]}, "space.include[1]", "not both"),
        (
            {"include": ["optimizer"], "fixed": {"optimizer.name": "adamw"}, "ranges": {"optimizer.lr": [0.01, 0.1]}},
            "space.ranges.optimizer.lr",
            "never sampled: it needs optimizer sgd or sgdw, which the base config and the fixed values rule out; "
            "optimizer.lr@adamw sets optimizer.lr here",
        ),
        ({"include": ["sparsity.target"]}, "space.include[0]", "never sampled: it needs sparsity on"),
    ],
)
def test_bad_space_sections_name_the_field(section, field, words):
    with pytest.raises(ConfigError) as e:
        Space.build(base(), section, CPU, source="s.yaml")
    assert e.value.field == field, str(e.value)
    assert words in e.value.message, str(e.value)
    assert str(e.value).startswith("s.yaml: ")


def test_distributed_group_is_opt_in_capped_by_the_machine_and_sampled_validly():
    from effsearch.config import COMPRESSIONS

    two = Machine(cores=2)
    assert not any(n.startswith("distributed.") for n in Space.build(base(), {}, two).active)
    assert "distributed.processes" not in Space.build(base(), {"include": "all"}, CPU).active  # one core
    space = Space.build(base(), {"include": "all"}, two)
    assert space.dims[[d.name for d in space.dims].index("distributed.processes")].choices == (1, 2)
    methods, kfac = set(), 0
    for params, cfg in sample(space, 300):
        d = cfg.distributed
        if d.processes == 1:
            assert d.compression.method == "none" and "distributed.compression.method" not in params
        else:
            assert not set(cfg.algorithms) & {"layer_freezing", "stochastic_depth", "randaugment", "augmix"}
            methods.add(d.compression.method)
        assert ("distributed.compression.ratio" in params) == (d.compression.method in ("topk", "randomk"))
        assert not ("sam" in cfg.algorithms and cfg.optimizer.name == "kfac-sgd")
        kfac += cfg.optimizer.name == "kfac-sgd"
    assert methods == set(COMPRESSIONS) and kfac > 0


@pytest.mark.parametrize("machine, model", [(GPU, "resnet-bottleneck"), (Machine(cores=2, ffcv=True), "tiny-cnn")])
def test_algorithm_gates_agree_with_validation(machine, model):
    """The space's gate on each algorithm switch and TrainConfig's validation read the same rules
    (effsearch.config.rules): on random configs of the space, switching an algorithm on is valid
    exactly where its gate allows it."""
    space = Space.build(base(model={"name": model}, epochs=3, device="auto"), {"include": "all"}, machine)
    gates = [
        d
        for d in space.dims
        if d.name.startswith("algorithms.") and d.name.count(".") == 1 and "unavailable" not in d.extra
    ]
    agreed = {True: 0, False: 0}
    for _, cfg in sample(space, 120):
        for gate in gates:
            algo = gate.extra["algorithm"]
            d = cfg.to_dict()
            d["algorithms"].pop(algo, None)
            allowed = gate.when is None or gate.when(d)
            gate.apply(d, True)
            try:
                TrainConfig.from_dict(d)
                valid = True
            except ConfigError as e:
                valid = False
                why = str(e)
            assert allowed == valid, (algo, cfg.to_dict() if allowed else None, None if valid else why)
            agreed[allowed] += 1
    assert agreed[True] and agreed[False]  # both sides were exercised


def test_space_show_says_the_rules_when():
    from effsearch.config import rules

    space = Space.build(base(), {"include": "all"}, GPU)
    rows = {r["dimension"]: r["when"] for r in space.rows()}
    assert (
        rows["algorithms.sam"] == rules.when_text("algorithms.sam") == "optimizer not kfac-sgd, precision != amp_fp16"
    )
    assert (
        rows["algorithms.cutmix"] == "a model of images, not mixup"
        and "compile off" in rows["algorithms.progressive_resizing"]
    )
    assert rows["optimizer.kfac"] == "optimizer sgd, compile off, precision not amp_fp16, factors up to 1280 on the CPU"
    # Only a language model keeps selection off (FFCV serves subsets too).
    assert rows["selection.strategy"] == "not a language model"
    parents = {d.name: d.parents for d in space.dims}
    assert set(parents["algorithms.sam"]) == {"optimizer.name", "optimizer.kfac", "precision"}


def test_cudnn_autotuning_is_searched_on_a_gpu_only_when_asked():
    """A worker keeps cuDNN's per-shape choice, so only its first trial of a shape would pay the
    timing (1-6 s on an H100): by default the GPU space holds cudnn_benchmark at the base value
    (off), and a range in the study file opts in."""
    gpu_base = base(device="auto")
    assert not gpu_base.cudnn_benchmark
    space = Space.build(gpu_base, {}, GPU)
    assert "cudnn_benchmark" not in space.active and "precision" in space.active
    assert all(not cfg.cudnn_benchmark for _, cfg in sample(space, 20))
    row = next(r for r in space.rows() if r["dimension"] == "cudnn_benchmark")
    assert row["state"] == "n/a" and "range" in row["values"]
    asked = Space.build(gpu_base, {"ranges": {"cudnn_benchmark": {"choices": [False, True]}}}, GPU)
    assert "cudnn_benchmark" in asked.active
    assert {cfg.cudnn_benchmark for _, cfg in sample(asked, 20)} == {False, True}


def test_swa_start_is_searched_below_the_bases_swa_end():
    """The rules want swa_end after swa_start in one unit: the space samples starts below the
    base's end, and none when that end is not a fraction of training."""

    def start_dim(space):
        return next(d for d in space.dims if d.name == "algorithms.swa.swa_start")

    for end, high in (("0.6dur", 0.55), ("0.97dur", 0.9)):
        space = Space.build(
            base(algorithms={"swa": {"swa_start": "0.3dur", "swa_end": end}}),
            {"include": ["algorithms.swa"]},
            Machine(cores=1),
        )
        assert start_dim(space).high == pytest.approx(high)
        starts = [float(c.algorithms["swa"]["swa_start"][:-3]) for _, c in sample(space, 40) if "swa" in c.algorithms]
        assert starts and max(starts) < float(end[:-3])  # and each sampled config passed validation
    space = Space.build(
        base(algorithms={"swa": {"swa_start": "2ep", "swa_end": "5ep"}}),
        {"include": ["algorithms.swa"]},
        Machine(cores=1),
    )
    assert "not a fraction of training" in str(start_dim(space).extra["unavailable"])


def test_a_range_this_machine_cannot_sample_is_kept_for_the_machine_that_can():
    """A range on a GPU-only dimension (compile_mode needs compile, offered on CUDA only) is read on
    a CPU too, e.g. by `space show` of a GPU study: never sampled here, but not a mistake."""
    section = {"include": ["system"], "ranges": {"compile_mode": {"choices": ["default", "reduce-overhead"]}}}
    for machine in (CPU, GPU):
        space = Space.build(base(), section, machine)
        assert "compile_mode" in space.active
    with pytest.raises(ConfigError, match="never sampled"):  # a rule, not the machine, rules it out here
        section = {"include": ["optimizer"], "fixed": {"optimizer.name": "adamw"}}
        Space.build(base(), {**section, "ranges": {"optimizer.kfac_damping": [0.001, 0.01]}}, CPU)


def test_the_fused_reason_says_which_torch_measured_it_not_which_runs():
    """ "(torch 2.7)" on a newer torch read as a wrong detected version."""
    row = {r["dimension"]: r for r in Space.build(base(), {}, CPU).rows()}["optimizer.fused"]
    assert row["state"] == "n/a" and "measured on torch 2.7" in row["values"]


def test_a_base_at_the_models_default_width_encodes_that_width():
    """model.width 0 is the model's default width: the baseline records that width (one of the
    choices), not no value."""
    b = base()
    assert b.model.width == 0
    space = Space.build(b, {"include": ["model.width"]}, CPU)
    assert space.encode(b) == {"model.width": MODEL_WIDTHS[b.model.name]}


def test_a_time_parameter_shows_its_unit_and_how_a_config_writes_it():
    """ema.half_life is searched as a number of batches, written `20ba` in a config: space show says
    so (`--set algorithms.ema={half_life: 20}` is refused for want of the unit)."""
    space = Space.build(base(), {"include": ["algorithms.ema", "algorithms.ema.half_life"]}, CPU)
    row = {r["dimension"]: r for r in space.rows()}["algorithms.ema.half_life"]
    assert row["values"].endswith("int log, batches (20 is 20ba in a config)")


def test_a_range_choice_the_model_rules_out_is_refused_naming_field_choice_and_rule():
    from effsearch.config.sources import ModelFacts, remember

    model = {"name": "tests.spaces_no_linear:build"}
    remember(model, ModelFacts(bottleneck=False, batchnorm=True, downsamples=True, final_linear=False))
    cfg = base(model=model)
    ranges = {"selection.strategy": {"choices": ["full", "random", "glister-pb"]}}
    with pytest.raises(ConfigError) as e:
        Space.build(cfg, {"include": ["selection.strategy"], "ranges": ranges}, CPU)
    assert e.value.field == "space.ranges.selection.strategy"
    assert "'glister-pb'" in e.value.message and "final nn.Linear" in e.value.message
    ok = {"selection.strategy": {"choices": ["full", "random"]}}
    assert "selection.strategy" in Space.build(cfg, {"include": ["selection.strategy"], "ranges": ok}, CPU).active


@pytest.mark.parametrize(
    ("final_linear", "epochs", "why"),
    [(False, 8, "the model ends in no nn.Linear"), (True, 1, "the base trains under 2 epochs")],
)
def test_space_show_all_says_why_the_model_based_strategies_were_left_out(final_linear, epochs, why):
    from effsearch.config.sources import ModelFacts, remember

    model = {"name": f"tests.spaces_linear_{final_linear}:build"}
    remember(model, ModelFacts(bottleneck=False, batchnorm=True, downsamples=True, final_linear=final_linear))
    space = Space.build(base(model=model, epochs=epochs), {"include": ["selection.strategy"]}, CPU)
    row = next(r for r in space.rows() if r["dimension"] == "selection.strategy")
    assert "glister-pb" not in row["values"] and "glister-pb, craig-pb, gradmatch-pb left out" in row["note"]
    assert why in row["note"]
    ranged = {"include": ["selection.strategy"], "ranges": {"selection.strategy": ["full", "random"]}}
    assert "left out" not in space.build(base(model=model, epochs=epochs), ranged, CPU).table(True)
    plain = Space.build(base(), {"include": ["selection.strategy"]}, CPU)
    assert "left out" not in plain.table(True)
