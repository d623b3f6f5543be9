"""What this machine and this install can run, so the space offers only that.

Detected once per process; tests pass a ``Machine`` by hand to check the rules
of machines they do not have (a GPU, FFCV).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


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

    def describe(self) -> str:
        extras = [name for name in ("bf16", "ffcv", "compile", "selection") if getattr(self, name)
                  and not (name == "ffcv" and self.ffcv is None and not _ffcv_checked.get("ok"))]
        return f"{self.device}" + (f" ({', '.join(extras)})" if extras else "")


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


_ffcv_checked: dict = {}


def ffcv_works() -> bool:
    """Whether `import ffcv` works. Asked only when a study may search the loader: the
    import takes seconds and sets torch to one thread, which is put back here."""
    if "ok" not in _ffcv_checked:
        ok = False
        if _importable("ffcv"):
            import torch

            threads = torch.get_num_threads()
            try:  # the package can be present while its compiled parts are not
                import ffcv  # noqa: F401

                ok = True
            except Exception:
                ok = False
            finally:
                torch.set_num_threads(threads)
        _ffcv_checked["ok"] = ok
    return _ffcv_checked["ok"]


def detect(device: str = "auto") -> Machine:
    """The machine a TrainConfig with ``device`` would run on (imports torch, ~5 s)."""
    import torch

    cuda = torch.cuda.is_available() and device != "cpu"
    from effsearch.trainer.distributed import cpu_cores

    return Machine(
        cores=cpu_cores(), gpus=torch.cuda.device_count() if cuda else 0,
        device="cuda" if cuda else "cpu",
        bf16=bool(cuda and torch.cuda.is_bf16_supported()),
        ffcv=None,  # checked on demand
        compile=bool(cuda and _importable("triton")),
        # The CORDS strategies come in through effsearch.trainer.selection.
        selection=_importable("cords") and _importable("effsearch.trainer.selection"),
    )
