"""benchmarks/gpu_check.sh's dispatch, on the CPU: a lent GPU gives one try, so the script must
refuse a bad part name before installing, and its exit status must say whether a part failed,
not whether an optional result file happened to exist."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"


def run(args, tmp_path, timeout=300, **env):
    e = {**os.environ, "GPU_CHECK_SMOKE": "1", "GPU_CHECK_DIR": str(tmp_path / "gpu"), **env}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=e, timeout=timeout, cwd=tmp_path
    )


def test_an_unknown_part_is_refused_before_the_install(tmp_path):
    for args in (["bogus"], ["overhead", "bogus"]):
        r = run(args, tmp_path)
        assert r.returncode == 2, r.stderr
        assert "bogus" in r.stderr
        assert "== install" not in r.stdout and "torch" not in r.stdout  # nothing installed or imported


def test_summary_alone_exits_zero_without_any_result(tmp_path):
    """The parts that write result files were not run: the summary still succeeds (it once exited
    1 here, because a missing result ended its copy loop with a failed test)."""
    out = tmp_path / "out"
    out.mkdir()
    r = run(["summary"], tmp_path, OUT=str(out))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (out / "summary.txt").is_file()
    assert not any(out.glob("*.json"))
    assert "no overhead, recipe or study results" in (out / "summary.txt").read_text()
    assert (tmp_path / "gpu" / "out" / "summary.txt").is_file()  # GPU_CHECK_DIR, not the checkout's .gpu


def test_recipe_streams_its_log_into_out(tmp_path):
    """The recipe part (a slow GPU trial, timed alone) writes its log into $OUT as it runs, so a
    call the device's time limit kills still brings it back; smoke mode trains it on the CPU, on digits."""
    out = tmp_path / "out"
    out.mkdir()
    r = run(["recipe"], tmp_path, OUT=str(out))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    log = (out / "recipe-gpu_slow_trial.log").read_text()
    assert "status: completed" in log and "final {'train_seconds'" in log


def test_lm_times_a_gpt_against_a_plain_loop_then_trains_the_baseline_and_pick_into_out(tmp_path):
    """The lm part (smoke: a tiny gpt on the CPU) writes the loop pairs and ratio into $OUT as it goes,
    then trains the LM study's baseline and pick on a small corpus of the Debian file's columns the
    test writes (LM_DATA: tests never read the shared data), each run's line and result beside them."""
    import gzip
    import json
    import random

    rng = random.Random(0)
    words = "the package provides tools for files and data with a library of small utilities".split()
    data = tmp_path / "corpus.jsonl.gz"
    with gzip.open(data, "wt", encoding="utf-8") as f:
        for i in range(400):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(8, 30))) + "."
            f.write(json.dumps({"text": text, "source": f"src{i // 2}", "split": "test" if i % 10 == 0 else "train"}))
            f.write("\n")
    out = tmp_path / "out"
    out.mkdir()
    r = run(["lm"], tmp_path, 900, OUT=str(out), LM_DATA=str(data))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    text = (out / "lm.txt").read_text()
    assert "pair 1: effsearch" in text and "ratio=" in text and "gpt {'n_layer': 2" in text
    for name in ("baseline", "pick"):  # configs/debian-lm.yaml, docs/results/debian-lm-pick.yaml
        assert f"{'lm-' + name:<14s} fp32" in text and "time to val_loss 9.00:" in text and "bits/byte" in text, text
        assert json.loads((out / f"lm-{name}.json").read_text())["status"] == "completed"
    bad = run(["lm"], tmp_path, LM_RUNS="overhead bogus")
    assert bad.returncode == 1 and "LM_RUNS takes overhead, baseline, pick; not 'bogus'" in bad.stderr
    assert "pair 1" not in bad.stdout  # refused before any part of it ran


def test_the_study_summary_splits_the_compute(tmp_path):
    """gpu_summary's "where the compute went", read from a scripted study's trials: wall seconds split
    into training (compile shown apart, as part of it: a compiled trial's first step), evaluation,
    set-up and the rest."""
    import sys

    import optuna
    from optuna.trial import TrialState, create_trial

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_summary
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from tests.support.fake_study import fake_storage

    path = fake_storage(tmp_path / "study.journal")
    from effsearch.search.store.storage import open_url

    study = optuna.load_study(study_name="fake", storage=open_url(str(path)))
    # wall 100 = train 60 (compile 20 of it) + eval 10 + set-up 5 + 25 other
    study.add_trial(
        create_trial(
            state=TrialState.PRUNED,
            user_attrs={
                "wall_seconds": 100.0,
                "train_seconds": 60.0,
                "compile_seconds": 20.0,
                "eval_seconds": 10.0,
                "setup_seconds": 5.0,
            },
        )
    )
    split = gpu_summary.compute_split(study.get_trials())
    assert split == (
        "compute 100 s: training 60 s (60%; compile 20 s of it), evaluation 10 s (10%), "
        "set-up 5 s (5%), other 25 s (25%)"
    )
    assert gpu_summary.compute_split([]) == "compute: none recorded"


