"""The search-efficiency replay (research/replay): its grid, rung rules, yardstick and command line."""

import sys

import pytest

from research import record_quickstart, search_anatomy
from research.replay import cli, report, surrogate, table
from research.replay.candidates import LossThenPred, MultiMetricRule, TimeRule
from research.replay.rules import OracleRule, Rule, grid_index
from research.replay.run import EARLY, LOSS_CAP, N_GRID, Run, Settle, grid_run, loss_points


def run(reach_at: int | None, final: float):
    """A run on the 1/9 grid: 1 s a ninth, 0.5 accuracy until ``reach_at`` (0.96 from there)."""
    acc = [0.96 if reach_at is not None and k >= reach_at else 0.5 for k in range(N_GRID)]
    return Run([float(k + 1) for k in range(N_GRID)], acc, final, 0.0, 0.1, 0.2)


def test_the_oracle_keeps_exactly_the_trials_that_raise_the_front():
    rule = OracleRule()
    rule.ref = (20.0, -0.9)
    pools: dict = {}
    target = 0.95
    assert rule.play(run(4, 0.97), target, pools, 0, may_prune=False) is None  # the baseline: 5 s, 0.97
    # Slower and no more accurate than the baseline: stopped at the first rung (grid point 0, 1/9).
    assert rule.play(run(6, 0.96), target, pools, 1) == 0
    assert rule.play(run(None, 0.80), target, pools, 2) == 0  # a miss
    # Faster, or more accurate: runs to the end and joins the front the next trial is judged on.
    assert rule.play(run(2, 0.955), target, pools, 3) is None
    assert rule.play(run(8, 0.99), target, pools, 4) is None
    assert rule.play(run(3, 0.95), target, pools, 5) == 0  # dominated by the 3 s / 0.955 trial now
    assert len(pools["oracle"]) == 3


def test_the_grid_takes_the_evaluation_meant_for_each_ninth():
    """The recorder evaluated every round(epochs / 9 x steps an epoch) steps: here 13 of 20 an
    epoch, so the k-th evaluation falls short of k/9 of 6 epochs. It is still the k/9 point (the
    first point at or past 1/9 would be the 2/9 one); the last ninth is the end."""
    hist = [[0.65 * k, 0.1 * k, 0.1 * k] for k in range(1, 10)] + [[6.0, 1.0, 0.95]]
    rec = {
        "status": "completed",
        "history": hist,
        "wall_seconds": 2.0,
        "train_seconds": 1.0,
        "eval_seconds": 0.5,
        "final_eval_seconds": 0.1,
        "val_accuracy": 0.95,
    }
    r = grid_run(rec, 6.0, 1.0, early=[(1 / 3, 0.11), (2 / 3, 0.12)])
    assert r.acc == pytest.approx([0.1 * k for k in range(1, 9)] + [0.95])
    assert r.t[0] == pytest.approx(0.1) and r.t[-1] == 1.0
    assert r.early_t == pytest.approx((0.1 / 3, 0.2 / 3)) and r.early_acc == (0.11, 0.12)  # on the run's clock


def test_a_first_rung_at_1_27_decides_on_the_early_point_and_pays_its_evaluation():
    rule = Rule("acc", 1 / 27, min_trials=1)
    assert [grid_index(r) for r in rule.brackets[0]] == [-2, 0, 2]  # 1/27, 1/9, 1/3
    assert rule.extra(-2) == 1 and rule.extra(8) == 1
    early = dict(early_t=(0.3, 0.6), early_acc=(0.5, 0.5))
    good = Run(
        [float(k + 1) for k in range(9)], [0.9] * 9, 0.97, 0.0, 0.1, 0.2, early_t=(0.3, 0.6), early_acc=(0.6, 0.7)
    )
    bad = Run([float(k + 1) for k in range(9)], [0.9] * 9, 0.97, 0.0, 0.1, 0.2, **early)
    pools: dict = {}
    assert rule.play(good, 0.95, pools, 0) is None
    # Ranked on accuracy at 1/27 alone (0.5 < 0.6; its later points are as good): stopped there.
    assert rule.play(bad, 0.95, pools, 1) == -2
    assert bad.cost(-2, pruned=True, extra=rule.extra(-2)) == pytest.approx(0.3 + 0.1)
    assert good.cost(8, extra=rule.extra(8)) == pytest.approx(9.0 + 0.1 * 10 + 0.2)
    with pytest.raises(ValueError, match="not on the replay's grid"):
        Rule("acc", 1 / 18)


