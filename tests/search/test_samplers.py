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

    assert set(samplers.SAMPLERS) == {"tpe", "nsga2", "nsga3", "gp", "random"}
    for name, kind in samplers.SAMPLERS.items():
        named = samplers.check_sampler(name)
        assert named.name == name and type(named.options) is kind.options
        built = samplers.make_sampler(named, 0).sampler
        if kind.options is TPEOptions:
            continue
        defaults = inspect.signature(type(built)).parameters
        for key, value in dataclasses.asdict(named.options).items():
            assert defaults[key].default == value, (name, key)
