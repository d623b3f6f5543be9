"""Gradient accumulation, fused steps, K-FAC and int8 quantization after training."""

import pytest
import torch
import torch.nn.functional as F

from effsearch.config import ConfigError, TrainConfig
from effsearch.trainer.data.splits import load_splits
from effsearch.trainer.result import RunResult
from effsearch.trainer.techniques.kfac import KFACSGD
from effsearch.trainer.training import build_optimizer, prepare, train
from tests.support.helpers import tiny


def _vec(lin):
    return torch.cat([lin.weight.detach(), lin.bias.detach()[:, None]], 1).clone()


@pytest.mark.parametrize("damping", [1e-3, 1e-1])
def test_kfac_update_on_one_linear_layer_is_the_damped_kronecker_fisher_solve(damping):
    """(A (x) G + damping I)^-1 vec(grad), built densely and solved, against the optimizer's step."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(5, 3)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    lr = 0.1
    opt = KFACSGD(
        lin.parameters(), lin, lr=lr, momentum=0.0, weight_decay=0.0, damping=damping, update_every=1, kl_clip=None
    )
    before = _vec(lin)
    out = lin(x)
    F.cross_entropy(out, y).backward()
    grad = torch.cat([lin.weight.grad, lin.bias.grad[:, None]], 1).double()
    opt.step()
    update = (before - _vec(lin)).double() / lr
    a = torch.cat([x, torch.ones(16, 1)], 1).double()  # inputs with the bias column
    A = a.T @ a / 16
    g = (torch.softmax(out.detach(), 1) - F.one_hot(y, 3)).double()  # per-sample dL/dz (batch-mean loss x B)
    G = g.T @ g / 16
    fisher = torch.kron(A, G) + damping * torch.eye(18, dtype=torch.double)  # acts on column-stacked vec
    want = torch.linalg.solve(fisher, grad.T.reshape(-1)).reshape(6, 3).T
    assert torch.allclose(update, want, rtol=1e-3, atol=1e-5), (update - want).abs().max()
    assert not torch.allclose(update, grad, rtol=0.1)  # it did precondition


def test_kfac_factors_stay_float32_under_bf16_autocast():
    """The forward hook runs inside the step's autocast: its covariance came out bf16 and eigh
    refused it on the H200 ("linalg_eigh_cuda" not implemented for 'BFloat16'). CPU autocast
    makes the same bf16 product, so this fails here without the fix too."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(5, 3)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    opt = KFACSGD(lin.parameters(), lin, lr=0.1, momentum=0.0, update_every=1, kl_clip=None)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(lin(x), y)
    loss.backward()
    opt.step()
    layer = opt.layers[lin]
    assert layer.A.dtype == layer.G.dtype == layer.QA.dtype == torch.float32
    assert torch.isfinite(lin.weight).all()


def test_kfac_survives_a_factor_float32_eigh_cannot_solve(monkeypatch):
    """float32's eigh failed to converge on a finite conv factor (1,024 zero rows of 1,152) and
    the exception failed the trial: float64 solves it, to the same step. A factor that is not
    finite keeps the last decomposition (the loop's loss check stops a diverging run)."""
    from effsearch.trainer.techniques import kfac

    def step(lin, x, y):
        opt = KFACSGD(lin.parameters(), lin, lr=0.1, momentum=0.0, update_every=1, kl_clip=None)
        F.cross_entropy(lin(x), y).backward()
        opt.step()
        return opt

    torch.manual_seed(0)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    torch.manual_seed(1)
    ref = torch.nn.Linear(5, 3)
    step(ref, x, y)
    real = torch.linalg.eigh

    def float32_fails(M, *a, **k):
        if M.dtype == torch.float32:
            raise torch.linalg.LinAlgError("linalg.eigh: The algorithm failed to converge")
        return real(M, *a, **k)

    monkeypatch.setattr(torch.linalg, "eigh", float32_fails)
    torch.manual_seed(1)
    lin = torch.nn.Linear(5, 3)
    opt = step(lin, x, y)
    assert opt.layers[lin].QA.dtype == torch.float32
    assert torch.allclose(lin.weight, ref.weight, atol=1e-6)
    monkeypatch.setattr(torch.linalg, "eigh", real)
    assert kfac._eigh(torch.full((3, 3), float("nan"))) is None
    layer = opt.layers[lin]
    QA = layer.QA.clone()
    layer.a_sum, layer.a_n = torch.full_like(layer.A, float("inf")), 1
    layer.g_sum, layer.g_n = layer.G.clone(), 1
    opt._update()
    assert torch.equal(layer.QA, QA)  # kept


