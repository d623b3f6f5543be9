"""No failure passes in silence: each one fails the run naming its cause, or the run goes on
with a warning printed once and recorded where the user looks (the header, a trial's
attributes, result.json)."""

import torch
import torch.nn.functional as F

import effsearch.trainer.run as trainer_run
from effsearch.config import TrainConfig
from effsearch.search import record
from effsearch.trainer.kfac import KFACSGD
from tests.helpers import tiny


# -- K-FAC's fallbacks -------------------------------------------------------------------------
def _always_fails(M, *a, **k):
    raise torch.linalg.LinAlgError("linalg.eigh: The algorithm failed to converge")


def test_kfac_counts_its_fallbacks_to_plain_sgd_and_warns_once(monkeypatch, capsys):
    torch.manual_seed(0)
    lin = torch.nn.Linear(5, 3)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    opt = KFACSGD(lin.parameters(), lin, lr=0.1, momentum=0.0, update_every=1, kl_clip=None)
    monkeypatch.setattr(torch.linalg, "eigh", _always_fails)
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(lin(x), y).backward()
        opt.step()
    got = opt.fallbacks()
    assert got["failed_decompositions"] == 3 and got["plain_steps"] == 3 and got["layers"] == ["Linear"]
    err = capsys.readouterr().err
    assert err.count("warning: K-FAC") == 1 and "plain SGD" in err, err


def test_kfac_counts_a_shape_mismatch(capsys):
    torch.manual_seed(0)
    lin = torch.nn.Linear(5, 3)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    opt = KFACSGD(lin.parameters(), lin, lr=0.1, momentum=0.0, update_every=100, kl_clip=None)
    F.cross_entropy(lin(x), y).backward()
    opt.step()  # decomposed: the next step preconditions
    layer = opt.layers[lin]
    layer.QA, layer.dA = torch.eye(4), torch.ones(4)  # a factor for another shape than the gradient's
    opt.zero_grad()
    F.cross_entropy(lin(x), y).backward()
    opt.step()
    got = opt.fallbacks()
    assert got["shape_mismatches"] == 1 and got["plain_steps"] == 1 and got["layers"] == ["Linear"]
    assert "warning: K-FAC" in capsys.readouterr().err


def test_a_kfac_run_records_its_fallbacks_in_the_result(monkeypatch, capsys):
    cfg = TrainConfig.from_dict(tiny(**{"optimizer.name": "kfac-sgd", "optimizer.kfac_update_every": 3}))
    clean = trainer_run.train(cfg, progress=False)
    assert "kfac_fallbacks" not in clean.final.extra  # a run that never fell back says nothing
    assert "K-FAC" not in capsys.readouterr().err
    monkeypatch.setattr(torch.linalg, "eigh", _always_fails)
    result = trainer_run.train(cfg, progress=False)
    got = result.final.extra["kfac_fallbacks"]
    assert got["plain_steps"] == result.final.steps and len(got["layers"]) == 4  # 3 convs and the linear layer
    assert result.to_dict()["final"]["kfac_fallbacks"] == got  # in result.json
    assert record.result_attrs(result, None)["kfac_fallbacks"] == got  # in the trial's attributes
    assert "plain SGD" in record.note_text(1, result, "summary", None, False)  # and its note
    assert capsys.readouterr().err.count("warning: K-FAC") == 1