def test_text_trains_the_topic_baseline_and_brings_back_each_runs_figures(tmp_path):
    """The text part (the Debian topic task's baseline and its study's pick, bf16 and compile on the
    GPU) in smoke mode: on the CPU, on a small file of the same columns the test writes (TEXT_DATA:
    tests never read the shared data); each run's line lands in $OUT/text.txt, its result beside it."""
    import gzip
    import json

    import yaml

    classes = yaml.safe_load((ROOT / "configs" / "debian-topics.yaml").read_text())["dataset"]["classes"]
    data = tmp_path / "topics.jsonl.gz"
    with gzip.open(data, "wt", encoding="utf-8") as f:
        for i in range(13 * 16):
            c = classes[i % 13]
            row = {"text": f"{c} tool for {c} work, {c} files", "section": c, "source": f"src{i // 2}"}
            f.write(json.dumps({**row, "split": "test" if i % 8 == 0 else "train"}) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    r = run(["text"], tmp_path, 1500, OUT=str(out), TEXT_DATA=str(data), TEXT_SECONDS="700")  # a loaded CPU
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = (out / "text.txt").read_text()
    assert "text-baseline  fp32" in lines and "time to 0.80 val" in lines, lines
    assert "text-pick      fp32" in lines, lines  # docs/results/debian-topics-pick.yaml, the study's knee
    assert all(json.loads((out / f"text-{r}.json").read_text())["status"] == "completed" for r in ("baseline", "pick"))
    bad = run(["text"], tmp_path, TEXT_DATA=str(data), TEXT_RUNS="bogus")
    assert bad.returncode == 1 and "TEXT_RUNS takes baseline, pick; not 'bogus'" in bad.stderr


@pytest.mark.slow
def test_the_gpu_machine_parts_run_and_leave_their_figures_in_out(tmp_path):
    """compile-reset and resume (docs/guide.md, "Several GPUs and several machines") in smoke mode,
    in one call as on the lent GPU: each prints its summary line and leaves its figures in $OUT
    (resume on the CPU, where the resumed curve must match exactly). ``share`` is left out (30 s of
    CI): its H200 figures are in docs/benchmarks.md, and test_devices.py checks what it drives."""
    import json
    import signal

    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "GPU_CHECK_SMOKE": "1", "GPU_CHECK_DIR": str(tmp_path / "gpu"), "OUT": str(out)}
    args = ["bash", str(SCRIPT), "compile-reset", "resume"]
    p = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path, start_new_session=True
    )
    try:
        stdout, stderr = p.communicate(timeout=1500)
    finally:
        if p.poll() is None:  # the parts' own processes too: the whole group
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 0, stdout[-3000:] + stderr[-3000:]
    for line in (
        "compile-reset after: first-step seconds by trial",
        "compile-reset before:",
        "resume (cpu): resumed from epoch",
    ):
        assert line in stdout, stdout[-3000:]
    assert len((out / "compile_reset.jsonl").read_text().splitlines()) == 4  # 2 trials x 2 arms
    resume = json.loads((out / "resume.json").read_text())
    assert resume["resumed_vs_whole"] == 0 and resume["whole_vs_whole"] == 0 and resume["segments"] == 2


def test_a_compile_reset_arm_stops_at_its_limit_while_its_trial_is_silent(tmp_path):
    """A cold compile prints nothing for minutes: the arm's limit must kill the child then, not
    after its next line (on an H200 a warm-up meant to stop at 50 s ran 235 s, and the call's time
    ran out before the arms compared). Smoke trials take seconds; a limit of 1 s ends each one first."""
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "compile_reset.py"), "--smoke", "--trials", "2"]
        + ["--arm-seconds", "1", "--arms", "after", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "compile-reset warm: stopped at the arm's limit (2 s)" in r.stdout, r.stdout
    assert "compile-reset after: stopped at the arm's limit (1 s)" in r.stdout, r.stdout
    assert "first step" not in r.stdout and not (out / "compile_reset.jsonl").exists()
