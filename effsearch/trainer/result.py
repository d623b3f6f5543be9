"""RunResult: what one training run leaves behind (``result.json``)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from effsearch.config.metrics import ACCURACY, Target


def _known(cls: Any) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.name != "extra")


def _split(cls: Any, d: dict) -> dict:
    """``d``'s keys that are fields of ``cls``, with the others in ``extra`` (a newer or older
    effsearch's keys survive a load and a save)."""
    known = _known(cls)
    out = {k: v for k, v in d.items() if k in known}
    extra = {k: v for k, v in d.items() if k not in known}
    return {**out, "extra": extra} if extra else out


def _as_dict(obj: Any) -> dict:
    """The fields that are set (None: not recorded), then ``extra``: the keys a dict had before."""
    out = {k: getattr(obj, k) for k in _known(type(obj)) if getattr(obj, k) is not None}
    out.update(obj.extra)
    return out


@dataclass(kw_only=True)
class EvalPoint:
    """One evaluation during training (a point of the learning curve)."""

    epoch: float
    samples_seen: int = 0
    train_seconds: float
    val_accuracy: float
    val_loss: float | None = None
    val_bpb: float | None = None  # language models: bits per byte of the held-out tokens
    train_loss: float | None = None
    subset_size: int | None = None  # data subset selection: images in the current subset
    selections: int | None = None  # data subset selection: subsets chosen so far
    val_images: int | None = None  # scored on this shuffled prefix of the validation set (None: all of it)
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return _as_dict(self)

    @classmethod
    def from_dict(cls, d: dict | EvalPoint) -> EvalPoint:
        return d if isinstance(d, EvalPoint) else cls(**_split(cls, d))


@dataclass(kw_only=True)
class Final:
    """The delivered model's measurements and where the run's seconds went. None: not recorded
    (a crashed run has no accuracy; a pruned one no test accuracy; quantized_* need quantize: int8)."""

    val_accuracy: float | None = None
    val_loss: float | None = None
    val_bpb: float | None = None  # language models: bits per byte of the held-out tokens
    test_accuracy: float | None = None  # recorded, never optimised
    test_loss: float | None = None  # language models: the test tokens' loss, recorded, never optimised
    train_seconds: float | None = None  # evaluation excluded
    eval_seconds: float | None = None
    setup_seconds: float | None = None
    compile_seconds: float | None = None
    data_seconds: float | None = None
    selection_seconds: float | None = None
    final_eval_seconds: float | None = None
    steps: int | None = None
    target_crossed_at: float | None = None  # crossed during training, but the delivered model missed
    sparsity: float | None = None
    params: int | None = None
    nonzero_params: int | None = None
    nonzero_param_bytes: int | None = None
    effective_batch: int | None = None  # with accumulation or several processes
    processes: int | None = None  # data-parallel
    comm_bytes_per_step: float | None = None
    comm_bytes_per_step_uncompressed: float | None = None
    quantize_backend: str | None = None  # quantize: int8
    fp32_bytes: int | None = None
    quantized_bytes: int | None = None
    quantized_val_accuracy: float | None = None
    quantized_test_accuracy: float | None = None
    quantize_seconds: float | None = None
    extra: dict = field(default_factory=dict)

    def set(self, **values: Any) -> None:
        """Record measurements (a name no field has goes to ``extra``)."""
        for k, v in values.items():
            if k in _known(Final):
                setattr(self, k, v)
            else:
                self.extra[k] = v

    def to_dict(self) -> dict:
        return _as_dict(self)

    @classmethod
    def from_dict(cls, d: dict | Final) -> Final:
        return d if isinstance(d, Final) else cls(**_split(cls, d))