def test_eta_9_decides_once_at_a_ninth_and_keeps_the_best_ninth():
    """The product's default since 2026-11-24: a trial kept at 1/9 is never judged again."""
    rule = Rule("pred", eta=9, min_trials=1)
    assert rule.name == "moasha-pred@1/9-eta9" and [grid_index(r) for r in rule.brackets[0]] == [0]
    pools: dict = {}
    target = 0.95
    # Slow starters (0.5 at 1/9) that reach the target late: the first one is alone at the rung.
    assert rule.play(run(6, 0.97), target, pools, 0) is None
    fast = Run([float(k + 1) for k in range(9)], [0.9] + [0.96] * 8, 0.97, 0.0, 0.1, 0.2)
    for n in range(1, 9):  # a second to a ninth peer at the rung: only one in 9 goes on
        assert rule.play(fast if n == 1 else run(6, 0.97), target, pools, n) == (None if n == 1 else 0)
    assert list(pools) == [(0, 0)]  # one rung: no point was judged at 1/3


def test_the_time_rung_judges_at_equal_seconds_and_falls_back_without_a_baseline_time():
    """TimeRule (the product's clock: time): each run at its first point at or past T seconds, on
    accuracy, the baseline's point a peer; a run whose budget ends before T is never judged;
    without T (a baseline that missed) the product's budget rung decides."""
    rule = TimeRule(0.15, eta=2)
    rule.T = 2.5
    pools: dict = {}
    fast = Run([0.5 * (k + 1) for k in range(N_GRID)], [0.9] * N_GRID, 0.97, 0.0, 0.1, 0.2)
    slow = Run([2.0 * (k + 1) for k in range(N_GRID)], [0.3] * N_GRID, 0.97, 0.0, 0.1, 0.2)
    short = Run([0.2 * (k + 1) for k in range(N_GRID)], [0.1] * N_GRID, 0.5, 0.0, 0.1, 0.2)
    assert rule.play(fast, 0.95, pools, 0, may_prune=False) is None  # the baseline: judged at 2.5 s (k=4)
    assert pools["time"] == [0.9]
    assert rule.play(slow, 0.95, pools, 1) == 1  # its first point past 2.5 s is 4 s (k=1), below the baseline
    assert rule.play(short, 0.95, pools, 2) is None and pools["time"] == [0.9, 0.3]  # ends at 1.8 s
    assert rule.extra(1) == 0
    rule.T = None
    assert rule.play(slow, 0.95, {}, 3) is None  # the fallback's first trial at its rung: no peer yet


def test_the_headline_interval_covers_what_other_seeds_read():
    import numpy as np

    ratios = np.random.default_rng(1).lognormal(mean=np.log(0.33), sigma=0.5, size=40)
    lo, hi = report.median_interval(ratios)
    assert lo < float(np.median(ratios)) < hi
    # Over many fresh seed sets of the same size, about 90% of their medians fall inside.
    fresh = np.median(np.random.default_rng(2).lognormal(np.log(0.33), 0.5, size=(2000, 40)), axis=1)
    assert 0.7 < np.mean((fresh >= lo) & (fresh <= hi)) <= 1.0
    assert report.median_interval([0.3] * 40) == (0.3, 0.3)  # no spread, no interval
    wide = report.median_interval(np.random.default_rng(1).lognormal(np.log(0.33), 1.0, size=40))
    assert wide[1] - wide[0] > hi - lo  # more seed noise, a wider interval


