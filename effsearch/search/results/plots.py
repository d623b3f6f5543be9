"""The Pareto front drawn for `effsearch export`: HTML (plotly, works offline) and PNG.

Time to target against the final value of its metric (accuracy, or a language model's loss),
each axis named with the target's metric and direction; the baseline is a star; dominated
trials (``--all``) are lighter. A trial that missed the target has no time to
target, so it is left off the plot and the title says how many were.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from effsearch.config import ConfigError
from effsearch.config.metrics import ACCURACY, Target
from effsearch.objectives import FINAL_METRIC, TIME_OBJECTIVES
from effsearch.search.results.report import fmt_value

LABELS = {
    "time_to_accuracy": "time to target accuracy (train seconds)",
    "time_to_target": "time to target (train seconds)",
    "final_accuracy": "final val accuracy",
    "final_val_loss": "final val loss (lower is better)",
    "final_val_bpb": "final val bits per byte (lower is better)",
    "train_time": "train seconds",
    "model_size": "model size (bytes of nonzero weights)",
    "quantized_size": "int8 model file (bytes, gzip)",
}
FRONT, DOMINATED, BASELINE = "#1f77b4", "#9aa5b1", "#d62728"


def label(name: str, target: Target | None = None) -> str:
    """An objective's axis title; a time objective's names its target (``val loss <= 2.3``)."""
    if name in TIME_OBJECTIVES and target is not None and target.metric != ACCURACY:
        return f"time to {target.text()} (train seconds)"
    return LABELS.get(name, name)


def doc_target(doc: dict) -> Target | None:
    value = doc.get("target_value", doc.get("target_accuracy"))  # an export older than target_value
    return Target(doc.get("target_metric") or ACCURACY, float(value)) if value is not None else None


def axes(objectives: list[str]) -> tuple[str, str]:
    if "time_to_accuracy" in objectives and "final_accuracy" in objectives:
        return "time_to_accuracy", "final_accuracy"
    time = next((n for n in objectives if n in TIME_OBJECTIVES), None)
    final = next((n for n in objectives if n in FINAL_METRIC), None)
    if time is not None and final is not None:
        return time, final
    if len(objectives) < 2:
        raise ConfigError(
            "--format", f"a plot needs two objectives; this study has {objectives}; export csv, json or yaml instead"
        )
    return objectives[0], objectives[1]


def missed(r: dict, x: str) -> bool:
    return x in TIME_OBJECTIVES and (r.get("reached_target") is False or r[x] is None)


def target_text(doc: dict) -> str:
    """The study's target in words (``val accuracy >= 0.9``); older exports: the accuracy as given."""
    target = doc_target(doc)
    return target.said() if target is not None else f"val accuracy {doc.get('target_accuracy')}"


def series(doc: dict) -> dict:
    """What is drawn: front and dominated rows that reached the target, the baseline, and the misses."""
    x, y = axes(doc["objectives"])
    shown = [r for r in doc["rows"] if not missed(r, x)]
    base = doc.get("baseline")
    return {
        "x": x,
        "y": y,
        "front": sorted((r for r in shown if r.get("on_front", True)), key=lambda r: r[x]),
        "dominated": [r for r in shown if not r.get("on_front", True)],
        "baseline": base if base and not missed(base, x) else None,
        "missed": [r for r in doc["rows"] if missed(r, x)],
    }


def title(doc: dict, s: dict) -> str:
    t = f"{doc['study']}: Pareto front"
    if len(doc["objectives"]) > 2:
        t += f" on {len(doc['objectives'])} objectives, shown on two"
    n = len(s["missed"])
    if n:
        target = doc_target(doc)
        t += (
            f"; {n} trial{'s' if n != 1 else ''} missed the target"
            + (f" {target.value:g}" if target is not None and target.metric == ACCURACY else "")
            + (f" {target.text()}" if target is not None and target.metric != ACCURACY else "")
            + " (not shown)"
        )
    return t


