"""Data-parallel training and gradient compression: the compressors by themselves, the DDP
hooks between two gloo processes on the CPU, and ``train`` starting its own second rank."""

import json
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from effsearch.config import ConfigError, TrainConfig
from effsearch.trainer.parallel import compression as C
from tests.support.helpers import free_port, tiny


def test_bit_packing_round_trips_at_every_width():
    g = torch.Generator().manual_seed(0)
    for bits in (1, 2, 3, 5, 8, 9, 16):
        codes = torch.randint(0, 2**bits, (1001,), generator=g)
        packed = C.pack_bits(codes, bits)
        assert packed.dtype == torch.uint8 and packed.numel() == C.packed_len(1001, bits)
        assert torch.equal(C.unpack_bits(packed, bits, 1001), codes)
    assert (C.qsgd_bits(15), C.qsgd_bits(255), C.qsgd_bits(1)) == (5, 9, 2)


@pytest.mark.parametrize("method", ["qsgd", "terngrad"])
def test_qsgd_and_terngrad_are_unbiased(method):
    x = torch.randn(300, generator=torch.Generator().manual_seed(1))
    segs = [(0, 100), (100, 200)]
    gen = torch.Generator().manual_seed(2)
    total = torch.zeros_like(x)
    n = 2000
    for _ in range(n):
        if method == "qsgd":
            codes, norms = C.qsgd_quantize(x, segs, 3, gen)
            total += C.unqsgd(codes, norms, segs, 3)
        else:
            codes, scales = C.ternarize(x, segs, gen)
            assert set(codes.unique().tolist()) <= {0, 1, 2}
            total += C.unternarize(codes, scales, segs)
    mean = total / n
    # One compression is far off; their mean converges to the gradient (error ~ 1/sqrt(n)).
    one = (
        C.unqsgd(*C.qsgd_quantize(x, segs, 3, gen), segs, 3)
        if method == "qsgd"
        else C.unternarize(*C.ternarize(x, segs, gen), segs)
    )
    rel = lambda v: float((v - x).norm() / x.norm())  # noqa: E731
    # Variance of QSGD (s=3) and TernGrad: E|Q(x)-x|^2 of the order of |x|^2 here; the mean's shrinks as 1/n.
    assert rel(one) > 0.5
    assert rel(mean) < 0.08, rel(mean)


# -- two gloo processes ------------------------------------------------------------------------


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _batch(rank):
    g = torch.Generator().manual_seed(10 + rank)
    x = torch.randn(32, 20, generator=g)
    x[:, :] *= 1e-3  # the first layer's gradients are tiny next to the last layer's
    return x, torch.randint(0, 4, (32,), generator=g)


def _grads(model, rank, hook_cfg=None):
    from torch.nn.parallel import DistributedDataParallel as DDP

    kwargs = {}
    if hook_cfg is not None and hook_cfg.distributed.compression.granularity == "entire-model":
        kwargs["bucket_cap_mb"] = 1
    ddp = DDP(model, **kwargs)
    counter = C.register(ddp, hook_cfg, rank, 2) if hook_cfg is not None else None
    x, y = _batch(rank)
    torch.nn.functional.cross_entropy(ddp(x), y).backward()
    return [p.grad.clone() for p in model.parameters()], counter


def _cfg(**compression):
    return TrainConfig.from_dict(
        tiny(**{"distributed.processes": 2, **{f"distributed.compression.{k}": v for k, v in compression.items()}})
    )


def _worker(rank, port, out):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.set_num_threads(1)
    try:
        ref, _ = _grads(_model(), rank)  # DDP's own all-reduce
        res = {}
        full, c = _grads(_model(), rank, _cfg(method="topk", ratio=1.0))
        res["topk1_err"] = max(float((a - b).abs().max()) for a, b in zip(full, ref))
        res["bytes"] = {}
        for ratio in (0.05, 0.1, 0.3):
            _, c = _grads(_model(), rank, _cfg(method="topk", ratio=ratio))
            res["bytes"][ratio] = c.bytes_sent
        for gran in ("layerwise", "entire-model"):
            g, _ = _grads(_model(), rank, _cfg(method="topk", ratio=0.02, granularity=gran))
            res[gran] = [int((t != 0).sum()) for t in g]  # entries updated per parameter
        for method, extra in (("qsgd", {"qstates": 15}), ("terngrad", {}), ("randomk", {"ratio": 0.1})):
            g, c = _grads(_model(), rank, _cfg(method=method, **extra))
            res[method] = {"bytes": c.bytes_sent, "finite": all(bool(torch.isfinite(t).all()) for t in g), "same": None}
            # every rank ends with the same averaged gradient
            flat = torch.cat([t.flatten() for t in g])
            other = flat.clone()
            dist.broadcast(other, src=0)
            res[method]["same"] = bool(torch.equal(flat, other))
        res["dense"] = sum(p.numel() * 4 for p in _model().parameters())
        res["numel"] = [p.numel() for p in _model().parameters()]
        if rank == 0:
            with open(out, "w") as f:
                json.dump(res, f)
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(240)
def test_compression_hooks_between_two_gloo_processes(tmp_path):
    out = tmp_path / "res.json"
    mp.spawn(_worker, args=(free_port(), str(out)), nprocs=2, join=True)
    r = json.loads(out.read_text())
    assert r["topk1_err"] < 1e-6  # TopK keeping everything is the plain average
    b = r["bytes"]
    # fewer entries, fewer bytes (index + value: 8 bytes an entry, so TopK pays off below ratio 0.5)
    assert b["0.05"] < b["0.1"] < b["0.3"] < r["dense"]
    # Layerwise: every parameter keeps its top 2% (at least one entry, on every rank's union).
    assert all(n >= 1 for n in r["layerwise"])
    # Entire model: the first layer's tiny gradients lose to the last layer's: no update at all.
    assert r["entire-model"][0] == 0 and r["entire-model"][2] > 0
    assert r["qsgd"]["bytes"] < 0.3 * r["dense"] and r["terngrad"]["bytes"] < 0.3 * r["dense"]
    assert r["randomk"]["bytes"] < 0.15 * r["dense"]
    for m in ("qsgd", "terngrad", "randomk"):
        assert r[m]["finite"] and r[m]["same"], m


