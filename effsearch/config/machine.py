"""What this machine and this install can run: read by validation before a run starts
(``check_runnable``) and by the search space, so it offers only that.

Detected once per process; tests pass a ``Machine`` by hand to check the rules
of machines they do not have (a GPU, FFCV). torch is imported lazily (~5 s): reading
a config or a study file's options does not need it.

Also here: which GPUs each worker of a study gets (``worker_devices``: its own
``CUDA_VISIBLE_DEVICES``) and what a trial records of the device it ran on
(``device_record``). ``EFFSEARCH_FAKE_GPUS`` and ``EFFSEARCH_FAKE_HOST`` are for tests: a CPU
machine that shows N GPUs to the device assignment, and a host name of its own per "node".
"""

from __future__ import annotations

import importlib.util
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from effsearch.config.fields import ConfigError

if TYPE_CHECKING:
    from collections.abc import Collection

    from effsearch.config.schema import TrainFields

INSTALL_HINT = (
    "install the system libraries and the extra: `sudo apt-get install -y pkg-config "
    "libopencv-dev libturbojpeg0-dev && uv sync --extra ffcv` (then `uv run --extra ffcv ...`), "
    "or use loader: torch"
)


@dataclass(frozen=True)
class Machine:
    device: str = "cpu"  # "cpu" | "cuda"
    bf16: bool = False  # the GPU runs amp_bf16
    ffcv: bool | None = False  # `import ffcv` works (None: find out when asked, see has_ffcv)
    compile: bool = False  # torch.compile is worth offering (CUDA with triton)
    selection: bool = True  # CORDS subset selection is installed
    cores: int = 1  # CPU cores this process may use (data-parallel processes on the CPU: one each)
    gpus: int = 0

    def max_processes(self) -> int:
        return self.gpus if self.device == "cuda" else self.cores

    def has_ffcv(self) -> bool:
        return ffcv_works() if self.ffcv is None else self.ffcv

    def precisions(self) -> tuple[str, ...]:
        if self.device != "cuda":
            return ("fp32",)
        return ("fp32", "amp_fp16", "amp_bf16") if self.bf16 else ("fp32", "amp_fp16")

    def describe(self, searched: Collection[str] | None = None) -> str:
        """The device and what it offers the space, in words (``cpu with CORDS subset selection``);
        with ``searched`` (the space's dimensions), only what one of them uses: a language model's
        space has no selection dimension, and its header had named CORDS all the same."""
        extras = [
            label
            for name, (label, dimension) in DESCRIBED.items()
            if getattr(self, name)
            and not (name == "ffcv" and self.ffcv is None and not _ffcv_checked.get("ok"))
            and (searched is None or any(d.split(".")[0] == dimension for d in searched))
        ]
        return f"{self.device}" + (f" with {', '.join(extras)}" if extras else "")


# What Machine.describe names for each optional capability it has, and the dimension (by its first
# dotted part) that uses it.
DESCRIBED = {
    "bf16": ("bf16", "precision"),
    "ffcv": ("FFCV", "loader"),
    "compile": ("torch.compile", "compile"),
    "selection": ("CORDS subset selection", "selection"),
}


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


_ffcv_checked: dict = {}


def ffcv_works() -> bool:
    """Whether ffcv imports here. Asked only when a study may search the loader: the import
    takes seconds."""
    if "ok" not in _ffcv_checked:
        _ffcv_checked["ok"] = _importable("ffcv") and _ffcv_import_error() is None
    return _ffcv_checked["ok"]


def _ffcv_import_error() -> Exception | None:
    """Import ffcv and its compiled parts (its C extension, built against OpenCV and libjpeg-turbo,
    numba, cv2); the error if that fails. The package can be present while those are not."""
    import torch

    threads = torch.get_num_threads()
    try:
        import ffcv  # noqa: F401
        from ffcv.loader import Loader  # noqa: F401
    except Exception as e:  # noqa: BLE001 - ImportError, or OSError when a system library is missing
        return e
    finally:
        torch.set_num_threads(threads)  # importing ffcv sets torch (and numba) to one thread
    return None


