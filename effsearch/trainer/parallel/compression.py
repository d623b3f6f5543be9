"""Gradient compression as DDP communication hooks.

DDP hands each bucket of gradients (a flat buffer) to a communication hook and
waits on the future it returns for the averaged buffer. fp16, bf16 and PowerSGD
are torch's own hooks (``torch.distributed.algorithms.ddp_comm_hooks``); TopK,
RandomK, ThresholdV, TernGrad and QSGD are written here after the GRACE
framework's definitions (Xu et al. 2021) and really send fewer bytes:

- topk, threshold: ``all_gather`` of (int32 index, fp32 value) pairs, summed into
  a zero buffer on every rank;
- randomk: every rank draws the same indices (a shared seed), so only the values
  travel, in an ``all_reduce``;
- terngrad, qsgd: signed levels packed at their bit width (2 bits for TernGrad,
  ceil(log2(2s+1)) for QSGD with s states) plus one fp32 scale per segment, in an
  ``all_gather``.

``layerwise`` compresses each parameter's gradient by itself (each gets its own k,
scale or norm); ``entire-model`` treats the bucket as one vector, and DDP is then
given one bucket for the whole model (``bucket_cap_mb``), so TopK over the entire
model may leave a layer with no update at all. Error feedback (Seide et al. 2014;
Karimireddy et al. 2019) keeps what compression dropped and adds it to the next
step's gradient.

Bytes are counted as each rank's payload handed to the collectives (what a rank
sends), from shapes known on the host: no device read, except ThresholdV, whose
message size depends on the data (one count per bucket read back per step).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import PowerSGDState
    from torch.nn.parallel import DistributedDataParallel

    from effsearch.config import TrainConfig

    Segments = list[tuple[int, int]]  # (offset, length) of each compressed piece
    Finish = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (averaged, local) -> the bucket's result
    Hook = Callable[[Any, dist.GradBucket], torch.futures.Future[torch.Tensor]]


@dataclass
class HookState:
    method: str
    ratio: float = 0.01
    threshold: float = 1e-3
    qstates: int = 255
    granularity: str = "layerwise"
    error_feedback: bool = False
    seed: int = 0
    world: int = 1
    rank: int = 0
    group: dist.ProcessGroup | None = None
    bytes_sent: int = 0  # payload a rank handed to collectives, summed over calls
    calls: int = 0
    residuals: dict = field(default_factory=dict)  # bucket index -> what compression dropped
    _gens: dict = field(default_factory=dict)

    def generator(self, device: torch.device | str, shared: bool) -> torch.Generator:
        """Shared: the same stream on every rank (RandomK's indices); else one per rank."""
        key = (str(device), shared)
        if key not in self._gens:
            g = torch.Generator(device=device)
            g.manual_seed(self.seed * 7919 + (0 if shared else 1 + self.rank))
            self._gens[key] = g
        return self._gens[key]


# -- bit packing ----------------------------------------------------------------------


def pack_bits(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Non-negative integers < 2**bits -> uint8, ``bits`` bits each (little-endian bit order)."""
    shifts = torch.arange(bits, device=codes.device)
    b = ((codes.reshape(-1, 1).long() >> shifts) & 1).to(torch.uint8).flatten()
    pad = (-b.numel()) % 8
    if pad:
        b = torch.cat([b, b.new_zeros(pad)])
    weights = (1 << torch.arange(8, device=codes.device)).to(torch.long)
    return (b.view(-1, 8).long() * weights).sum(1).to(torch.uint8)


def unpack_bits(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    shifts = torch.arange(8, device=packed.device)
    b = ((packed.long().reshape(-1, 1) >> shifts) & 1).flatten()[: n * bits].view(n, bits)
    return (b << torch.arange(bits, device=packed.device)).sum(1)


def packed_len(n: int, bits: int) -> int:
    return (n * bits + 7) // 8


def qsgd_bits(qstates: int) -> int:
    return max(1, math.ceil(math.log2(2 * qstates + 1)))


# -- segments ---------------------------------------------------------------------------


def segments(bucket: dist.GradBucket, granularity: str) -> Segments:
    """(offset, length) of each compressed piece of the bucket's flat buffer."""
    n = bucket.buffer().numel()
    if granularity == "entire-model":
        return [(0, n)]
    out, off = [], 0
    for p in bucket.parameters():
        out.append((off, p.numel()))
        off += p.numel()
    assert off == n, f"bucket layout: parameters hold {off} entries, the buffer {n}"
    return out


def seg_ids(segs: Segments, device: torch.device) -> torch.Tensor:
    """Which segment each entry of the flat buffer belongs to."""
    return torch.repeat_interleave(
        torch.arange(len(segs), device=device), torch.tensor([n for _, n in segs], device=device)
    )


def keep_count(n: int, ratio: float) -> int:
    return min(n, max(1, math.ceil(ratio * n)))


# -- compressors: flat fp32 gradient -> (message, locally decoded gradient) ----------------


def topk_select(x: torch.Tensor, segs: Segments, ratio: float) -> torch.Tensor:
    idx = [x[off : off + n].abs().topk(keep_count(n, ratio), sorted=False).indices + off for off, n in segs]
    return torch.cat(idx)


def randomk_select(x: torch.Tensor, segs: Segments, ratio: float, gen: torch.Generator) -> torch.Tensor:
    idx = [torch.randperm(n, generator=gen, device=x.device)[: keep_count(n, ratio)] + off for off, n in segs]
    return torch.cat(idx)


def ternarize(x: torch.Tensor, segs: Segments, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """TernGrad (Wen et al. 2017): s * sign(g) * Bernoulli(|g| / s), s = max |g| per segment.
    Returns codes in {0, 1, 2} (t + 1) and the scales."""
    ids = seg_ids(segs, x.device)
    scales = torch.stack([x[off : off + n].abs().max() for off, n in segs])
    s = scales[ids]
    p = torch.where(s > 0, x.abs() / s.clamp_min(1e-30), torch.zeros_like(x))
    b = torch.rand(x.shape, generator=gen, device=x.device) < p
    t = torch.sign(x) * b
    return (t + 1).long(), scales


def unternarize(codes: torch.Tensor, scales: torch.Tensor, segs: Segments) -> torch.Tensor:
    return (codes.float() - 1) * scales[seg_ids(segs, codes.device)]


def qsgd_quantize(x: torch.Tensor, segs: Segments, s: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """QSGD (Alistarh et al. 2017): ||g|| * sign(g_i) * xi_i / s, xi_i the level |g_i|/||g|| * s
    rounded up or down at random (unbiased). Returns codes q + s in [0, 2s] and the norms."""
    ids = seg_ids(segs, x.device)
    norms = torch.stack([x[off : off + n].norm() for off, n in segs])
    nrm = norms[ids]
    level = torch.where(nrm > 0, x.abs() / nrm.clamp_min(1e-30) * s, torch.zeros_like(x))
    low = level.floor()
    up = torch.rand(x.shape, generator=gen, device=x.device) < (level - low)
    q = torch.sign(x) * (low + up)
    return (q + s).long(), norms


def unqsgd(codes: torch.Tensor, norms: torch.Tensor, segs: Segments, s: int) -> torch.Tensor:
    return (codes.float() - s) * norms[seg_ids(segs, codes.device)] / s


# -- the hook ---------------------------------------------------------------------------------


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8)


def _gather(state: HookState, msg: torch.Tensor) -> torch.futures.Future[torch.Tensor]:
    """All ranks' uint8 messages (same length), as a future of a (world, len) tensor."""
    out = msg.new_empty(state.world * msg.numel())
    work = dist.all_gather_into_tensor(out, msg, group=state.group, async_op=True)
    assert work is not None  # async_op=True returns its Work
    fut = work.get_future()
    # The output buffer itself, filled once the future completes (what the future's value holds
    # differs between backends: gloo gives the per-rank chunks).
    return fut.then(lambda f: (f.wait(), out.view(state.world, -1))[1])


# No annotation on bucket or the return: DDP compares them with real types, and here they are strings.
def compress_hook(state: HookState, bucket):  # type: ignore[no-untyped-def]
    """The DDP communication hook for effsearch's own compressors (see the module docstring)."""
    buf = bucket.buffer()
    x = buf.float()
    if state.error_feedback:
        r = state.residuals.get(bucket.index())
        if r is not None and r.shape == x.shape:
            x = x + r
    segs = segments(bucket, state.granularity)
    state.calls += 1

    def finish(avg: torch.Tensor, local: torch.Tensor) -> torch.Tensor:
        if state.error_feedback:
            state.residuals[bucket.index()] = x - local
        return avg.to(buf.dtype)

    send = _SENDERS.get(state.method)
    if send is None:
        raise ValueError(f"unknown compression method {state.method!r}")
    return send(state, x, segs, finish)


def _send_sparse(
    state: HookState, x: torch.Tensor, segs: Segments, finish: Finish
) -> torch.futures.Future[torch.Tensor]:
    """topk, threshold: (index, value) pairs, all-gathered."""
    m, world = state.method, state.world
    if m == "topk":
        idx = topk_select(x, segs, state.ratio)
    else:
        idx = (x.abs() >= state.threshold).nonzero().flatten()
    vals = x[idx]
    k = idx.numel()
    if m == "threshold":  # a data-dependent size: agree on the largest, pad with (0, 0.0)
        counts = torch.tensor([k], device=x.device, dtype=torch.long)
        everyone = counts.new_empty(world)
        dist.all_gather_into_tensor(everyone, counts, group=state.group)
        kmax = int(everyone.max())
        state.bytes_sent += 8
        if kmax > k:
            idx = torch.cat([idx, idx.new_zeros(kmax - k)])
            vals = torch.cat([vals, vals.new_zeros(kmax - k)])
        k = kmax
    msg = torch.cat([_as_bytes(idx.to(torch.int32)), _as_bytes(vals.float())])
    state.bytes_sent += msg.numel()
    local = (
        torch.zeros_like(x).index_put_((idx[: vals.numel()].long(),), vals, accumulate=True)
        if state.error_feedback
        else x
    )

    def decode(rows: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for row in rows:
            i = row[: 4 * k].view(torch.int32).long()
            v = row[4 * k :].view(torch.float32)
            out.index_add_(0, i, v)
        return finish(out / world, local)

    if k == 0:  # nothing above the threshold anywhere
        fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        fut.set_result(finish(torch.zeros_like(x), torch.zeros_like(x)))
        return fut
    return _gather(state, msg).then(lambda f: decode(f.value()))


def _send_randomk(
    state: HookState, x: torch.Tensor, segs: Segments, finish: Finish
) -> torch.futures.Future[torch.Tensor]:
    """randomk: the same indices on every rank (a shared seed), so the values are all-reduced."""
    idx = randomk_select(x, segs, state.ratio, state.generator(x.device, shared=True))
    vals = x[idx].contiguous()
    state.bytes_sent += vals.numel() * vals.element_size()
    local = torch.zeros_like(x).index_put_((idx,), vals) if state.error_feedback else x
    fut = dist.all_reduce(vals, group=state.group, async_op=True).get_future()

    def scatter(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
        out = torch.zeros_like(x)
        f.wait()
        out[idx] = vals / state.world  # reduced in place
        return finish(out, local)

    return fut.then(scatter)


def _send_quantized(
    state: HookState, x: torch.Tensor, segs: Segments, finish: Finish
) -> torch.futures.Future[torch.Tensor]:
    """terngrad, qsgd: packed codes and their scales, all-gathered."""
    m, n = state.method, x.numel()
    gen = state.generator(x.device, shared=False)
    if m == "terngrad":
        codes, scales = ternarize(x, segs, gen)
        bits = 2
    else:
        codes, scales = qsgd_quantize(x, segs, state.qstates, gen)
        bits = qsgd_bits(state.qstates)
    packed = pack_bits(codes, bits)
    msg = torch.cat([packed, _as_bytes(scales.float())])
    state.bytes_sent += msg.numel()
    plen = packed.numel()

    def decode_one(row: torch.Tensor) -> torch.Tensor:
        c = unpack_bits(row[:plen], bits, n)
        sc = row[plen:].clone().view(torch.float32)  # a copy: the row may start off a 4-byte boundary
        return unternarize(c, sc, segs) if m == "terngrad" else unqsgd(c, sc, segs, state.qstates)

    local = decode_one(msg) if state.error_feedback else x

    def decode(rows: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for row in rows:
            out += decode_one(row)
        return finish(out / state.world, local)

    return _gather(state, msg).then(lambda f: decode(f.value()))


_SENDERS = {
    "topk": _send_sparse,
    "threshold": _send_sparse,
    "randomk": _send_randomk,
    "terngrad": _send_quantized,
    "qsgd": _send_quantized,
}


def counting(hook: Hook, state: HookState, nbytes: Callable[[dist.GradBucket], int]) -> Hook:
    """Wrap one of torch's hooks so that its payload is counted (``nbytes(bucket)``)."""

    def wrapped(torch_state, bucket):  # type: ignore[no-untyped-def]  # untyped for DDP, as compress_hook
        state.calls += 1
        state.bytes_sent += nbytes(bucket)
        return hook(torch_state, bucket)

    return wrapped


def powersgd_bytes(psgd_state: PowerSGDState, rank: int) -> Callable[[dist.GradBucket], int]:
    """PowerSGD's payload for a bucket: rank-1 tensors and matrices it does not compress go
    as fp32 (torch's ``_should_compress`` rule); the others as P (n x r) and Q (m x r)."""
    from torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import _should_compress

    def nbytes(bucket: dist.GradBucket) -> int:
        total = bucket.buffer().numel() * 4
        if psgd_state.iter < psgd_state.start_powerSGD_iter:
            return total  # vanilla all-reduce first (torch's warm-up)
        sent = 0
        for g in bucket.gradients():
            if g.ndim <= 1:
                sent += g.numel() * 4
                continue
            rows, cols = g.shape[0], g.numel() // g.shape[0]
            r = min(rows, cols, rank)
            ok = _should_compress(rows, cols, r, psgd_state.min_compression_rate)[0]
            sent += (rows + cols) * r * 4 if ok else g.numel() * 4
        return sent

    return nbytes


def register(
    ddp: DistributedDataParallel, cfg: TrainConfig, rank: int, world: int, group: dist.ProcessGroup | None = None
) -> HookState | None:
    """Register ``cfg.distributed.compression`` on ``ddp``; returns the byte counter (None:
    DDP's own all-reduce, no hook)."""
    c = cfg.distributed.compression
    if c.method == "none":
        return None
    state = HookState(
        c.method, c.ratio, c.threshold, c.qstates, c.granularity, c.error_feedback, cfg.seed, world, rank, group
    )
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if c.method in ("fp16", "bf16"):
        hook = default_hooks.fp16_compress_hook if c.method == "fp16" else default_hooks.bf16_compress_hook
        ddp.register_comm_hook(group, counting(hook, state, lambda b: b.buffer().numel() * 2))
    elif c.method == "powersgd":
        ps = powerSGD_hook.PowerSGDState(
            process_group=group,
            matrix_approximation_rank=c.rank,
            use_error_feedback=c.error_feedback,
            warm_start=True,
            start_powerSGD_iter=2,
            random_seed=cfg.seed,
        )
        ddp.register_comm_hook(ps, counting(powerSGD_hook.powerSGD_hook, state, powersgd_bytes(ps, c.rank)))
    else:
        ddp.register_comm_hook(state, compress_hook)
    return state
