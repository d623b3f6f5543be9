"""MO-ASHA pruning decisions on hand-made points, and its state in Optuna's storage."""

import math

import optuna
import pytest

from effsearch.search.pareto import crowding, fronts, hypervolume_2d, rank
from effsearch.search.pruner import MOASHAPruner, RungPoint, RungTracker
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
    p = MOASHAPruner(eta=3, min_trials=3)
    peers = [RungPoint(10, 0.80, False), RungPoint(12, 0.85, False), RungPoint(20, 0.90, False),
             RungPoint(15, 0.70, False), RungPoint(30, 0.60, False)]
    assert not p.decide(RungPoint(25, 0.65, False), peers)  # slower and less accurate than several
    assert p.decide(RungPoint(8, 0.83, False), peers)  # faster and more accurate than most: front


def test_slow_but_accurate_is_not_pruned_for_being_slow():
    p = MOASHAPruner(eta=3, min_trials=3)
    fast = [RungPoint(5 + i, 0.70 - 0.01 * i, False) for i in range(6)]
    assert p.decide(RungPoint(60, 0.95, False), fast)  # alone at the accurate end of the front


def test_reached_target_time_vs_unreached_bound():
    p = MOASHAPruner(eta=2, min_trials=2)
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
    pruner = MOASHAPruner(eta=2, min_fraction=0.25, min_trials=3)
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
    from effsearch.search.storage import open_url

    storage = open_url(url) if "://" not in url else url
    study = optuna.load_study(study_name="s", storage=storage)
    pruner = MOASHAPruner(eta=2, min_fraction=0.25, min_trials=3)
    out = []
    for secs, acc in points:
        t = study.ask()
        out.append(RungTracker(pruner, study, t, 4, 0.99)(EvalPoint(epoch=1, train_seconds=secs, val_accuracy=acc)))
        study.tell(t, state=optuna.trial.TrialState.PRUNED if out[-1] else None,
                   values=None if out[-1] else [secs, acc])
    return out


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_workers_in_separate_processes_share_rungs(tmp_path, kind):
    """A second process's weak trials are judged against the first process's strong ones."""
    import multiprocessing

    from effsearch.search.storage import open_url

    url = str(tmp_path / "s.journal") if kind == "journal" else f"sqlite:///{tmp_path}/s.db"
    optuna.create_study(study_name="s", storage=open_url(url) if kind == "journal" else url,
                        directions=["minimize", "maximize"])
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        strong = pool.apply(_worker, (url, [(10, 0.9), (12, 0.92), (8, 0.88)]))
    with ctx.Pool(1) as pool:
        weak = pool.apply(_worker, (url, [(30, 0.5), (40, 0.4), (7, 0.95)]))
    assert strong == [None, None, None]  # too few trials at the rung for the first two, then kept
    assert weak[0] and weak[1] and "of 4 trials" in weak[0] and "of 5 trials" in weak[1]
    assert weak[2] is None  # faster and more accurate than everyone: kept
    study = optuna.load_study(study_name="s", storage=open_url(url))
    assert [t.user_attrs["rung_0"][:2] for t in study.trials] == \
        [[10, 0.9], [12, 0.92], [8, 0.88], [30, 0.5], [40, 0.4], [7, 0.95]]
