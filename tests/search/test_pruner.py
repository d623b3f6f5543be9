"""MO-ASHA pruning decisions on hand-made points, and its state in Optuna's storage. The tests
of storage and of non-dominated ranking use ``rank: spent`` (the stored point is the raw seconds);
the last ones test ``rank: predicted``, the default."""

import math

import optuna
import pytest

from effsearch.config import ConfigError
from effsearch.search.pareto import crowding, fronts, hypervolume_2d, rank
from effsearch.search.pruners import MOASHAPruner, RungPoint, RungTracker
from effsearch.trainer.result import EvalPoint


def test_fronts_and_crowding():
    pts = [(1, 5), (2, 4), (3, 3), (2, 6), (4, 4), (5, 5)]
    assert fronts(pts) == [[0, 1, 2], [3, 4], [5]]
    d = crowding(pts, [0, 1, 2])
    assert d[0] == d[2] == math.inf and 0 < d[1] < math.inf
    assert rank(pts)[:3] == [0, 2, 1]  # ends first: the front stays spread


def test_hypervolume_2d():
    assert hypervolume_2d([(1, 1)], (2, 2)) == 1
    assert hypervolume_2d([(0, 1), (1, 0)], (2, 2)) == 3
    assert hypervolume_2d([(3, 3)], (2, 2)) == 0


def test_rungs_are_geometric():
    p = MOASHAPruner(eta=3, min_fraction=1 / 9)
    assert p.rungs() == pytest.approx([1 / 9, 1 / 3])
    assert p.rung_of(0.05) is None and p.rung_of(0.2) == 0 and p.rung_of(0.5) == 1


def test_dominated_trial_is_pruned_front_trial_kept():
    p = MOASHAPruner(eta=3, min_trials=3, rank="spent")
    peers = [
        RungPoint(10, 0.80, False),
        RungPoint(12, 0.85, False),
        RungPoint(20, 0.90, False),
        RungPoint(15, 0.70, False),
        RungPoint(30, 0.60, False),
    ]
    assert not p.decide(RungPoint(25, 0.65, False), peers)  # slower and less accurate than several
    assert p.decide(RungPoint(8, 0.83, False), peers)  # faster and more accurate than most: front


def test_slow_but_accurate_is_not_pruned_for_being_slow():
    p = MOASHAPruner(eta=3, min_trials=3, rank="spent")
    fast = [RungPoint(5 + i, 0.70 - 0.01 * i, False) for i in range(6)]
    assert p.decide(RungPoint(60, 0.95, False), fast)  # alone at the accurate end of the front


def test_reached_target_time_vs_unreached_bound():
    p = MOASHAPruner(eta=2, min_trials=2, rank="spent")
    # Reached the target at 100 s vs still below it after only 5 s: neither dominates.
    assert p.decide(RungPoint(5, 0.5, False), [RungPoint(100, 0.9, True)])
    assert p.decide(RungPoint(100, 0.9, True), [RungPoint(5, 0.5, False)])


def test_too_few_trials_at_a_rung_keeps_everyone():
    p = MOASHAPruner(eta=3, min_trials=4)
    assert p.decide(RungPoint(100, 0.1, False), [RungPoint(1, 0.9, False), RungPoint(2, 0.95, False)])


def test_bad_knobs_are_refused():
    with pytest.raises(ValueError, match="eta"):
        MOASHAPruner(eta=1)
    with pytest.raises(ValueError, match="min_fraction"):
        MOASHAPruner(min_fraction=1.5)


def test_state_lives_in_storage_and_is_shared(tmp_path):
    """Two workers (two study handles on one storage) see each other's rung points."""
    url = f"sqlite:///{tmp_path}/s.db"
    s1 = optuna.create_study(study_name="s", storage=url, directions=["minimize", "maximize"])
    s2 = optuna.load_study(study_name="s", storage=url)
    pruner = MOASHAPruner(eta=2, min_fraction=0.25, min_trials=3, rank="spent")
    good = [(10, 0.9), (12, 0.92), (8, 0.88)]
    for secs, acc in good:  # worker 1 runs three strong trials to the first rung
        t = s1.ask()
        RungTracker(pruner, s1, t, 4, 0.99)(EvalPoint(epoch=1, train_seconds=secs, val_accuracy=acc))
    weak = s2.ask()  # worker 2's trial is slower and worse than all of them
    reason = RungTracker(pruner, s2, weak, 4, 0.99)(EvalPoint(epoch=1, train_seconds=30, val_accuracy=0.5))
    assert reason and "rung 0" in reason
    stored = optuna.load_study(study_name="s", storage=url).trials[weak.number].user_attrs
    assert stored["rung_0"] == [30.0, 0.5, False]