def hover(r: dict, objectives: list[str]) -> str:
    lines = [f"trial {r['trial']}" + (" (baseline)" if r["baseline"] else "")]
    lines += [f"{n}: {fmt_value(n, r[n])}" for n in objectives]
    if r.get("test_loss") is not None:  # a language model's
        lines.append(f"test loss: {r['test_loss']:.4f}")
    elif r.get("test_accuracy") is not None:
        lines.append(f"test accuracy: {r['test_accuracy']:.4f}")
    if r.get("speedup"):
        lines.append(f"speed-up: {r['speedup']:.2f}x")
    return "<br>".join(html.escape(line) for line in lines + [r.get("summary") or ""])


def figure(doc: dict) -> Any:  # a plotly Figure
    import plotly.graph_objects as go

    s = series(doc)
    x, y, objs = s["x"], s["y"], doc["objectives"]
    fig = go.Figure()
    if s["dominated"]:
        fig.add_trace(
            go.Scatter(
                name="dominated",
                mode="markers",
                opacity=0.35,
                x=[r[x] for r in s["dominated"]],
                y=[r[y] for r in s["dominated"]],
                marker={"color": DOMINATED, "size": 9},
                hovertext=[hover(r, objs) for r in s["dominated"]],
                hoverinfo="text",
            )
        )
    # A step line only where the front is a 2-D front (with more objectives it is a projection).
    fig.add_trace(
        go.Scatter(
            name="Pareto front",
            mode="lines+markers+text" if len(objs) == 2 else "markers+text",
            x=[r[x] for r in s["front"]],
            y=[r[y] for r in s["front"]],
            line_shape="hv",
            marker={"color": FRONT, "size": 11},
            line={"color": FRONT, "dash": "dot"},
            text=[str(r["trial"]) for r in s["front"]],
            textposition="top left",
            hovertext=[hover(r, objs) for r in s["front"]],
            hoverinfo="text",
        )
    )
    b = s["baseline"]
    if b:
        fig.add_trace(
            go.Scatter(
                name=f"baseline (trial {b['trial']})",
                mode="markers",
                x=[b[x]],
                y=[b[y]],
                marker={"color": BASELINE, "size": 18, "symbol": "star"},
                hovertext=[hover(b, objs)],
                hoverinfo="text",
            )
        )
    fig.update_layout(
        title={"text": title(doc, s), "font": {"size": 14}},
        template="plotly_white",
        xaxis_title=label(x, doc_target(doc)),
        yaxis_title=label(y, doc_target(doc)),
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def table_html(doc: dict) -> str:
    objs = doc["objectives"]
    test = "test_loss" if any(r.get("test_loss") is not None for r in doc["rows"]) else "test_accuracy"
    head = (
        ["trial"]
        + (["on front"] if doc["rows"] and "on_front" in doc["rows"][0] else [])
        + objs
        + [test.replace("_", " "), "speed-up", "reached target", "config"]
    )

    def cells(r: Any) -> str:
        c = [f"{r['trial']}{'*' if r['baseline'] else ''}"]
        if "on_front" in r:
            c.append("yes" if r["on_front"] else "")
        c += [fmt_value(n, r[n]) for n in objs]
        c += [
            f"{r[test]:.4f}" if r.get(test) is not None else "-",
            f"{r['speedup']:.2f}x" if r.get("speedup") else "-",
            {True: "yes", False: "no"}.get(r.get("reached_target"), "-"),
            r.get("summary") or "",
        ]
        return "".join(f"<td>{html.escape(str(v))}</td>" for v in c)

    return (
        "<table><tr>"
        + "".join(f"<th>{html.escape(h)}</th>" for h in head)
        + "</tr>\n"
        + "\n".join(f"<tr>{cells(r)}</tr>" for r in doc["rows"])
        + "</table>"
    )


def write_html(doc: dict, path: Path) -> None:
    plot = figure(doc).to_html(full_html=False, include_plotlyjs=True, div_id="pareto-front")
    name = html.escape(doc["study"])
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{name}: Pareto front</title>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}}</style></head>
<body><h2>Study {name}</h2>
<p>storage {html.escape(doc["storage"])}; objectives {html.escape(", ".join(doc["objectives"]))};
target {html.escape(target_text(doc))}; * = baseline trial</p>
{plot}
{table_html(doc)}
</body></html>
"""
    path.write_text(page)


def write_png(doc: dict, path: Path) -> None:
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state

    s = series(doc)
    x, y = s["x"], s["y"]
    fig = Figure(figsize=(8, 5), dpi=110)
    ax = fig.add_subplot()
    if s["dominated"]:
        ax.scatter(
            [r[x] for r in s["dominated"]],
            [r[y] for r in s["dominated"]],
            color=DOMINATED,
            alpha=0.35,
            label="dominated",
        )
    fx, fy = [r[x] for r in s["front"]], [r[y] for r in s["front"]]
    if len(doc["objectives"]) == 2 and fx:
        ax.step(fx, fy, where="post", color=FRONT, linestyle=":", linewidth=1)
    ax.scatter(fx, fy, color=FRONT, label="Pareto front", zorder=3)
    for r in s["front"]:
        ax.annotate(str(r["trial"]), (r[x], r[y]), textcoords="offset points", xytext=(-4, 5), ha="right", fontsize=8)
    if s["baseline"]:
        b = s["baseline"]
        ax.scatter([b[x]], [b[y]], marker="*", s=220, color=BASELINE, label=f"baseline (trial {b['trial']})", zorder=4)
    if not fx and not s["dominated"]:
        ax.text(0.5, 0.5, "no trial to show", transform=ax.transAxes, ha="center", color="grey")
    ax.set_xlabel(label(x, doc_target(doc)))
    ax.set_ylabel(label(y, doc_target(doc)))
    ax.set_title(_wrap(title(doc, s)), fontsize=10)
    ax.grid(alpha=0.3)
    ax.margins(0.08)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")


def _wrap(text: str, width: int = 80) -> str:
    head, sep, tail = text.partition("; ")
    return f"{head}\n{tail}" if sep and len(text) > width else text


# -- the anytime curve (search.anytime): the best speed-up within a point against the compute so far --

TUNE = "#7f7f7f"


def anytime_series(doc: dict) -> dict:
    """What the anytime plot draws: the curve's steps (x in baseline runs), phase 1's own (subset)
    steps, where phase 2 starts, and the best recipe's speed-up over the baseline (a level)."""
    c = doc["anytime"]
    pts = [p for p in c["points"] if p["baseline_runs"] is not None]
    found = [(p["baseline_runs"], p["best_speedup"]) for p in pts if p["best_speedup"] is not None]
    tune = [
        (p["baseline_runs"], p["tune_speedup"]) for p in pts if p["phase"] == "tune" and p["tune_speedup"] is not None
    ]
    recipe, base = doc.get("best_recipe"), doc.get("baseline")
    level = None
    if recipe and base and recipe.get("time_to_target") and base.get("time_to_target"):
        level = base["time_to_target"] / recipe["time_to_target"]
    return {
        "found": found,
        "tune": tune,
        "phase2_at": c.get("phase1_runs"),
        "recipe": level,
        "recipe_name": (recipe or {}).get("recipe"),
        "within": c["within"],
    }