def test_kfac_captures_only_on_update_steps_and_trains():
    cfg = TrainConfig.from_dict(tiny(**{"optimizer.name": "kfac-sgd", "optimizer.kfac_update_every": 3, "epochs": 3}))
    result = train(cfg, progress=False)
    assert result.status == "completed" and result.final.val_accuracy > 0.3  # 10 classes: chance is 0.1
    run = prepare(cfg, load_splits(cfg), "cpu", RunResult(status="running", config=cfg.to_dict()))
    opt = run.loop.optimizer
    assert isinstance(opt, KFACSGD) and opt.handles  # armed for the first step only
    run.fit()
    assert opt.kfac_steps == run.loop.step == 12 and len(opt.layers) == 4  # 3 convs and the linear layer
    assert all(layer.QA is not None for layer in opt.layers.values())


def _factors(model, conv, x, y):
    """The input factor K-FAC builds for ``conv`` on one step of ``model`` over (x, y)."""
    opt = KFACSGD(model.parameters(), model, lr=0.1, momentum=0.0, update_every=1, kl_clip=None)
    F.cross_entropy(model(x), y).backward()
    opt.step()
    return opt.layers[conv].A


@pytest.mark.parametrize(
    "padding, mode, explicit",
    [
        ("same", "zeros", (1, 1, 1, 1)),  # 3x3
        ("same", "reflect", (1, 1, 1, 1)),
        ((1, 1), "replicate", (1, 1, 1, 1)),
        ("valid", "zeros", (0, 0, 0, 0)),
    ],
)
def test_kfac_factors_of_a_padded_conv_are_those_of_explicit_padding(padding, mode, explicit):
    """A Conv2d that pads by a string or a mode other than zeros builds the same input factor
    as F.pad then an unpadded conv: F.unfold takes int padding only (a string failed there)."""
    torch.manual_seed(0)
    x, y = torch.randn(4, 2, 6, 6), torch.randint(0, 3, (4,))
    conv = torch.nn.Conv2d(2, 3, 3, padding=padding, padding_mode=mode)
    model = torch.nn.Sequential(conv, torch.nn.Flatten(), torch.nn.LazyLinear(3))
    model(x)
    ref = torch.nn.Conv2d(2, 3, 3, padding=0)
    ref.load_state_dict(conv.state_dict())
    pad = "constant" if mode == "zeros" else mode
    ref_model = torch.nn.Sequential(_Pad(explicit, pad), ref, torch.nn.Flatten(), torch.nn.LazyLinear(3))
    ref_model(x)
    assert torch.allclose(_factors(model, conv, x, y), _factors(ref_model, ref, x, y), atol=1e-6)


class _Pad(torch.nn.Module):
    def __init__(self, pads, mode):
        super().__init__()
        self.pads, self.mode = pads, mode

    def forward(self, x):
        return F.pad(x, self.pads, mode=self.mode)


def test_kfac_trains_a_model_with_same_padded_convs():
    """padding="same" (odd and even kernels, dilation, a reflect mode) reached F.unfold, which
    takes ints only: the first K-FAC step raised. Every conv is now preconditioned on every step."""
    torch.manual_seed(0)
    convs = [
        torch.nn.Conv2d(3, 4, 3, padding="same"),
        torch.nn.Conv2d(4, 4, 2, padding="same"),  # even: the odd pixel on the right
        torch.nn.Conv2d(4, 4, 3, padding="same", dilation=2, padding_mode="reflect"),
    ]
    model = torch.nn.Sequential(
        *[m for c in convs for m in (c, torch.nn.ReLU())], torch.nn.Flatten(), torch.nn.Linear(4 * 8 * 8, 3)
    )
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 3, (8,))
    opt = KFACSGD(model.parameters(), model, lr=0.05, momentum=0.0, update_every=2)
    first = None
    for _ in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        first = first if first is not None else loss.item()
        loss.backward()
        plain = [c.weight.grad.clone() for c in convs]
        before = [c.weight.detach().clone() for c in convs]
        opt.step()
        for c, g, w in zip(convs, plain, before):
            step = (w - c.weight.detach()) / 0.05
            assert not torch.allclose(step, g, rtol=0.1)  # preconditioned, not the plain gradient
    assert opt.fallbacks() is None and opt.kfac_steps == 4
    assert all(opt.layers[c].QA.shape[0] == c.weight[0].numel() + 1 for c in convs)
    assert all(torch.isfinite(c.weight).all() for c in convs)
    assert F.cross_entropy(model(x), y).item() < first


def test_kfac_says_which_grouped_convs_it_leaves_to_plain_sgd(caplog):
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 4, 3, groups=4), torch.nn.Conv2d(4, 2, 1))
    opt = KFACSGD(model.parameters(), model, lr=0.1)
    assert [layer.name for layer in opt.layers.values()] == ["1"]
    assert "grouped convolutions; 0 (groups=4) train with plain SGD" in caplog.text


