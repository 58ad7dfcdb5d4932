"""An action memory for the LiveWeb chooser: a kNN-LM over delexicalised expert replies.

The 3.7M ranked-format LM picks the expert's action on only ~65% of steps, its *own training steps* included
(``python -m lynn.lm.web_accuracy``): it underfits the procedures (which field next, which sort option, when a
task is done). Those procedures are what the train split holds most plainly: with the goal's literals as slot
names (:func:`lynn.lm.web_candidates.web_slots`), every instance of a template has the same goal text and the
same replies (``fill textbox "Max price" = "N2"`` then ``select combobox "Sort by" = "price_desc"``), so the
expert's next reply in a new instance is, most of the time, the one it gave at the same point of another.

:class:`ActionMemory` stores the train steps' masked replies under keys that say where an episode is — the
masked goal with the masked history, then coarser keys (the goal with the last reply and the page's path
pattern; the goal with the path pattern) for states the expert never visited — and gives, for a new state, the
distribution of the replies stored under its most specific key that has any. :class:`RankedChooser` mixes it
with the LM's distribution over the page's candidates, as the kNN-LM does (Khandelwal et al., 2020:
``p = λ p_kNN + (1 − λ) p_LM``), renormalised over the candidates the page offers (a stored answer such as
another instance's price is no candidate on this page, so answers stay the LM's to read). λ is
``WebFormat.memory_weight``, chosen on a salted draw of *train* instances (never the test split).

Why not a retrieved demonstration in the prompt instead (Synapse-style exemplars): that needs the LM to learn
to copy the hint, which is the skill it lacks; the mixture needs no retraining and keeps the LM for what only it
can do, reading the page.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from lynn.lm.web_candidates import mask_slots, web_slots
from lynn.lm.web_ranker import Element, parse_page

MEMORY_FILE = "lynn_memory.json.gz"


def path_pattern(url: str, slots: dict[str, str]) -> str:
    """The page's path with the goal's literals masked and other digits as ``#`` (``/product/#``)."""
    p = mask_slots(urlparse(url).path, slots)
    return re.sub(r"\d+", "#", p)


def template_of(goal: str, slots: dict[str, str]) -> str:
    """The goal with its slots masked and any other digits as ``#``: the same for every instance of a template."""
    # Slot names too: "with 1 units" (1 is no slot) and "with N3 units" are one template.
    return re.sub(r"\b[LN]\d+\b|\d+", "#", mask_slots(goal, slots))


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_SLOT_NAME = re.compile(r"^[LN]\d+$")


def generalise(reply: str, constants: set[str] | frozenset[str]) -> str:
    """``reply`` (masked) with every quoted value that is neither a slot name nor a site constant as ``*``:
    ``click link "Fjord Pro Webcam"`` -> ``click link "*"``, ``answer "$85.38"`` -> ``answer "*"``; kept:
    ``click button "Save product"``, ``answer "done"``, ``fill textbox "Price" = "N2"``."""
    return _QUOTED.sub(
        lambda m: m.group(0) if m.group(1) in constants or _SLOT_NAME.match(m.group(1)) else '"*"', reply
    )


_LABEL = re.compile(r"^([A-Za-z][\w ]*):\s*(.+)$")
_READING = re.compile(r"\$[\d,]+(?:\.\d+)?|\d{4}-\d\d-\d\d|\b\d+(?:\.\d+)?\b")


def span_addresses(page: Sequence[Element]) -> dict[str, str]:
    """Where each answer span of ``page`` (:func:`lynn.lm.web_candidates.answer_spans`' derivations) sits, in
    words that hold across instances: ``Price/after`` (the value of a ``Price: …`` reading), ``Rating/m1`` (its
    second number), ``link#14/name`` (the 15th link's name: the first product of a sorted list),
    ``article#2/by`` (the third review's author). The first address of a span wins."""
    out: dict[str, str] = {}
    seen: Counter[str] = Counter()
    for e in page:
        n = seen[e.role]
        seen[e.role] += 1
        for field_name, t in (
            ("name", e.name),
            ("value", e.value),
            *((f"t{i}", x) for i, x in enumerate(e.texts)),
        ):
            t = t.strip()
            if not t:
                continue
            lab = _LABEL.match(t)
            base = lab.group(1) if lab else f"{e.role}#{n}.{field_name}"
            out.setdefault(t, f"{base}/all")
            if lab:
                out.setdefault(lab.group(2).strip(), f"{base}/after")
            for j, m in enumerate(_READING.finditer(t)):
                out.setdefault(m.group(0), f"{base}/m{j}")
            by = re.search(r"\bby (.+)$", t)
            if by:
                out.setdefault(by.group(1).strip(), f"{base}/by")
    return out


