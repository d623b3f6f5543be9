"""The samplers a study file can name, each built from a study and run for a few trials
(tests/support/scripted.py's stand-in trains them: no training), so one that Optuna changes or that the space trips up
fails here rather than in a user's study. TPE, NSGA-II and random run in other tests."""

import optuna
import pytest
from optuna.trial import TrialState

from effsearch.cli import main
from effsearch.config.machine import Machine
from effsearch.search.run import workers
from effsearch.search.store.storage import open_url
from effsearch.search.study import samplers, studyfile
from tests.support.tiny_study import study_file


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.parametrize(
    "sampler, cls",
    [
        ({"name": "nsga3", "population_size": 4}, optuna.samplers.NSGAIIISampler),
        ({"name": "gp", "n_startup_trials": 3}, optuna.samplers.GPSampler),
    ],
)
def test_sampler_is_built_from_the_study_and_proposes_trials(tmp_path, monkeypatch, scripted, sampler, cls):
    path = study_file(tmp_path, n_trials=9, sampler=sampler)
    spec = studyfile.load(path, machine=Machine())
    assert type(samplers.make_sampler(spec.sampler, spec.seed).sampler) is cls

    # The run builds its own: record it, and the points its model proposed (past NSGA-III's first
    # generation, GP's random start-up trials), so a sampler falling back to random draws fails.
    built, proposed = [], []
    make = workers.make_sampler
    monkeypatch.setattr(workers, "make_sampler", lambda *a: built.append(make(*a)) or built[-1])
    relative = cls.sample_relative
    monkeypatch.setattr(
        cls,
        "sample_relative",
        lambda self, study, trial, space: proposed.append(relative(self, study, trial, space)) or proposed[-1],
    )
    monkeypatch.setattr(workers, "warm_up", lambda cfg, data_root=None, train_fn=None: 0.0)
    assert main(["run", str(path)]) == 0
    assert [type(s.sampler) for s in built] == [cls]
    trials = optuna.load_study(study_name="tiny", storage=open_url(str(path.with_suffix(".journal")))).get_trials()
    assert len(trials) == 9 and all(t.state == TrialState.COMPLETE for t in trials)
    assert any(proposed), proposed
    assert len({tuple(sorted(t.params.items())) for t in trials}) > 5  # not one point again and again


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_every_registered_sampler_builds_with_its_options_and_optunas_defaults():
    """SAMPLERS is the one registry: each name a study file may give is checked into its option
    dataclass and builds its Optuna sampler. The defaults are passed explicitly, so where effsearch
    has no reason of its own (all but TPE's) they must be Optuna's, or a study file that names no
    option would change with this table."""
    import dataclasses
    import inspect

    from effsearch.config.options import TPEOptions

    assert set(samplers.SAMPLERS) == {"tpe", "nsga2", "nsga3", "gp", "random", "local"}
    for name, kind in samplers.SAMPLERS.items():
        named = samplers.check_sampler(name)
        assert named.name == name and type(named.options) is kind.options
        built = samplers.make_sampler(named, 0).sampler
        if kind.options is TPEOptions:
            continue
        defaults = inspect.signature(type(built)).parameters
        for key, value in dataclasses.asdict(named.options).items():
            assert defaults[key].default == value, (name, key)


def _study_with(trials: list[tuple[dict, list[float], float]]):
    """An in-memory study of complete trials: (params, values, constraint), each lr and epochs."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution
    from optuna.trial import create_trial

    from effsearch.search.store.storage import CONSTRAINTS_KEY

    study = optuna.create_study(directions=["minimize", "maximize"])
    dists = {"lr": FloatDistribution(0.001, 1.0, log=True), "opt": CategoricalDistribution(["sgd", "adamw"])}
    for params, values, c in trials:
        study.add_trial(
            create_trial(values=values, params=params, distributions=dists, system_attrs={CONSTRAINTS_KEY: [c]})
        )
    return study, dists


def test_the_local_sampler_changes_a_few_parameters_of_the_best_completed_trial():
    from effsearch.search.study.local import LocalSampler

    good = {"lr": 0.05, "opt": "sgd"}
    study, dists = _study_with(
        [
            ({"lr": 0.5, "opt": "adamw"}, [1.0, 0.95], 0.3),  # missed the target (told its train seconds): never first
            (good, [2.0, 0.9], 0.0),  # reached it, fastest
            ({"lr": 0.01, "opt": "adamw"}, [5.0, 0.85], 0.0),  # reached it, slower and less accurate
        ]
    )
    sampler = LocalSampler(seed=0, changes=0.0, tournament=3)  # exactly one change; every trial drawn
    for _ in range(20):
        trial = study.ask()
        sampler.before_trial(study, trial._cached_frozen_trial)
        drawn = {
            name: sampler.sample_independent(study, trial._cached_frozen_trial, name, d) for name, d in dists.items()
        }
        assert sum(drawn[k] != good[k] for k in good) == 1  # the fastest hit, one parameter changed
        study.tell(trial, state=TrialState.FAIL)


def test_local_is_a_study_files_sampler_and_reproduces_its_trials(tmp_path, monkeypatch, scripted):
    monkeypatch.setattr(workers, "warm_up", lambda cfg, data_root=None, train_fn=None: 0.0)
    runs = []
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        path = study_file(tmp_path / folder, n_trials=8, sampler={"name": "local", "tournament": 2})
        assert main(["run", str(path)]) == 0
        trials = optuna.load_study(study_name="tiny", storage=open_url(str(path.with_suffix(".journal")))).get_trials()
        assert all(t.state == TrialState.COMPLETE for t in trials)
        runs.append([t.params for t in trials])
    assert runs[0] == runs[1]  # the same seed: the same trials
    base = runs[0][0]
    assert all(sum(p.get(k) != v for k, v in base.items()) <= 4 for p in runs[0][1:3])  # near a parent, not uniform
