"""Devices per trial on a machine with GPUs, tested on the CPU with EFFSEARCH_FAKE_GPUS (the
machine shows that many GPUs to the device assignment; trials still train on the CPU): one worker
per GPU, pinned through its own CUDA_VISIBLE_DEVICES; a trial of distributed.processes k gets k;
more workers than free GPUs refused with the arithmetic unless share_devices, which marks every
such trial's time as shared; each trial records its device, and the dashboard's status groups them."""

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import torch
import yaml

from effsearch.cli import main
from effsearch.config import ConfigError
from effsearch.config.machine import detect, worker_devices
from effsearch.search.run import workers
from effsearch.search.store.attrs import BASELINE_FOR_KEY, PLACEMENT_KEY
from effsearch.search.store.storage import open_url
from effsearch.search.study import studyfile
from tests.support.helpers import ran, tiny
from tests.support.scripted import TRAIN_FN, TRAIN_FN_ENV
from tests.support.tiny_study import study_file

ROOT = Path(__file__).resolve().parents[2]
STUDY = {"base": {**tiny(), "epochs": 1}, "n_trials": 2, "space": {"include": ["optimizer"]}}


def load(tmp_path, study=STUDY, **flags):
    return studyfile.from_mapping(dict(study), tmp_path / "s.yaml", **flags)