def reply_form(raw: str, shown: str, constants: frozenset[str], addresses: dict[str, str]) -> str:
    """What the memory stores and matches for a reply: an answer as the address of its (first) part on the page
    (``answer @Price/after``), anything else :func:`generalise`-d."""
    if raw.startswith('answer "') and raw.endswith('"') and raw != 'answer "done"':
        first = re.split(r"; |, ", raw[len('answer "') : -1])[0]
        if first in addresses:
            return "answer @" + addresses[first]
    return generalise(shown, constants)


def _wild(address: str) -> str:
    return re.sub(r"#\d+", "#*", address)


def answer_pattern(text: str, addresses: dict[str, str]) -> str | None:
    """How a multi-part answer goes on after its first part, in addresses that hold across instances, one
    entry per run of parts of one kind: ``"3; Ana Lee, Bo Wu, Cy Ode"`` -> ``"; article#*.name/by+, "`` (``+``
    and the separator: every such span of the page, in page order); ``"shipped; $31.64"`` -> ``"; Order
    total/after"``; ``""`` for a one-part answer; None when a part is no span of the page."""
    pieces = re.split(r"(; |, )", text)
    parts, seps = pieces[0::2], pieces[1::2]
    if any(p not in addresses for p in parts):
        return None
    runs: list[list[str]] = []  # [sep, address, separator inside the run or ""]
    for sep, part in zip(seps, parts[1:], strict=True):
        addr = _wild(addresses[part])
        if runs and runs[-1][1] == addr:
            runs[-1][2] = sep
        else:
            runs.append([sep, addr, ""])
    return "\t".join(sep + addr + (f"+{inner}" if inner else "") for sep, addr, inner in runs)


def best_pattern(patterns: Counter[str]) -> str:
    """The most common stored pattern, a one-span entry read as a run where another answer of the template
    listed that kind (an instance with one review teaches no list; one with three does)."""
    lists = {}
    for pat in patterns:
        for e in pat.split("\t"):
            m = re.match(r"^(; |, )(.+?)\+(; |, )$", e)
            if m:
                lists[m.group(2)] = m.group(3)
    merged: Counter[str] = Counter()
    for pat, n in patterns.items():
        entries = []
        for e in filter(None, pat.split("\t")):
            sep, addr = e[:2], e[2:]
            entries.append(f"{sep}{addr}+{lists[addr]}" if addr in lists else e)
        merged["\t".join(entries)] += n
    return merged.most_common(1)[0][0]


def extend_answer(first: str, pattern: str, addresses: dict[str, str]) -> str | None:
    """The answer that :func:`answer_pattern` ``pattern`` makes of ``first`` on a page (its spans and their
    addresses, in page order), or None when the page lacks a part the pattern needs."""
    text, used = first, {first}
    for entry in filter(None, pattern.split("\t")):
        sep, want, inner = entry[:2], entry[2:], ""
        m = re.match(r"^(.+?)\+(; |, )$", want)
        if m:
            want, inner = m.group(1), m.group(2)
        spans = [sp for sp, a in addresses.items() if _wild(a) == want and sp not in used]
        if not spans:
            return None
        take = spans if inner else spans[:1]
        text += sep + (inner or sep).join(take)
        used.update(take)
    return text