def _worker(url: str, points: list, ready=None) -> list:
    """One worker process: its trials reach rung 0 with ``points``; returns the verdicts."""
    from effsearch.search.store.storage import open_url

    storage = open_url(url) if "://" not in url else url
    study = optuna.load_study(study_name="s", storage=storage)
    pruner = MOASHAPruner(eta=2, min_fraction=0.25, min_trials=3, rank="spent")
    out = []
    for secs, acc in points:
        t = study.ask()
        out.append(RungTracker(pruner, study, t, 4, 0.99)(EvalPoint(epoch=1, train_seconds=secs, val_accuracy=acc)))
        study.tell(
            t, state=optuna.trial.TrialState.PRUNED if out[-1] else None, values=None if out[-1] else [secs, acc]
        )
    return out


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_workers_in_separate_processes_share_rungs(tmp_path, kind):
    """A second process's weak trials are judged against the first process's strong ones."""
    import multiprocessing

    from effsearch.search.store.storage import open_url

    url = str(tmp_path / "s.journal") if kind == "journal" else f"sqlite:///{tmp_path}/s.db"
    optuna.create_study(
        study_name="s", storage=open_url(url) if kind == "journal" else url, directions=["minimize", "maximize"]
    )
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        strong = pool.apply(_worker, (url, [(10, 0.9), (12, 0.92), (8, 0.88)]))
    with ctx.Pool(1) as pool:
        weak = pool.apply(_worker, (url, [(30, 0.5), (40, 0.4), (7, 0.95)]))
    assert strong == [None, None, None]  # too few trials at the rung for the first two, then kept
    assert weak[0] and weak[1] and "best 1/2 of 4:" in weak[0] and "best 1/2 of 5:" in weak[1]
    assert weak[2] is None  # faster and more accurate than everyone: kept
    study = optuna.load_study(study_name="s", storage=open_url(url))
    assert [t.user_attrs["rung_0"][:2] for t in study.trials] == [
        [10, 0.9],
        [12, 0.92],
        [8, 0.88],
        [30, 0.5],
        [40, 0.4],
        [7, 0.95],
    ]


def test_predicted_time_extends_the_last_slope_and_caps_a_flat_curve():
    from effsearch.search.pruners import predicted_time

    # 0.5 -> 0.7 in 10 s: 0.02 a second, 0.2 short of 0.9: 10 s more.
    assert predicted_time(20, 0.7, 0.5, 0.9, (10, 0.5)) == pytest.approx(30)
    assert predicted_time(20, 0.95, 0.5, 0.9, (10, 0.5)) == 20  # reached: its own seconds
    assert predicted_time(20, 0.5, 0.5, 0.9, (10, 0.6)) == pytest.approx(400)  # falling: 10x the 40 s projected
    assert predicted_time(10, 0.3, 0.25, 0.9, None) == pytest.approx(30)  # from the start, 0 at 0 s


def test_predicted_rank_does_not_keep_the_cheapest_so_far():
    """Under ``spent``, the trial that has spent least is a front end with infinite crowding and
    is kept at chance accuracy; under ``predicted`` its flat curve predicts it never gets there."""
    spent, predicted = MOASHAPruner(eta=3, min_trials=3, rank="spent"), MOASHAPruner(eta=3, min_trials=3)
    assert predicted.rank == "predicted"  # the default
    peers = [
        RungPoint(20, 0.60, False),
        RungPoint(22, 0.62, False),
        RungPoint(25, 0.70, False),
        RungPoint(30, 0.75, False),
        RungPoint(28, 0.72, False),
    ]
    assert spent.decide(RungPoint(2, 0.10, False), peers)
    # The same cheap trial, its time now the capped prediction of a curve that is not rising.
    assert not predicted.decide(RungPoint(180, 0.10, False), peers)