def test_settled_points_cost_a_first_batch_as_the_product_scores_them():
    """The product scores a point on its first batch when the upper bound there is under the
    target, or once the target was reached; a rung's point when it is pruned even at that bound.
    Whole: rungs a trial was kept at, the run's end, and a stop no bound would have made."""
    settle = Settle(128, 256)
    assert settle.share == 0.5 and settle.upper(0.5) < 0.95 < settle.upper(0.94)
    r = Run([float(k + 1) for k in range(9)], [0.5, 0.6, 0.94, 0.96, 0.9, 0.97, 0.97, 0.97, 0.97], 0.97, 0.0, 1.0, 0.0)
    # 0.5, 0.6 settled; 0.94 is within the bound of 0.95 (whole); 0.96 reaches it (whole);
    # then settled to the end, which is whole: 2 x 0.5 + 2 + 4 x 0.5 + 1.
    assert r.evals(8, 0.95, settle) == pytest.approx(6.0)
    assert r.evals(8, 0.95, None) == pytest.approx(9.0) == r.evals(8, 0.95, settle, whole=range(9))
    assert r.evals(8, 0.95, settle, whole=[0]) == pytest.approx(6.5)  # kept at a rung at 1/9
    assert r.evals(0, 0.95, settle, stop=True) == pytest.approx(1.0)
    assert r.evals(0, 0.95, settle, stop=True, stop_settled=True) == pytest.approx(0.5)
    assert r.cost(0, pruned=True, evals=0.5) == pytest.approx(1.0 + 0.5)

    # The rule says whether a stop was settled: pruned even at the bound of its first batch.
    rule = Rule("pred", eta=9, min_trials=1)
    rule.settle = settle
    pools: dict = {}
    strong = Run([float(k + 1) for k in range(9)], [0.9] * 9, 0.97, 0.0, 1.0, 0.0)
    assert rule.play(strong, 0.95, pools, 0) is None and rule.rungs_passed == [0]
    chance = Run([float(k + 1) for k in range(9)], [0.1] * 9, 0.1, 0.0, 1.0, 0.0)
    assert rule.play(chance, 0.95, pools, 1) == 0 and rule.stop_settled
    close = Run([float(k + 1) for k in range(9)], [0.85] * 9, 0.9, 0.0, 1.0, 0.0)
    assert rule.play(close, 0.95, pools, 2) == 0 and not rule.stop_settled  # kept at its bound


def test_the_anatomy_sorts_the_costs_spent_before_the_level():
    """research/search_anatomy.py: costs in spending order, summed by kind up to the compute at
    which the level was reached; what is left of it is the sampler's own seconds."""
    mod = search_anatomy
    log = [("hit", 9.0), ("pruned", 1.0), ("miss", 6.0), ("pruned", 1.0), ("hit", 5.0), ("pruned", 1.0)]
    out = mod.split(log, 22.5, warm=True)  # reached with the second hit, 0.5 s of sampling among them
    assert out["baseline"] == 9.0 and out["pruned"] == 2.0 and out["miss"] == 6.0 and out["hit"] == 5.0
    assert out["n_pruned"] == 2 and out["n_full"] == 2 and out["sampler"] == pytest.approx(0.5)
    cold = mod.split(log, 9.5, warm=False)
    assert cold["baseline"] == 0.0 and cold["hit"] == 9.0 and cold["n_full"] == 1 and cold["pruned"] == 0.0


def test_the_loss_rule_keeps_the_lowest_val_loss_and_reads_it_where_recorded():
    """Rank ``loss`` (a candidate rule): at a rung up to the first ninth, ASHA on val loss; the
    recorded points give each run its loss at 1/27, 2/27 and 3/27 (a missing or non-finite one
    reads LOSS_CAP); a rung after the first ninth, where nothing is recorded, is refused."""
    points = [[0.1, 0.2, 0.1, 2.31, 2.4], [0.2, 0.4, 0.12, float("nan"), 2.3], [0.3, 0.6, 0.2, 2.25, 2.2]]
    assert loss_points(points, 2.7) == (2.31, LOSS_CAP, 2.25)
    assert loss_points([], 2.7) == (LOSS_CAP,) * 3
    rule = Rule("loss", 1 / 9, eta=9, min_trials=1)
    pools: dict = {}

    def lossy(loss):
        r = run(None, 0.9)
        r.early_loss = (2.3, 2.3, loss)
        return r

    for loss in (2.30, 2.31, 2.32):
        rule.play(lossy(loss), 0.95, pools, 0, may_prune=False)
    assert rule.play(lossy(2.29), 0.95, pools, 1) is None  # the lowest loss of four: kept
    assert rule.play(lossy(2.315), 0.95, pools, 2) == 0  # pruned at 1/9, with the accuracy of the rest
    with pytest.raises(ValueError, match="first ninth"):
        Rule("loss", 1 / 9, eta=2)