def detect(device: str = "auto") -> Machine:
    """The machine a TrainConfig with ``device`` would run on (imports torch, ~5 s)."""
    import torch

    cuda = torch.cuda.is_available() and device != "cpu"
    fake = fake_gpus()
    return Machine(
        cores=cpu_cores(),
        gpus=fake[0] if fake is not None else (torch.cuda.device_count() if cuda else 0),
        device="cuda" if cuda else "cpu",
        bf16=bool(cuda and torch.cuda.is_bf16_supported()),
        ffcv=None,  # checked on demand
        compile=bool(cuda and _importable("triton")),
        # The CORDS strategies come in through effsearch.trainer.data.selection.
        selection=_importable("cords") and _importable("effsearch.trainer.data.selection"),
    )


def cpu_cores() -> int:
    """CPU cores this process may use (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# -- GPUs per worker -----------------------------------------------------------------

# For tests only: "N" or "N:NAME" makes this machine show N GPUs (named NAME, default "fake GPU")
# to the device assignment below, while trials still train on the CPU; read here and nowhere else.
FAKE_GPUS = "EFFSEARCH_FAKE_GPUS"
FAKE_HOST = "EFFSEARCH_FAKE_HOST"  # for tests only: the host name trials record (two "nodes" on one machine)


def fake_gpus() -> tuple[int, str] | None:
    """(count, name) of the GPUs ``EFFSEARCH_FAKE_GPUS`` pretends this machine has (None: unset)."""
    text = os.environ.get(FAKE_GPUS, "").strip()
    if not text:
        return None
    count, _, name = text.partition(":")
    try:
        n = int(count)
    except ValueError:
        raise ConfigError(FAKE_GPUS, f"must be N or N:NAME (a test's fake GPUs); got {text!r}") from None
    return max(0, n), name or "fake GPU"


def gpus_in_sight() -> int:
    """GPUs this machine may have, read without torch (its import takes seconds): the fake ones, else
    the NVIDIA driver's list (0 where it has none). Only to let a check of a study file's own values
    skip a bound that GPUs change; ``detect`` counts them."""
    fake = fake_gpus()
    if fake is not None:
        return fake[0]
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def host_name() -> str:
    """This machine's name, as trials record it."""
    return os.environ.get(FAKE_HOST) or socket.gethostname()


def visible_ids(gpus: int) -> list[str]:
    """The ids of this process's ``gpus`` GPUs, as CUDA_VISIBLE_DEVICES names them: the user's own
    list where it is set (a worker pinned to "2,3" of it gets "2"), else 0..gpus-1."""
    given = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return given[:gpus] if len(given) >= gpus else [str(i) for i in range(gpus)]


def free_workers(gpus: int, per_trial: int) -> int:
    """Workers that each hold ``per_trial`` GPUs of their own."""
    return gpus // max(1, per_trial)


def worker_devices(gpus: int, workers: int, per_trial: int) -> list[str]:
    """Each worker's CUDA_VISIBLE_DEVICES: ``per_trial`` GPUs of its own while they last; past
    that (``share_devices``) the same GPUs again, round the machine."""
    ids = visible_ids(gpus)
    k = max(1, per_trial)
    slots = [",".join(ids[i * k : (i + 1) * k]) for i in range(max(1, free_workers(gpus, k)))]
    return [slots[i % len(slots)] for i in range(workers)]


def device_record(device: str, index: str | None, shared: bool) -> dict:
    """What a trial on ``device`` ("cuda" or "cpu") records of where it trained: the device's name
    (its kind: speed-ups are read against a baseline of the same kind), ``index`` (this worker's
    CUDA_VISIBLE_DEVICES), the host, and whether other workers trained on the same GPU meanwhile
    (their times then measure each other)."""
    fake = fake_gpus()
    if fake is not None and fake[0] > 0:
        name = fake[1]
    elif device == "cuda":
        import torch

        name = torch.cuda.get_device_name(0)
    else:
        name, index, shared = "cpu", None, False
    return {"name": name, "index": index, "host": host_name(), "shared": shared}


def under_torchrun() -> bool:
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ and int(os.environ["WORLD_SIZE"]) > 1


# -- the rules that need the machine ----------------------------------------------