def test_the_fastest_to_the_target_at_a_rung_is_kept_though_its_score_there_is_the_fronts_lowest():
    """Its time to target is final and the front's fast end; ranked on its score at its own (early)
    rung it came last in the first front, and the language-model study pruned its fastest trial so.
    A reached trial some reached peer beat to the target is ranked as before."""
    p = MOASHAPruner(eta=9, min_trials=5)
    # scores: losses negated (Target.score); each reached the target, at its own rung point
    peers = [RungPoint(19.0 + i, -5.45 - 0.01 * i, True) for i in range(4)]
    peers += [RungPoint(40.0 + i, -5.50 - 0.02 * i, False) for i in range(4)]
    fastest = RungPoint(15.6, -5.65, True)
    assert p.decide(fastest, peers)
    assert not p.decide(RungPoint(19.5, -5.65, True), peers)  # reached, but not first: ranked
    p.keep_fastest = False
    assert not p.decide(fastest, peers)  # as it was: one kept of 9, the most accurate of the front


def test_tracker_ranks_on_the_predicted_time(tmp_path):
    study = optuna.create_study(directions=["minimize", "maximize"])
    pruner = MOASHAPruner(eta=2, min_fraction=0.5, min_trials=1, rank="predicted")
    t = study.ask()
    track = RungTracker(pruner, study, t, 4, 0.9)
    track(EvalPoint(epoch=1, train_seconds=10, val_accuracy=0.5))
    track(EvalPoint(epoch=2, train_seconds=20, val_accuracy=0.7))  # rung 0 at half the budget
    secs, acc, reached = study.trials[t.number].user_attrs["rung_0"]
    assert (secs, acc, reached) == (pytest.approx(30), 0.7, False)


def test_rank_option_is_checked():
    from effsearch.search.pruners import check_pruner, make_pruner

    with pytest.raises(ConfigError, match="rank"):
        make_pruner(check_pruner({"name": "moasha", "rank": "fastest"}))
    assert make_pruner(check_pruner({"name": "moasha", "rank": "predicted"})).pruner.rank == "predicted"


def test_default_judges_the_first_trial_against_the_baseline():
    """By default (``min_trials`` 2) the baseline's rung point, recorded though it is never pruned,
    is enough of a peer: a trial the baseline beats at the first rung stops there. At 4 it
    would have run on to the end, as the first trials at every rung did in the replay."""
    from effsearch.search.pruners import check_pruner, make_pruner

    study = optuna.create_study(directions=["minimize", "maximize"])
    pruner = make_pruner(check_pruner({"name": "moasha"}), study).pruner
    assert pruner.min_trials == 2
    base = study.ask()
    assert (
        RungTracker(pruner, study, base, 9, 0.95, may_prune=False)(
            EvalPoint(epoch=1, train_seconds=1.0, val_accuracy=0.80)
        )
        is None
    )
    weak = study.ask()
    reason = RungTracker(pruner, study, weak, 9, 0.95)(EvalPoint(epoch=1, train_seconds=1.2, val_accuracy=0.40))
    assert reason and "best 1/9 of 2:" in reason
    assert len(reason) <= 120 and reason.endswith("val accuracy 0.4000")  # whole in `status`
    strong = study.ask()
    assert RungTracker(pruner, study, strong, 9, 0.95)(EvalPoint(epoch=1, train_seconds=0.9, val_accuracy=0.85)) is None
    assert MOASHAPruner(min_trials=4).decide(RungPoint(9, 0.40, False), [RungPoint(1.5, 0.80, False)])


def test_default_is_one_rung_at_a_ninth_keeping_the_best_ninth():
    """A second cut at a third stopped front-making recipes among the survivors (replay, 40 seeds)."""
    p = MOASHAPruner()
    assert p.rungs() == pytest.approx([1 / 9])
    peers = [RungPoint(5.0 + i, 0.5, False) for i in range(8)]  # 9 at the rung: one goes on
    assert p.decide(RungPoint(4.0, 0.6, False), peers)
    assert not p.decide(RungPoint(5.5, 0.5, False), peers)
    # Written as 0.111, eta 9 would have put a rung at 0.999, where a stop saves nothing.
    assert MOASHAPruner(eta=9, min_fraction=0.111).rungs() == [0.111]
    assert MOASHAPruner(eta=3, min_fraction=1 / 9).rungs() == pytest.approx([1 / 9, 1 / 3])