def test_each_worker_gets_gpus_of_its_own_while_they_last(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert worker_devices(4, 4, 1) == ["0", "1", "2", "3"]
    assert worker_devices(4, 2, 2) == ["0,1", "2,3"]
    assert worker_devices(4, 6, 1) == ["0", "1", "2", "3", "0", "1"]  # share_devices: round the machine
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")  # the user's own list: workers split it
    assert worker_devices(4, 2, 2) == ["4,5", "6,7"]


def test_four_fake_gpus_make_four_workers_each_pinned_to_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("EFFSEARCH_FAKE_GPUS", "4")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert detect().gpus == 4 and detect().device == "cpu"  # shown to the assignment; trained on the CPU
    spec = load(tmp_path)  # workers: auto, the default
    assert spec.workers == 4 and workers.devices_of(spec) == ["0", "1", "2", "3"]
    assert not workers.shares_devices(spec)
    two = load(tmp_path, {**STUDY, "base": {**STUDY["base"], "distributed": {"processes": 2}}})
    assert two.workers == 2 and two.devices_per_trial == 2 and workers.devices_of(two) == ["0,1", "2,3"]


def test_more_workers_than_free_gpus_are_refused_with_the_arithmetic(tmp_path, monkeypatch):
    monkeypatch.setenv("EFFSEARCH_FAKE_GPUS", "4")
    with pytest.raises(ConfigError) as e:
        load(tmp_path, workers=5)
    assert e.value.field == "--workers"
    assert "5 workers x one GPU a trial need 5 GPUs; this machine shows 4 (0, 1, 2, 3): at most 4" in str(e.value)
    assert "share_devices: true" in str(e.value)
    with pytest.raises(ConfigError, match=r"workers: 3 workers x 2 GPUs a trial need 6 GPUs; .* at most 2"):
        load(tmp_path, {**STUDY, "workers": 3, "base": {**STUDY["base"], "distributed": {"processes": 2}}})
    shared = load(tmp_path, {**STUDY, "share_devices": True}, workers=5)
    assert shared.workers == 5 and workers.shares_devices(shared)
    assert workers.devices_of(shared) == ["0", "1", "2", "3", "0"]


def test_a_trial_asking_more_gpus_than_the_machine_shows_is_refused_naming_the_field(tmp_path, monkeypatch):
    monkeypatch.setenv("EFFSEARCH_FAKE_GPUS", "1")
    with pytest.raises(ConfigError) as e:
        load(tmp_path, {**STUDY, "base": {**STUDY["base"], "distributed": {"processes": 2}}})
    assert e.value.field == "base.distributed.processes" and "this machine shows 1" in e.value.message


def test_auto_without_a_gpu_is_the_cpu_default_and_a_count_is_bounded_by_the_cores(tmp_path, monkeypatch):
    monkeypatch.delenv("EFFSEARCH_FAKE_GPUS", raising=False)
    if torch.cuda.is_available():
        pytest.skip("a machine with a GPU: auto counts them")
    assert load(tmp_path, {**STUDY, "workers": "auto"}).workers == 1
    assert load(tmp_path, workers="auto").workers == 1
    with pytest.raises(ConfigError, match=r"workers: must be an integer or auto; got 'many'"):
        load(tmp_path, {**STUDY, "workers": "many"})


def test_the_flag_takes_auto_and_refuses_a_word(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(STUDY))
    with pytest.raises(SystemExit) as e:
        main(["run", str(tmp_path / "s.yaml"), "--workers", "many"])
    assert e.value.code == 2
    assert "argument --workers: must be an integer or auto; got 'many'" in capsys.readouterr().err


def test_a_shared_gpu_marks_every_trial_s_time_and_status_says_so(tmp_path, monkeypatch, capsys):
    """Two workers on one GPU (share_devices): each trial's record says its time was measured on a
    shared device, and `status` marks those rows and says what it means."""
    from effsearch.search.run import runner
    from effsearch.search.store.storage import open_storage
    from tests.support.scripted import scripted_train

    monkeypatch.setenv("EFFSEARCH_FAKE_GPUS", "1:fake H100")
    spec = studyfile.load(study_file(tmp_path, 2, share_devices=True, workers=2))
    assert spec.workers == 2 and workers.shares_devices(spec)
    study = runner.ensure_study(spec, open_storage(spec))
    threads = torch.get_num_threads()
    try:
        assert workers.work(spec, warm=False, train_fn=scripted_train, devices="0") == "done"  # one of the two
    finally:
        torch.set_num_threads(threads)
    placements = [t.user_attrs[PLACEMENT_KEY] for t in study.get_trials()]
    assert placements and all(p == {**placements[0], "shared": True} for p in placements)
    assert placements[0]["name"] == "fake H100" and placements[0]["index"] == "0"
    assert main(["status", str(tmp_path / "tiny.yaml")]) == 0
    out = capsys.readouterr().out
    assert "~ = timed on a shared GPU" in out and "COMPLETE*~" in out, out
    assert "devices: fake H100 on " in out and "GPU 0 2 trials" in out, out
    assert "2 trials were timed on a GPU other workers trained on meanwhile" in out, out


def test_the_main_process_gives_back_its_warm_up_s_gpu_cache_before_its_workers_start(tmp_path, monkeypatch):
    """The pre-flight's warm-up trains in the main process, on the GPU that worker 0 trains on: what
    its allocator keeps cached there is given back before the workers start, not held all study long."""
    import types

    spec = load(tmp_path, workers=2)
    events = []
    cuda = types.SimpleNamespace(is_initialized=lambda: True, empty_cache=lambda: events.append("emptied"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))  # a warmed-up CUDA process
    monkeypatch.setattr(workers, "start_workers", lambda *args: events.append("started") or [])
    monkeypatch.setattr(workers, "watch", lambda procs, study, progress: "done")
    assert workers.run_workers(spec, None, None, None) == "done"
    assert events == ["emptied", "started"]


PROBE = """
import os, pathlib
devices = os.environ.get("CUDA_VISIBLE_DEVICES")
if devices is not None:
    pathlib.Path(__file__).with_name(f"env-{os.getpid()}.txt").write_text(devices)
"""


@pytest.mark.slow
def test_worker_processes_run_pinned_to_their_own_devices(tmp_path):
    """`effsearch run` on a machine showing 2 GPUs: two worker processes, each with its own
    CUDA_VISIBLE_DEVICES (a plugin module, imported in every worker, writes what it sees), and every
    trial records the device of the worker that ran it."""
    (tmp_path / "envprobe.py").write_text(PROBE)
    path = study_file(tmp_path, 4, plugins=["envprobe"])
    # Scripted trials: only where each worker runs, and what its trials record, are under test.
    env = {**os.environ, "EFFSEARCH_FAKE_GPUS": "2", "TQDM_DISABLE": "1", TRAIN_FN_ENV: TRAIN_FN}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run(
        [sys.executable, "-m", "effsearch.cli", "run", str(path), "--workers", "auto"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = {int(p.stem.split("-")[1]): p.read_text() for p in tmp_path.glob("env-*.txt")}
    assert sorted(seen.values()) == ["0", "1"], seen  # two workers, one device each
    trials = ran(optuna.load_study(study_name="tiny", storage=open_url(str(tmp_path / "tiny.journal"))).get_trials())
    for t in trials:
        pid, placement = t.user_attrs["worker"]["pid"], t.user_attrs[PLACEMENT_KEY]
        assert placement["index"] == seen[pid] and placement["name"] == "fake GPU", (t.number, placement, seen)
        assert placement["shared"] is False


def test_every_trial_of_a_worker_starts_with_a_fresh_compile_state(tmp_path, monkeypatch):
    """A worker resets Dynamo's caches before each trial: a function one trial compiled is compiled
    again by the next, which pays its own compile. Without the reset the next trial ran the first's
    graph (no compile time paid), and on an H100 a worker's fourth compile trial took 77.9 s in its
    first step where its first took 4.0 s (docs/benchmarks.md, "GPU study")."""
    from effsearch.search.run import runner
    from effsearch.search.store.storage import open_storage
    from tests.support.scripted import scripted_train

    compiles = []

    def backend(graph, inputs):
        compiles.append(graph)
        return graph.forward

    step = torch.compile(lambda x: x * 2 + 1, backend=backend)

    def train(cfg, **kw):
        step(torch.ones(3))  # the trial's "first step"
        return scripted_train(cfg, **kw)

    torch._dynamo.reset()
    monkeypatch.delenv("EFFSEARCH_FAKE_GPUS", raising=False)
    spec = studyfile.load(study_file(tmp_path, 3))
    runner.ensure_study(spec, open_storage(spec))
    assert workers.work(spec, warm=False, train_fn=train) == "done"
    assert len(compiles) == 3  # once a trial


def test_a_new_kind_of_device_gets_a_baseline_of_its_own(tmp_path, monkeypatch, capsys):
    """Speed-ups are read against a baseline timed on the same kind of device: a worker on a kind
    the study has no baseline of queues one, runs it, and its trials' speed-ups read against it. A
    worker of another kind that draws such a baseline hands it back untrained (not counted)."""
    from effsearch.search.run import kinds, runner
    from effsearch.search.store import queries
    from effsearch.search.store.storage import open_storage
    from tests.support.scripted import scripted_train

    spec = studyfile.load(study_file(tmp_path, 2))
    study = runner.ensure_study(spec, open_storage(spec))
    monkeypatch.setenv("EFFSEARCH_FAKE_GPUS", "1:kind-a")
    assert workers.work(spec, warm=False, train_fn=scripted_train) == "done"
    monkeypatch.setenv("EFFSEARCH_FAKE_GPUS", "1:kind-b")  # a node with another kind of GPU joins
    assert workers.work(studyfile.load(study_file(tmp_path, 4)), warm=False, train_fn=scripted_train) == "done"
    trials = study.get_trials()
    base_b = [t for t in trials if t.user_attrs.get(BASELINE_FOR_KEY) == "kind-b"]
    assert len(base_b) == 1 and base_b[0].state.name == "COMPLETE"
    assert queries.device_kind(base_b[0]) == "kind-b" and base_b[0].user_attrs["speedup"] == 1.0
    for t in trials:
        if queries.device_kind(t) == "kind-b":
            assert queries.baseline_for(trials, t).number == base_b[0].number
        else:
            assert queries.baseline_for(trials, t).number == 0
    assert main(["status", str(tmp_path / "tiny.yaml")]) == 0
    out = capsys.readouterr().out
    assert "devices: kind-a on" in out and "kind-b on" in out and "no baseline timed on" not in out, out

    # A baseline queued for a kind no worker here has: drawn and handed back, untrained, uncounted.
    study.enqueue_trial(spec.space.encode(spec.baseline), user_attrs={"baseline": True, BASELINE_FOR_KEY: "kind-c"})
    assert workers.work(studyfile.load(study_file(tmp_path, 5)), warm=False, train_fn=scripted_train) == "done"
    handed = [t for t in study.get_trials() if t.user_attrs.get(BASELINE_FOR_KEY) == "kind-c"]
    assert [t.user_attrs["status"] for t in handed] == [kinds.HANDED_BACK] and "history" not in handed[0].user_attrs
    assert queries.counts(study.get_trials())["done"] == 5  # the handed-back one is not among them


def test_the_cores_bound_checked_before_the_machine_leaves_a_gpu_machine_to_its_gpus(tmp_path, monkeypatch):
    """Without a GPU in sight a worker count over the cores is refused before torch is imported;
    with GPUs the bound is theirs, so the early check stands aside and the refusal is the GPUs'."""
    monkeypatch.setenv("EFFSEARCH_FAKE_GPUS", "4")
    with pytest.raises(ConfigError, match=r"workers: 10000 workers x one GPU a trial need 10000 GPUs"):
        load(tmp_path, {**STUDY, "workers": 10_000})
