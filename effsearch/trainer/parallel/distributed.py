"""Data-parallel training: processes, the process group, DDP and its communication hook.

``effsearch train`` with ``distributed.processes: N > 1`` makes the calling process
rank 0 and starts ranks 1..N-1 itself (``spawn``; gloo on CPU, NCCL on GPUs), so the
progress bar, the study's pruner and ``result.json`` stay in the caller. Under
``torchrun`` (RANK / WORLD_SIZE in the environment) every process is started by the
launcher and effsearch only joins the group. Each rank trains its shard of every
epoch's order (``DeviceBatches``, as ``DistributedSampler`` would); gradients are
averaged by ``torch.nn.parallel.DistributedDataParallel`` or by the compression hook
(``compression.py``). Rank 0 evaluates, decides when to stop (shared at evaluation
points and epoch ends, never per step), keeps the time and writes the result.
"""

from __future__ import annotations

import contextlib
import datetime
import inspect
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from effsearch.config.machine import backend, cpu_cores, under_torchrun

if TYPE_CHECKING:
    from torch.nn.parallel import DistributedDataParallel

    from effsearch.config import TrainConfig
    from effsearch.trainer.composer.model import EffModel
    from effsearch.trainer.parallel.compression import HookState


@dataclass
class Context:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    backend: str = ""
    children: list = field(default_factory=list)  # processes rank 0 started
    threads: int | None = None  # torch's thread count before (put back on exit)

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def on(self) -> bool:
        return self.world > 1


SINGLE = Context()


def world_size(cfg: TrainConfig) -> int:
    return int(os.environ["WORLD_SIZE"]) if under_torchrun() else cfg.distributed.processes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Long enough for rank 0's evaluations and CORDS selections, which the other ranks wait out.
TIMEOUT = datetime.timedelta(minutes=30)


