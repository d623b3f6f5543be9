"""CORDS data-subset selection in a training run: every strategy selects and
trains, subsets have the right size and schedule, weights reach the loss (also
through MixUp, CutMix and LabelSmoothing), selection time is train time, bad
combinations are refused, and the cords 0.0.4 compatibility fixes hold."""

import json
import math
import sys
import time

import numpy as np
import pytest
import torch
from composer.core import Callback
from composer.loss import soft_cross_entropy

from effsearch.config import SELECTIONS, WEIGHTED_SELECTIONS, ConfigError, TrainConfig
from effsearch.trainer.composer.model import EffModel
from effsearch.trainer.data import cords_compat
from effsearch.trainer.data import selection as S
from effsearch.trainer.data.splits import load_splits
from effsearch.trainer.models import build_model
from effsearch.trainer.result import RunResult
from effsearch.trainer.training import prepare, train
from tests.support.helpers import tiny

STRATEGIES = SELECTIONS[1:]


def sel(strategy, fraction=0.3, **more):
    """A tiny run with selection every epoch (synthetic 400 images: 320 to train, batches of 32)."""
    d = {
        "dataset.synthetic_size": 400,
        "selection.strategy": strategy,
        "selection.fraction": fraction,
        "selection.select_every": 1,
        "epochs": 3,
    }
    d.update(more)
    return tiny(**d)


def built(raw, callbacks=()):
    cfg = TrainConfig.from_dict(raw)
    result = RunResult(status="running", config=cfg.to_dict())
    run = prepare(cfg, load_splits(cfg), "cpu", result, callbacks=list(callbacks))
    run.fit()
    run.loop.finish()
    return run, result, cfg


# -- every strategy ------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_selects_and_trains(strategy):
    run, result, cfg = built(sel(strategy))
    s = run.selection
    n = len(run.train_loader.dataset)
    budget = int(0.3 * n)
    batches = math.ceil(budget / cfg.batch_size)
    assert len(run.train_loader) == batches  # Composer's epoch: the budget's batches, every epoch
    kinds = [e["kind"] for e in s.log]
    if strategy == "random":
        assert kinds == ["random"]
    elif strategy == "random-online":
        assert kinds == ["random"] * 3
    else:  # as CORDS: random first (untrained model), then the strategy every epoch
        assert kinds == ["random", "strategy", "strategy"]
    assert [p.epoch for p in result.history] == [1.0, 2.0, 3.0]
    for point in result.history:
        assert abs(point.subset_size - 0.3 * n) <= cfg.batch_size, point  # within one batch of the fraction
    assert result.history[-1].selections == len(kinds)
    served = min(s.subset_size, batches * cfg.batch_size)
    assert result.history[-1].samples_seen == result.history[-2].samples_seen + served
    assert 0 < s.seconds <= run.loop.train_seconds()
    if strategy in WEIGHTED_SELECTIONS:
        w = run.train_loader.dataset.weights
        chosen = s.sampler.subset
        assert (w[chosen] > 0).any() and w.sum() > 0
        outside = torch.ones(n, dtype=torch.bool)
        outside[chosen] = False
        assert (w[outside] == 0).all()  # only the subset carries weight
    else:
        assert run.train_loader.dataset.weights is None
    assert run.state.timestamp.epoch.value == 3


def test_random_online_changes_its_subset_and_random_keeps_it():
    online, _, _ = built(sel("random-online", epochs=4))
    prints = [e["fingerprint"] for e in online.selection.log]
    assert len(prints) == 4 and len(set(prints)) == 4
    fixed, _, _ = built(sel("random", epochs=4))
    assert [e["epoch"] for e in fixed.selection.log] == [0]
    served = []
    for _ in range(3):  # the fixed subset, reshuffled each epoch
        served.append(sorted(fixed.selection.sampler))
    assert served[0] == served[1] == served[2] == sorted(fixed.selection.sampler.subset.tolist())


def test_selection_is_reproducible_and_leaves_global_rngs_alone():
    a, _, _ = built(sel("random-online"))
    b, _, _ = built(sel("random-online"))
    c, _, _ = built(sel("random-online", seed=1))
    fa = [e["fingerprint"] for e in a.selection.log]
    assert fa == [e["fingerprint"] for e in b.selection.log]
    assert fa != [e["fingerprint"] for e in c.selection.log]
    np.random.seed(123)
    expect = np.random.random()
    np.random.seed(123)
    with cords_compat.seeded(7):
        cords_compat.strategies().RandomStrategy(_cords_loader(10), online=True).select(4)
    assert np.random.random() == expect