def test_time_rung_keeps_the_most_accurate_at_equal_seconds_with_the_baseline_as_a_peer():
    """clock: time. Before the baseline has a time to target: budget rungs. After: one rung at
    time_fraction of it, accuracy ranked, the baseline's accuracy there (from its curve) a peer;
    a run whose budget ends before the rung is never judged."""
    from effsearch.search.pruners import check_pruner, make_pruner

    study = optuna.create_study(directions=["minimize", "maximize"])
    sp = make_pruner(check_pruner({"name": "moasha", "clock": "time", "eta": 2, "time_fraction": 0.25}), study)
    cfg = type("C", (), {"epochs": 4, "target_accuracy": 0.9})()
    base = study.ask()
    base.set_user_attr("baseline", True)
    sp.begin(base, cfg, may_prune=False)
    assert sp.eval_after(cfg) == () and sp.eval_at(cfg) == pytest.approx(tuple(4 * r for r in sp.pruner.rungs()))
    base.set_user_attr("time_to_target", 8.0)
    base.set_user_attr(
        "history",
        [
            {"epoch": 1, "train_seconds": 1.5, "val_accuracy": 0.5},
            {"epoch": 2, "train_seconds": 3.0, "val_accuracy": 0.8},
        ],
    )
    study.tell(base, [8.0, 0.95])
    assert sp.time_rung() == (2.0, 0.8)  # the baseline's first point at or past 0.25 x 8 s

    def run(points, epochs=4):
        t = study.ask()
        sp.begin(t, type("C", (), {"epochs": epochs, "target_accuracy": 0.9})())
        assert sp.eval_after(None) == (2.0,) and sp.eval_at(cfg) == ()
        out = [sp.on_eval(t, EvalPoint(epoch=e, train_seconds=s, val_accuracy=a)) for e, s, a in points]
        study.tell(t, [9.0, 0.9])
        return t, out

    weak, out = run([(0.5, 1.0, 0.9), (1.0, 2.1, 0.6)])  # below the baseline there: 1 of 2 kept
    assert out[0] is None and out[1] and "train seconds" in out[1]
    assert study.trials[weak.number].user_attrs["rung_time"] == [2.1, 0.6]
    strong, out = run([(1.0, 2.2, 0.85), (2.0, 4.0, 0.9)])
    assert out == [None, None]  # kept, and judged once only
    short, out = run([(0.25, 1.0, 0.2), (0.5, 2.5, 0.3)], epochs=0.5)  # its end is past the mark
    assert out == [None, None] and "rung_time" not in study.trials[short.number].user_attrs
    p = MOASHAPruner(eta=3, min_trials=2)
    assert p.keep_by_accuracy(0.5, [0.9, 0.4, 0.3]) and not p.keep_by_accuracy(0.5, [0.9, 0.6, 0.7])
    with pytest.raises(ValueError, match="clock"):
        MOASHAPruner(clock="epochs")


def test_the_default_clock_is_the_budget_rung_even_once_the_baseline_has_a_time():
    """pruner: {name: moasha} judges each trial at a share of its own epochs: the time rung
    (clock: time) ranks on early speed alone and lost the accurate recipes end to end
    (docs/results.md, earlier studies)."""
    from effsearch.search.pruners import check_pruner, make_pruner

    study = optuna.create_study(directions=["minimize", "maximize"])
    sp = make_pruner(check_pruner({"name": "moasha"}), study)
    cfg = type("C", (), {"epochs": 4, "target_accuracy": 0.9})()
    base = study.ask()
    base.set_user_attr("baseline", True)
    sp.begin(base, cfg, may_prune=False)
    base.set_user_attr("time_to_target", 8.0)
    base.set_user_attr("history", [{"epoch": 1, "train_seconds": 1.5, "val_accuracy": 0.5}])
    study.tell(base, [8.0, 0.95])
    t = study.ask()
    sp.begin(t, cfg)
    assert sp.time_rung() is None and sp.eval_after(cfg) == ()
    assert sp.eval_at(cfg) == pytest.approx((4 / 9,))  # one rung at a ninth of its 4 epochs


