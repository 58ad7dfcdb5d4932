"""Aggregate result folders into a leaderboard: Markdown, a self-contained HTML page, a PNG chart.

Any folder tree holding ``episodes.jsonl`` files written by :mod:`lynn.eval.runner` works; rows are
grouped by (env, split, row name, variant). Each env is ranked by its own headline measure
(:data:`HEADLINES`: Coordination by reward, % of the oracle and regret; the others by success rate).
Success rates carry a Wilson 95% interval (0/10 is 0–27.8%, never ± 0); means carry Student's t. The row name
is the run's ``label`` (``lynn eval --label``), else the agent name (results written before labels
existed); the variant is the agent, its kwargs and the env's kwargs from the run's ``config.json`` (an
env kwarg such as EVMQuest's ``profile`` changes the tasks, so it changes the row too). Two variants never
share a row: when they share a name (e.g. two unlabeled ``lm`` runs with different models), the rows
are named by the kwargs that differ, e.g. ``lm [model=lm-evm2]`` and ``lm [model=final]``, or
``oracle [env.profile=reference]``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lynn.eval.runner import CONFIG_FILE, EXTRA_MEASURES, RESULT_FILE, read_records
from lynn.eval.stats import mean_ci95, wilson_interval
from lynn.records import EpisodeRecord


@dataclass(frozen=True)
class Row:
    """One leaderboard line (``agent`` is the row's name: the label, else the agent name).

    ``success_ci`` is the Wilson 95% interval ``(low, high)``; ``score`` (an env's ``info["score"]``,
    Coordination: the fraction of the oracle's success rate) and ``regret`` (summed per episode) are
    ``nan`` where the env reports none.
    """

    env_id: str
    split: str
    agent: str
    episodes: int
    successes: int
    success: float
    success_ci: tuple[float, float]
    reward: float
    reward_ci: float
    mean_steps: float
    crashed: int
    score: float = math.nan
    score_ci: float = math.nan
    regret: float = math.nan
    regret_ci: float = math.nan


#: Each env's headline measures, in ranking order (``success``, ``reward``, ``score``, ``regret``).
#: Coordination's settled success against 90% of the oracle ties for most routers; its measure is reward.
HEADLINES: dict[str, tuple[str, ...]] = {"Lynn/Coordination-v0": ("reward", "score", "regret")}
DEFAULT_HEADLINE: tuple[str, ...] = ("success",)


def headline(env_id: str) -> tuple[str, ...]:
    """The measures that rank ``env_id``'s rows (:data:`HEADLINES`, else success)."""
    return HEADLINES.get(env_id, DEFAULT_HEADLINE)


def _variant(run_folder: Path) -> str:
    """The agent and its kwargs of the run in ``run_folder`` (canonical JSON; ``""`` without a config)."""
    try:
        cfg = json.loads((run_folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    if not isinstance(cfg, dict):
        return ""
    variant = {"agent": cfg.get("agent"), "agent_kwargs": cfg.get("agent_kwargs") or {}}
    if cfg.get("env_kwargs"):  # only when set: runs on the env's defaults keep their old variant key
        variant["env_kwargs"] = cfg["env_kwargs"]
    return json.dumps(variant, sort_keys=True)


def _short(value: Any) -> str:
    """A kwarg value as a row-name part: a path by its last component, anything else as JSON."""
    if isinstance(value, str):
        parts = [p for p in value.replace("\\", "/").split("/") if p]
        return parts[-1] if parts else value
    return json.dumps(value, sort_keys=True)


def _names(name: str, variants: list[str]) -> dict[str, str]:
    """Distinct row names for the variants that share ``name``: the kwargs that differ, then a digest."""
    if len(variants) == 1:
        return {variants[0]: name}
    parsed = {v: (json.loads(v) if v else {}) for v in variants}
    flat = {
        v: {
            "agent": p.get("agent"),
            **(p.get("agent_kwargs") or {}),
            **{f"env.{k}": x for k, x in (p.get("env_kwargs") or {}).items()},
        }
        if p
        else {}
        for v, p in parsed.items()
    }
    keys = sorted({k for f in flat.values() for k in f})
    differing = [k for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flat.values()}) > 1]
    out: dict[str, str] = {}
    for v, f in flat.items():
        if not v:
            out[v] = f"{name} [no config]"
        else:
            shown = ", ".join(f"{k}={_short(f.get(k))}" for k in differing)
            out[v] = f"{name} [{shown}]"
    if len(set(out.values())) < len(out):  # e.g. two models both in folders named "final"
        out = {v: f"{n} #{hashlib.sha1(v.encode()).hexdigest()[:6]}" for v, n in out.items()}
    return out


def collect(root: str | Path) -> list[Row]:
    """Every (env, split, row name, variant) found under ``root``, best success first within each env."""
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"no results folder {root}")
    groups: dict[tuple[str, str, str, str], dict[tuple[Any, ...], EpisodeRecord]] = defaultdict(dict)
    for path in sorted(root.rglob(RESULT_FILE)):
        variant = _variant(path.parent)
        for rec in read_records(path):
            name = rec.get("label") or rec["agent"]
            group = (rec["env_id"], rec.get("split") or "all", name, variant)
            # The same episode found twice (copied folders) counts once.
            groups[group][(rec["episode"], rec["seed"], rec.get("task_id"))] = rec
    shared: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for env_id, split, name, variant in groups:
        shared[(env_id, split, name)].append(variant)
    names = {k: _names(k[2], sorted(vs)) for k, vs in shared.items()}
    rows = []
    for (env_id, split, name, variant), recs in groups.items():
        values = list(recs.values())
        wins = sum(1 for r in values if r["success"])
        rw, rw_ci = mean_ci95([float(r["reward"]) for r in values])
        extra: dict[str, float] = {}
        for measure in EXTRA_MEASURES:
            if all(measure in r for r in values):
                extra[measure], extra[f"{measure}_ci"] = mean_ci95([float(r[measure]) for r in values])
        rows.append(
            Row(
                env_id,
                split,
                names[(env_id, split, name)][variant],
                len(values),
                wins,
                wins / len(values),
                wilson_interval(wins, len(values)),
                rw,
                rw_ci,
                sum(r["steps"] for r in values) / len(values),
                sum(1 for r in values if r.get("traceback")),
                **extra,
            )
        )
    rows.sort(key=lambda r: (r.env_id, r.split, *_rank(r), r.agent))
    return rows


def _rank(row: Row) -> tuple[float, ...]:
    """Sort key: best first by the env's headline measures (regret: lower is better), then reward."""
    key = []
    for m in (*headline(row.env_id), "reward"):
        v = getattr(row, m)
        v = -math.inf if v != v else v  # rows without the measure go last
        key.append(v if m == "regret" and v != -math.inf else -v)
    return tuple(key)


def _rate(row: Row) -> str:
    low, high = row.success_ci
    return f"{row.successes}/{row.episodes} = {row.success:.1%} ({low:.1%}–{high:.1%})"


def _num(mean: float, ci: float) -> str:
    return f"{mean:.3f} ± {ci:.3f}"


def _measure(row: Row, name: str) -> str:
    if name == "success":
        return "success " + _rate(row)
    if name == "reward":
        return f"reward {row.reward:.1f} ± {row.reward_ci:.1f}"
    if name == "score":
        return f"{row.score:.1%} ± {row.score_ci:.1%} of oracle" if row.score == row.score else "—"
    return f"regret {row.regret:.1f} ± {row.regret_ci:.1f}" if row.regret == row.regret else "—"


HEADER = [
    "env",
    "split",
    "agent",
    "episodes",
    "headline (95% CI)",
    "success (Wilson 95%)",
    "reward (95% CI)",
    "steps",
    "crashed",
]


def table_cells(rows: list[Row]) -> list[list[str]]:
    """The leaderboard as strings, one list per row, in :data:`HEADER` order.

    The headline cell is the env's own measures (:func:`headline`); an env ranked on another measure
    than success shows ``—`` in the success column.
    """
    return [
        [
            r.env_id,
            r.split,
            r.agent,
            str(r.episodes),
            " · ".join(_measure(r, m) for m in headline(r.env_id)),
            _rate(r) if "success" in headline(r.env_id) else "—",
            _num(r.reward, r.reward_ci),
            f"{r.mean_steps:.1f}",
            str(r.crashed),
        ]
        for r in rows
    ]


def to_markdown(rows: list[Row]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cells) + " |" for cells in table_cells(rows)]
    return "\n".join(lines) + "\n"