def test_kappa_warm_starts_on_full_data_then_selects():
    run, result, cfg = built(sel("gradmatch-pb", epochs=4, **{"selection.kappa": 0.5}))
    n = len(run.train_loader.dataset)
    per_epoch = math.ceil(int(0.3 * n) / cfg.batch_size) * cfg.batch_size
    assert [e["kind"] for e in run.selection.log] == ["warm-start", "strategy", "strategy"]
    assert [e["epoch"] for e in run.selection.log] == [0, 2, 3]  # first selection right after the warm start
    sizes = [p.subset_size for p in result.history]
    assert sizes[:2] == [n, n] and all(abs(x - 0.3 * n) <= cfg.batch_size for x in sizes[2:])
    seen = [p.samples_seen for p in result.history]
    assert seen[:2] == [per_epoch, 2 * per_epoch]  # warm start: same batches per epoch as the subset epochs


# -- weights reach the loss ------------------------------------------------------------


class LossProbe(Callback):
    """Recomputes the weighted loss each batch and compares it with the trainer's."""

    def __init__(self):
        self.checked = 0
        self.non_uniform = 0
        self.target = None

    def before_loss(self, state, logger):
        self.target = state.batch[1].detach().clone()  # after MixUp/CutMix/LabelSmoothing changed it

    def before_backward(self, state, logger):
        batch = state.batch
        assert len(batch) == 3, "weighted strategies always serve (x, y, w)"
        w = batch[2]
        out = state.outputs.detach()

        def weighted(target):
            return (soft_cross_entropy(out, target, reduction="none") * w).sum() / w.sum()

        expected = weighted(self.target)
        for algo in state.algorithms:
            name = type(algo).__name__
            if name == "MixUp" and algo.interpolate_loss:
                expected = (1 - algo.mixing) * expected + algo.mixing * weighted(algo.permuted_target)
            if name == "CutMix" and algo.interpolate_loss:
                lam = algo._adjusted_lambda
                expected = lam * expected + (1 - lam) * weighted(algo._permuted_target)
        assert torch.allclose(state.loss.detach(), expected, rtol=1e-5, atol=1e-6)
        self.checked += 1
        if not torch.allclose(w, w[0].expand_as(w)):
            self.non_uniform += 1


@pytest.mark.parametrize(
    "algorithms",
    [
        {},
        {"mixup": {"alpha": 1.0}},
        {"mixup": {"alpha": 1.0, "interpolate_loss": True}},
        {"cutmix": {"alpha": 1.0, "interpolate_loss": True}},
        {"label_smoothing": {"smoothing": 0.2}},
    ],
    ids=["plain", "mixup", "mixup-interpolate-loss", "cutmix-interpolate-loss", "label-smoothing"],
)
def test_weights_reach_the_loss(algorithms):
    probe = LossProbe()
    run, result, _ = built(sel("craig-pc", epochs=2, algorithms=algorithms), [probe])
    assert probe.checked == 2 * len(run.train_loader)
    assert probe.non_uniform > 0  # CRAIG's weights differ within batches, so the check discriminates


def test_loss_reuses_weights_only_for_the_same_outputs():
    m = EffModel(torch.nn.Identity(), 4)
    out = torch.randn(6, 4)
    y, y2 = torch.randint(0, 4, (6,)), torch.randint(0, 4, (6,))
    w = torch.tensor([1.0, 0.0, 3.0, 0.5, 2.0, 0.0])
    ce2 = soft_cross_entropy(out, y2, reduction="none")
    first = m.loss(out, (None, y, w))
    assert torch.allclose(first, (soft_cross_entropy(out, y, reduction="none") * w).sum() / w.sum())
    assert torch.allclose(m.loss(out, (None, y2)), (ce2 * w).sum() / w.sum())  # MixUp's second term
    assert torch.allclose(m.loss(out.clone(), (None, y2)), ce2.mean())  # other outputs: unweighted


# -- time ----------------------------------------------------------------------------


def test_selection_time_is_train_time_and_reported(tmp_path, monkeypatch):
    spans = []
    original = S.SubsetSelection._choose

    def timed(self, *a, **k):
        t0 = time.perf_counter()
        try:
            return original(self, *a, **k)
        finally:
            spans.append((t0, time.perf_counter()))

    monkeypatch.setattr(S.SubsetSelection, "_choose", timed)
    run, result, _ = built(sel("gradmatch-pb", epochs=2))
    clock = run.loop
    assert len(spans) == 2
    assert all(clock.t0 <= a and b <= clock.t_end for a, b in spans)  # inside the training clock
    assert run.selection.seconds >= sum(b - a for a, b in spans) - 1e-6
    assert clock.train_seconds() >= run.selection.seconds
    assert result.history[0].train_seconds >= spans[0][1] - spans[0][0]  # the epoch-0 selection, before eval 1

    r = train(TrainConfig.from_dict(sel("gradmatch-pb", epochs=2)), out_dir=tmp_path, progress=False)
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["final"]["selection_seconds"] == r.final.selection_seconds > 0
    assert saved["final"]["train_seconds"] >= saved["final"]["selection_seconds"]
    assert [p["subset_size"] for p in saved["history"]] == [p.subset_size for p in r.history]


