"""The ``effsearch`` command line: it parses arguments, calls ``effsearch.api``, prints, and maps
errors to exit codes (0 done, 1 the work failed, 2 bad input, 130 Ctrl-C). What the library logs
(the ``effsearch`` logger) it prints to stderr as it always printed it. Heavy imports (torch,
Composer, Optuna) stay inside the commands so that ``--help`` and bad input answer at once."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from effsearch.api import check_output
from effsearch.config import ConfigError
from effsearch.config.arguments import command_line

if TYPE_CHECKING:
    from effsearch.trainer.result import RunResult

EXIT_BAD_INPUT = 2
# What a shell reports for a command killed by SIGPIPE (128 + 13): a reader that closed early,
# as `effsearch status S | head -2` does, ends the command as it ends `cat` or `ls`.
EXIT_BROKEN_PIPE = 141


class _Stderr(logging.StreamHandler):
    """A handler writing to sys.stderr as it is at each record (a caller may have replaced it)."""

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


class _Said(logging.Formatter):
    """A record as the command says it: a warning as ``warning: ...``, anything else as its message."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return f"warning: {text}" if record.levelno == logging.WARNING else text


@contextlib.contextmanager
def console() -> Iterator[None]:
    """The ``effsearch`` logger printed to stderr from INFO up, for one command (then as it was)."""
    logger = logging.getLogger("effsearch")
    handler = _Stderr()
    handler.setFormatter(_Said("%(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@contextlib.contextmanager
def quiet_optuna() -> Iterator[None]:
    """Optuna's errors only, for a command that reads or runs a study (its per-trial INFO lines
    would repeat effsearch's own); its verbosity as it was afterwards."""
    from effsearch.api import optuna_quieted

    with optuna_quieted(logging.ERROR):
        yield


def _cmd_train(args) -> int:
    from effsearch import api
    from effsearch.config.imports import import_plugins
    from effsearch.config.machine import under_torchrun
    from effsearch.trainer.result import ResultNotSaved

    import_plugins(args.plugin, field="--plugin")
    cfg = api.load_config(args.config, args.set)
    out = Path(args.out) if args.out else Path("runs") / f"{Path(args.config).stem}-{cfg.hash()}"
    api.check_output(out, "--out", folder=True)  # train's own check would name out_dir, after this line
    # Under torchrun every rank runs this command; rank 0 speaks and writes.
    main = not under_torchrun() or os.environ.get("RANK") == "0"
    before = _stamp(out / "result.json")
    try:
        with api.naming_file(args.config):
            result = api.train(cfg, data_dir=args.data_dir, out_dir=out, progress=not args.quiet and main)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {_left(out / 'result.json', before)}", file=sys.stderr)
        return 130
    except ResultNotSaved as e:  # what the run measured is shown all the same
        if main:
            _show(args, e.result)
        print(f"effsearch: error: --out: {e.strerror}; the run's figures are above only", file=sys.stderr)
        return 1
    if not main:
        return 0 if result.status == "completed" else 1
    # Said once the result is there: a refusal in set-up (the model, the data) writes nothing.
    print(f"effsearch train: {args.config} -> {out}/result.json", file=sys.stderr)
    return _show(args, result)


def _show(args, result: RunResult) -> int:
    """What a run measured, on stdout (on stderr with --json: stdout holds the JSON line alone, for
    a pipe); the exit code its status gives."""
    f, out = result.final, sys.stderr if args.json else sys.stdout
    if f.extra.get("input_adapted"):
        print(f"note: {f.extra['input_adapted']}", file=sys.stderr)
    ttt = f"{result.time_to_target:.1f}s" if result.time_to_target is not None else "not reached"
    print(f"status: {result.status}{' (' + result.reason + ')' if result.reason else ''}", file=out)
    nan = float("nan")
    if result.target_metric == "val_accuracy":
        print(f"val accuracy {_or(f.val_accuracy, nan):.4f}  test accuracy {_or(f.test_accuracy, nan):.4f}", file=out)
    else:  # a language model: its loss (lower is better) and bits per byte of the held-out text
        bpb = f"  bits per byte {f.val_bpb:.4f}" if f.val_bpb is not None else ""
        test = f"  test loss {f.test_loss:.4f}" if f.test_loss is not None else ""
        print(f"val loss {_or(f.val_loss, nan):.4f}{bpb}{test}  (lower is better)", file=out)
    print(
        f"train {_or(f.train_seconds, 0):.1f}s (eval {_or(f.eval_seconds, 0):.1f}s apart)  "
        f"time to {_target_words(result)}: {ttt}",
        file=out,
    )
    if f.sparsity:
        print(f"sparsity {f.sparsity:.3f}  nonzero params {f.nonzero_params:,}", file=out)
    if f.processes:
        print(
            f"{f.processes} processes: {f.comm_bytes_per_step:,.0f} bytes sent per step by each "
            f"(uncompressed {f.comm_bytes_per_step_uncompressed:,})",
            file=out,
        )
    if f.quantized_bytes is not None:
        print(
            f"int8: {f.quantized_bytes:,} bytes (fp32 {f.fp32_bytes:,}, gzip'd state dicts)  "
            f"test accuracy {f.quantized_test_accuracy:.4f}",
            file=out,
        )
    if args.json:
        print(json.dumps(result.to_dict()))
    return 0 if result.status == "completed" else 1


def _target_words(result: RunResult) -> str:
    """``0.900`` for an accuracy (as before), ``val loss <= 2.3`` for any other metric."""
    t = result.target
    return f"{t.value:.3f}" if t.metric == "val_accuracy" else t.text()


def _workers(text: str) -> int | str:
    """--workers: a count, or auto (checked with the study file: the error names the flag)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer or auto; got {text!r}") from None


def _or(value, default):
    return default if value is None else value


def _stamp(path: Path) -> int | None:
    """``path``'s modification time (ns), None if it is not there."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def _left(path: Path, before: int | None) -> str:
    """What a run interrupted by Ctrl-C left: a Ctrl-C during set-up (the data, the model, the
    imports) comes before the run has anything to write."""
    now = _stamp(path)
    if now is not None and now != before:
        return f"partial result written to {path}"
    if now is not None:
        return f"nothing was written ({path} is an earlier run's)"
    return "nothing was written"


def _cmd_run(args) -> int:
    from effsearch import api
    from effsearch.config.imports import import_plugins

    import_plugins(args.plugin, field="--plugin")  # its errors name the flag, not a list
    # Everything is checked before the storage is opened: a bad file writes nothing.
    try:
        with quiet_optuna():
            api.run_study(
                args.study,
                storage=args.storage,
                n_trials=args.n_trials,
                timeout=args.timeout,
                workers=args.workers,
                budget=args.budget,
                data_dir=args.data_dir,
                warm_start=args.warm_start or (),
                plugins=args.plugin,
                out=sys.stderr,
            )
    except api.StudyFailed:  # why is already printed, in the run's own lines
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _cmd_status(args) -> int:
    from effsearch import api

    with quiet_optuna():
        print(api.status(args.study, args.storage, front_only=args.front))
    return 0


def _cmd_export(args) -> int:
    from effsearch import api

    check_output(args.out, "-o", folder=False)
    with quiet_optuna():
        done = api.export(
            args.study, args.out, storage=args.storage, format=args.format, all_trials=args.all, plot=args.plot
        )
    what = (
        "points of the anytime curve"
        if args.plot == "anytime"
        else "complete trials"
        if args.all
        else "trials on the Pareto front"
    )
    holds = "the plot has no point" if done.format == "png" else "the file holds its header"
    empty = f" (none yet: {holds}; `effsearch status {args.study}` shows the study's trials)" if not done.rows else ""
    print(
        f"effsearch export: {done.rows} {what} of study {done.study!r} -> {args.out} ({done.format}){empty}",
        file=sys.stderr,
    )
    return 0


def _cmd_best(args) -> int:
    from effsearch import api

    check_output(args.out, "-o", folder=False)
    try:
        with quiet_optuna():
            picked = api.write_best(args.study, args.out, pick=args.pick, storage=args.storage)
    except api.NothingToPick as e:
        print(f"effsearch best: {e}", file=sys.stderr)
        return 1
    print(
        f"effsearch best: trial {picked.trial} ({picked.pick}) -> {args.out}; train it with `effsearch train {args.out}`",
        file=sys.stderr,
    )
    return 0


def _cmd_dashboard(args) -> int:
    from effsearch.search.results import dashboard

    dashboard.check_port(args.port)
    dashboard.check_host(args.host, args.port)  # both flags before the study is read
    with quiet_optuna():
        target = dashboard.resolve(args.study, args.storage, args.artifact_dir)
        return dashboard.serve(target, args.host, args.port)


def _cmd_space_show(args) -> int:
    from effsearch import api
    from effsearch.config.imports import import_plugins

    import_plugins(args.plugin, field="--plugin")
    spec = api.study_spec(args.study)
    space = spec.space
    print(
        f"search space of {spec.source} on {space.machine.describe(space.active)}: {len(space.active)} dimensions "
        f"searched, {len(space.fixed)} fixed; other fields come from `base`"
    )
    print("a dimension is sampled only when its `when` holds; conflicting algorithms are never both on")
    if "batch_size" in space.active:
        print(
            "optimizer.lr is the lr at batch 128: a trial at batch size B trains with optimizer.lr * B / 128 "
            "(optimizer.scale_lr_with_batch), so the dashboard's optimizer.lr is not the lr it ran with"
        )
    print("")
    print(space.table(show_all=args.all))
    return 0


def _cmd_recipes(args) -> int:
    from effsearch.search.study import recipes

    print(recipes.table())
    return 0


def _study_args(parser) -> None:
    parser.add_argument("study", help="study file, or a study name (with --storage)")
    parser.add_argument("--storage", help="Optuna storage URL or journal file (default: the study file's)")


def _data_dir_arg(parser) -> None:
    parser.add_argument(
        "--data-dir", help="dataset folder (default: $EFFSEARCH_DATA_DIR, else ~/.cache/effsearch/data)"
    )


def _plugin_arg(parser) -> None:
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (and in every worker and process); repeatable. Like an import "
        "path in a config, it runs that code",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="effsearch",
        description="Search how to train a network: the Pareto front of wall-clock time to a target "
        "(an accuracy, or a language model's loss) vs the final value, over CORDS subsets, Composer algorithms, FFCV, schedules, "
        "batch size, sparsity, precision, data-parallel processes with compressed gradients, "
        "gradient accumulation, K-FAC and int8 quantization.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    t = sub.add_parser(
        "train",
        help="train one configuration (a TrainConfig YAML) and write result.json",
        description="Train one TrainConfig YAML; writes OUT/result.json with the history, "
        "final accuracies (or loss), train seconds (evaluation excluded) and time to target. "
        "With distributed.processes N > 1 it starts N-1 more processes itself "
        "(or joins torchrun's); rank 0 writes the result.",
    )
    t.add_argument("config", help="TrainConfig YAML, e.g. configs/quickstart.yaml or an exported best.yaml")
    t.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field, dotted keys, YAML values (repeatable): --set optimizer.lr=0.1; "
        "an algorithm: --set algorithms.NAME={} (or true) turns it on with defaults, "
        "--set algorithms.NAME=null (or false) turns it off",
    )
    t.add_argument("--out", help="output folder (default: runs/NAME-HASH)")
    _data_dir_arg(t)
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.add_argument(
        "--json",
        action="store_true",
        help="print the result as one JSON line on stdout (the summary then goes to stderr)",
    )
    _plugin_arg(t)
    t.set_defaults(func=_cmd_train)

    r = sub.add_parser(
        "run",
        help="run or resume a study: the Pareto front of time to target vs final accuracy (or loss)",
        description="Run an Optuna multi-objective study over how the base config is trained. "
        "Running it again resumes: finished trials are kept and N is the study's total. "
        "With `pruner: moasha` weak trials stop at their rungs; with `tuning: subset` "
        "the N trials run on a data subset as study NAME-tune, then the baseline and "
        "the top_k are confirmed on all the data as study NAME. Exit code 0: done; 1: "
        "the study could not do its work (failure_limit trials failed with the same "
        "error, no completed trial, none that reached the target, a baseline that does not "
        "train); 2: bad input (the "
        "study file, --storage, missing data); 130: Ctrl-C or SIGTERM (the running trials are queued again).",
    )
    r.add_argument("study", help="study file, e.g. studies/quickstart.yaml")
    r.add_argument(
        "--storage",
        help="Optuna storage: postgresql://user:pass@host/db, sqlite:///x.db or a "
        "journal file (default: the study file's, else STEM.journal beside it)",
    )
    r.add_argument("--n-trials", type=int, metavar="N", help="the study's total number of trials")
    r.add_argument("--timeout", type=float, metavar="S", help="start no new trial after S seconds")
    r.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="the study's compute budget: no new trial starts once its trials' summed wall seconds "
        "(set-up, training, evaluation; both phases of a tuning phase) reach SECONDS; replaces "
        "the study file's `budget`",
    )
    r.add_argument(
        "--warm-start",
        metavar="STUDY|CONFIG",
        action="append",
        help="queue the Pareto-front configs of an earlier study (its study file, or its name in "
        "this study's storage), or a training config file (as `effsearch best -o` writes), "
        "after the baseline, trained as given; repeatable; a resumed study does not queue "
        "them again",
    )
    r.add_argument(
        "--workers",
        type=_workers,
        metavar="K|auto",
        help="worker processes on this machine; auto (the default): one per GPU, each pinned to its own "
        "(CUDA_VISIBLE_DEVICES; a trial of distributed.processes k gets k), 1 without GPUs. At most one "
        "per free GPU (share_devices: true in the study file allows more), or per CPU core without GPUs",
    )
    _data_dir_arg(r)
    _plugin_arg(r)
    r.set_defaults(func=_cmd_run)

    st = sub.add_parser(
        "status",
        help="trials and the Pareto front of a study",
        description="A table of a study's trials and its current Pareto front.",
    )
    _study_args(st)
    st.add_argument("--front", action="store_true", help="show the Pareto front only")
    st.set_defaults(func=_cmd_status)

    ex = sub.add_parser(
        "export",
        help="write a study's Pareto front as CSV, JSON, YAML, HTML or PNG",
        description="Write the Pareto front of a study (time to target vs the final value of its "
        "metric: val accuracy, or a language model's val loss): "
        "trial, objective values, test accuracy, speed-up over the baseline, "
        "reached target, and the config. html and png draw it; trials that missed "
        "the target are left off the drawing (the title counts them).",
    )
    _study_args(ex)
    ex.add_argument(
        "--format",
        choices=("csv", "json", "yaml", "html", "png"),
        help="output format (default: from the suffix of -o)",
    )
    ex.add_argument("-o", "--out", required=True, metavar="FILE", help="output file, e.g. front.csv")
    ex.add_argument("--all", action="store_true", help="also the dominated complete trials (column on_front)")
    ex.add_argument(
        "--plot",
        choices=("front", "anytime"),
        default="front",
        help="front (default): the Pareto front; anytime: the best speed-up within 1 point of the "
        "baseline's val accuracy found against the compute spent so far, in baseline runs "
        "(both phases of a tuning phase); csv, json and yaml then hold its points",
    )
    ex.set_defaults(func=_cmd_export)

    b = sub.add_parser(
        "best",
        help="write one trial's TrainConfig YAML, for `effsearch train`",
        description="Pick a trial of a study and write its TrainConfig, with where it came from "
        "as a comment header; `effsearch train FILE` trains exactly that config. "
        "fastest, knee, fastest-above, fastest-below and fastest-within count only trials that "
        "reached the target; "
        "knee: after min-max normalising time and accuracy over the front, the front "
        "point farthest above the line joining its two ends.",
    )
    _study_args(b)
    b.add_argument(
        "--pick",
        default="knee",
        metavar="PICK",
        help="knee (default), fastest, most-accurate (the best final value: highest accuracy, lowest "
        "loss), fastest-above:ACC (least time to target with final val accuracy >= ACC, e.g. "
        "fastest-above:0.95), fastest-below:LOSS (the same where lower is better: final val loss "
        "<= LOSS), or fastest-within:D (least time to target with a final value at most D worse than "
        "the baseline trial's, e.g. fastest-within:0.01 for within 1 point of accuracy)",
    )
    b.add_argument("-o", "--out", required=True, metavar="FILE", help="output YAML, e.g. best.yaml")
    b.set_defaults(func=_cmd_best)

    d = sub.add_parser(
        "dashboard",
        help="serve optuna-dashboard on a study, with each trial's files",
        description="Start optuna-dashboard on a study's storage with the artifact folder "
        "`effsearch run` writes (learning curve, config, result per trial). "
        "Listens on 127.0.0.1 unless --host says otherwise; Ctrl-C stops it.",
    )
    d.add_argument(
        "study",
        metavar="STUDY_OR_STORAGE",
        help="study file, a study name (with --storage), or a storage by itself (all its studies)",
    )
    d.add_argument("--storage", help="Optuna storage URL or journal file, for a study name")
    d.add_argument(
        "--artifact-dir",
        metavar="DIR",
        help="artifact folder (default: the study file's, else STORAGE.artifacts beside a journal file)",
    )
    d.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    d.add_argument("--port", type=int, default=8080, help="port (default: 8080)")
    d.set_defaults(func=_cmd_dashboard)

    sp = sub.add_parser("space", help="inspect a study's search space")
    sp_sub = sp.add_subparsers(dest="space_command", metavar="SUBCOMMAND")
    sp_sub.required = True
    show = sp_sub.add_parser(
        "show",
        help="print the search space as a table",
        description="Print the dimensions a study searches, their ranges and conditions.",
    )
    show.add_argument("study", help="study file")
    show.add_argument(
        "--all", action="store_true", help="also list dimensions left at the base value or unavailable on this machine"
    )
    _plugin_arg(show)
    show.set_defaults(func=_cmd_space_show)

    rc = sub.add_parser(
        "recipes",
        help="list the named starting recipes a study can warm-start from",
        description="Published fast-training recipes, each a change to a study's base (so it fits "
        "your model and data), with its source and when it helps. A study queues them "
        "after its baseline with warm_start: [recipe:NAME] (or [recipes] for all).",
    )
    rc.set_defaults(func=_cmd_recipes)

    from effsearch.data_cli import add_data_parser  # `effsearch data prepare` (FFCV .beton files)

    add_data_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with command_line():  # what the library says names the command's flags, not the API's keywords
        try:
            with console():
                code = args.func(args)
                sys.stdout.flush()  # a reader gone shows here, not in Python's flush at exit
                return code
        except ConfigError as e:  # bad input, a study or storage that is not there among it
            print(f"effsearch: error: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except BrokenPipeError:
            _mute_stdout()
            return EXIT_BROKEN_PIPE


def _mute_stdout() -> None:
    """stdout pointed at /dev/null, so that Python's own flush at exit does not fail on the closed
    pipe again (the recipe in Python's `signal` docs, "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