def test_the_two_stage_surrogate_answers_alike_and_holds_out():
    """``--cond``: the first ninth from the parameters, the rest given it. The same configuration
    gets the same answer; held out, it ranks final accuracy at rho >= 0.8 (as the one-stage one does)."""
    from effsearch.search.study import studyfile

    spec = studyfile.load(table.STUDY)
    tab = table.Table(table.TABLE, spec.space, table.LOADED)
    sur = surrogate.CondSurrogate(tab, "full")
    x = list(tab.X[3])
    a, b = sur(x, "k"), sur(x, "k")
    assert a is b and len(a.early_acc) == len(EARLY) and len(a.early_loss) == len(EARLY) + 1
    assert surrogate.validate(sur, tab, "full", spec.base.target_accuracy)[0] >= 0.8


def test_derived_features_read_each_optimizers_lr_and_the_accumulated_batch():
    """Steps count accumulated batches as one; each optimizer's own lr parameter is read (sgdw
    shares SGD's); the quickstart's features (sgd, adamw, no accumulation) are as before."""
    import math

    base = {"epochs": 6, "batch_size": 64, "optimizer.name": "sgd", "optimizer.lr": 0.1}
    steps, sgd_lr, adamw_lr, _ = table.derived(base)
    assert steps == pytest.approx(math.log(6 / 64)) and sgd_lr == pytest.approx(math.log(0.05)) and adamw_lr == -10
    assert table.derived({**base, "accumulate": 2})[0] == pytest.approx(steps - math.log(2))
    adamw = table.derived({**base, "optimizer.name": "adamw", "optimizer.lr@adamw": 0.002})
    assert adamw[1] == -10 and adamw[2] == pytest.approx(math.log(0.001))
    assert table.derived({**base, "optimizer.name": "sgdw"})[1] == pytest.approx(sgd_lr)


def test_a_phase1_table_records_the_studys_phase_1_and_loads_alone(tmp_path, monkeypatch, capsys):
    """``python -m research.record_quickstart --study F --phase1``: each configuration once, as F's
    phase 1 trains it (its data subset and target, no test set), on the nine-point grid; the replay
    loads such a table without the quickstart's early and loss points (keyed by the same indices)."""
    from effsearch.search.study import studyfile
    from tests.support.tiny_study import study_file

    rec = record_quickstart
    monkeypatch.setattr(rec, "BASELINE_SEEDS", 1)
    path = study_file(tmp_path, tuning={"name": "subset", "data_fraction": 0.5, "target_accuracy": 0.3})
    out = tmp_path / "table.jsonl"
    monkeypatch.setattr(sys, "argv", ["r", "--study", str(path), "--phase1", "--n", "2", "--out", str(out)])
    rec.main()
    spec = studyfile.load(path)
    tab = table.Table(out, spec.space, None, None, None)
    assert len(tab.rows) == 2 and len(tab.baseline) == 2  # seed 0, and again beside the first 20
    for r in tab.rows + tab.baseline:
        assert set(r) & {"full", "tune20", "tune50", "seed1"} == {"full"}
        assert r["config"]["dataset"]["data_fraction"] == pytest.approx(0.5 * spec.base.dataset.data_fraction)
        assert r["config"]["target_accuracy"] == 0.3 and r["full"]["test_accuracy"] is None
        assert r["full"]["history"] and len(r["full_run"].acc) == N_GRID  # (as many points as steps allow)
    assert not tab.early and not tab.loss
    # A study without a tuning phase has no phase 1 to record.
    (tmp_path / "plain").mkdir()
    plain = study_file(tmp_path / "plain")
    monkeypatch.setattr(
        sys, "argv", ["r", "--study", str(plain), "--phase1", "--n", "1", "--out", str(tmp_path / "no.jsonl")]
    )
    with pytest.raises(SystemExit) as e:
        rec.main()
    assert e.value.code == 2 and "--phase1 needs a study with a tuning phase" in capsys.readouterr().err


def test_max_slowdown_stops_a_run_short_of_the_target_at_its_mark():
    """The product's SlowStop in the replay: a run still under the target at the mark stops there
    (its last grid point before it, one evaluation at the mark, no final evaluation); a run that
    reached the target first, or whose budget ends first, runs on; rungs after the mark never see it."""
    slow = run(None, 0.5)  # 1 s a ninth, never reaches 0.96
    assert slow.slow_stop(4.5, 0.95) == 3 and slow.slow_stop(0.5, 0.95) == -1
    assert slow.slow_stop(9.0, 0.95) is None and slow.slow_stop(None, 0.95) is None
    assert run(2, 0.97).slow_stop(4.5, 0.95) is None
    assert slow.slow_cost(3, 4.5, 0.95, None) == pytest.approx(4.5 + 4 * 0.1 + 0.1)
    rule = Rule("pred", 1 / 3, eta=3)
    pools = {}
    assert rule.play(slow, 0.95, pools, 1, until=1) is None and not any(pools.values())
    rule.play(slow, 0.95, pools, 1, until=2)
    assert sum(len(p) for p in pools.values()) == 1  # seen at its rung at 1/3 (position 2)