def plot_png(rows: list[Row]) -> bytes:
    """A bar chart of success rate (with 95% CI) per agent, one panel per env/split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        panels[(r.env_id, r.split)].append(r)
    n = max(1, len(panels))
    fig, axes = plt.subplots(1, n, figsize=(max(4.5, 4.2 * n), 3.6), squeeze=False)
    for ax, ((env_id, split), prs) in zip(axes[0], sorted(panels.items()), strict=False):
        names = [r.agent for r in prs]
        if "success" in headline(env_id):
            lows = [r.success - r.success_ci[0] for r in prs]
            highs = [r.success_ci[1] - r.success for r in prs]
            ax.bar(names, [r.success for r in prs], yerr=[lows, highs], capsize=4, color="#4c78a8")
            ax.set_ylim(0, 1.05)
            ax.set_ylabel("success rate (Wilson 95%)")
        else:
            ax.bar(
                names, [r.reward for r in prs], yerr=[r.reward_ci for r in prs], capsize=4, color="#4c78a8"
            )
            ax.set_ylabel("mean reward (95% CI)")
        ax.set_title(f"{env_id} ({split})", fontsize=9)
        ax.tick_params(axis="x", rotation=30, labelsize=8)
    if not panels:
        axes[0][0].text(0.5, 0.5, "no results", ha="center")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def to_html(rows: list[Row], png: bytes | None = None, title: str = "Lynn Gym leaderboard") -> str:
    """A self-contained HTML page (inline CSS, chart embedded as a data URI)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADER)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>" for cells in table_cells(rows)
    )
    img = ""
    if png:
        img = (
            f'<img alt="success rate by agent" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2rem;color:#222}}table{{border-collapse:collapse}}
th,td{{border:1px solid #ccc;padding:4px 10px;text-align:left}}th{{background:#f3f3f3}}img{{max-width:100%;margin-top:1rem}}</style>
</head><body><h1>{html.escape(title)}</h1>
<p>Each env ranked by its own headline measure; success rates with a Wilson 95% interval, means ± 95% CI (Student's t); same seeds give the same rows.</p>
<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>
{img}
</body></html>
"""


def write_leaderboard(
    root: str | Path, html_path: str | Path | None = None
) -> tuple[list[Row], dict[str, Path]]:
    """Write ``leaderboard.md``, ``leaderboard.png`` and the HTML page (default inside ``root``)."""
    root = Path(root)
    rows = collect(root)
    png = plot_png(rows)
    paths = {
        "markdown": root / "leaderboard.md",
        "png": root / "leaderboard.png",
        "html": Path(html_path) if html_path else root / "leaderboard.html",
    }
    paths["markdown"].write_text(to_markdown(rows), encoding="utf-8")
    paths["png"].write_bytes(png)
    paths["html"].parent.mkdir(parents=True, exist_ok=True)
    paths["html"].write_text(to_html(rows, png), encoding="utf-8")
    return rows, paths