def test_a_rung_is_settled_on_part_of_the_validation_set_only_when_pruned_at_its_upper_bound():
    """``settle``: a rung's point scored on a shuffled prefix of the validation set, its accuracy at
    most ``upper``. True only when it is pruned even at ``upper`` (and then the whole-set score,
    lower, prunes it too); False where it may be kept (scored whole: its record is a peer); None
    off the rungs; the baseline is always scored whole."""
    study = optuna.create_study(directions=["minimize", "maximize"])
    pruner = MOASHAPruner(eta=3, min_fraction=1 / 4, min_trials=2)  # rungs at 1 and 3 of 4 epochs
    for acc in (0.80, 0.75, 0.70):
        t = study.ask()
        RungTracker(pruner, study, t, 4, 0.95)(EvalPoint(epoch=1, train_seconds=1.0, val_accuracy=acc))
    t = study.ask()
    track = RungTracker(pruner, study, t, 4, 0.95)
    assert track.settle(0.5, 0.5, 0.3) is None  # no rung here: the trainer's own rule
    assert track.settle(1, 1.0, 0.5) is True  # even at 0.5 it is not in the best third of 4
    assert track.settle(1, 1.0, 0.9) is False  # at 0.9 it would be kept: score it whole
    for upper in (0.5, 0.6, 0.7, 0.74):
        if track.settle(1, 1.0, upper):
            assert not pruner.decide(
                track._point(1, 1.0, upper - 0.05, None),
                [RungPoint.from_attr(v) for v in pruner.peers(study, t, "rung_0")],
            )
    assert track(EvalPoint(epoch=1, train_seconds=1.0, val_accuracy=0.45))  # pruned, as settled
    assert track.settle(1, 1.0, 0.5) is None  # decided: nothing left to settle
    base = study.ask()
    assert RungTracker(pruner, study, base, 4, 0.95, may_prune=False).settle(1, 1.0, 0.1) is False


def test_slow_stop_ends_a_trial_short_of_the_target_past_the_limit():
    """max_slowdown: a trial still below the target at factor x the baseline's time to target (train
    seconds) stops there; one that has reached the target runs on; the baseline and warm starts have
    no limit; before the baseline has a time to target, nobody has one. The inner pruner still sees
    every point first (its rung records are the others' peers)."""
    from effsearch.search.pruners import NoPruner, SlowStop

    seen = []

    class Inner(NoPruner):
        def on_eval(self, trial, point):
            seen.append(point.train_seconds)
            return "inner" if point.val_accuracy < 0 else None

        def eval_after(self, cfg):
            return (1.0,)

    study = optuna.create_study(directions=["minimize", "maximize"])
    stop = SlowStop(Inner(), 4.0, study)
    cfg = type("C", (), {"epochs": 4, "target_accuracy": 0.9})()
    base = study.ask()
    base.set_user_attr("baseline", True)
    stop.begin(base, cfg, may_prune=False)
    assert stop.eval_after(cfg) == (1.0,)
    assert stop.on_eval(base, EvalPoint(epoch=4, train_seconds=50.0, val_accuracy=0.5)) is None
    early = study.ask()
    stop.begin(early, cfg)  # the baseline is still running: no time to target yet
    assert (
        stop.eval_after(cfg) == (1.0,)
        and stop.on_eval(early, EvalPoint(epoch=4, train_seconds=99, val_accuracy=0.5)) is None
    )
    base.set_user_attr("time_to_target", 2.5)
    study.tell(base, [2.5, 0.95])

    slow = study.ask()
    stop.begin(slow, cfg)
    assert stop.eval_after(cfg) == (1.0, 10.0)
    assert stop.on_eval(slow, EvalPoint(epoch=1, train_seconds=9.9, val_accuracy=0.8)) is None
    assert stop.settle(slow, 2, 10.1, upper=0.85) is True  # stopped whatever the rest of the set says
    reason = stop.on_eval(slow, EvalPoint(epoch=2, train_seconds=10.1, val_accuracy=0.85))
    assert reason and "10.1 train seconds" in reason and "4x the baseline's time to target (2.50s" in reason
    assert seen[-1] == 10.1
    assert stop.on_eval(slow, EvalPoint(epoch=2, train_seconds=10.1, val_accuracy=-1)) == "inner"

    reached = study.ask()
    stop.begin(reached, cfg)
    assert stop.on_eval(reached, EvalPoint(epoch=1, train_seconds=9.0, val_accuracy=0.91)) is None
    assert stop.settle(reached, 2, 12.0, upper=0.5) is None  # no decision of the limit's: the inner's
    assert stop.on_eval(reached, EvalPoint(epoch=2, train_seconds=12.0, val_accuracy=0.5)) is None
    warm = study.ask()
    stop.begin(warm, cfg, may_prune=False)
    assert stop.eval_after(cfg) == (1.0,)
    assert stop.on_eval(warm, EvalPoint(epoch=2, train_seconds=30.0, val_accuracy=0.5)) is None


