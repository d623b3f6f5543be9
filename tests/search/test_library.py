"""The library raises and logs; the command maps. ``run_study`` shows nothing when quiet, takes a
checked StudySpec, calls Optuna-style callbacks, raises ``StudyFailed`` instead of returning an
exit code, and leaves Optuna's logging as its user set it; what a worker process logs reaches the
main process's handlers. Trials train with tests/support/scripted.py's stand-in (``scripted``)."""

import logging
import os

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

import effsearch
from effsearch.cli import main
from effsearch.config import ConfigError
from effsearch.search.run import runner
from effsearch.search.store import record
from effsearch.search.study import studyfile
from tests.support.scripted import scripted_train
from tests.support.tiny_study import study_file


def test_a_quiet_run_prints_nothing_and_logs_its_warnings(tmp_path, scripted, monkeypatch, capsys, caplog):
    """A note that cannot be saved is a warning; the library used to print it on stderr whatever
    ``quiet`` said. Now it is logged (once) and a quiet run prints nothing of its own."""

    def refuse(trial, text):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(record, "save_note", refuse)
    study = effsearch.run_study(study_file(tmp_path, 3), quiet=True)
    assert sum(t.state == TrialState.COMPLETE for t in study.trials) == 3
    shown = capsys.readouterr()
    assert shown.out == "" and shown.err == "", shown
    said = [r.getMessage() for r in caplog.records if r.name.startswith("effsearch") and r.levelno == logging.WARNING]
    assert len(said) == 1 and "dashboard note was not saved" in said[0] and "disk full" in said[0], said


def test_run_study_runs_a_studyspec_and_calls_back_after_each_trial(tmp_path, scripted):
    spec = effsearch.study_spec(study_file(tmp_path, 3))
    assert isinstance(spec, effsearch.StudySpec)
    seen = []
    study = effsearch.run_study(spec, quiet=True, callbacks=[lambda s, t: seen.append((s, t))])
    assert sorted(t.number for _, t in seen) == [0, 1, 2]
    assert all(isinstance(s, optuna.Study) and s.study_name == "tiny" for s, _ in seen)
    assert all(isinstance(t, FrozenTrial) and t.state.is_finished() for _, t in seen)
    assert [t.number for t in study.trials] == [0, 1, 2]
    with pytest.raises(ConfigError, match="n_trials: a StudySpec runs as it was checked"):
        effsearch.run_study(spec, n_trials=5, quiet=True)


def test_the_runner_raises_where_the_command_exits_1(tmp_path, scripted, capsys):
    """runner.run returned exit codes, which the API turned back into exceptions from the last
    printed lines; now it raises StudyFailed with the reason, and the command maps it to 1."""

    def broken(cfg, **kw):
        if kw.get("on_eval") is None:  # the pre-flight's warm-up: the baseline's config trains
            return scripted_train(cfg, **kw)
        raise RuntimeError("no kernel for this op (simulated)")

    path = study_file(tmp_path, 6, failure_limit=2)
    with pytest.raises(effsearch.StudyFailed) as e:
        runner.run(studyfile.load(path), train_fn=broken)  # injected: nothing of effsearch's is patched
    assert "could not do its work" in str(e.value) and "failed with the same error" in str(e.value)
    assert "no kernel for this op" in str(e.value)
    assert capsys.readouterr().err == ""  # no stream given: the run showed nothing
    scripted(broken)  # the command takes its train function from EFFSEARCH_TRAIN_FN
    assert main(["run", str(path)]) == 1
    assert "failed with the same error" in capsys.readouterr().err


def test_optunas_logging_is_left_as_its_user_set_it(tmp_path, scripted, capsys):
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.DEBUG)
    try:
        path = study_file(tmp_path, 2)
        effsearch.run_study(path, quiet=True)
        assert optuna.logging.get_verbosity() == optuna.logging.DEBUG
        assert main(["status", str(path)]) == 0  # the command quiets Optuna for itself, then puts it back
        assert optuna.logging.get_verbosity() == optuna.logging.DEBUG
    finally:
        optuna.logging.set_verbosity(before)


PLUGIN = """
import logging, os
logging.getLogger("effsearch.plugin").warning("imported in process %d", os.getpid())
"""