class ActionMemory:
    """Generalised expert replies under the keys of the states they were given in (see the module docstring).

    Attributes:
        table: key -> generalised reply -> count.
        constants: the quoted values kept in generalised replies: those in the replies of at least half of a
            template's train episodes (``Save product``, ``Sort by``, ``done``), not an instance's own names.
    """

    def __init__(
        self,
        table: dict[str, dict[str, int]] | None = None,
        constants: Iterable[str] = (),
        answers: dict[str, dict[str, int]] | None = None,
    ) -> None:
        self.table: dict[str, Counter[str]] = {k: Counter(v) for k, v in (table or {}).items()}
        self.constants = frozenset(constants)
        #: template + first part's address -> how the expert's answers went on (:func:`answer_pattern`).
        self.answers: dict[str, Counter[str]] = {k: Counter(v) for k, v in (answers or {}).items()}

    def answer_key(self, goal: str, first_address: str) -> str:
        return template_of(goal, web_slots(goal)) + "\t" + first_address

    def keys(self, goal: str, replies: Sequence[str], url: str) -> list[str]:
        """The keys of a state, most specific first: template + history, template + last reply + page,
        template + page (history replies generalised)."""
        slots = web_slots(goal)
        g = template_of(goal, slots)
        hist = [generalise(mask_slots(r, slots), self.constants) for r in replies]
        page = path_pattern(url, slots)
        last = hist[-1] if hist else ""
        return [
            "h\t" + g + "\t" + "\t".join(hist),
            "l\t" + g + "\t" + last + "\t" + page,
            "p\t" + g + "\t" + page,
        ]

    @classmethod
    def build(
        cls, steps: Iterable[dict[str, Any]], share: float = 0.5, min_episodes: int = 3
    ) -> ActionMemory:
        """From :func:`lynn.lm.web_candidates.episode_steps` steps (train split only; their ``reply`` set).

        A quoted value is a constant when it is in the replies of at least ``share`` of the episodes of a
        template with at least ``min_episodes`` episodes."""
        steps = [st for st in steps if st.get("reply") is not None]
        for st in steps:
            if st.get("split", "train") != "train":
                raise ValueError(
                    f"{st.get('task_id')} is a {st['split']} step: the memory holds train steps only"
                )
        episodes: dict[str, set[tuple[Any, Any]]] = {}
        uses: dict[tuple[str, str], set[tuple[Any, Any]]] = {}
        for st in steps:
            slots = web_slots(st["goal"])
            t = template_of(st["goal"], slots)
            ep = (st["task_id"], st["seed"])
            episodes.setdefault(t, set()).add(ep)
            for m in _QUOTED.finditer(mask_slots(st["reply"], slots)):
                uses.setdefault((t, m.group(1)), set()).add(ep)
        constants = {
            v
            for (t, v), eps in uses.items()
            if len(episodes[t]) >= min_episodes and len(eps) >= share * len(episodes[t])
        }
        mem = cls(constants=constants)
        for st in steps:
            shown = mask_slots(st["reply"], web_slots(st["goal"]))
            where = span_addresses(parse_page(str(st["axtree"])))
            reply = reply_form(st["reply"], shown, mem.constants, where)
            if reply.startswith("answer @"):
                pattern = answer_pattern(st["reply"][len('answer "') : -1], where)
                if pattern is not None:
                    key = mem.answer_key(st["goal"], reply[len("answer @") :])
                    mem.answers.setdefault(key, Counter())[pattern] += 1
            for key in mem.keys(st["goal"], st["replies"], str(st["obs"].get("url", ""))):
                mem.table.setdefault(key, Counter())[reply] += 1
        return mem

    def lookup(self, goal: str, replies: Sequence[str], url: str) -> Counter[str]:
        """Generalised reply counts under the most specific key of this state the memory holds (empty if none)."""
        return self.lookup_key(goal, replies, url)[1]

    def lookup_key(self, goal: str, replies: Sequence[str], url: str) -> tuple[str, Counter[str]]:
        """:meth:`lookup` with the key it found (``""`` and empty counts when none): its first field says how
        specific the match was (``h`` history, ``l`` last reply + page, ``p`` page)."""
        for key in self.keys(goal, replies, url):
            if key in self.table:
                return key, self.table[key]
        return "", Counter()

    def templates(self) -> list[str]:
        """The masked goal templates the memory holds keys of (:func:`template_of`)."""
        return sorted({k.split("\t")[1] for k in self.table})

    def save(self, path: str | Path) -> None:
        data = {
            "answers": {k: dict(v) for k, v in sorted(self.answers.items())},
            "constants": sorted(self.constants),
            "table": {k: dict(v) for k, v in sorted(self.table.items())},
        }
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)

    @classmethod
    def load(cls, path: str | Path) -> ActionMemory:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
        return cls(data["table"], data["constants"], data.get("answers"))


