"""A variant as a real study: the study file with the variant's sampler, target and warm starts,
its budget in baseline runs, run by ``effsearch.run_study`` and read by ``effsearch export --plot
anytime``'s curve (``effsearch/search/results/anytime.py``).

The study file's warm starts are replaced by the variant's (``[recipes]``, or none: the
quickstart's hand-picked one goes), its pruner and space kept unless the variant names a pruner.
With ``target: relative`` the base's target is ``{relative_to_baseline: -0.01}``; with ``study``
it is the file's, and the curve reads speed-ups to that target (within a point all the same).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from research.anytime.curve import Event, Search
from research.anytime.variants import Variant

WITHIN = 0.01
N_TRIALS = 10_000  # the budget stops the study


def study_mapping(v: Variant, study_path: Path, seed: int, budget_runs: float) -> dict:
    """The study file's mapping with the variant's choices."""
    from effsearch.config import read_yaml
    from effsearch.search.study.studyfile import MINIMAL_STUDY

    raw = read_yaml(study_path, MINIMAL_STUDY)
    raw["name"] = f"{raw.get('name', 'study')}-{v.name.replace('/', '-').replace('@', '-')}-s{seed}"
    raw["seed"] = seed
    raw["sampler"] = dict(v.sampler)
    raw["warm_start"] = list(v.warm)
    raw["n_trials"] = N_TRIALS
    raw["budget"] = {"baseline_runs": budget_runs}
    if v.pruner is not None and v.pruner.get("name") == "none":
        raw["pruner"] = "none"
    if v.target == "relative":
        raw.setdefault("base", {})["target_accuracy"] = {"relative_to_baseline": -WITHIN}
        if isinstance(raw.get("tuning"), dict) and "target_accuracy" in raw["tuning"]:
            raw["tuning"] = {k: x for k, x in raw["tuning"].items() if k != "target_accuracy"}
    return raw


def search(
    v: Variant, study_path: Path, seed: int, budget_runs: float, data_dir: str | None, out: Path | None
) -> Search:
    """One live study of the variant; its events read off the anytime curve."""
    import effsearch
    from effsearch.search.results import anytime

    folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="anytime-"))
    folder.mkdir(parents=True, exist_ok=True)
    raw = study_mapping(v, study_path, seed, budget_runs)
    storage = str(folder / "anytime.journal")
    study = effsearch.run_study(raw, folder=folder, storage=storage, data_dir=data_dir, quiet=True)
    from effsearch.search.store.attrs import TUNE_STUDY_KEY

    tune_name = study.user_attrs.get(TUNE_STUDY_KEY)
    tune = effsearch.load_study(tune_name, storage) if tune_name else None
    c = anytime.curve(study, tune)
    origin = _origins(study, tune)
    events = [
        Event(p["baseline_runs"], p["best_speedup"], origin.get(p["best_trial"], "search"))
        for p in c["points"]
        if p["baseline_runs"] is not None and p["phase"] != "tune"
    ]
    recipe = max([e.speedup for e in events if e.origin.startswith("recipe:") and e.speedup] or [1.0])
    print(
        f"  {v.name} seed {seed}: {events[-1].runs if events else 0:.1f} baseline runs, best "
        f"{max([e.speedup or 0 for e in events] or [0]):.2f}x within a point (trial {c['points'][-1]['best_trial']})",
        flush=True,
    )
    return Search(events, recipe)


def _origins(study, tune) -> dict:
    """trial number -> where it came from: baseline, a warm start's label, or search."""
    from effsearch.search.store.attrs import BASELINE_KEY, TUNE_TRIAL_KEY, WARM_KEY

    source = {t.number: t for t in (tune or study).get_trials(deepcopy=False)}
    out = {}
    for t in study.get_trials(deepcopy=False):
        first = source.get(t.user_attrs.get(TUNE_TRIAL_KEY), t) if tune is not None else t
        if t.user_attrs.get(BASELINE_KEY) or first.user_attrs.get(BASELINE_KEY):
            out[t.number] = "baseline"
        else:
            out[t.number] = first.user_attrs.get(WARM_KEY) or "search"
    return out