# -- validation and CORDS's known failures ------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"selection.strategy": "craig-pb", "algorithms": {"selective_backprop": {}}},
            "algorithms.selective_backprop: cannot be combined with selection.strategy 'craig-pb'",
        ),
        (
            {"selection.strategy": "gradmatch", "algorithms": {"selective_backprop": {}}},
            "algorithms.selective_backprop: cannot be combined with selection.strategy 'gradmatch'",
        ),
        ({"selection.strategy": "glister", "selection.greedy": "lazy"}, "selection.greedy: 'lazy' does not apply"),
        ({"selection.strategy": "gradmatch-pb", "selection.greedy": "naive"}, "selection.greedy: 'naive' does not"),
        (
            {"selection.strategy": "craig", "selection.select_every": 3},
            "selection.select_every: 'craig' would never run",
        ),
        (
            {"selection.strategy": "random", "loader": "ffcv", "algorithms": {"randaugment": {}}},
            "algorithms.randaugment: works on the torch loader's per-image transforms only",
        ),
    ],
)
def test_bad_combinations_are_refused(change, message):
    raw = sel("random", epochs=3)
    raw.pop("selection")
    raw["selection"] = {"fraction": 0.3, "select_every": 1}
    for key, value in change.items():
        if key.startswith("selection."):
            raw["selection"][key.split(".", 1)[1]] = value
        else:
            raw[key] = value
    with pytest.raises(ConfigError, match=message):
        TrainConfig.from_dict(raw)


def test_allowed_combinations_validate():
    TrainConfig.from_dict(sel("glister", algorithms={"selective_backprop": {}}))  # unweighted: fine
    TrainConfig.from_dict(sel("craig", **{"selection.select_every": 3, "selection.kappa": 0.5}))
    # FFCV serves every strategy's subsets and weights (effsearch.trainer.data.ffcv_loader).
    for strategy in SELECTIONS[1:]:
        assert TrainConfig.from_dict(sel(strategy, loader="ffcv")).loader == "ffcv"


def test_selective_backprop_trains_with_an_unweighted_strategy():
    sb = {"selective_backprop": {"start": 0.0, "end": 1.0, "keep": 0.5, "interrupt": 0}}
    run, result, _ = built(sel("glister", epochs=2, algorithms=sb))
    assert result.history[-1].selections == 2


def test_glister_greedy_default_works_where_cords_stochastic_fails():
    cfg = TrainConfig.from_dict(sel("glister-pb", **{"selection.greedy": "stochastic"}))
    splits = load_splits(cfg)
    with pytest.raises(
        ConfigError,
        match="selection.greedy: 'stochastic' cannot run glister-pb.*Sample larger than population.*'naive' or 'auto'",
    ):
        S.make_selection(cfg, splits, "cpu")
    auto = TrainConfig.from_dict(sel("glister-pb"))
    assert S.resolve_greedy(auto, 320, splits.train_y.numpy(), 10) == "Naive"
    assert S.resolve_greedy(TrainConfig.from_dict(sel("glister")), 320, splits.train_y.numpy(), 10) == "Stochastic"
    # The predicate matches CORDS: its own stochastic greedy fails on exactly this data.
    _, selection = S.make_selection(auto, splits, "cpu")
    strategy = selection._build(S.ModelView(build_model("tiny-cnn", 3, 10, 8).eval()))
    strategy.greedy = "Stochastic"
    with pytest.raises(ValueError, match="Sample larger than population"):
        strategy.select(selection.budget, {})


def test_craig_supervised_refuses_data_it_cannot_hold():
    cfg = TrainConfig.from_dict(sel("craig", **{"dataset.synthetic_size": 12_600, "dataset.val_fraction": 0.1}))
    with pytest.raises(ConfigError, match="'craig' .* dense .* Use craig-pc or craig-pb"):
        S.make_selection(cfg, load_splits(cfg), "cpu")


def test_a_failure_inside_cords_names_the_strategy(monkeypatch):
    cls = cords_compat.strategies().GradMatchStrategy

    def broken(self, budget, params):
        raise IndexError("deep inside CORDS")

    monkeypatch.setattr(cls, "select", broken)
    with pytest.raises(
        S.SelectionError,
        match=r"'gradmatch-pb' \(CORDS gradmatch/PerBatch\) failed at epoch 1: "
        "IndexError: deep inside CORDS",
    ):
        built(sel("gradmatch-pb", epochs=2))


