"""effsearch's own loop: Composer's algorithms get the events they act on (and nothing else
costs a step), schedules match Composer's, devices map to Composer's names, evaluation
measures the delivered model, and a time to target is earned by it."""

import pytest
import torch
from composer.core import Event, Time, Timestamp, TimeUnit

from effsearch.config import ConfigError, TrainConfig
from effsearch.config.algorithms import ALGORITHMS
from effsearch.config.machine import resolve_device
from effsearch.trainer import loop as L
from effsearch.trainer.composer import events as E
from effsearch.trainer.data.splits import DeviceBatches, load_splits
from effsearch.trainer.result import EvalPoint, RunResult, time_to_target
from effsearch.trainer.training import prepare, train
from tests.support.helpers import tiny
from tests.support.text import tiny_text, write_jsonl


def prepared(overrides, text=None):
    """A prepared run of ``tiny`` (``text``: a JSONL file, for ``tiny_text``) with ``overrides``."""
    cfg = TrainConfig.from_dict(tiny(**overrides) if text is None else tiny_text(text, **overrides))
    return prepare(cfg, load_splits(cfg), "cpu", RunResult(status="running", config=cfg.to_dict())), cfg


BERT = {"name": "hf:BertConfig", "kwargs": {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}}
# What each algorithm needs to be built on a CPU: a model of that structure (text: a JSONL file).
NEEDS = {"bottleneck": {"model.name": "resnet-bottleneck", "model.width": 4}, "tokens": {}, "bert": {"model": BERT}}
# Not built on a CPU here: LowPrecisionLayerNorm needs mixed precision (CUDA; its surgery is tested on
# the text model in test_text_models.py), and ALiBi is refused on every model (config.rules).
UNBUILT = ("low_precision_layernorm", "alibi")


VARIANTS = {  # parameters that change which events an algorithm matches
    "mixup": [{}, {"interpolate_loss": True}],
    "cutmix": [{}, {"interpolate_loss": True}],
    "stochastic_depth": [{"drop_warmup": 0.5}],
    "swa": [{"update_interval": "1ba"}, {"update_interval": "1ep"}],
    "selective_backprop": [{"start": 0.0, "end": 1.0}],
    "ema": [{"half_life": "2ba"}],
    "squeeze_excite": [{"min_channels": 8}],  # a block on tiny's convolutions (a config adding none is refused)
}


