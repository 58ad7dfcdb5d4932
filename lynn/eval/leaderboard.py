"""Aggregate result folders into a leaderboard: Markdown, a self-contained HTML page, a PNG chart.

Any folder tree holding ``episodes.jsonl`` files written by :mod:`lynn.eval.runner` works; rows are
grouped by (env, split, agent) and report mean ± 95% CI of success and reward.
"""

from __future__ import annotations

import base64
import html
import io
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lynn.eval.runner import RESULT_FILE, read_records
from lynn.eval.stats import mean_ci95


@dataclass(frozen=True)
class Row:
    """One leaderboard line."""

    env_id: str
    split: str
    agent: str
    episodes: int
    success: float
    success_ci: float
    reward: float
    reward_ci: float
    mean_steps: float
    crashed: int


def collect(root: str | Path) -> list[Row]:
    """Every (env, split, agent) found under ``root``, best success first within each env."""
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"no results folder {root}")
    groups: dict[tuple[str, str, str], dict[tuple[Any, ...], dict[str, Any]]] = defaultdict(dict)
    for path in sorted(root.rglob(RESULT_FILE)):
        for rec in read_records(path):
            key = (rec["env_id"], rec.get("split") or "all", rec["agent"])
            # The same episode found twice (copied folders) counts once.
            groups[key][(rec["episode"], rec["seed"], rec.get("task_id"))] = rec
    rows = []
    for (env_id, split, agent), recs in groups.items():
        values = list(recs.values())
        s, s_ci = mean_ci95([1.0 if r["success"] else 0.0 for r in values])
        rw, rw_ci = mean_ci95([float(r["reward"]) for r in values])
        rows.append(
            Row(
                env_id,
                split,
                agent,
                len(values),
                s,
                s_ci,
                rw,
                rw_ci,
                sum(r["steps"] for r in values) / len(values),
                sum(1 for r in values if r.get("traceback")),
            )
        )
    rows.sort(key=lambda r: (r.env_id, r.split, -r.success, -r.reward, r.agent))
    return rows


def _pct(mean: float, ci: float) -> str:
    return f"{mean:.1%} ± {ci:.1%}"


def _num(mean: float, ci: float) -> str:
    return f"{mean:.3f} ± {ci:.3f}"


HEADER = ["env", "split", "agent", "episodes", "success (95% CI)", "reward (95% CI)", "steps", "crashed"]


def table_cells(rows: list[Row]) -> list[list[str]]:
    """The leaderboard as strings, one list per row, in :data:`HEADER` order."""
    return [
        [
            r.env_id,
            r.split,
            r.agent,
            str(r.episodes),
            _pct(r.success, r.success_ci),
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
        ax.bar(names, [r.success for r in prs], yerr=[r.success_ci for r in prs], capsize=4, color="#4c78a8")
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{env_id} ({split})", fontsize=9)
        ax.set_ylabel("success rate")
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
<p>Mean ± 95% confidence interval (Student's t) over episodes; same seeds give the same rows.</p>
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
