"""What each trial leaves in the study: attributes, artifacts and a note.

User attributes hold the facts (config YAML, history, reached flag, test
accuracy, sparsity, timings, device, versions); the artifact store holds files
optuna-dashboard shows (the learning curve and the config); the note is the
one-paragraph summary the dashboard puts on the trial's page.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
import yaml

from effsearch.config import TrainConfig
from effsearch.config.metrics import ACCURACY, Target
from effsearch.search.store.attrs import (
    BASELINE_KEY,
    CONFIG_KEY,
    DEVICE_KEY,
    FINAL_KEYS,
    HISTORY_KEY,
    KFAC_KEY,
    PLACEMENT_KEY,
    REACHED_KEY,
    REASON_KEY,
    SPEEDUP_KEY,
    STATUS_KEY,
    TARGET_KEY,
    TARGET_METRIC_KEY,
    TEST_ACCURACY_KEY,
    TEST_LOSS_KEY,
    TEXT_KEY,
    TIME_TO_TARGET_KEY,
    TRAIN_SECONDS_KEY,
    VAL_ACCURACY_KEY,
    VAL_BPB_KEY,
    VAL_LOSS_KEY,
    VERSIONS_KEY,
)
from effsearch.trainer.result import RunResult, clean

if TYPE_CHECKING:
    from optuna.artifacts import FileSystemArtifactStore
    from optuna.trial import BaseTrial, FrozenTrial


NAN = float("nan")


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


@dataclass(frozen=True)
class Recorded:
    """What a trial's user attributes say about its result (``result_attrs`` wrote them; an
    older effsearch may have written fewer). None: not recorded."""

    status: str | None = None
    reason: str | None = None
    baseline: bool = False
    reached_target: bool | None = None
    time_to_target: float | None = None
    target_accuracy: float | None = None  # the target's value, on target_metric
    target_metric: str = ACCURACY
    speedup: float | None = None
    val_accuracy: float | None = None
    val_loss: float | None = None
    val_bpb: float | None = None
    test_accuracy: float | None = None
    test_loss: float | None = None  # a language model's
    train_seconds: float | None = None
    device: str | None = None
    versions: dict = field(default_factory=dict)

    @property
    def target(self) -> Target | None:
        return Target(self.target_metric, self.target_accuracy) if self.target_accuracy is not None else None

    def final(self, metric: str) -> float | None:
        """The delivered model's recorded value of ``metric`` (val_accuracy, val_loss, val_bpb)."""
        return getattr(self, metric, None)

    @classmethod
    def of(cls, trial: BaseTrial) -> Recorded:
        a = trial.user_attrs
        return cls(
            status=a.get(STATUS_KEY),
            reason=a.get(REASON_KEY),
            baseline=bool(a.get(BASELINE_KEY)),
            reached_target=a.get(REACHED_KEY),
            time_to_target=a.get(TIME_TO_TARGET_KEY),
            target_accuracy=a.get(TARGET_KEY),
            target_metric=a.get(TARGET_METRIC_KEY) or ACCURACY,
            speedup=a.get(SPEEDUP_KEY),
            val_accuracy=a.get(VAL_ACCURACY_KEY),
            val_loss=a.get(VAL_LOSS_KEY),
            val_bpb=a.get(VAL_BPB_KEY),
            test_accuracy=a.get(TEST_ACCURACY_KEY),
            test_loss=a.get(TEST_LOSS_KEY),
            train_seconds=a.get(TRAIN_SECONDS_KEY),
            device=a.get(DEVICE_KEY),
            versions=a.get(VERSIONS_KEY) or {},
        )


def stored_config(trial: BaseTrial, key: str = CONFIG_KEY) -> TrainConfig | None:
    """The TrainConfig a trial attribute holds as YAML (None: the trial has none)."""
    text = trial.user_attrs.get(key)
    if not text:
        return None
    return TrainConfig.from_dict(yaml.safe_load(text), source=f"trial {trial.number}")


def set_attrs(trial: BaseTrial, attrs: dict) -> None:
    for key, value in attrs.items():
        trial.set_user_attr(key, clean(value))


# What result_attrs writes: a duplicate config's trial copies these from the trial that trained it.
RESULT_KEYS = (
    STATUS_KEY,
    REASON_KEY,
    REACHED_KEY,
    TIME_TO_TARGET_KEY,
    TARGET_KEY,
    TARGET_METRIC_KEY,
    HISTORY_KEY,
    DEVICE_KEY,
    VERSIONS_KEY,
    SPEEDUP_KEY,
    TEXT_KEY,
    KFAC_KEY,
) + FINAL_KEYS


def copied_attrs(original: FrozenTrial) -> dict:
    """``original``'s result attributes, for a trial answered with its result, and where it trained
    (its speed-up is read against the baseline of that kind of device)."""
    return {k: original.user_attrs[k] for k in (*RESULT_KEYS, PLACEMENT_KEY) if k in original.user_attrs}


def result_attrs(result: RunResult, speedup: float | None, text: bool = False) -> dict:
    """What a trial records of its run (``text``: it trained on token rows)."""
    f = result.final
    attrs = {
        STATUS_KEY: result.status,
        REASON_KEY: result.reason,
        REACHED_KEY: result.reached_target,
        TIME_TO_TARGET_KEY: result.time_to_target,
        TARGET_KEY: result.target_accuracy,
        TARGET_METRIC_KEY: result.target_metric,
        HISTORY_KEY: [p.to_dict() for p in result.history],
        DEVICE_KEY: result.device,
        VERSIONS_KEY: result.versions,
        SPEEDUP_KEY: speedup,
    }
    attrs.update({k: getattr(f, k) for k in FINAL_KEYS if getattr(f, k) is not None})
    if KFAC_KEY in f.extra:
        attrs[KFAC_KEY] = f.extra[KFAC_KEY]
    if text:
        attrs[TEXT_KEY] = True
    return attrs