def resolve_device(cfg: TrainFields) -> str:
    """The device ``cfg`` runs on here ("cpu" or "cuda"); refuses what this machine cannot do."""
    import torch

    from effsearch.config import rules

    has_cuda = torch.cuda.is_available()
    if cfg.device == "cuda" and not has_cuda:
        raise ConfigError("device", "is 'cuda' but no CUDA device is available; use 'auto' or 'cpu'")
    device = "cuda" if cfg.device == "auto" and has_cuda else ("cpu" if cfg.device == "auto" else cfg.device)
    # The config's rules about the device (precision, K-FAC's factors), on the device `auto` became.
    rules.check({**cfg.to_dict(), "device": device}, rules.of("precision") + rules.of("optimizer.kfac"))
    if cfg.precision == "amp_bf16" and device == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError("precision", "amp_bf16 is not supported by this GPU; use amp_fp16 or fp32")
    return device


def memory_bytes(device: str) -> int | None:
    """The most memory a run on ``device`` can use: the GPU's, or the CPU's (the machine's, or its
    cgroup's limit where that is lower, as in a container). None: the GPU cannot be asked (a study
    file read for a machine of other devices than this one)."""
    if device == "cuda":
        import torch

        try:
            return int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
        except (RuntimeError, AssertionError):
            return None
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def check_weights_fit(params: int, weight_bytes: int, field: str, cfg: TrainFields, device: str) -> None:
    """A model whose weights alone (a bound below what training it needs: its gradients, the
    optimizer's state and the activations come on top) exceed the device's memory is refused
    before any data is read; on the CPU each data-parallel process holds a copy."""
    copies = cfg.distributed.processes if device == "cpu" else 1
    have = memory_bytes(device)
    if have is None or weight_bytes * copies <= have:
        return
    where = "this GPU's" if device == "cuda" else "this machine's"
    each = f" in each of {copies} processes" if copies > 1 else ""
    raise ConfigError(
        field,
        f"the model ({cfg.model.name!r}) has {params:,} parameters: its weights alone take "
        f"{weight_bytes / 2**30:,.1f} GiB{each}, more than {where} {have / 2**30:,.1f} GiB of memory "
        "(training needs several times its weights); make it smaller",
    )


def require_ffcv() -> None:
    """Raise ConfigError (with the install line) unless ffcv and its compiled parts import here."""
    e = _ffcv_import_error()
    if e is not None:
        raise ConfigError(
            "loader", f"is 'ffcv' but ffcv cannot be imported here ({type(e).__name__}: {e}); " + INSTALL_HINT
        )


def check_processes(cfg: TrainFields, device: str) -> None:
    """Processes this machine can hold: one per CPU core (gloo) or per GPU (NCCL)."""
    d = cfg.distributed
    if under_torchrun():
        world = int(os.environ["WORLD_SIZE"])
        if d.processes not in (1, world):
            raise ConfigError(
                "distributed.processes",
                f"is {d.processes} but torchrun started WORLD_SIZE={world} "
                "processes; set it to 1 (take torchrun's) or to the same",
            )
        return
    n = d.processes
    if n == 1:
        return
    if device == "cuda":
        import torch

        gpus = torch.cuda.device_count()
        if n > gpus:
            raise ConfigError(
                "distributed.processes",
                f"must be at most {gpus} here (one process per GPU; this machine has {gpus}); got {n}",
            )
    else:
        cores = cpu_cores()
        if n > cores:
            raise ConfigError(
                "distributed.processes",
                f"must be at most {cores} here (one process per CPU core; this machine has {cores}); got {n}",
            )
    if backend(cfg, device) == "nccl" and device != "cuda":
        raise ConfigError("distributed.backend", "'nccl' needs CUDA devices; this run is on the CPU")


def backend(cfg: TrainFields, device: str) -> str:
    """The process group's backend: ``auto`` is NCCL on CUDA, gloo on the CPU."""
    b = cfg.distributed.backend
    return ("nccl" if device == "cuda" else "gloo") if b == "auto" else b


def check_runnable(cfg: TrainFields) -> str:
    """Rules that need the machine (device, precision, installed extras, processes). Returns the device."""
    device = resolve_device(cfg)
    if cfg.loader == "ffcv":
        require_ffcv()
    check_processes(cfg, device)
    return device