def anytime_title(doc: dict, s: dict) -> str:
    last = s["found"][-1] if s["found"] else None
    t = f"{doc['study']}: best speed-up within {s['within'] * 100:g} point of the baseline's val accuracy"
    if last:
        t += f"; {last[1]:.2f}x after {last[0]:.1f} baseline runs of compute"
    return t


def _anytime_labels() -> tuple[str, str]:
    return ("compute spent so far (runs of the baseline)", "best speed-up over the baseline (x)")


def write_anytime_png(doc: dict, path: Path) -> None:
    from matplotlib.figure import Figure

    s = anytime_series(doc)
    fig = Figure(figsize=(8, 5), dpi=110)
    ax = fig.add_subplot()
    if s["tune"]:
        ax.step(
            *zip(*s["tune"]),
            where="post",
            color=TUNE,
            linestyle="--",
            linewidth=1,
            label="phase 1 on its subset (over its own baseline)",
        )
    if s["found"]:
        xs, ys = zip(*s["found"])
        ax.step(xs, ys, where="post", color=FRONT, linewidth=2, label="found (full data, within the point)")
        ax.scatter([xs[-1]], [ys[-1]], color=FRONT, zorder=3)
    ax.axhline(1.0, color=BASELINE, linewidth=0.8, label="the baseline (1x)")
    if s["recipe"]:
        ax.axhline(
            s["recipe"],
            color="#2ca02c",
            linestyle=":",
            linewidth=1.2,
            label=f"best known recipe ({s['recipe_name']}): {s['recipe']:.2f}x",
        )
    if s["phase2_at"] is not None:
        ax.axvline(s["phase2_at"], color=TUNE, linestyle=":", linewidth=0.8)
        ax.annotate("phase 2", (s["phase2_at"], 1.0), textcoords="offset points", xytext=(3, 4), fontsize=8, color=TUNE)
    if not s["found"] and not s["tune"]:
        ax.text(
            0.5,
            0.5,
            "no point to show (the baseline has not run or missed the target)",
            transform=ax.transAxes,
            ha="center",
            color="grey",
        )
    x, y = _anytime_labels()
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(_wrap(anytime_title(doc, s)), fontsize=10)
    ax.grid(alpha=0.3)
    ax.set_xlim(left=0)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")