# -- through effsearch train -------------------------------------------------------------------


# Imported by the second rank (EFFSEARCH_PLUGINS): its interpreter's teardown aborts, as native
# threads torn down at exit sometimes did (exit -6 after a run that had finished).
ABORT_AT_EXIT = """
import atexit, multiprocessing, os
if multiprocessing.parent_process() is not None:
    atexit.register(os.abort)
"""


@pytest.mark.timeout(420)
def test_train_starts_its_second_rank_shares_the_subset_and_writes_one_result(tmp_path, monkeypatch):
    """Also: a rank that finished its training exits 0 whatever its interpreter's teardown does."""
    from effsearch.trainer.training import train

    (tmp_path / "abort_at_exit.py").write_text(ABORT_AT_EXIT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("EFFSEARCH_PLUGINS", "abort_at_exit")

    cfg = TrainConfig.from_dict(
        tiny(
            **{
                "distributed.processes": 2,
                "distributed.compression.method": "topk",
                "distributed.compression.ratio": 0.01,
                "distributed.compression.error_feedback": True,
                "selection.strategy": "random-online",
                "selection.fraction": 0.5,
                "selection.select_every": 1,
                "accumulate": 2,
                "epochs": 2,
                "batch_size": 16,
            }
        )
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = train(cfg, out_dir=tmp_path / "run", progress=False)
    assert result.status == "completed", result.reason
    # No deprecation raised from effsearch's own calls (torch 2.15 renamed DDP's broadcast_buffers).
    ours = [f"{w.filename}:{w.lineno}: {w.message}" for w in caught if "/effsearch/" in w.filename.replace("\\", "/")]
    assert not [w for w in ours if "deprecat" in w.lower()], ours
    f = result.final
    assert f.processes == 2 and f.effective_batch == 64
    assert 0 < f.comm_bytes_per_step < 0.1 * f.comm_bytes_per_step_uncompressed
    # 128 training images, half a subset per epoch: 64 split in 2 shards of 32, micro-batches of 16,
    # two per step: 1 step an epoch.
    assert f.steps == 2
    assert [p.subset_size for p in result.history] == [64, 64]
    assert (tmp_path / "run" / "result.json").is_file()
    assert list((tmp_path / "run").iterdir()) == [tmp_path / "run" / "result.json"]


@pytest.mark.timeout(420)
def test_a_time_rung_point_lands_on_the_same_step_on_every_rank(tmp_path, monkeypatch):
    """A pruner's time rung (``eval_after``) in a data-parallel run: rank 0's clock picks the
    step; the other rank waits there, and a stop decided on that point stops both (a rank that
    went on would wait for the other's gradients until the timeout). Rank 0 scores its points
    on part of the validation set (``settle``) while the other waits."""
    from effsearch.trainer import loop
    from effsearch.trainer.training import train

    monkeypatch.setitem(loop.EVAL_BATCH, "cpu", 8)  # rank 0 is this process

    cfg = TrainConfig.from_dict(tiny(**{"distributed.processes": 2, "epochs": 3}))  # 2 steps an epoch a rank
    seen = []

    def on_eval(point):
        seen.append(point.epoch)
        return "pruned at the second point" if len(seen) == 2 else None

    result = train(
        cfg, progress=False, on_eval=on_eval, eval_after=(1e-9, 1e6), settle=lambda epoch, seconds, upper: True
    )
    assert seen == [0.5, 1.0]  # the first step past the mark, then the epoch's end
    assert result.status == "pruned" and [p.epoch for p in result.history] == [0.5, 1.0]
    assert [p.val_images for p in result.history] == [8, 8]


def test_processes_above_the_machine_are_refused_with_the_limit(monkeypatch):
    from effsearch.cli import main
    from effsearch.config import machine
    from effsearch.config.machine import check_runnable

    monkeypatch.setattr(machine, "cpu_cores", lambda: 2)
    with pytest.raises(ConfigError) as e:
        check_runnable(TrainConfig.from_dict(tiny(**{"distributed.processes": 3})))
    assert e.value.field == "distributed.processes" and "at most 2" in e.value.message
    assert main(["train", "configs/quickstart.yaml", "--set", "distributed.processes=3"]) == 2


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"distributed.compression.method": "topk"}, "distributed.compression.method"),  # one process
        (
            {
                "distributed.processes": 2,
                "distributed.compression.method": "fp16",
                "distributed.compression.error_feedback": True,
            },
            "distributed.compression.error_feedback",
        ),
        ({"distributed.processes": 2, "algorithms": {"layer_freezing": {}}}, "algorithms.layer_freezing"),
        ({"distributed.processes": 2, "device": "cpu", "distributed.backend": "nccl"}, "distributed.backend"),
        (
            {
                "distributed.processes": 2,
                "distributed.compression.method": "powersgd",
                "distributed.compression.granularity": "entire-model",
            },
            "distributed.compression.granularity",
        ),
        ({"distributed.processes": 2, "distributed.compression.method": "gzip"}, "distributed.compression.method"),
    ],
)
def test_distributed_rules_name_the_field(overrides, field):
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict(tiny(**overrides))
    assert e.value.field == field, str(e.value)