@pytest.mark.parametrize("name, text", [(n, False) for n in sorted(set(ALGORITHMS) - set(UNBUILT))] + [("mixup", True)])
def test_each_algorithm_matches_no_per_batch_event_outside_its_table(name, text, tmp_path):
    """The loop fires only the per-batch events in ALGORITHMS[name].batch_events: every other one
    must be one the algorithm's own match() refuses, at the start, middle and end of training.
    Text models' algorithms (and MixUp's text version) are built on a text model."""
    import composer.algorithms as ca

    need = ALGORITHMS[name].needs_structure
    on_text = text or need in ("tokens", "bert")
    model = NEEDS.get(need, {})
    for params in VARIANTS.get(name, [{}]):
        run, _ = prepared(
            {"algorithms": {name: params}, **model}, write_jsonl(tmp_path / "t.jsonl") if on_text else None
        )
        state = run.state
        composer_class = getattr(ca, ALGORITHMS[name].composer_name)
        algo = next(a for a in state.algorithms if isinstance(a, composer_class))
        listened = set(E.listens(algo))
        total = int(state.max_duration.value)
        for step in (0, total // 2, total - 1):
            state.timestamp = Timestamp(batch=step, sample=step * 32, batch_in_epoch=step % 4)
            for event in set(E.BATCH_EVENTS) - listened:
                assert not algo.match(event, state), f"{name} {params} matches {event} at batch {step}"


def test_a_run_without_algorithms_fires_no_per_batch_event(monkeypatch):
    from composer.core import Engine

    fired = []
    original = Engine.run_event
    monkeypatch.setattr(Engine, "run_event", lambda self, e: (fired.append(Event(e)), original(self, e))[1])
    run, cfg = prepared({"epochs": 3, "dataset.synthetic_size": 400})
    run.fit()
    steps = run.loop.step
    assert steps == 3 * 10 and run.loop.events == frozenset()
    assert not set(fired) & set(E.BATCH_EVENTS)
    assert len(fired) < steps  # a few per epoch and per evaluation, none per step


def test_label_smoothing_gets_its_events_and_others_stay_off():
    run, _ = prepared({"algorithms": {"label_smoothing": {}}})
    assert run.loop.events == {Event.BEFORE_LOSS, Event.AFTER_LOSS}


@pytest.mark.parametrize(
    "name, warmup, final, extra",
    [
        ("cosine", 0.2, 0.1, {}),
        ("cosine", 0.0, 0.0, {}),
        ("linear", 0.1, 0.05, {}),
        ("constant", 0.3, 0.0, {}),
        ("multistep", 0.1, 0.0, {"milestones": [0.5, 0.8], "gamma": 0.2}),
    ],
)
def test_schedule_table_matches_composers_schedulers(name, warmup, final, extra):
    import composer.optim as co

    from effsearch.trainer.techniques.schedule import factors

    run, _ = prepared({})
    state = run.state
    total = 50
    state.max_duration = Time(total, TimeUnit.BATCH)
    warm = f"{warmup}dur"
    composer = {
        "cosine": lambda: co.CosineAnnealingWithWarmupScheduler(t_warmup=warm, alpha_f=final),
        "linear": lambda: co.LinearWithWarmupScheduler(t_warmup=warm, alpha_f=final),
        "constant": lambda: co.ConstantWithWarmupScheduler(t_warmup=warm),
        "multistep": lambda: co.MultiStepWithWarmupScheduler(
            t_warmup=warm, milestones=[f"{m}dur" for m in extra["milestones"]], gamma=extra["gamma"]
        ),
    }[name]()
    cfg = TrainConfig.from_dict(
        tiny(**{"schedule": {"name": name, "warmup_fraction": warmup, "final_lr_fraction": final, **extra}})
    )
    ours = factors(cfg.schedule, total)
    for step in range(total):
        state.timestamp = Timestamp(batch=step)
        assert ours[step] == pytest.approx(float(composer(state)), abs=1e-6), step


def test_onecycle_ramps_then_decays():
    from effsearch.trainer.techniques.schedule import factors

    cfg = TrainConfig.from_dict(
        tiny(**{"schedule": {"name": "onecycle", "warmup_fraction": 0.25, "final_lr_fraction": 0.0}})
    )
    f = factors(cfg.schedule, 100)
    assert f[0] == pytest.approx(0.05) and max(f) == pytest.approx(f[25]) and f[25] == pytest.approx(1.0)
    assert f[-1] == pytest.approx(1 / 75) and all(a >= b for a, b in zip(f[25:], f[26:]))


def test_devices_map_to_composers_names(monkeypatch):
    """Composer refuses 'cuda'; 'auto' on a CUDA machine must reach Composer as 'gpu'."""
    import composer.utils

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    for device in ("auto", "cuda"):
        cfg = TrainConfig.from_dict(tiny(device=device, precision="amp_bf16"))
        assert resolve_device(cfg) == "cuda"
    asked = []
    monkeypatch.setattr(composer.utils, "get_device", lambda name: asked.append(name) or name)
    assert E.composer_device("cuda") == "gpu" and E.composer_device("cpu") == "cpu"
    assert asked == ["gpu", "cpu"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device(TrainConfig.from_dict(tiny(device="auto"))) == "cpu"


def test_evaluations_measure_the_delivered_model():
    """EMA: every evaluation sees the averaged weights the run delivers; sparsity: the masked ones."""
    for extra in (
        {"algorithms": {"ema": {"half_life": "1000ba"}}},
        {
            "sparsity.target": 0.8,
            "sparsity.schedule": "constant",
            "sparsity.start": 0.0,
            "sparsity.update_every": 1,
            "algorithms": {"ema": {"half_life": "5ba"}},
        },
    ):
        r = train(TrainConfig.from_dict(tiny(epochs=3, **extra)), progress=False)
        assert r.status == "completed", r.reason
        assert r.history[-1].val_accuracy == r.final.val_accuracy, extra
        assert r.history[-1].val_loss == pytest.approx(r.final.val_loss, rel=1e-6), extra
    assert abs(r.final.sparsity - 0.8) < 0.01


def test_evaluation_does_not_depend_on_its_batch_size(monkeypatch):
    """Batches are a cost choice (a CPU scores small ones faster): every image counts once,
    the last partial batch included, and BatchNorm uses its running statistics."""
    run, _ = prepared({"epochs": 1})
    run.fit()
    x, y = run.splits.val_x, run.splits.val_y
    scores = []
    for size in (1024, 128, 7):  # 7 leaves a partial last batch
        monkeypatch.setitem(L.EVAL_BATCH, "cpu", size)
        with run.loop.delivered():
            scores.append(run.loop.evaluate(x, y))
    assert len(y) % 7 and scores[0][0] == scores[1][0] == scores[2][0]
    assert scores[1][1] == pytest.approx(scores[0][1], rel=1e-5) and scores[2][1] == pytest.approx(
        scores[0][1], rel=1e-5
    )


def test_time_to_target_needs_the_final_model_to_reach_it(monkeypatch):
    h = [EvalPoint(epoch=1, train_seconds=1, val_accuracy=0.5), EvalPoint(epoch=2, train_seconds=2, val_accuracy=0.95)]
    assert time_to_target(h, 0.9, final_value=0.91) == 2
    assert time_to_target(h, 0.9, final_value=0.2) is None
    assert time_to_target(h, 0.9, final_value=float("nan")) is None

    # A run whose evaluations cross the target but whose delivered model misses it.
    scores = iter([(0.9, 0.3), (0.9, 0.3), (0.1, 2.0), (0.1, 2.0)])
    monkeypatch.setattr(L.Loop, "score", lambda self, x, y, enough=None: (*next(scores), len(y)))
    r = train(TrainConfig.from_dict(tiny(epochs=2, target_accuracy=0.5)), progress=False)
    assert [p.val_accuracy for p in r.history] == [0.9, 0.9]
    assert r.final.val_accuracy == 0.1
    assert r.time_to_target is None and r.final.target_crossed_at == r.history[0].train_seconds


def test_compile_refuses_algorithms_that_change_batch_shapes():
    with pytest.raises(ConfigError, match="algorithms.progressive_resizing: cannot be combined with compile"):
        TrainConfig.from_dict(tiny(compile=True, algorithms={"progressive_resizing": {}}))
    with pytest.raises(ConfigError, match="compile_mode: must be one of"):
        TrainConfig.from_dict(tiny(compile_mode="fast"))


def test_device_batches_serve_every_sample_once_an_epoch_with_weights():
    x = torch.arange(10, dtype=torch.uint8).view(10, 1, 1, 1)
    y = torch.arange(10)
    b = DeviceBatches(x, y, 4, seed=0, device="cpu")
    assert len(b) == 3 and len(b.dataset) == 10
    assert sorted(torch.cat([yb for _, yb in b]).tolist()) == list(range(10))
    dropped = DeviceBatches(x, y, 4, seed=0, device="cpu", drop_last=True)
    assert len(dropped) == 2 and [len(yb) for _, yb in dropped] == [4, 4]
    w = torch.zeros(10)
    sampler = [7, 3, 5]
    weighted = DeviceBatches(x, y, 2, seed=0, device="cpu", sampler=sampler, weights=w)
    w[[7, 3, 5]] = torch.tensor([0.7, 0.3, 0.5])  # written in place, as the selection does
    got = {int(yy): float(ww) for _, yb, wb in weighted for yy, ww in zip(yb, wb)}
    assert got == pytest.approx({7: 0.7, 3: 0.3, 5: 0.5})


def test_blurpool_and_ghost_batchnorm_compile_without_graph_breaks():
    """composer_compat's patches: Dynamo traces the whole surgered model in one graph."""
    import torch._dynamo

    run, _ = prepared({"algorithms": {"blurpool": {"min_channels": 1}, "ghost_batchnorm": {"ghost_batch_size": 8}}})
    module = run.state.model.module
    names = {type(m).__name__ for m in module.modules()}
    assert {"BlurMaxPool2d", "GhostBatchNorm2d"} <= names
    module.train()
    torch._dynamo.reset()
    explained = torch._dynamo.explain(module)(torch.randn(32, 3, 16, 16))
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def test_ghost_batchnorm_patch_keeps_composers_statistics():
    """Chunks normalised alone, running averages moved by momentum / nchunks per chunk, as
    Composer's own forward does, and a batch under one ghost batch normalised whole."""
    from composer.algorithms.ghost_batchnorm.ghost_batchnorm import GhostBatchNorm2d

    from effsearch.trainer.composer import compat as composer_compat

    composer_compat.apply()
    torch.manual_seed(0)
    ref = torch.nn.BatchNorm2d(3)
    ghost = GhostBatchNorm2d(ghost_batch_size=8, base_batchnorm=torch.nn.BatchNorm2d(3))
    x = torch.randn(20, 3, 4, 4) * 3 + 1
    out = ghost(x)
    ref.momentum = 0.1 / 3
    expected = torch.cat([ref(c) for c in x.chunk(3, 0)])
    assert torch.allclose(out, expected, atol=1e-5)
    assert torch.allclose(ghost.batchnorm.running_mean, ref.running_mean, atol=1e-6)
    assert torch.allclose(ghost.batchnorm.running_var, ref.running_var, atol=1e-6)
    assert ghost.batchnorm.momentum == 0.1  # never touched
    small = ghost(x[:5])
    assert small.shape == (5, 3, 4, 4)


@pytest.mark.parametrize("interval", [1, 2])
def test_sam_patch_steps_as_sharpness_aware_minimisation(interval):
    """composer_compat 4: on a SAM step the update is SGD's with the gradient taken at
    w + rho * g / |g|; on the steps between, a plain SGD step; no host read decides either."""
    from composer.algorithms.sam.sam import SAMOptimizer

    from effsearch.trainer.composer import compat as composer_compat

    composer_compat.apply()
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 2)
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    w0 = [t.detach().clone() for t in (lin.weight, lin.bias)]
    opt = SAMOptimizer(torch.optim.SGD(lin.parameters(), lr=0.1), rho=0.05, interval=interval)

    def closure(**kw):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(lin(x), y)
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert isinstance(loss, torch.Tensor)

    def grad_at(params):
        w, b = (t.clone().requires_grad_(True) for t in params)
        torch.nn.functional.cross_entropy(x @ w.T + b, y).backward()
        return [w.grad, b.grad]

    g = grad_at(w0)
    if interval == 1:  # this step is a SAM step
        norm = torch.norm(torch.stack([t.norm(2) for t in g]), 2)
        g = grad_at([t + 0.05 / (norm + 1e-12) * gt for t, gt in zip(w0, g)])
    for t, t0, gt in zip((lin.weight, lin.bias), w0, g):
        assert torch.allclose(t.detach(), t0 - 0.1 * gt, atol=1e-6)


# Algorithms that read nothing back per step (StochasticDepth and SWA do inside Composer:
# docs/benchmarks.md; SAM did, twice a step, until composer_compat 4).
SYNC_FREE = [
    "label_smoothing",
    "mixup",
    "cutmix",
    "cutout",
    "ema",
    "gradient_clipping",
    "blurpool",
    "progressive_resizing",
    "selective_backprop",
    "colout",
    "ghost_batchnorm",
    "channels_last",
    "sam",
]


@pytest.mark.parametrize("name", SYNC_FREE)
def test_gpu_mode_reads_nothing_back_inside_an_epoch(name):
    """With the GPU's check cadence (no per-step loss read), a run's host reads
    (aten::_local_scalar_dense: .item(), float(), bool() of a tensor) come from evaluation
    points and epoch ends, not from steps: 40 steps, a handful of reads."""
    from torch.profiler import ProfilerActivity, profile

    params = {"start": 0.0, "end": 1.0} if name == "selective_backprop" else {}
    run, _ = prepared(
        {
            "epochs": 4,
            "dataset.synthetic_size": 400,
            "eval_every": 2,
            "algorithms": {name: params},
            "sparsity.target": 0.5,
        }
    )
    run.loop.check_every = 0  # what a CUDA run does
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run.fit()
    assert run.loop.step == 40
    reads = sum(e.count for e in prof.key_averages() if e.key == "aten::_local_scalar_dense")
    # per epoch: the divergence check (1); per evaluation point: the accuracy and loss (1) and the train loss (1)
    assert reads <= 4 * 1 + 2 * 2, reads


def test_last_evaluation_sees_swa_averages_swapped_in_at_the_last_epoch_end():
    """SWA (per epoch) puts its averaged weights in at EPOCH_END of its last epoch; the
    evaluation at that epoch's end comes after, so it measures the delivered model."""
    r = train(
        TrainConfig.from_dict(
            tiny(epochs=4, algorithms={"swa": {"swa_start": "0.25dur", "swa_end": "0.97dur", "update_interval": "1ep"}})
        ),
        progress=False,
    )
    assert r.status == "completed", r.reason
    assert r.history[-1].val_accuracy == r.final.val_accuracy
    assert r.history[-1].val_loss == pytest.approx(r.final.val_loss, rel=1e-6)


@pytest.fixture
def eager_compile(monkeypatch):
    """torch.compile through Dynamo's eager backend: inductor needs a GPU or a working C++
    toolchain, and Dynamo's tracing, guards and caches (what these tests look at) are the same."""
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda m, mode=None, **kw: real(m, backend="eager"))