def upload_files(
    trial: optuna.Trial, store: FileSystemArtifactStore | None, result: RunResult, config_yaml: str
) -> list[str]:
    """The learning curve (PNG), the config (YAML) and result.json, into the artifact store."""
    if store is None:
        return []
    from optuna.artifacts import upload_artifact

    ids = []
    with tempfile.TemporaryDirectory(prefix="effsearch-") as tmp_dir:
        tmp = Path(tmp_dir)
        files = [tmp / "config.yaml", tmp / "result.json"]
        files[0].write_text(config_yaml)
        files[1].write_text(json.dumps(result.to_dict(), indent=2))
        png = tmp / "learning_curve.png"
        if result.history and plot_curve(result, png, title=f"trial {trial.number}"):
            files.insert(0, png)
        for f in files:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # artifacts are "experimental" in Optuna
                ids.append(upload_artifact(artifact_store=store, file_path=str(f), study_or_trial=trial))
    return ids


def plot_curve(result: RunResult, path: Path, title: str = "") -> bool:
    """The target's metric (validation accuracy, loss, ...) against train seconds, with the target
    line (~0.1 s: no pyplot state)."""
    from matplotlib.figure import Figure  # a required dependency: a broken install is an error, recorded

    xs = [p.train_seconds for p in result.history]
    target = result.target
    ys = [_or(target.of(p), NAN) for p in result.history]
    fig = Figure(figsize=(5, 3.2), dpi=90)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.13, right=0.97, bottom=0.15, top=0.9)
    ax.plot(xs, ys, marker="o", label=target.m.label)
    part = [(x, y) for x, y, p in zip(xs, ys, result.history) if p.val_images]
    if part:  # scored on a prefix of the validation set: settled, not measured to the last image
        ax.plot(
            *zip(*part),
            linestyle="none",
            marker="o",
            markerfacecolor="white",
            color="C0",
            label="on part of the validation set",
        )
    ax.axhline(target.value, color="grey", linestyle="--", label=f"target {target.text()}")
    if result.time_to_target is not None:
        ax.axvline(
            result.time_to_target, color="green", linestyle=":", label=f"reached at {result.time_to_target:.2f} s"
        )
    ax.set_xlabel("train seconds (evaluation excluded)")
    ax.set_ylabel(target.m.label + ("" if target.m.higher else " (lower is better)"))
    ax.set_title(f"{title} ({result.status})")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right" if target.m.higher else "upper right", fontsize=8)
    fig.savefig(path)
    return True


def lr_line(cfg: dict) -> str:
    """What the searched lr means, when it is scaled by the batch size (the dashboard shows the param)."""
    o, bs = cfg["optimizer"], cfg["batch_size"]
    if not o.get("scale_lr_with_batch"):
        return ""
    return (
        f"- lr: optimizer.lr {o['lr']:.4g} is the lr at batch 128 (the searched value); at batch {bs} "
        f"this trial trained with {o['lr'] * bs / 128:.4g}"
    )


def note_text(trial_number: int, result: RunResult, summary: str, speedup: float | None, baseline: bool) -> str:
    f = result.final
    ttt = (
        f"{result.time_to_target:.2f} s"
        if result.time_to_target is not None
        else "not reached by the delivered model (infeasible: off the front)"
    )
    lines = [
        f"### Trial {trial_number}{' (baseline)' if baseline else ''}: {result.status}",
        f"{result.reason}" if result.reason else "",
        f"- time to {result.target.text()}: **{ttt}**" + (f" ({speedup:.2f}x the baseline)" if speedup else ""),
        final_line(result),
        f"- train {_or(f.train_seconds, 0):.2f} s, selection {_or(f.selection_seconds, 0):.2f} s, "
        f"sparsity {_or(f.sparsity, 0):.2f}",
        f"- {summary}",
        lr_line(result.config) if result.config else "",
        kfac_line(f.extra.get(KFAC_KEY)),
        f"- device: {result.device}",
    ]
    return "\n".join(line for line in lines if line)


def final_line(result: RunResult) -> str:
    """The delivered model's validation (and test) measurements, the target's metric first."""
    f = result.final
    if result.target_metric == ACCURACY:
        return (
            f"- val accuracy {_or(f.val_accuracy, NAN):.4f}, test accuracy "
            f"{_or(f.test_accuracy, NAN):.4f} (recorded, never optimised)"
        )
    parts = [f"val loss {_or(f.val_loss, NAN):.4f}"] + ([f"val bits per byte {f.val_bpb:.4f}"] if f.val_bpb else [])
    parts += [f"test loss {f.test_loss:.4f} (recorded, never optimised)"] if f.test_loss is not None else []
    return "- " + ", ".join(parts) + f", val next-token accuracy {_or(f.val_accuracy, NAN):.4f}"


def kfac_line(fallbacks: dict | None) -> str:
    """What K-FAC did not precondition (``KFACSGD.fallbacks``), for the note ("" when it did all)."""
    if not fallbacks:
        return ""
    return (
        f"- **K-FAC fell back to plain SGD** on {fallbacks['plain_steps']} step(s), layers "
        f"{', '.join(fallbacks['layers'])} ({fallbacks['failed_decompositions']} failed decomposition(s), "
        f"{fallbacks['shape_mismatches']} shape mismatch(es))"
    )


def save_note(trial: optuna.Trial, text: str) -> None:
    """The trial's note on optuna-dashboard's page (a required dependency: a broken install raises)."""
    from optuna_dashboard import save_note as _save

    _save(trial, text)
