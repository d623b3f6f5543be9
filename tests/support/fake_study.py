"""A study made of given values (export, best, dashboard tests), so that the front and every
pick are known without training."""

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from effsearch.config import TrainConfig
from effsearch.search.store.storage import open_url
from tests.support.helpers import tiny

# trial: (time to target, None for a miss; final val accuracy)
POINTS = {
    0: (10.0, 0.95),  # the baseline, on the front
    1: (2.0, 0.80),
    2: (4.0, 0.93),
    3: (20.0, 0.96),  # the rest of the front; 2 is the knee
    4: (12.0, 0.90),  # dominated by 0
    5: (None, 0.70),
}  # missed the target (0.75)
FRONT = [1, 2, 0, 3]  # fastest first


def config(n: int) -> TrainConfig:
    return TrainConfig.from_dict(tiny(**{"optimizer.lr": 0.01 * (n + 1)}))


def add(study, n, tta, acc, **attrs):
    # As the runner stores them: a miss has its train seconds (30) and is infeasible.
    study.add_trial(
        create_trial(
            values=[tta if tta is not None else 30.0, acc],
            system_attrs={"constraints": [0.0 if tta is not None else 0.05]},
            params={"optimizer.lr": 0.01 * (n + 1)},
            distributions={"optimizer.lr": FloatDistribution(0.001, 1.0)},
            user_attrs={
                "config": config(n).to_yaml(),
                "reached_target": tta is not None,
                "time_to_target": tta,
                "val_accuracy": acc,
                "test_accuracy": acc - 0.01,
                "speedup": 10.0 / tta if tta else None,
                "status": "completed",
                "device": "cpu (test)",
                "versions": {"effsearch": "0.1.0", "torch": "2.7.0", "mosaicml": "0.32.1"},
                **attrs,
            },
        )
    )


def fake_storage(path):
    """A journal at ``path`` with study 'fake' (POINTS, a pruned and a failed trial) and 'misses' (no hit)."""
    storage = open_url(str(path))
    for name in ("fake", "misses"):
        study = optuna.create_study(study_name=name, storage=storage, directions=["minimize", "maximize"])
        study.set_user_attr("objectives", ["time_to_accuracy", "final_accuracy"])
        study.set_user_attr("target_accuracy", 0.75)
    fake = optuna.load_study(study_name="fake", storage=storage)
    for n, (tta, acc) in POINTS.items():
        add(fake, n, tta, acc, **({"baseline": True} if n == 0 else {}))
    fake.add_trial(create_trial(state=TrialState.PRUNED, user_attrs={"config": config(6).to_yaml()}))
    fake.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"status": "failed", "reason": "test"}))
    misses = optuna.load_study(study_name="misses", storage=storage)
    add(misses, 0, None, 0.6, baseline=True)
    add(misses, 1, None, 0.7)
    return path