def test_swa_with_compile_loads_its_averages_back(eager_compile):
    """SWA's averaged copy of a compiled model held the weights twice (``compiled._orig_mod.*``)
    and failed to load back at its last epoch (a GPU study's trial)."""
    import copy

    r = train(
        TrainConfig.from_dict(
            tiny(
                epochs=4,
                compile=True,
                algorithms={"swa": {"swa_start": "0.25dur", "swa_end": "0.97dur", "update_interval": "1ep"}},
            )
        ),
        progress=False,
    )
    assert r.status == "completed", r.reason
    run, _ = prepared({"compile": True})
    model = run.state.model
    assert model.compiled is not None
    assert not any(k.startswith("compiled.") for k in copy.deepcopy(model).state_dict())


def test_every_compile_run_in_a_process_compiles_its_own_graph(eager_compile):
    """A worker trains many configs in one process. Dynamo's graphs live per code object for the
    process: without a reset a run reused an earlier run's graph, and from the 9th variant of the
    model on (Dynamo's recompile limit) a "compile" run trained eager, silently."""
    from torch._dynamo.utils import counters

    variants = [(w, cl) for w in (8, 12, 16, 20, 24) for cl in (False, True)]  # 10 > the limit of 8
    for width, cl in variants:
        before = counters["stats"]["unique_graphs"]
        r = train(
            TrainConfig.from_dict(tiny(epochs=0.5, compile=True, channels_last=cl, **{"model.width": width})),
            progress=False,
        )
        assert r.status == "completed", r.reason
        assert counters["stats"]["unique_graphs"] == before + 1, (width, cl)


