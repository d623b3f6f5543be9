"""A study whose target is a loss (lower is better): the picks read its direction, and status,
export and the plots' axes name the metric and its direction."""

import json

import optuna
import pytest
import yaml
from optuna.distributions import FloatDistribution
from optuna.trial import create_trial

from effsearch.cli import main
from effsearch.config import TrainConfig
from effsearch.search.store.storage import open_url
from tests.support.helpers import tiny

# trial: (time to target, None for a miss; final val loss); the target is val loss <= 2.5
LOSSES = {0: (10.0, 2.0), 1: (4.0, 2.05), 2: (3.0, 2.2), 3: (20.0, 1.9), 4: (None, 2.8)}


def config(n: int) -> TrainConfig:
    return TrainConfig.from_dict(
        tiny(**{"optimizer.lr": 0.01 * (n + 1), "target.metric": "val_loss", "target.value": 2.5})
    )


@pytest.fixture
def loss_study(tmp_path):
    path = tmp_path / "loss.journal"
    study = optuna.create_study(study_name="lm", storage=open_url(str(path)), directions=["minimize", "minimize"])
    study.set_user_attr("objectives", ["time_to_target", "final_val_loss"])
    study.set_user_attr("target_accuracy", 2.5)
    study.set_user_attr("target_metric", "val_loss")
    for n, (tta, loss) in LOSSES.items():
        study.add_trial(
            create_trial(
                values=[tta if tta is not None else 30.0, loss],
                system_attrs={"constraints": [0.0 if tta is not None else loss - 2.5]},
                params={"optimizer.lr": 0.01 * (n + 1)},
                distributions={"optimizer.lr": FloatDistribution(0.001, 1.0)},
                user_attrs={
                    "config": config(n).to_yaml(),
                    "reached_target": tta is not None,
                    "time_to_target": tta,
                    "target_accuracy": 2.5,
                    "target_metric": "val_loss",
                    "val_loss": loss,
                    "test_loss": loss + 0.125,  # a language model's, recorded beside its token accuracy
                    "test_accuracy": 0.25,
                    "val_accuracy": 0.3,
                    "status": "completed",
                    **({"baseline": True} if n == 0 else {}),
                },
            )
        )
    return path


@pytest.mark.parametrize(
    "pick,trial",
    [
        ("fastest", 2),
        ("most-accurate", 3),  # the lowest loss
        ("fastest-below:2.1", 1),
        ("fastest-within:0.05", 1),  # a loss at most 0.05 above the baseline's 2.0
        ("fastest-within:0.01", 0),
    ],
)
def test_the_picks_read_a_loss_as_lower_is_better(loss_study, tmp_path, pick, trial):
    out = tmp_path / "best.yaml"
    assert main(["best", "lm", "--storage", str(loss_study), "--pick", pick, "-o", str(out)]) == 0
    assert TrainConfig.from_yaml(out).hash() == config(trial).hash()


def test_a_pick_in_the_wrong_direction_is_bad_input(loss_study, tmp_path, capsys):
    out = tmp_path / "best.yaml"
    assert main(["best", "lm", "--storage", str(loss_study), "--pick", "fastest-above:0.9", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--pick" in err and "fastest-below" in err and "lower is better" in err and "Traceback" not in err
    assert not out.exists()


def test_status_and_export_name_the_metric_and_its_direction(loss_study, tmp_path, capsys):
    assert main(["status", "lm", "--storage", str(loss_study)]) == 0
    text = capsys.readouterr().out
    assert "val loss <= 2.5 (lower is better)" in text
    assert "val loss (lower better)" in text
    # a language model's test loss, not its next-token accuracy, beside the objectives
    assert "test loss" in text and "test acc" not in text and "2.1250" in text and "0.2500" not in text
    out = tmp_path / "front.json"
    assert main(["export", "lm", "--storage", str(loss_study), "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["target_metric"] == "val_loss" and doc["target_value"] == 2.5 and "target_accuracy" not in doc
    assert {r["trial"]: r["test_loss"] for r in doc["rows"]}[0] == 2.125
    assert main(["best", "lm", "--storage", str(loss_study), "--pick", "fastest", "-o", str(tmp_path / "b.yaml")]) == 0
    assert "test loss 2.3250" in (tmp_path / "b.yaml").read_text()  # trial 2's, in the header
    from effsearch.search.results import plots

    x, y = plots.axes(doc["objectives"])
    assert plots.label(x, plots.doc_target(doc)) == "time to val loss <= 2.5 (train seconds)"
    assert plots.label(y, plots.doc_target(doc)) == "final val loss (lower is better)"


def test_a_relative_accuracy_target_beside_a_loss_target_is_refused(tmp_path):
    from effsearch.api import study_spec
    from effsearch.config import ConfigError

    base = tiny(**{"target.metric": "val_loss", "target.value": 2.5})
    base["target_accuracy"] = {"relative_to_baseline": -0.01}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "base": base, "n_trials": 2}))
    with pytest.raises(ConfigError) as e:
        study_spec(path)
    assert e.value.field == "base.target_accuracy" and "give one or the other" in str(e.value)
