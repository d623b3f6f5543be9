"""What a study's space is and samples, as text to diff across two versions of effsearch.

Prints `effsearch space show --all`'s table and the first N configurations the study's own sampler
(seeded as the study file says) draws with no trial told back: the baseline's and warm starts'
configs are not enqueued, so these are the sampler's own draws, each as its parameters and the
TrainConfig they make (YAML). Run it on two checkouts and diff:

    uv run python benchmarks/space_fingerprint.py studies/quickstart.yaml studies/debian-topics.yaml > after.txt
    git stash; uv run python benchmarks/space_fingerprint.py ... > before.txt; git stash pop; diff before.txt after.txt

``--drop FIELD`` leaves a top-level TrainConfig field out of the YAML where it holds its default
(a field a newer version added: the configurations sampled are otherwise compared whole).
"""

from __future__ import annotations

import argparse
import sys

import optuna


def fingerprint(path: str, n: int, drop: list[str]) -> str:
    from effsearch.config.schema import TrainFields
    from effsearch.search.study import studyfile
    from effsearch.search.study.samplers import make_sampler

    spec = studyfile.load(path)
    lines = [f"== {path}", spec.space.table(show_all=True)]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["minimize", "maximize"], sampler=make_sampler(spec.sampler, spec.seed))
    defaults = TrainFields().to_dict()
    for i in range(n):
        trial = study.ask()
        cfg = spec.space.config(trial).to_dict()
        for name in drop:
            if cfg.get(name) == defaults.get(name):
                cfg.pop(name, None)
        lines.append(f"-- trial {i}: {sorted(trial.params.items())}")
        lines.append(repr(cfg))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("studies", nargs="+")
    p.add_argument("-n", type=int, default=10, help="configurations sampled per study")
    p.add_argument("--drop", action="append", default=[], help="a top-level field left out where at its default")
    args = p.parse_args(argv)
    for path in args.studies:
        print(fingerprint(path, args.n, args.drop))
    return 0


if __name__ == "__main__":
    sys.exit(main())