def test_extra_evaluations_land_on_the_first_step_at_or_past_each_epoch_asked():
    """``eval_at`` (a pruner's rungs) adds points; one short of its epoch would judge a rung early."""
    cfg = TrainConfig.from_dict(tiny(epochs=2))  # 128 training images, batch 32: 4 steps an epoch
    assert [p.epoch for p in train(cfg, progress=False).history] == [1.0, 2.0]
    r = train(cfg, progress=False, eval_at=(2 / 9, 2 / 3, 1.0))
    assert [p.epoch for p in r.history] == [0.25, 0.75, 1.0, 2.0]


def test_evaluations_after_train_seconds_land_on_the_first_step_past_each():
    """``eval_after`` (a pruner's time rung): a point at the first step whose train seconds passed
    the mark; a mark already passed when another point is due costs no second evaluation."""
    cfg = TrainConfig.from_dict(tiny(epochs=2))  # 4 steps an epoch
    r = train(cfg, progress=False, eval_after=(1e-9,))
    assert [p.epoch for p in r.history] == [0.25, 1.0, 2.0]
    r = train(cfg, progress=False, eval_after=(1e-9, 2e-9), eval_at=(0.25,))
    assert [p.epoch for p in r.history] == [0.25, 1.0, 2.0]
    r = train(cfg, progress=False, eval_after=(1e6,))  # never reached: no extra point
    assert [p.epoch for p in r.history] == [1.0, 2.0]