def test_the_multi_metric_rule_ranks_by_fronts_and_never_prunes_a_front_member():
    """OptunaHub's multi_metric_pruner as modelled: MedianPruner on the Pareto ranks of (seconds so
    far, accuracy); a trial on the first front at a step is never pruned, then or later."""

    def curve(speed, acc):
        return Run([speed * (k + 1) for k in range(N_GRID)], [acc] * N_GRID, acc, 0.0, 0.1, 0.2)

    rule = MultiMetricRule("median", "spent")
    assert rule.steps == list(range(N_GRID - 1))  # every evaluation before the end
    pools: dict = {}
    target = 0.95
    for i, (speed, acc) in enumerate([(1.0, 0.6), (2.0, 0.7), (3.0, 0.8), (1.5, 0.5), (2.5, 0.55)]):
        assert rule.play(curve(speed, acc), target, pools, i) is None  # the first 5: no pruning (startup)
    # Slower and less accurate than most: pruned at its first evaluation.
    assert rule.play(curve(3.0, 0.4), target, pools, 5) == 0
    # The slowest of all but the most accurate: on the first front, so it runs to the end.
    assert rule.play(curve(4.0, 0.9), target, pools, 6) is None
    # The package's values at one step: -1 for the current trial on the front, else its rank plus a
    # bonus in (-0.5, -0.1) by hypervolume contribution among the trials sharing its rank.
    assert rule.rewards([(1.0, -0.5), (2.0, -0.6)], 1)[1] == -1.0
    # Both behind the first point, neither behind the other: the one adding more hypervolume (the
    # current trial, 1.0 x 0.04 against 0.2 x 0.14 from the reference point (2.2, -0.36)) goes first.
    assert rule.rewards([(1.0, -0.9), (2.0, -0.5), (1.2, -0.4)], 2) == pytest.approx([0.0, 0.9, 0.5])


def test_loss_then_pred_stops_at_1_27_on_loss_then_judges_survivors_at_1_9():
    """The candidate two-look rule: val loss at 1/27 keeping 1/eta1, then the default's rung at 1/9
    among the survivors; both looks are evaluations before or at the ninths, paid by every survivor."""
    rule = LossThenPred(eta1=2, eta2=2)
    assert rule.early == [grid_index(1 / 27)] and rule.extra(0) == 1
    pools: dict = {}

    def trial(loss, acc):
        r = run(None, 0.9)
        r.acc = [acc] + r.acc[1:]
        r.early_t, r.early_acc, r.early_loss = (0.3, 0.6), (0.1, 0.1), (loss, 2.3, 2.3)
        return r

    rule.play(trial(2.30, 0.5), 0.95, pools, 0, may_prune=False)  # the baseline: a peer at both looks
    assert rule.play(trial(2.40, 0.9), 0.95, pools, 1) == grid_index(1 / 27)  # worse loss: stopped first
    assert rule.play(trial(2.20, 0.3), 0.95, pools, 2) == 0  # best loss, but the worst at 1/9
    assert rule.play(trial(2.10, 0.9), 0.95, pools, 3) is None  # best at both: runs on


@pytest.mark.parametrize(
    "args, says",
    [
        (["--dump", "/no/such/folder/x.json"], "--dump: no such folder"),  # written after a 15-minute run
        (["--plot", "/no/such/folder/x.png"], "--plot: no such folder"),
        (["--only", "rows:random,no-such-method"], "--only: no method named no-such-method"),  # would run nothing
    ],
)
def test_a_bad_output_folder_or_method_name_is_a_usage_error_before_any_search(monkeypatch, capsys, args, says):
    with pytest.raises(SystemExit) as e:
        cli.main(["--seeds", "1", *args])
    assert e.value.code == 2 and says in capsys.readouterr().err
