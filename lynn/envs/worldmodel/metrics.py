"""Quality of predicted next observations: line F1, exact match, URL accuracy, Δ-summary token F1.

- **line F1**: F1 of the multiset of axtree lines (indentation and element ids included: what an agent
  reads) of the predicted page against the real next page. ``line_f1_noid`` is the same with element ids
  removed (a navigation renumbers every id, which the id-aware figure punishes fully).
- **exact match**: URL, title and whole axtree equal.
- **URL accuracy**: predicted URL equals the real one.
- **summary token F1**: lower-cased word tokens of the predicted Δ summary against the reference
  summary of the real transition (:func:`lynn.envs.worldmodel.delta.summarize`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

_ID = re.compile(r"\[(?:f\d+)?e\d+\] ?")
_WORD = re.compile(r"\w+|[^\w\s]")


def _f1(pred: Counter, gold: Counter) -> float:
    if not pred and not gold:
        return 1.0
    common = sum((pred & gold).values())
    if common == 0:
        return 0.0
    p, r = common / sum(pred.values()), common / sum(gold.values())
    return 2 * p * r / (p + r)


def line_f1(pred: str, gold: str, ids: bool = True) -> float:
    """Multiset F1 of the lines of two axtrees (``ids=False`` drops element ids first)."""
    if not ids:
        pred, gold = _ID.sub("", pred), _ID.sub("", gold)
    return _f1(Counter(pred.split("\n")), Counter(gold.split("\n")))


def token_f1(pred: str, gold: str) -> float:
    """F1 of lower-cased word/punctuation tokens."""
    return _f1(Counter(_WORD.findall(pred.lower())), Counter(_WORD.findall(gold.lower())))


def score(
    pred_obs: dict[str, Any], gold_obs: dict[str, Any], pred_summary: str, gold_summary: str
) -> dict[str, float]:
    """The per-transition figures."""
    pa, ga = str(pred_obs.get("axtree", "")), str(gold_obs.get("axtree", ""))
    url_ok = str(pred_obs.get("url", "")) == str(gold_obs.get("url", ""))
    return {
        "line_f1": line_f1(pa, ga),
        "line_f1_noid": line_f1(pa, ga, ids=False),
        "exact": float(url_ok and pa == ga and pred_obs.get("title") == gold_obs.get("title")),
        "url_acc": float(url_ok),
        "summary_f1": token_f1(pred_summary, gold_summary),
    }


def mean_scores(rows: Iterable[dict[str, float]]) -> dict[str, float]:
    rows = list(rows)
    if not rows:
        return {}
    return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]}


def roc_auc(labels: Sequence[int], scores: Sequence[float]) -> float:
    """Area under the ROC curve (Mann-Whitney, ties count half); NaN with one class only."""
    pos = [s for y, s in zip(labels, scores, strict=True) if y]
    neg = [s for y, s in zip(labels, scores, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    order = sorted((s, i) for i, s in enumerate(list(pos) + list(neg)))
    ranks = [0.0] * len(order)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and order[j + 1][0] == order[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k][1]] = (i + j) / 2 + 1
        i = j + 1
    r_pos = sum(ranks[: len(pos)])
    return (r_pos - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))