def test_slow_stop_leaves_a_second_past_a_tiny_baseline_time():
    """A baseline at 0.05 s to target: 4x is 0.2 s, timing noise; the limit is a second past it."""
    from effsearch.search.pruners import NoPruner, SlowStop

    study = optuna.create_study(directions=["minimize", "maximize"])
    stop = SlowStop(NoPruner(), 4.0, study)
    cfg = type("C", (), {"epochs": 4, "target_accuracy": 0.9})()
    base = study.ask()
    base.set_user_attr("baseline", True)
    base.set_user_attr("time_to_target", 0.05)
    study.tell(base, [0.05, 0.95])
    trial = study.ask()
    stop.begin(trial, cfg)
    assert stop.eval_after(cfg) == (pytest.approx(1.05),)
    assert stop.on_eval(trial, EvalPoint(epoch=1, train_seconds=0.3, val_accuracy=0.5)) is None
    reason = stop.on_eval(trial, EvalPoint(epoch=2, train_seconds=1.06, val_accuracy=0.5))
    assert reason and "21x the baseline's time to target (0.05s" in reason


def test_an_accuracy_equal_to_the_target_has_reached_it_at_a_rung_and_for_max_slowdown():
    """Validation accuracies are fractions k/n (114 of 120 is 0.95 exactly): a point at the target
    has reached it. The rung records the trial as reached since that point (not since a later,
    higher one), and max_slowdown, past its limit, leaves the trial that reached it running."""
    from effsearch.search.pruners import NoPruner, SlowStop

    assert 114 / 120 == 0.95
    study = optuna.create_study(directions=["minimize", "maximize"])
    pruner = MOASHAPruner(eta=2, min_fraction=0.5, min_trials=1, rank="spent")
    t = study.ask()
    track = RungTracker(pruner, study, t, 4, 0.95)
    track(EvalPoint(epoch=1, train_seconds=10, val_accuracy=114 / 120))  # before the rung, at the target
    track(EvalPoint(epoch=2, train_seconds=20, val_accuracy=0.97))  # rung 0: half the budget
    assert tuple(study.trials[t.number].user_attrs["rung_0"]) == (10, 0.97, True)

    stop = SlowStop(NoPruner(), 2.0, study)
    cfg = type("C", (), {"epochs": 4, "target_accuracy": 0.95})()
    base = study.ask()
    base.set_user_attr("baseline", True)
    base.set_user_attr("time_to_target", 5.0)
    study.tell(base, [5.0, 0.95])
    trial = study.ask()
    stop.begin(trial, cfg)  # the limit: 10 train seconds
    assert stop.on_eval(trial, EvalPoint(epoch=1, train_seconds=4.0, val_accuracy=114 / 120)) is None
    assert stop.on_eval(trial, EvalPoint(epoch=2, train_seconds=12.0, val_accuracy=0.9)) is None


# -- the rung arithmetic, edge by edge ---------------------------------------------------------


def test_a_rung_point_survives_the_storage_round_trip():
    for point in (RungPoint(12.5, 0.625, True), RungPoint(3.0, 0.25, False)):
        assert RungPoint.from_attr(point.to_attr()) == point
    back = RungPoint.from_attr([7, 0.5, 1])  # as JSON may hand it back
    assert back == RungPoint(7.0, 0.5, True) and type(back.reached) is bool
    assert RungPoint(7, 0.5, False).objectives() == (7, -0.5)


def test_predicted_time_at_the_target_and_over_a_short_step():
    from effsearch.search.pruners import predicted_time

    assert predicted_time(20, 0.9, 0.5, 0.9, (10, 0.5)) == 20  # exactly at the target: reached
    # 0.1 -> 0.3 in half a second: 0.4 a second, 0.2 short of 0.5: half a second more.
    assert predicted_time(1.0, 0.3, 0.5, 0.5, (0.5, 0.1)) == pytest.approx(1.5)
    assert predicted_time(20, 0.5, 0.5, 0.9, (10, 0.5)) == pytest.approx(400)  # flat: the cap
    assert predicted_time(20, 0.89, 0.5, 0.9, (10, 0.1)) == pytest.approx(20 + 0.01 / 0.079)  # well below the cap