def test_kfac_layers_follow_the_model_order():
    """A set of modules iterates by address, so the KL clip's sum over layers was added up in an
    order that changed between runs: a seeded K-FAC run with selective backprop did not repeat."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(4, 4) for _ in range(12)]
    model = torch.nn.Sequential(*[m for lin in layers for m in (lin, torch.nn.ReLU())])
    opt = KFACSGD(model.parameters(), model, lr=0.1, update_every=1)
    assert list(opt.layers) == layers
    opt.step()  # re-armed after an update: still in order
    assert list(opt.layers) == layers


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"optimizer.name": "kfac-sgd", "compile": True}, "optimizer.name"),
        ({"optimizer.name": "kfac-sgd", "algorithms": {"sam": {}}}, "algorithms.sam"),
        ({"optimizer.name": "sgdw", "optimizer.fused": True}, "optimizer.fused"),
        ({"accumulate": 0}, "accumulate"),
        ({"quantize": "int4"}, "quantize"),
    ],
)
def test_rules_name_the_field(overrides, field):
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict(tiny(**overrides))
    assert e.value.field == field, str(e.value)


def test_fused_runs_on_cpu_where_torch_has_it_and_the_lr_rule_reads_the_effective_batch():
    cfg = TrainConfig.from_dict(
        tiny(
            **{
                "optimizer.fused": True,
                "accumulate": 4,
                "batch_size": 16,
                "optimizer.scale_lr_with_batch": True,
                "optimizer.lr": 0.1,
            }
        )
    )
    opt = build_optimizer(cfg, torch.nn.Linear(2, 2).parameters(), "cpu")
    assert opt.defaults["fused"] is True
    assert opt.defaults["lr"] == pytest.approx(0.1 * 64 / 128)  # batch 16 x 4 micro-batches
    assert not build_optimizer(TrainConfig.from_dict(tiny()), torch.nn.Linear(2, 2).parameters(), "cpu").defaults.get(
        "fused"
    )


def test_accumulation_steps_once_per_k_micro_batches_with_one_steps_gradient(monkeypatch):
    """accumulate=2 at batch 16 takes the gradient a batch of 32 would (BatchNorm aside: eval mode)."""
    cfg = TrainConfig.from_dict(tiny(**{"accumulate": 2, "batch_size": 16, "epochs": 1}))
    run = prepare(cfg, load_splits(cfg), "cpu", RunResult(status="running", config=cfg.to_dict()))
    loop = run.loop
    assert loop.bpe == 4  # 128 images, micro-batches of 16, 2 a step
    loop.model.module.eval()  # BatchNorm's batch statistics would differ between micro-batches
    batches = list(loop.loader)[:2]
    loop._forward_backward([loop.augment(b) for b in batches])
    acc = [p.grad.clone() for p in loop.model.parameters()]
    x = torch.cat([b[0] for b in batches])
    y = torch.cat([b[1] for b in batches])
    loop._forward_backward([loop.augment((x, y))])  # the same samples as one micro-batch
    whole = [p.grad.clone() for p in loop.model.parameters()]
    for a, w in zip(acc, whole):
        assert torch.allclose(a, w, atol=1e-5), (a - w).abs().max()
    loop.model.module.train()
    run.fit()
    assert loop.step == 4 and run.loop.summary()["effective_batch"] == 32


def test_int8_quantization_after_training_with_sparsity():
    cfg = TrainConfig.from_dict(
        tiny(
            **{
                "quantize": "int8",
                "sparsity.target": 0.6,
                "sparsity.schedule": "constant",
                "epochs": 3,
                "model.width": 16,
            }
        )
    )
    f = train(cfg, progress=False).final
    assert f.quantized_bytes < 0.5 * f.fp32_bytes
    assert abs(f.quantized_test_accuracy - f.test_accuracy) <= 0.1
    assert 0 <= f.quantized_val_accuracy <= 1 and f.quantize_seconds > 0
    from effsearch.objectives import OBJECTIVES

    r = RunResult(status="completed", config={}, final=f)
    assert OBJECTIVES["quantized_size"].value(r) == f.quantized_bytes
    with pytest.raises(ValueError, match="quantize: int8"):
        OBJECTIVES["quantized_size"].value(RunResult(status="completed", config={}, final={}))


def test_quantization_lets_no_warning_through():
    """torch's deprecation notices about its own quantization tooling are silenced in
    quantize.QUIET (the module docstring says why the path stays); anything else shows."""
    import warnings

    from effsearch.trainer.models import build_model
    from effsearch.trainer.techniques import quantize

    splits = load_splits(TrainConfig.from_dict(tiny()))
    net = build_model("resnet9", 3, 10, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quantize.measure(net, splits)
    assert [str(w.message)[:120] for w in caught] == []


def test_quantization_works_on_the_resnets():
    from effsearch.trainer.models import build_model
    from effsearch.trainer.techniques import quantize

    cfg = TrainConfig.from_dict(tiny())
    splits = load_splits(cfg)
    for name in ("resnet9", "resnet20", "resnet-bottleneck"):
        net = build_model(name, 3, 10, 4)
        f = quantize.measure(net, splits)
        assert f["quantized_bytes"] < f["fp32_bytes"], name