def mix_parts(
    lm_scores: Sequence[float], forms: Sequence[str], counts: Counter[str]
) -> tuple[list[float], list[float] | None]:
    """The two distributions :func:`mix` mixes, per candidate: ``p_LM`` (the softmax of ``lm_scores``) and
    ``p_kNN`` (None when no stored reply has a candidate of its form on this page: the memory says nothing)."""
    import math

    top = max(lm_scores)
    ex = [math.exp(s - top) for s in lm_scores]
    z = sum(ex)
    p_lm = [e / z for e in ex]
    present = {f for f in forms if counts.get(f, 0) > 0}
    n = sum(counts[f] for f in present)
    if n == 0:
        return p_lm, None
    mass: dict[str, float] = {}
    for f, p in zip(forms, p_lm, strict=True):
        mass[f] = mass.get(f, 0.0) + p
    knn = [
        counts.get(f, 0) / n * p / mass[f] if f in present else 0.0 for f, p in zip(forms, p_lm, strict=True)
    ]
    return p_lm, knn


def mix(lm_scores: Sequence[float], forms: Sequence[str], counts: Counter[str], weight: float) -> list[float]:
    """Log of ``weight · p_kNN + (1 − weight) · p_LM`` per candidate (``forms``: their :func:`reply_form`).

    ``p_LM`` is the softmax of ``lm_scores``. The memory speaks of generalised replies (``click link "*"``);
    ``p_kNN`` gives each stored reply's share of the counts to the candidates of that form, split among them as
    the LM weighs them (so the memory says *what kind* of action, and the LM *which* of that kind)."""
    import math

    p_lm, knn = mix_parts(lm_scores, forms, counts)
    if weight <= 0 or knn is None:
        return [math.log(max(p, 1e-300)) for p in p_lm]
    return [math.log(max(weight * k + (1 - weight) * p, 1e-300)) for k, p in zip(knn, p_lm, strict=True)]


MIXTURE_FILE = "lynn_mixture.json"
#: The memory key kinds of :meth:`ActionMemory.keys`, most specific first.
KEY_LEVELS = ("h", "l", "p")


class MemoryWeights:
    """A memory weight λ per state instead of one ``WebFormat.memory_weight``: ``λ = σ(bias + level[k] +
    template[t])`` for a state whose memory match is of kind ``k`` (:data:`KEY_LEVELS`) in goal template ``t``
    (:func:`template_of`; a template without an entry adds 0). DynaWeb learns these logits by RL on the mixture
    (:mod:`lynn.agents.dynaweb.mixture`) and saves them as ``lynn_mixture.json`` beside the model; a chooser of a
    folder holding that file uses them (:meth:`lynn.lm.web_candidates.RankedChooser.from_folder`).
    """

    def __init__(
        self, bias: float, level: dict[str, float] | None = None, template: dict[str, float] | None = None
    ):
        self.bias = float(bias)
        self.level = {k: float(v) for k, v in (level or {}).items()}
        self.template = {k: float(v) for k, v in (template or {}).items()}

    def logit(self, goal: str, key: str) -> float:
        t = template_of(goal, web_slots(goal))
        return self.bias + self.level.get(key.split("\t")[0], 0.0) + self.template.get(t, 0.0)

    def weight(self, goal: str, key: str) -> float:
        import math

        return 1.0 / (1.0 + math.exp(-self.logit(goal, key)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "bias": self.bias,
            "level": dict(sorted(self.level.items())),
            "template": dict(sorted(self.template.items())),
        }

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> MemoryWeights:
        d = json.loads(Path(path).read_text())
        return cls(d["bias"], d.get("level"), d.get("template"))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lynn.lm.web_memory TRANSITIONS... --model MODEL_DIR [--weight 0.5]``: the action memory of
    ``lynn collect`` expert transitions (train split only) into the model folder, and λ into its format."""
    import argparse

    from lynn.lm.web_candidates import load_steps

    ap = argparse.ArgumentParser(prog="python -m lynn.lm.web_memory", description=main.__doc__)
    ap.add_argument("transitions", nargs="+", help="transitions.jsonl files or folders (train split)")
    ap.add_argument("--model", required=True, help="model folder with lynn_web.json")
    ap.add_argument("--weight", type=float, help="set WebFormat.memory_weight (λ) in its lynn_web.json")
    args = ap.parse_args(argv)
    mem = ActionMemory.build(load_steps(args.transitions))
    mem.save(Path(args.model) / MEMORY_FILE)
    if args.weight is not None:
        fmt_file = Path(args.model) / "lynn_web.json"
        fmt = json.loads(fmt_file.read_text())
        fmt["memory_weight"] = args.weight
        fmt_file.write_text(json.dumps(fmt, indent=1))
    print(f"{len(mem.table)} keys -> {Path(args.model) / MEMORY_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