def write_anytime_html(doc: dict, path: Path) -> None:
    import plotly.graph_objects as go

    s = anytime_series(doc)
    fig = go.Figure()
    if s["tune"]:
        fig.add_trace(
            go.Scatter(
                name="phase 1 on its subset (over its own baseline)",
                mode="lines",
                x=[p[0] for p in s["tune"]],
                y=[p[1] for p in s["tune"]],
                line_shape="hv",
                line={"color": TUNE, "dash": "dash"},
            )
        )
    if s["found"]:
        fig.add_trace(
            go.Scatter(
                name="found (full data, within the point)",
                mode="lines+markers",
                x=[p[0] for p in s["found"]],
                y=[p[1] for p in s["found"]],
                line_shape="hv",
                line={"color": FRONT},
            )
        )
    fig.add_hline(y=1.0, line={"color": BASELINE, "width": 1})
    if s["recipe"]:
        fig.add_hline(
            y=s["recipe"],
            line={"color": "#2ca02c", "dash": "dot"},
            annotation_text=f"best known recipe ({s['recipe_name']}): {s['recipe']:.2f}x",
        )
    if s["phase2_at"] is not None:
        fig.add_vline(x=s["phase2_at"], line={"color": TUNE, "dash": "dot"}, annotation_text="phase 2")
    x, y = _anytime_labels()
    fig.update_layout(
        title={"text": anytime_title(doc, s), "font": {"size": 14}},
        template="plotly_white",
        xaxis_title=x,
        yaxis_title=y,
        legend={"orientation": "h", "y": -0.2},
    )
    name = html.escape(doc["study"])
    body = fig.to_html(full_html=False, include_plotlyjs=True, div_id="anytime-curve")
    path.write_text(f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{name}: anytime curve</title></head>
<body style="font-family:sans-serif;margin:1.5em"><h2>Study {name}</h2>
<p>storage {html.escape(doc["storage"])}; target {html.escape(target_text(doc))}</p>
{body}
</body></html>
""")