@contextlib.contextmanager
def session(
    cfg: TrainConfig, device: str, data_root: str | os.PathLike | None = None, train: Callable[..., Any] | None = None
) -> Iterator[Context]:
    """The process group for this run (and, from the caller, the ranks it starts).

    ``train(cfg, data_root=..., out_dir=None, progress=False)`` is what ranks 1..N-1 run: the
    trainer passes its own entry point (a module-level function, so spawn can pickle it), which
    keeps this module free of an import of the trainer that imports it."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # A child (``_child``) or a caller that made its own group: join it as it is.
        g = torch.distributed
        yield Context(
            g.get_rank(), g.get_world_size(), int(os.environ.get("LOCAL_RANK", g.get_rank())), g.get_backend()
        )
        return
    world = world_size(cfg)
    if world == 1:
        yield SINGLE
        return
    be = backend(cfg, device)
    if under_torchrun():
        rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", 0))
        ctx = Context(rank, world, local, be)
        _setup_rank(ctx, device)
        torch.distributed.init_process_group(be, timeout=TIMEOUT)
    else:
        ctx = _spawn_ranks(cfg, world, be, device, data_root, train)
    failed = None
    try:
        yield ctx
    except BaseException as e:
        failed = e
        raise
    finally:
        _teardown(ctx, failed)


def _spawn_ranks(
    cfg: TrainConfig,
    world: int,
    be: str,
    device: str,
    data_root: str | os.PathLike | None,
    train: Callable[..., Any] | None,
) -> Context:
    """Start ranks 1..world-1 (spawned processes running ``train``) and join the group as rank 0."""
    port = _free_port()
    ctx = Context(0, world, 0, be)
    import multiprocessing as mp

    spawn = mp.get_context("spawn")
    for rank in range(1, world):
        p = spawn.Process(
            target=_child,
            args=(train, rank, world, port, be, cfg.to_dict(), device, data_root),
            daemon=True,
            name=f"effsearch-rank{rank}",
        )
        p.start()
        ctx.children.append(p)
    _setup_rank(ctx, device)
    torch.distributed.init_process_group(
        be, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=world, timeout=TIMEOUT
    )
    return ctx


def _teardown(ctx: Context, failed: BaseException | None) -> None:
    """Leave the group, wait for the ranks this process started, and say which failed (unless the
    run's own error, ``failed``, is being raised)."""
    # Teardown only: after a rank failed the group may be broken or gone; the run's own error
    # (raised on) or a rank's exit code (checked below) says what went wrong.
    with contextlib.suppress(Exception):
        torch.distributed.destroy_process_group()
    for p in ctx.children:
        p.join(timeout=60 if failed is None else 5)
        if p.is_alive():
            p.terminate()
            p.join(5)
    if ctx.threads is not None:
        torch.set_num_threads(ctx.threads)
    bad = [p for p in ctx.children if p.exitcode not in (0, None)]
    if bad and failed is None:
        raise RuntimeError(
            f"distributed rank(s) {', '.join(p.name for p in bad)} exited with code "
            f"{', '.join(str(p.exitcode) for p in bad)}"
        )


def _setup_rank(ctx: Context, device: str) -> None:
    if device == "cuda":
        torch.cuda.set_device(ctx.local_rank)
    else:
        # N processes on the machine's cores: each takes its share, so they do not oversubscribe.
        ctx.threads = torch.get_num_threads()
        torch.set_num_threads(max(1, cpu_cores() // ctx.world))


def _child(
    train: Callable[..., Any],
    rank: int,
    world: int,
    port: int,
    be: str,
    cfg_dict: dict,
    device: str,
    data_root: str | os.PathLike | None,
) -> None:
    """Ranks 1..N-1: join the group, train the same config, write nothing."""
    import faulthandler
    import sys
    import warnings

    faulthandler.enable()  # a rank killed by a signal says where: rank 0 only sees its exit code
    warnings.filterwarnings("ignore")
    from effsearch.config import TrainConfig
    from effsearch.config.imports import import_plugins

    import_plugins()  # the parent's plugins (EFFSEARCH_PLUGINS): the config may name what they bring

    ctx = Context(rank, world, rank if device == "cuda" else 0, be)
    _setup_rank(ctx, device)
    torch.distributed.init_process_group(
        be, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=TIMEOUT
    )
    try:
        train(TrainConfig.from_dict(cfg_dict), data_root=data_root, out_dir=None, progress=False)
    finally:
        with contextlib.suppress(Exception):  # teardown, as in session: this rank's exit code tells rank 0
            torch.distributed.destroy_process_group()
    # Done, and the exit code is what rank 0 reads: skip the interpreter's teardown. DDP still
    # holds the gloo group there, and native threads torn down at exit can abort the process
    # ("terminate called without an active exception", exit -6) after a run that succeeded.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def wrap(
    model: EffModel, cfg: TrainConfig, ctx: Context, device: str
) -> tuple[DistributedDataParallel, HookState | None, int]:
    """DDP around the network (after Composer's surgery) and the compression hook; returns
    (the DDP module, the byte counter or None, uncompressed bytes per step)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from effsearch.trainer.parallel import compression

    module = model.module
    params = [p for p in module.parameters() if p.requires_grad]
    dense = sum(p.numel() * p.element_size() for p in params)
    kwargs: dict[str, Any] = {}
    if cfg.distributed.compression.granularity == "entire-model" and cfg.distributed.compression.method != "none":
        kwargs["bucket_cap_mb"] = dense / 2**20 + 1  # one bucket: the hook sees the whole model as one vector
    # Rank 0's BatchNorm statistics are its own shard's: no per-step broadcast of buffers. torch
    # 2.15 renamed the switch and warns on the old name; its new one still syncs buffers once at
    # init, where every rank's are the freshly built model's anyway.
    if "forward_sync_buffers" in inspect.signature(DDP).parameters:
        kwargs["forward_sync_buffers"] = False
    else:
        kwargs["broadcast_buffers"] = False
    ddp = DDP(
        module,
        device_ids=[torch.cuda.current_device()] if device == "cuda" else None,
        gradient_as_bucket_view=True,
        **kwargs,
    )
    counter = compression.register(ddp, cfg, ctx.rank, ctx.world)
    return ddp, counter, dense


def broadcast_float(x: float, ctx: Context, device: str) -> float:
    """Rank 0's ``x`` on every rank (one 8-byte broadcast)."""
    t = torch.tensor([x], dtype=torch.float64, device=device)
    torch.distributed.broadcast(t, src=0)
    return float(t.item())


def agree(flag: bool, ctx: Context, device: str) -> bool:
    """Rank 0's ``flag`` on every rank."""
    return broadcast_float(1.0 if flag else 0.0, ctx, device) != 0.0


def broadcast_object(obj: Any, ctx: Context) -> Any:
    box = [obj]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]
