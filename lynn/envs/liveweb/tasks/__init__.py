"""Task banks in WebArena's JSON format: the bundled one and users' own files, checked when loaded."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

BUNDLED = Path(__file__).with_name("liveweb_tasks.json")
REQUIRED = ("task_id", "intent", "eval")
SPLITS = ("train", "test")
_PLACEHOLDER = re.compile(r"__[A-Z][A-Z0-9_]*?__")


class TaskFileError(ValueError):
    """A task file that cannot be scored as written; the message names each task and field."""


def load_tasks(
    source: str | Path | list[dict[str, Any]] | None = None,
    splits: Mapping[str, Any] | str | Path | None = None,
) -> list[dict[str, Any]]:
    """Load a task list: the bundled bank (``None``), a JSON file (a list, or one task object), or a list
    of dicts.

    Args:
        source: the tasks.
        splits: which split each task is in, for files that have no ``split`` field (WebArena's do
            not): ``{task_id: "train"|"test"}`` or ``{"train": [task_id, ...], "test": [...]}``, or a JSON
            file of either. Tasks with neither a ``split`` field nor an entry are in ``"test"``
            (WebArena's published tasks are its test set).

    Raises:
        TaskFileError: a task misses ``task_id``/``intent``/``eval``, two tasks share an id, or the
            split mapping is malformed.
    """
    base = Path(".")
    if source is None:
        source = BUNDLED
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"task file {path} not found; pass tasks= a WebArena-format JSON file")
        data = json.loads(path.read_text(encoding="utf-8"))
        base = path.parent
    else:
        data = source
    if isinstance(data, dict):
        data = [data]
    mapping = _split_map(splits)
    tasks, seen = [], set()
    for i, raw in enumerate(data):
        if not isinstance(raw, dict):
            raise TaskFileError(f"task #{i} is not a JSON object")
        missing = [k for k in REQUIRED if k not in raw]
        if missing:
            raise TaskFileError(f"task #{i} ({raw.get('task_id', '?')}) misses {missing}")
        task = dict(raw)
        task["task_id"] = str(task["task_id"])
        if task["task_id"] in seen:
            raise TaskFileError(f"duplicate task_id {task['task_id']!r}")
        seen.add(task["task_id"])
        task.setdefault("sites", [])
        task.setdefault("start_url", "")
        task.setdefault("login", {})
        if task["task_id"] in mapping:
            task["split"] = mapping[task["task_id"]]
        task.setdefault("split", "test")
        if task["split"] not in SPLITS:
            raise TaskFileError(f"task {task['task_id']}: split {task['split']!r} is not one of {SPLITS}")
        if task.get("storage_state") and not Path(task["storage_state"]).is_file():
            alt = base / str(task["storage_state"])
            if alt.is_file():  # WebArena's paths are relative to where its files live
                task["storage_state"] = str(alt)
        tasks.append(task)
    unknown = set(mapping) - seen
    if unknown:
        raise TaskFileError(f"splits names tasks that are not in the file: {sorted(unknown)[:5]}")
    return tasks


def _split_map(splits: Mapping[str, Any] | str | Path | None) -> dict[str, str]:
    if splits is None:
        return {}
    if isinstance(splits, str | Path):
        splits = json.loads(Path(splits).read_text(encoding="utf-8"))
    if not isinstance(splits, Mapping):
        raise TaskFileError("splits must map task_id -> split or split -> [task_id, ...]")
    out: dict[str, str] = {}
    for k, v in splits.items():
        if k in SPLITS and isinstance(v, list):
            out.update({str(t): k for t in v})
        elif isinstance(v, str):
            out[str(k)] = v
        else:
            raise TaskFileError(f"splits[{k!r}]: expected a split name or a list of task ids, got {v!r}")
    bad = {s for s in out.values() if s not in SPLITS}
    if bad:
        raise TaskFileError(f"splits: {sorted(bad)} are not splits; use {SPLITS}")
    return out


def check_tasks(
    tasks: list[dict[str, Any]],
    *,
    evaluation: str = "lynn",
    served: Mapping[str, str] | None = None,
    user_sites: set[str] | frozenset[str] = frozenset(),
    judge: Any = None,
) -> tuple[list[str], list[str]]:
    """Every problem that would make a task score wrongly or fail at reset, found before anything runs.

    Args:
        tasks: loaded tasks.
        evaluation: ``"lynn"`` or ``"webarena"`` (which evaluator types and locators are valid).
        served: site name -> URL (or placeholder) of every site the env can open; ``None`` skips the
            site checks.
        user_sites: the names of sites the user runs (no database the env could restore).
        judge: the configured LLM judge, if any.

    Returns:
        (errors, warnings): one line each, naming the task and the field.
    """
    from lynn.envs.liveweb.evaluators import EVAL_TYPES
    from lynn.envs.liveweb.webarena_eval import (
        EXTENSION_TYPES,
        LOCATOR_FUNCS,
        URL_FUNCS,
        WEBARENA_EVAL_TYPES,
        needs_judge,
        parse_func,
    )

    webarena = evaluation == "webarena"
    types_ok = WEBARENA_EVAL_TYPES + EXTENSION_TYPES if webarena else EVAL_TYPES
    errors: list[str] = []
    warns: list[str] = []
    for t in tasks:
        tid = t["task_id"]

        def err(field: str, msg: str, tid: str = tid) -> None:
            errors.append(f"task {tid}: {field}: {msg}")

        spec = t.get("eval")
        if not isinstance(spec, Mapping):
            err("eval", "must be an object with eval_types")
            continue
        types = spec.get("eval_types")
        if not isinstance(types, list) or not types:
            err("eval.eval_types", "must be a non-empty list")
            types = []
        for kind in types:
            if kind not in types_ok:
                err(
                    "eval.eval_types",
                    f"{kind!r} is not supported with evaluation={evaluation!r}; use {', '.join(types_ok)}",
                )
        if "string_match" in types:
            answers = spec.get("reference_answers")
            if not isinstance(answers, Mapping):
                err(
                    "eval.reference_answers",
                    'must be an object such as {"must_include": [...]} (the old list format is not read: '
                    "write the list as must_include)",
                )
            else:
                if "must_include" in answers and not isinstance(answers["must_include"], list):
                    err("eval.reference_answers.must_include", "must be a list of strings")
                fuzzy = answers.get("fuzzy_match")
                if fuzzy is not None and fuzzy != "N/A" and not isinstance(fuzzy, list):
                    err("eval.reference_answers.fuzzy_match", 'must be a list of strings or "N/A"')
                if needs_judge(t, webarena) and judge is None:
                    err(
                        "eval.reference_answers.fuzzy_match",
                        "is scored by an LLM judge; pass judge={'base_url': 'http://HOST:PORT/v1', 'model': 'NAME'} "
                        "(any OpenAI-compatible endpoint)",
                    )
                if spec.get("string_note") and not webarena:
                    warns.append(
                        f"task {tid}: eval.string_note: not used by our rules (report_infeasible or the answer "
                        "'N/A' passes); evaluation='webarena' judges the reason against it"
                    )
        if "url_match" in types:
            if not str(spec.get("reference_url") or "").strip():
                (warns if webarena else errors).append(
                    f"task {tid}: eval.reference_url: empty"
                    + (" (WebArena's rule then matches every page)" if webarena else "; url_match needs one")
                )
            if spec.get("url_note", "GOLD in PRED") != "GOLD in PRED":
                err(
                    "eval.url_note",
                    f"unknown matching rule {spec['url_note']!r}; WebArena knows only 'GOLD in PRED'",
                )
        if "program_html" in types:
            targets = spec.get("program_html")
            if not isinstance(targets, list) or not targets:
                err("eval.program_html", "must be a non-empty list of {url, locator, required_contents}")
                targets = []
            for j, target in enumerate(targets):
                where = f"eval.program_html[{j}]"
                if not isinstance(target, Mapping):
                    err(where, "must be an object")
                    continue
                url, loc = str(target.get("url", "")), str(target.get("locator", ""))
                if not url.strip():  # WebArena's page.goto("") raises mid-evaluation: say so at load
                    err(
                        where + ".url", "is empty; use 'last' (the final page) or the URL of the page to read"
                    )
                if url.startswith("func"):
                    if webarena:
                        try:
                            parse_func(url, URL_FUNCS)
                        except ValueError as exc:
                            err(where + ".url", str(exc))
                    else:
                        err(where + ".url", "func: URLs are WebArena helpers; use evaluation='webarena'")
                if loc.startswith("func:"):
                    if webarena:
                        try:
                            parse_func(loc, LOCATOR_FUNCS)
                        except ValueError as exc:
                            err(where + ".locator", str(exc))
                    else:
                        err(
                            where + ".locator",
                            "func: locators are WebArena helpers; use evaluation='webarena'",
                        )
                elif webarena and loc.strip() and not loc.startswith(("document.", "[...document.")):
                    err(where + ".locator", f"{loc!r}: WebArena reads only '', document.* or func: locators")
                req = target.get("required_contents")
                if not isinstance(req, Mapping) or not ({"exact_match", "must_include"} & set(req)):
                    err(where + ".required_contents", "needs exact_match or must_include")
                elif "must_include" in req and not isinstance(req["must_include"], list):
                    err(where + ".required_contents.must_include", "must be a list")
                prep = target.get("prep_actions")
                if prep is not None and not (
                    isinstance(prep, list) and all(isinstance(p, str) for p in prep)
                ):
                    err(where + ".prep_actions", "must be a list of JavaScript expressions")
        if "page_list" in types and not isinstance(spec.get("page_list"), Mapping):
            err("eval.page_list", "must be an object with reference_url")
        state = t.get("storage_state")
        if state and not Path(str(state)).is_file():
            err(
                "storage_state",
                f"{state!r} does not exist (a Playwright storage state with the login cookies)",
            )
        geo = t.get("geolocation")
        if geo is not None and not (
            isinstance(geo, Mapping)
            and isinstance(geo.get("latitude"), int | float)
            and isinstance(geo.get("longitude"), int | float)
        ):
            err("geolocation", f"must be null or {{'latitude': .., 'longitude': ..}}, got {geo!r}")
        if t.get("require_login") and not state and not t.get("login"):
            warns.append(
                f"task {tid}: require_login: true but the task has neither storage_state nor login, so the "
                "episode starts logged out (as in WebArena, which logs in only through storage_state)"
            )
        if served is not None:
            for site in t.get("sites") or []:
                if site not in served:
                    err("sites", f"{site!r} is not served; pass sites={{{site!r}: 'http://HOST:PORT'}}")
            from lynn.envs.liveweb.evaluators import fill_placeholders

            for field, text in (
                ("start_url", t.get("start_url")),
                ("eval.reference_url", spec.get("reference_url")),
            ):
                left = _PLACEHOLDER.findall(fill_placeholders(str(text or ""), served))
                if left:
                    names = ", ".join(sorted({p.strip("_").lower() for p in left}))
                    err(
                        field,
                        f"placeholder {left[0]} has no site; pass sites={{{names!r}: 'http://HOST:PORT'}}",
                    )
            if t.get("require_reset") and set(t.get("sites") or []) & set(user_sites):
                warns.append(
                    f"task {tid}: require_reset: the env cannot restore a site you run "
                    f"({', '.join(sorted(set(t['sites']) & set(user_sites)))}); reset it between such tasks"
                )
    return errors, warns


def raise_for(errors: list[str], limit: int = 25) -> None:
    """Raise one :class:`TaskFileError` listing ``errors`` (the first ``limit``), if any."""
    if errors:
        more = f"\n... and {len(errors) - limit} more" if len(errors) > limit else ""
        raise TaskFileError(
            f"{len(errors)} problem(s) in the task file:\n" + "\n".join(errors[:limit]) + more
        )