@pytest.mark.slow
def test_a_worker_process_logs_to_the_main_process_s_handlers(tmp_path, scripted, caplog):
    """Worker processes start bare (spawn): their records go back to the main process and are
    handled there, where the command (or the caller) set logging up. The plugin logs once per
    process that imports it: the main one and each worker."""
    (tmp_path / "loudplugin.py").write_text(PLUGIN)
    path = study_file(tmp_path, 2, workers=2, plugins=["loudplugin"])
    effsearch.run_study(path, quiet=True)
    processes = {r.process for r in caplog.records if r.name == "effsearch.plugin"}
    assert os.getpid() in processes and len(processes) == 3, processes


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def test_a_run_holds_back_optunas_info_lines_and_puts_its_verbosity_back(tmp_path, scripted):
    """`run_study(quiet=True)` let Optuna print "A new study created" and a "Trial N finished with
    values ... parameters ..." line a trial on stderr."""
    seen = _Records()
    logging.getLogger("optuna").addHandler(seen)
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.INFO)  # Optuna's default
    try:
        effsearch.run_study(study_file(tmp_path, 2), quiet=True)
        assert optuna.logging.get_verbosity() == optuna.logging.INFO
    finally:
        optuna.logging.set_verbosity(before)
        logging.getLogger("optuna").removeHandler(seen)
    info = [r.getMessage()[:80] for r in seen.records if r.levelno < logging.WARNING]
    assert info == [], info


def test_status_takes_the_study_run_study_returned_or_its_storage_alone(tmp_path, scripted, capsys, monkeypatch):
    """status refused the Study run_study returned (pareto_front and best_config took it), and read a
    journal given alone as YAML ("not valid YAML"), in Python and on the command line."""
    monkeypatch.chdir(tmp_path)
    study = effsearch.run_study({**yaml_of(study_file(tmp_path, 2)), "name": "nb"}, quiet=True)
    journal = tmp_path / "nb.journal"
    assert journal.is_file()
    by_study = effsearch.status(study)
    assert by_study.startswith("study 'nb' in ") and str(journal) in by_study.splitlines()[0], by_study
    assert effsearch.status(str(journal)) == by_study == effsearch.status("nb", storage="nb.journal")
    assert effsearch.export(study, tmp_path / "f.csv").rows >= 1
    assert main(["status", "nb.journal"]) == 0
    assert capsys.readouterr().out.startswith("study 'nb' in ")


def test_the_api_names_keywords_where_the_command_names_flags(tmp_path, scripted, capsys, monkeypatch):
    """A notebook was told to give `--storage URL` or that `--pick` was bad: flags it has not got."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        effsearch.status("nb")
    assert "storage=" in str(e.value) and "--storage" not in str(e.value), e.value
    assert main(["status", "nb"]) == 2
    err = capsys.readouterr().err
    assert "--storage=" in err and "storage=" not in err.replace("--storage=", ""), err
    study = effsearch.run_study(study_file(tmp_path, 2), quiet=True)
    with pytest.raises(ConfigError) as e:
        effsearch.best_config(study, pick="fastest-above:2")
    assert str(e.value).startswith("pick: ") and "--pick" not in str(e.value), e.value
    with pytest.raises(effsearch.NothingToPick) as nothing:
        effsearch.best_config(study, pick="fastest-above:1.0")
    assert "satisfies pick=fastest-above:1 " in str(nothing.value), nothing.value
    assert main(["best", str(tmp_path / "tiny.yaml"), "--pick", "fastest-above:2", "-o", "b.yaml"]) == 2
    assert "effsearch: error: --pick: " in capsys.readouterr().err


def yaml_of(path):
    import yaml

    return yaml.safe_load(path.read_text())


def test_an_output_folder_on_a_read_only_file_system_is_called_read_only(tmp_path, monkeypatch):
    """Not "permission denied": chmod would not help there."""
    import os
    from types import SimpleNamespace

    from effsearch import api

    monkeypatch.setattr(os, "access", lambda path, mode: False)
    monkeypatch.setattr(os, "statvfs", lambda path: SimpleNamespace(f_flag=os.ST_RDONLY))
    with pytest.raises(ConfigError) as e:
        api.check_output(tmp_path / "front.csv", "-o", folder=False)
    assert e.value.field == "-o" and "(a read-only file system)" in str(e.value)