# -- cords 0.0.4 compatibility (effsearch/trainer/data/cords_compat.py) ---------------------------


def _cords_loader(n, batch=4):
    x = torch.randint(0, 255, (n, 3, 8, 8), dtype=torch.uint8)
    y = torch.arange(n) % 3
    ds = S.NormalizedImages(x, y, torch.full((3,), 0.5), torch.full((3,), 0.25))
    return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=False)


def test_cords_imports_and_leaves_no_stand_ins():
    import importlib.util

    import sklearn.datasets

    st = cords_compat.strategies()
    assert st.GLISTERStrategy.__module__ == "cords.selectionstrategies.SL.glisterstrategy"
    assert "load_boston" not in vars(sklearn.datasets)
    if importlib.util.find_spec("torchtext") is None:
        assert "torchtext" not in sys.modules and "torchtext.data" not in sys.modules
    assert "cords.utils.data.datasets.SL.builder" in sys.modules  # the module that needed them


def test_craig_scores_samples_in_index_order():
    st = cords_compat.strategies()
    craig_mod = sys.modules["cords.selectionstrategies.SL.craigstrategy"]
    assert craig_mod.SubsetRandomSampler is cords_compat.InOrderSampler
    torch.manual_seed(0)
    model = build_model("tiny-cnn", 3, 3, 4).eval()
    loader = _cords_loader(24)
    view = S.ModelView(model)
    craig = st.CRAIGStrategy(
        loader, loader, view, torch.nn.CrossEntropyLoss(reduction="none"), "cpu", 3, False, False, "PerClass", S.log
    )
    idxs = torch.tensor([5, 1, 22, 9, 14, 3, 17])
    craig.compute_score({}, idxs)
    x = torch.stack([loader.dataset[int(i)][0] for i in idxs])
    y = torch.stack([loader.dataset[int(i)][1] for i in idxs])
    with torch.no_grad():
        g = torch.softmax(model(x), 1) - torch.nn.functional.one_hot(y, 3)  # d(CE)/d(logits), in idxs order
    dist = ((g[:, None] - g[None]) ** 2).sum(-1)
    assert np.allclose(craig.dist_mat, (dist.max() - dist).numpy(), atol=1e-5)


def test_gradmatch_honours_lambda_on_cpu():
    st = cords_compat.strategies()
    torch.manual_seed(0)
    X, Y = torch.rand(8, 30), torch.rand(8)
    out = []
    for lam in (0.0, 5.0):
        gm = st.GradMatchStrategy(
            _cords_loader(8),
            _cords_loader(8),
            None,
            None,
            0.1,
            cords_compat.gradmatch_device("cpu"),
            3,
            False,
            "PerBatch",
            S.log,
            lam=lam,
            eps=1e-100,
        )
        out.append(gm.ompwrapper(X, Y, 5))
    assert out[0][1] != out[1][1]  # the regularisation changes the weights (CORDS's CPU branch drops it)


def test_random_strategy_no_longer_reseeds_from_entropy():
    st = cords_compat.strategies()
    picks = []
    for _ in range(2):
        with cords_compat.seeded(11):
            picks.append(st.RandomStrategy(_cords_loader(50), online=True).select(10)[0].tolist())
    assert picks[0] == picks[1]


def test_apricot_kernels_compile_once():
    cords_compat.strategies()
    fl = sys.modules["apricot.functions.facilityLocation"]
    assert fl.calculate_gains(fl.dtypes, False, True, False) is fl.calculate_gains(fl.dtypes, False, True, False)


def test_importing_cords_leaves_numpy_error_handling_alone():
    """cords' helpers set np.seterr(all='raise') at import; an underflow in Optuna's TPE
    (same process) would then raise and lose a trial."""
    import importlib

    from effsearch.trainer.data import cords_compat

    before = np.geterr()
    cords_compat.strategies()
    importlib.import_module("cords.selectionstrategies.helpers.omp_solvers")
    assert np.geterr() == before
    assert np.exp(np.float64(-1000)) == 0.0  # underflow: no FloatingPointError


def test_select_every_default_is_held_below_the_epochs():
    # Left at null, the period is 5 epochs, or fewer so that a model-based strategy selects at
    # least once: `--set epochs=2` with a strategy must not be refused for a value nobody set.
    from effsearch.config import select_every

    short = TrainConfig.from_dict(sel("gradmatch-pb", **{"selection.select_every": None, "epochs": 2}))
    assert short.selection.select_every is None and select_every(short) == 1
    assert (
        select_every(TrainConfig.from_dict(sel("gradmatch-pb", **{"selection.select_every": None, "epochs": 20}))) == 5
    )
    assert select_every(TrainConfig.from_dict(sel("craig", **{"selection.select_every": 2, "epochs": 4}))) == 2