def test_the_accuracy_bound_is_below_the_true_accuracy_at_most_as_often_as_it_says():
    """A point stopped early is wrong only when the bound falls under the true accuracy: 0.135%
    (z = 3, one-sided) at any accuracy. Checked by drawing scores of n images at known accuracies
    (Wilson's bound failed this near 0.97)."""
    import numpy as np

    rng = np.random.default_rng(0)
    for p in (0.1, 0.5, 0.85, 0.97):
        for n in (128, 256, 1024):
            c = rng.binomial(n, p, size=20000)
            below = np.mean([L.accuracy_upper(int(k), n) < p for k in c])
            assert below < 0.0025, (p, n, below)
    assert L.accuracy_upper(128, 128) == 1.0 and 0.0 < L.accuracy_upper(0, 128) < 0.1
    assert L.accuracy_upper(64, 128) < L.accuracy_upper(64, 127)  # fewer images, wider


def test_a_point_scores_as_much_of_the_validation_set_as_its_decision_needs(monkeypatch):
    """score(enough=...) asks after 1, 2, 4, ... batches and stops where told, the accuracy that
    of the images scored; a run with ``settle`` scores points below the target on a prefix of a
    fixed shuffle and its last point whole; without it every point is whole."""
    monkeypatch.setitem(L.EVAL_BATCH, "cpu", 16)
    run, _ = prepared({"epochs": 1})
    run.fit()
    x, y = run.splits.val_x, run.splits.val_y
    asked = []
    with run.loop.delivered():
        whole = run.loop.score(x, y)
        assert whole[2] == len(y) and whole[:2] == run.loop.evaluate(x, y)
        assert run.loop.score(x, y, enough=lambda u: asked.append(u) or False)[:2] == pytest.approx(whole[:2])
        first = run.loop.score(x, y, enough=lambda u: True)
        alone = run.loop.evaluate(x[:16], y[:16])
    assert len(asked) == len([b for b in (1, 2, 4, 8, 16, 32) if 16 * b < len(y)])
    assert first[2] == 16 and first[:2] == pytest.approx(alone)

    cfg = TrainConfig.from_dict(tiny(epochs=2, eval_every=0.25, target_accuracy=0.99))
    plain = train(cfg, progress=False)
    settled = train(cfg, progress=False, settle=True)
    assert all(p.val_images is None for p in plain.history)
    assert [p.val_images for p in settled.history[:-1]] == [16] * (len(settled.history) - 1)
    assert settled.history[-1].val_images is None
    assert settled.history[-1].val_accuracy == plain.history[-1].val_accuracy
    assert settled.final.val_accuracy == plain.final.val_accuracy
    # A hook's verdict comes first: False scores every point whole.
    hooked = train(cfg, progress=False, settle=lambda epoch, seconds, upper: False)
    assert [p.val_accuracy for p in hooked.history] == [p.val_accuracy for p in plain.history]
