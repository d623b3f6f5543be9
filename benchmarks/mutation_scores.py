"""Killed / total per module from a mutmut 3 run (benchmarks/mutation.sh prints it).

    python benchmarks/mutation_scores.py [MUTANTS_DIR] [--survivors]

A timeout counts as killed (the mutant made a test hang: caught); "no tests" (no selected test
calls the function) and "suspicious" count as not killed. ``pruners (rungs)`` is the part of
pruners/moasha.py and pruners/slowstop.py that is pure rung arithmetic: RungPoint, predicted_time,
MOASHAPruner's checks, rungs, rung_of, decide, keep_by_accuracy and _time_label, and SlowStop.mark
(the rest reads a study)."""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

KILLED = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout"}
NAMES = {0: "survived", 33: "no tests", 5: "no tests", None: "not checked"}
RUNG_FUNCTIONS = (
    "x_predicted_time__",
    "xǁRungPointǁ",
    "xǁMOASHAPrunerǁ__init____",
    "xǁMOASHAPrunerǁrungs__",
    "xǁMOASHAPrunerǁrung_of__",
    "xǁMOASHAPrunerǁdecide__",
    "xǁMOASHAPrunerǁkeep_by_accuracy__",
    "xǁMOASHAPrunerǁ_time_label__",
    "xǁSlowStopǁmark__",
)


def status(code) -> str:
    return KILLED.get(code) or NAMES.get(code) or "suspicious"


def groups(key: str) -> list[str]:
    module = key.split(".x")[0].replace("effsearch.", "").replace(".__init__", "")
    function = key[len(key.split(".x")[0]) + 1 :]
    out = [module]
    if module in ("search.pruners.moasha", "search.pruners.slowstop") and function.startswith(RUNG_FUNCTIONS):
        out.append("search.pruners (rungs)")
    return out


def main(argv: list[str]) -> None:
    root = Path(next((a for a in argv if not a.startswith("-")), "mutants"))
    by_group: dict[str, Counter] = defaultdict(Counter)
    survivors = []
    for meta in sorted(root.rglob("*.py.meta")):
        for key, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            s = status(code)
            for g in groups(key):
                by_group[g][s] += 1
            if s not in ("killed", "timeout"):
                survivors.append(f"{s:9}  {key}")
    print(f"{'module':24} {'killed':>7} {'total':>6} {'score':>6}  survived  no tests  timeout")
    for g in sorted(by_group):
        c = by_group[g]
        total = sum(c.values())
        killed = c["killed"] + c["timeout"]
        other = {k: v for k, v in c.items() if k not in ("killed", "survived", "no tests", "timeout")}
        print(
            f"{g:24} {killed:7d} {total:6d} {killed / total:6.1%}  {c['survived']:8d}  {c['no tests']:8d}"
            f"  {c['timeout']:7d}" + (f"  (other: {other})" if other else "")
        )
    if "--survivors" in argv:
        print("\n".join(survivors))


if __name__ == "__main__":
    main(sys.argv[1:])