# A pruner built in code is refused as a study file's knob is: one declaration of the bounds
# (MOASHAOptions), one error (a ConfigError naming pruner.KNOB).
@pytest.mark.parametrize(
    "knobs, words",
    [
        ({"rank": "fastest"}, "pruner.rank: must be one of predicted, spent; got 'fastest'"),
        ({"clock": "wall"}, "pruner.clock: must be one of time, budget; got 'wall'"),
        ({"time_fraction": 0}, "pruner.time_fraction: must be in (0, 1); got 0.0"),
        ({"time_fraction": 1}, "pruner.time_fraction: must be in (0, 1); got 1.0"),
        ({"eta": 1}, "pruner.eta: must be > 1; got 1.0"),
        ({"min_fraction": 0}, "pruner.min_fraction: must be in (0, 1); got 0.0"),
        ({"min_fraction": 1}, "pruner.min_fraction: must be in (0, 1); got 1.0"),
        ({"min_trials": 0}, "pruner.min_trials: must be >= 1; got 0"),
    ],
)
def test_each_bad_knob_is_refused_with_its_bound(knobs, words):
    with pytest.raises(ConfigError) as e:
        MOASHAPruner(**knobs)
    assert str(e.value) == words


def test_edge_knobs_are_taken():
    p = MOASHAPruner(eta=1.5, min_fraction=0.001, min_trials=1, time_fraction=0.999, clock="time", rank="spent")
    assert (p.eta, p.min_fraction, p.min_trials, p.time_fraction, p.clock, p.rank) == (
        1.5,
        0.001,
        1,
        0.999,
        "time",
        "spent",
    )


def test_no_rung_in_the_last_hundredth_and_a_rung_is_hit_at_its_own_fraction():
    assert MOASHAPruner(eta=2, min_fraction=0.495).rungs() == [0.495]  # the next, 0.99, saves nothing
    assert MOASHAPruner(eta=2, min_fraction=0.49).rungs() == [0.49, 0.98]
    p = MOASHAPruner(eta=9, min_fraction=1 / 9)
    assert p.rungs() == [1 / 9]
    assert p.rung_of(1 / 9) == 0 and p.rung_of(1 / 9 - 1e-12) == 0  # epochs' float fractions land on it
    assert p.rung_of(1 / 9 - 1e-6) is None and p.rung_of(1.0) == 0


def test_within_a_front_the_more_accurate_goes_first():
    """rank predicted: two trials neither of which dominates; with room for one, the more
    accurate stays, however fast the other is (and under rank spent, so would the ends)."""
    p = MOASHAPruner(eta=2, min_trials=1)
    fast, accurate = RungPoint(1, 0.5, False), RungPoint(10, 0.9, False)
    assert not p.decide(fast, [accurate]) and p.decide(accurate, [fast])
    assert p.decide(RungPoint(5, 0.7, False), [])  # alone: kept


def test_keep_by_accuracy_counts_only_the_more_accurate():
    p = MOASHAPruner(eta=2, min_trials=2)
    assert p.keep_by_accuracy(0.5, [0.5])  # a tie is no one more accurate
    assert not p.keep_by_accuracy(0.5, [0.6])
    assert MOASHAPruner(eta=2, min_trials=3).keep_by_accuracy(0.1, [0.9])  # too few trials yet: kept
    assert MOASHAPruner(eta=3, min_trials=1).keep_by_accuracy(0.5, [0.9, 0.1, 0.2])  # 1 above, room for 2


def test_the_time_in_a_pruned_reason_is_named_for_what_it_is():
    reached, unreached = RungPoint(5, 0.9, True), RungPoint(5, 0.5, False)
    assert MOASHAPruner(rank="predicted")._time_label(reached) == "time to target"
    assert MOASHAPruner(rank="spent")._time_label(reached) == "time to target"
    assert MOASHAPruner(rank="predicted")._time_label(unreached) == "predicted time to target"
    assert MOASHAPruner(rank="spent")._time_label(unreached) == "seconds so far"