@dataclass
class RunResult:
    status: str  # completed | diverged | interrupted | pruned | failed
    config: dict
    history: list[EvalPoint] = field(default_factory=list)
    final: Final = field(default_factory=Final)
    target_accuracy: float = 0.0  # the target's value, on ``target_metric`` (the name is the stored format's)
    time_to_target: float | None = None
    reason: str = ""
    device: str = "cpu"
    versions: dict = field(default_factory=dict)
    target_metric: str = ACCURACY

    def __post_init__(self) -> None:  # result.json's shape (dicts) in, typed out
        self.history = [EvalPoint.from_dict(p) for p in self.history]
        self.final = Final.from_dict(self.final)

    @property
    def reached_target(self) -> bool:
        return self.time_to_target is not None

    @property
    def target(self) -> Target:
        return Target(self.target_metric, self.target_accuracy)

    def to_dict(self) -> dict:
        """result.json's shape (as before the types: history a list of dicts, final a dict)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["history"] = [p.to_dict() for p in self.history]
        d["final"] = self.final.to_dict()
        if self.target_metric == ACCURACY:  # an accuracy run's file is as before the metric targets
            del d["target_metric"]
        return clean(d)

    @classmethod
    def from_dict(cls, d: dict) -> RunResult:
        return cls(**d)

    def save(self, path: str | Path) -> Path:
        """Write atomically (a temporary file renamed over ``path``), so a crash never leaves half a
        file. The partial result is written right after a first Ctrl-C, so Ctrl-C waits while it is
        written: a second one interrupts once the file is in place (KeyboardInterrupt from here)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_dict(), indent=2)
        interrupted = False
        with hold_ctrl_c():
            for _ in range(WRITE_TRIES):
                try:
                    _write_atomic(path, text)
                    break
                except KeyboardInterrupt:  # raised all the same (a handler that ran as the hold began)
                    interrupted = True
        if interrupted:
            raise KeyboardInterrupt
        return path

    @classmethod
    def load(cls, path: str | Path) -> RunResult:
        return cls.from_dict(json.loads(Path(path).read_text()))


class ResultNotSaved(OSError):
    """result.json could not be written (a full disk, a folder gone): the run's ``result`` rides
    along, so what it measured is still shown."""

    def __init__(self, path: Path, cause: OSError, result: RunResult) -> None:
        super().__init__(cause.errno, f"cannot write {path}: {cause.strerror or cause}")
        self.path, self.result = path, result


# Writes of result.json a KeyboardInterrupt raised inside them can restart before it gives up.
WRITE_TRIES = 3


def _write_atomic(path: Path, text: str) -> None:
    """``text`` to a temporary file beside ``path``, renamed over it; the temporary file never stays."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".result-", suffix=".json")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would hide it from a shared folder's readers
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it
    os.umask(mask)
    return mask


@contextlib.contextmanager
def hold_ctrl_c() -> Iterator[None]:
    """Ctrl-C (and SIGTERM, where Python handles it: the trainer's ``Terminated``) waits while the
    block runs, then acts as it would have (KeyboardInterrupt, with the default handler) once the
    block is done. Signals reach the main thread only, so elsewhere this does nothing; nor for a
    signal Python does not handle itself (ignored, or the system's default)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    held = {s: h for s, h in previous.items() if callable(h)}
    got: list = []
    for s in held:
        signal.signal(s, lambda signum, frame: got.append((signum, frame)))
    try:
        yield
    finally:
        for s, h in held.items():
            signal.signal(s, h)
        if got:  # the user's latest word: it wins over what the block raised
            signum, frame = got[-1]
            held[signum](signum, frame)


def time_to_target(history: list, target: float | Target, final_value: float | None = None) -> float | None:
    """Train seconds at the first evaluation at or past ``target`` in its metric's direction (a
    number: a val accuracy; a loss is reached at or below it).

    With ``final_value`` (the delivered model's value of the metric), a run whose final
    model misses the target has no time to target: a crossing earlier in training was not
    earned by the model the user gets (sparsity pruned further after it, say).
    """
    t = target if isinstance(target, Target) else Target(ACCURACY, float(target))
    if final_value is not None and not t.reached(final_value):
        return None
    for point in map(EvalPoint.from_dict, history):  # EvalPoints, or their dicts (a stored curve)
        if t.reached(t.of(point)):
            return point.train_seconds
    return None


def speedup(baseline_seconds: float | None, seconds: float | None) -> float | None:
    """How many times faster than the baseline a run reached the target (None when either has
    no time to target)."""
    return baseline_seconds / seconds if baseline_seconds and seconds else None


def clean(obj: Any) -> Any:
    """JSON-safe: NaN and infinities become None (JSON, and PostgreSQL's JSON, have no NaN);
    tuples become lists and keys strings."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    return obj


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("effsearch", "torch", "torchvision", "mosaicml", "cords", "optuna", "ffcv"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    import platform

    out["python"] = platform.python_version()
    return out
