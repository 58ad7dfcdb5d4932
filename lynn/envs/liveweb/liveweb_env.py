"""``Lynn/LiveWeb-v0``: web tasks in a real Chromium on real (bundled or user) sites."""

from __future__ import annotations

import contextlib
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from lynn.envs.liveweb.actions import STOP_ACTIONS, Action, ActionError, parse_actions
from lynn.envs.liveweb.evaluators import EvalContext, evaluate, fill_placeholders
from lynn.envs.liveweb.tasks import check_tasks, load_tasks, raise_for
from lynn.envs.liveweb.webarena_eval import make_judge
from lynn.envs.spaces import MAX_TEXT, UnicodeText

OBS_MODES = ("text", "screenshot", "html", "all")
EVALUATIONS = ("lynn", "webarena")
OBS_FORMATS = ("lynn", "browsergym")


def _form_login(url: str, form: dict[str, str], timeout: float = 10.0) -> list[tuple[str, str]]:
    """POST a login form outside the browser and return the session cookies it sets.

    Plain HTTP from Python: a few ms, and independent of the context's network guard.
    """
    import http.cookiejar
    import urllib.error
    import urllib.parse
    import urllib.request

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None  # the 303 after a login is the success signal; do not follow it

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect)
    try:
        opener.open(url, urllib.parse.urlencode(form).encode(), timeout=timeout).close()
    except urllib.error.HTTPError as exc:
        if exc.code not in (301, 302, 303, 307):
            raise RuntimeError(f"login at {url} as {form.get('username')!r} failed: HTTP {exc.code}") from exc
    cookies = [(c.name, c.value) for c in jar]
    if not cookies:
        raise RuntimeError(f"login at {url} as {form.get('username')!r} set no session cookie")
    return cookies


def _webarena_select(page: Any, locator: str, prep: list[str]) -> str:
    """What WebArena's program_html reads with ``locator`` (see :mod:`.webarena_eval`)."""
    from lynn.envs.liveweb.webarena_eval import GITLAB_ROLE_JS, LOCATOR_FUNCS, parse_func

    if not locator.strip():
        return str(page.content())
    if locator.startswith(("document.", "[...document.")):
        try:
            for script in prep:
                page.evaluate(f"() => {script}")
        except Exception:  # noqa: BLE001  (WebArena ignores a failing prep action)
            pass
        try:
            return str(page.evaluate(f"() => {locator}")) or ""
        except Exception:  # noqa: BLE001  (WebArena: "the page is wrong, return empty")
            return ""
    if locator.startswith("func:"):
        _, args = parse_func(locator, LOCATOR_FUNCS)
        try:
            return str(page.evaluate(GITLAB_ROLE_JS, args[1]))
        except Exception:  # noqa: BLE001  (WebArena's helper reads "" when the account is not listed)
            return ""
    raise ValueError(f"Unknown locator: {locator}")


BROWSERGYM_KEYS = (
    "axtree_object",
    "dom_object",
    "extra_element_properties",
    "focused_element_bid",
    "open_pages_urls",
    "open_pages_titles",
    "chat_messages",
    "goal_object",
    "active_page_index",
    "elapsed_time",
)


class AnyValue(spaces.Space):
    """A space of any value of one Python type (BrowserGym's ``AnyDict``): structured observations
    such as CDP trees and chat logs. ``sample`` gives an empty one."""

    def __init__(self, kind: type) -> None:
        super().__init__(shape=None, dtype=None)
        self.kind = kind

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        return self.kind()

    def contains(self, x: Any) -> bool:
        return isinstance(x, self.kind)

    def __repr__(self) -> str:
        return f"AnyValue({self.kind.__name__})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnyValue) and other.kind is self.kind


class LiveWebEnv(gym.Env):
    """
    ## Description
    Web tasks in a real browser on real sites. By default the env serves three bundled sites (a
    **shop**, a **forum** and the shop's **admin** back office: Starlette + SQLite apps with
    deterministic seed data) from its own server process on loopback ports, and drives Debian's
    Chromium through Playwright. Tasks use WebArena's JSON format (511 bundled instances of 65
    templates: information seeking, navigation and content modification; none passes on its pristine
    state or for a generic answer). Requests to any origin outside the task's sites are blocked.

    ## Action Space
    A Unicode text: BrowserGym's high-level actions (:mod:`.actions`; parsed with :mod:`ast`, literal
    arguments only, never executed): ``click(bid, button, modifiers)``, ``dblclick``, ``hover``,
    ``fill(bid, value, enable_autocomplete_menu)``, ``select_option``, ``press``, ``check``/``uncheck``,
    ``focus``, ``clear``, ``drag_and_drop``, ``upload_file`` (files in ``env.browser.upload_dir``),
    ``scroll``, ``scroll_at``, ``mouse_*``, ``keyboard_*``, ``goto``, ``go_back``, ``go_forward``,
    ``new_tab``, ``tab_close``, ``tab_focus``, ``send_msg_to_user(text)`` (the answer; ends the
    episode), ``report_infeasible(reason)`` (ends the episode) and ``noop(wait_ms)``. Several calls
    per step (one per line or ``;``-separated) and prose or a fenced block around them are accepted, as
    BrowserGym accepts them. ``bid`` is an element id shown as ``[e12]`` in the axtree (``12`` means
    ``e12``); numbers must be finite and are clamped (scroll to ±100,000 px, coordinates to the
    viewport, waits to 10 s).

    ## Observation Space
    A ``Dict`` of texts: ``goal``, ``url``, ``title``, ``axtree`` (the accessibility tree, one element
    per line, interactive ones prefixed by their id), ``open_pages`` (one line per tab, ``*`` marks
    the active one), ``last_action``, ``last_action_error``. ``obs_mode="screenshot"`` adds
    ``screenshot`` (``Box(0, 255, (H, W, 3), uint8)``), ``"html"`` adds pruned ``html``, ``"all"`` both.
    ``obs_format="browsergym"`` adds BrowserGym's keys (:mod:`.browsergym_obs`): ``chat_messages``,
    ``goal_object``, ``open_pages_urls``, ``open_pages_titles``, ``active_page_index``,
    ``axtree_object`` (CDP ``Accessibility.getFullAXTree``, nodes with ids carry ``browsergym_id``),
    ``dom_object`` (CDP ``DOMSnapshot.captureSnapshot``), ``extra_element_properties``,
    ``focused_element_bid`` and ``elapsed_time`` (BrowserGym's ``screenshot`` comes only with an
    ``obs_mode`` that asks for it: a screenshot costs ≈ 100 ms).

    ## Rewards
    0 on every step except the last: when the agent answers (``send_msg_to_user``) or reports the task
    infeasible, or the episode is truncated (WebArena scores that state too), the task's evaluators
    (``string_match``, ``url_match``, ``program_html`` and our ``db_check``/``page_list``) score the
    final state and the reward is their product (0 or 1). A bad action gives 0 and a message in
    ``info["error"]`` and ``last_action_error``; the episode goes on.

    ## Episode End
    Terminates on ``send_msg_to_user`` / ``report_infeasible``, or with ``end_on_success=True``
    (BrowserGym's WebArena behaviour) as soon as a task that needs no answer passes; truncated after
    ``max_steps`` (default: the registry's ``max_episode_steps``, 30).

    ## Arguments
    - ``tasks``: ``None`` (bundled bank), a path to a WebArena-format JSON file, or a list of task dicts.
      Every problem (missing ``storage_state`` file, unknown eval type, ``func:`` helper, unmapped
      site, ``fuzzy_match`` without a judge, ...) is reported when the env is built, naming task and
      field; ``skip_invalid_tasks=True`` drops such tasks with a warning instead.
    - ``sites``: ``{name: base_url}`` of already running instances (e.g. a WebArena deployment); task
      placeholders ``__NAME__`` are replaced by these URLs. Bundled sites not listed are served locally.
    - ``split``: ``"train"``, ``"test"`` or ``None`` (all) — which tasks ``reset`` draws from;
      ``splits``: a split mapping for files without ``split`` fields (else they are all ``"test"``).
    - ``evaluation``: ``"lynn"`` (default; our strict rules, :mod:`.evaluators`) or ``"webarena"``
      (WebArena's exact rules, :mod:`.webarena_eval`); ``judge``: ``{"base_url", "model"}`` of an
      OpenAI-compatible endpoint for ``fuzzy_match`` (or an object with ``fuzzy_match`` /
      ``unachievable_match``).
    - ``obs_mode``: ``"text"`` (default), ``"screenshot"``, ``"html"`` or ``"all"``; ``obs_format``:
      ``"lynn"`` (default) or ``"browsergym"`` (its extra keys; ≈ 20-60 ms a step more).
    - ``multiaction`` (default ``True``, BrowserGym's); ``noop_wait_ms``: what ``noop()`` waits
      (default 0, BrowserGym's 1000 with ``obs_format="browsergym"``).
    - ``viewport``: ``(width, height)``; ``action_timeout_ms`` / ``nav_timeout_ms``: how long an element
      action / a navigation may take before it is reported as an error.
    - ``network_guard``: ``"proxy"`` (default; Chromium itself refuses every origin but the task's) or
      ``"route"`` (Playwright route interception; slower, see ``BrowserSession``).

    ## Version History
    - v0: initial version.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        tasks: str | Path | list[dict[str, Any]] | None = None,
        sites: dict[str, str] | None = None,
        split: str | None = None,
        obs_mode: str = "text",
        viewport: tuple[int, int] = (1280, 720),
        action_timeout_ms: int = 3000,
        nav_timeout_ms: int = 8000,
        network_guard: str = "proxy",
        render_mode: str | None = None,
        end_on_success: bool = False,
        max_steps: int | None = None,
        evaluation: str = "lynn",
        judge: Any = None,
        splits: dict[str, Any] | str | Path | None = None,
        skip_invalid_tasks: bool = False,
        multiaction: bool = True,
        noop_wait_ms: float | None = None,
        obs_format: str = "lynn",
    ) -> None:
        if obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {obs_mode!r}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError("render_mode must be None or 'rgb_array'")
        if evaluation not in EVALUATIONS:
            raise ValueError(f"evaluation must be one of {EVALUATIONS}, got {evaluation!r}")
        self.render_mode = render_mode
        self.obs_mode = obs_mode
        self.evaluation = evaluation
        self.judge = make_judge(judge)
        self.user_sites = {k: v.rstrip("/") for k, v in (sites or {}).items()}
        loaded = self._check(load_tasks(tasks, splits=splits), skip_invalid_tasks)
        self.all_tasks = self._in_split(loaded, split)
        if not self.all_tasks:
            have = sorted({str(t.get("split")) for t in loaded})
            raise ValueError(
                f"no tasks in split {split!r} (the file has {have}); choose another or pass splits="
            )
        self.by_id = {t["task_id"]: t for t in self.all_tasks}
        self.viewport = tuple(viewport)
        self.action_timeout_ms = action_timeout_ms
        self.nav_timeout_ms = nav_timeout_ms
        if network_guard not in ("proxy", "route"):
            raise ValueError("network_guard must be 'proxy' or 'route'")
        self.network_guard = network_guard
        if obs_format not in OBS_FORMATS:
            raise ValueError(f"obs_format must be one of {OBS_FORMATS}, got {obs_format!r}")
        self.obs_format = obs_format
        self.multiaction = bool(multiaction)
        if noop_wait_ms is None:
            noop_wait_ms = 1000.0 if obs_format == "browsergym" else 0.0  # BrowserGym's noop() waits 1 s
        if not 0 <= float(noop_wait_ms) <= 10_000:
            raise ValueError(f"noop_wait_ms must be in [0, 10000], got {noop_wait_ms!r}")
        self.noop_wait_ms = float(noop_wait_ms)
        self.end_on_success = bool(end_on_success)
        if max_steps is not None and (isinstance(max_steps, bool) or int(max_steps) < 1):
            raise ValueError(f"max_steps must be a positive int or None, got {max_steps!r}")
        self.max_steps = None if max_steps is None else int(max_steps)
        self._steps = 0
        self._truncated = False
        self._t_reset = time.time()
        self.chat = []
        self._ref_items: dict[tuple[str, str], list[str]] = {}

        obs: dict[str, spaces.Space] = {
            k: UnicodeText()
            for k in ("goal", "url", "title", "axtree", "open_pages", "last_action", "last_action_error")
        }
        if obs_mode in ("screenshot", "all"):
            obs["screenshot"] = spaces.Box(0, 255, (self.viewport[1], self.viewport[0], 3), np.uint8)
        if obs_mode in ("html", "all"):
            obs["html"] = UnicodeText()
        if obs_format == "browsergym":
            obs["axtree_object"] = AnyValue(dict)
            obs["dom_object"] = AnyValue(dict)
            obs["extra_element_properties"] = AnyValue(dict)
            obs["focused_element_bid"] = UnicodeText()
            obs["open_pages_urls"] = AnyValue(list)
            obs["open_pages_titles"] = AnyValue(list)
            obs["chat_messages"] = AnyValue(list)
            obs["goal_object"] = AnyValue(list)
            obs["active_page_index"] = spaces.Box(0, np.iinfo(np.int64).max, (1,), np.int64)
            obs["elapsed_time"] = spaces.Box(0, np.inf, (1,), np.float64)
        self.observation_space = spaces.Dict(obs)
        self.action_space = UnicodeText(max_length=4096)

        self.server: Any = None
        self.browser: Any = None
        self.task: dict[str, Any] | None = None
        self.urls: dict[str, str] = {}
        self._last_obs: dict[str, Any] | None = None
        self._done = False

    # --- tasks ---------------------------------------------------------------------------------
    @staticmethod
    def _in_split(loaded: list[dict[str, Any]], split: str | None) -> list[dict[str, Any]]:
        if split not in (None, "train", "test"):
            raise ValueError(f"split must be 'train', 'test' or None, got {split!r}")
        return [t for t in loaded if split is None or t.get("split") == split]

    @classmethod
    def _tasks_for(cls, tasks: Any, split: str | None, splits: Any = None) -> list[dict[str, Any]]:
        return cls._in_split(load_tasks(tasks, splits=splits), split)

    def _check(self, loaded: list[dict[str, Any]], skip_invalid: bool) -> list[dict[str, Any]]:
        """Report every problem of the task file now (naming task and field), not at reset or scoring;
        returns the tasks to use (without the invalid ones when ``skip_invalid``)."""
        from lynn.envs.liveweb.sites.server import SITE_NAMES

        served = {s: f"http://{s}.bundled" for s in SITE_NAMES} | self.user_sites
        errors, warns = check_tasks(
            loaded,
            evaluation=self.evaluation,
            served=served,
            user_sites=set(self.user_sites),
            judge=self.judge,
        )
        if skip_invalid and errors:
            bad = {e.split(":", 1)[0].removeprefix("task ") for e in errors}
            warns = [f"skipped: {e}" for e in errors] + warns
            loaded = [t for t in loaded if t["task_id"] not in bad]
        else:
            raise_for(errors)
        self.task_warnings = warns
        if warns:
            warnings.warn(
                f"{len(warns)} task file note(s) (see env.task_warnings): " + "; ".join(warns[:3]),
                stacklevel=3,
            )
        return loaded

    @classmethod
    def list_tasks(
        cls, split: str | None = None, tasks: Any = None, splits: Any = None, **_: Any
    ) -> list[dict[str, Any]]:
        """The task list (``task_id``, ``split``, ``description``, ``sites``, ``kind``) without starting anything."""
        return [
            {
                "task_id": t["task_id"],
                "split": t.get("split"),
                "description": t["intent"],
                "sites": t.get("sites", []),
                "kind": t.get("kind"),
            }
            for t in cls._tasks_for(tasks, split, splits)
        ]

    # --- processes -----------------------------------------------------------------------------
    def _ensure_server(self) -> None:
        from lynn.envs.liveweb.sites.server import SITE_NAMES, SiteServer

        used = {s for t in self.all_tasks for s in t.get("sites") or SITE_NAMES}
        needed = tuple(s for s in SITE_NAMES if s in used and s not in self.user_sites)
        if not needed:
            return
        if self.server is None:
            self.server = SiteServer(needed)
        elif not self.server.alive():
            self.server.start()

    def _site_urls(self) -> dict[str, str]:
        urls = dict(self.server.urls) if self.server is not None else {}
        urls.update(self.user_sites)
        return urls

    def _ensure_browser(self) -> None:
        if self.browser is None:
            from lynn.envs.liveweb.browser import BrowserSession

            self.browser = BrowserSession(
                viewport=self.viewport,
                action_timeout_ms=self.action_timeout_ms,
                nav_timeout_ms=self.nav_timeout_ms,
                network_guard=self.network_guard,
                noop_wait_ms=self.noop_wait_ms,
            )

    def _open_episode(self, url: str) -> None:
        """A clean browser context (``BrowserSession.new_context``) allowed onto the task's sites, logged in as
        the task says, at ``url``."""
        assert self.task is not None
        names = self.task.get("sites") or list(self.urls)
        allowed = {self.urls[n] for n in names if n in self.urls} | set(self.user_sites.values())
        state = self.task.get(
            "storage_state"
        )  # WebArena: a saved login (cookies) for the user's own instance
        self.browser.new_context(
            allowed, storage_state=state or None, geolocation=self.task.get("geolocation") or None
        )
        self._login()
        for i, one in enumerate(u.strip() for u in url.split("|AND|")):  # WebArena: several start tabs
            if i:
                self.browser.new_tab()
            self.browser.goto(one)

    def _login(self) -> None:
        from lynn.envs.liveweb.sites.seed import ADMIN_PASSWORD, ADMIN_USER, DEFAULT_PASSWORD

        assert self.task is not None
        for site, user in (self.task.get("login") or {}).items():
            if site not in self.urls:
                continue
            password = ADMIN_PASSWORD if user == ADMIN_USER else DEFAULT_PASSWORD
            if isinstance(user, dict):  # user instances: {"username": ..., "password": ..., "path": "/login"}
                password, path, user = (
                    user.get("password", ""),
                    user.get("path", "/login"),
                    user.get("username", ""),
                )
            else:
                path = "/login"
            cookies = _form_login(self.urls[site] + path, {"username": user, "password": password})
            self.browser.add_cookies(
                [{"name": k, "value": v, "url": self.urls[site] + "/"} for k, v in cookies]
            )

    # --- gym API -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        options = options or {}
        if "task_id" in options and options["task_id"] is not None:
            tid = str(options["task_id"])
            if tid not in self.by_id:
                raise ValueError(f"unknown task_id {tid!r}; see LiveWebEnv.list_tasks()")
            self.task = self.by_id[tid]
        else:
            self.task = self.all_tasks[int(self.np_random.integers(len(self.all_tasks)))]
        self._ensure_server()
        if self.server is not None:
            t = time.perf_counter()
            self.server.restore()
            timings["restore_s"] = time.perf_counter() - t
        self.urls = self._site_urls()
        self._ensure_browser()
        t = time.perf_counter()
        start = fill_placeholders(self.task.get("start_url") or "", self.urls) or next(
            iter(self.urls.values())
        )
        events: list[str] = []
        try:
            self._open_episode(start)
        except Exception as exc:  # noqa: BLE001  (a crashed browser: relaunch once, then let it raise)
            events.append(f"browser restarted during reset: {str(exc).splitlines()[0][:160]}")
            self.browser.close()
            self.browser = None
            self._ensure_browser()
            self._open_episode(start)
        timings["context_s"] = time.perf_counter() - t
        self._done = False
        self._steps = 0
        self._truncated = False
        self._ref_items = {}
        self._t_reset = time.time()
        self.chat: list[dict[str, Any]] = [
            {"role": "user", "timestamp": self._t_reset, "message": self.task["intent"]}
        ]
        self.answer: str | None = None
        self.infeasible = False
        obs = self._observe("", "", timings)
        timings["total_s"] = time.perf_counter() - t0
        info = {
            "task_id": self.task["task_id"],
            "error": None,
            "timings": timings,
            "events": events + self.browser.pop_events(),
        }
        return obs, info

    def _observe(self, last_action: str, error: str, timings: dict[str, float]) -> dict[str, Any]:
        from lynn.envs.liveweb.browser import BrowserCrashed

        t = time.perf_counter()
        want_shot = self.obs_mode in ("screenshot", "all")
        want_html = self.obs_mode in ("html", "all")
        bg = self.obs_format == "browsergym"
        try:
            raw = self.browser.observe(screenshot=want_shot, html=want_html, structured=bg)
        except BrowserCrashed as exc:
            error = (error + "; " if error else "") + self._recover(
                f"browser crashed while observing ({exc})"
            )
            raw = self.browser.observe(screenshot=want_shot, html=want_html, structured=bg)
        timings.update(raw.pop("_timings", {}))
        timings["observe_s"] = time.perf_counter() - t
        assert self.task is not None
        obs = {
            "goal": self.task["intent"],
            "url": raw["url"],
            "title": raw["title"],
            "axtree": raw["axtree"][:MAX_TEXT],
            "open_pages": raw["open_pages"],
            "last_action": last_action[:4096],
            "last_action_error": error[:MAX_TEXT],
        }
        if want_shot:
            obs["screenshot"] = raw["screenshot"]
        if want_html:
            obs["html"] = raw["html"][:MAX_TEXT]
        if bg:
            for key in BROWSERGYM_KEYS[:6]:
                obs[key] = raw[key]
            obs["chat_messages"] = [dict(m) for m in self.chat]
            obs["goal_object"] = [{"type": "text", "text": self.task["intent"]}]
            obs["active_page_index"] = np.array([self.browser.active], dtype=np.int64)
            obs["elapsed_time"] = np.array([time.time() - self._t_reset], dtype=np.float64)
        self._last_obs = obs
        return obs

    def _recover(self, why: str) -> str:
        """Restart whatever died (server, browser) and reopen the last URL in a fresh, logged-in context."""
        url = (self._last_obs or {}).get("url") or fill_placeholders(
            self.task.get("start_url", ""), self.urls
        )
        if self.server is not None and not self.server.alive():
            self.server.start()  # same ports, so URLs stay valid
            why += "; site server restarted"
        if not self.browser.alive():
            why += "; browser restarted"
        try:
            self._open_episode(url)
        except Exception:  # noqa: BLE001  (the last URL itself may be the problem: go to the start page)
            self._open_episode(fill_placeholders(self.task.get("start_url", ""), self.urls))
        return why + f"; reopened {url}"

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        text = action if isinstance(action, str) else repr(action)
        error = ""
        reward, terminated, truncated = 0.0, False, False
        info: dict[str, Any] = {"task_id": self.task["task_id"]}
        if self._done:
            error = "the episode has ended; call reset()"
        else:
            recovered = False
            if self.server is not None and not self.server.alive():
                # The page was reopened, so the agent's element ids are stale: report, do not act.
                error = self._recover("the site server had died") + "; the action was not executed"
                recovered = True
            try:
                calls = parse_actions(action, multiaction=self.multiaction)
            except ActionError as exc:
                calls = []
                error = str(exc)
            parsed: Action | None = None
            if not recovered:
                t = time.perf_counter()
                for parsed in calls:  # BrowserGym runs a multi-action in order and stops at an error
                    error = self._execute(parsed)
                    if error:
                        parsed = None
                        break
                timings["action_s"] = time.perf_counter() - t
            self._steps += 1
            stop = parsed is not None and parsed.name in STOP_ACTIONS
            limit = self._step_limit()
            if stop:
                assert parsed is not None
                self.answer = parsed.args.get("text")
                self.infeasible = parsed.name == "report_infeasible"
                role, msg = (
                    ("infeasible", parsed.args["reason"]) if self.infeasible else ("assistant", self.answer)
                )
                self.chat.append({"role": role, "timestamp": time.time(), "message": msg})
                terminated = True
            elif limit is not None and self._steps >= limit:
                truncated = True  # WebArena scores the final state of a truncated episode too
                self._truncated = True
                self.answer, self.infeasible = None, False
            if stop or truncated or (self.end_on_success and self._may_pass_unanswered()):
                t = time.perf_counter()
                score, notes = self._evaluate()
                timings["eval_s"] = time.perf_counter() - t
                if stop or truncated or score >= 1.0:
                    terminated = terminated or (not truncated)
                    reward = float(score)
                    info.update(success=score >= 1.0, score=score, eval=notes)
                    self._done = True
        events = self.browser.pop_events()
        obs = self._observe(text, error, timings)
        events += self.browser.pop_events()
        if events and not error and any(e.startswith("blocked") for e in events):
            obs["last_action_error"] = "; ".join(e for e in events if e.startswith("blocked"))
        timings["total_s"] = time.perf_counter() - t0
        info.update(error=error or None, timings=timings, events=events)
        return obs, reward, terminated, truncated, info

    def _step_limit(self) -> int | None:
        if self.max_steps is not None:
            return self.max_steps
        spec = getattr(self, "spec", None)
        return getattr(spec, "max_episode_steps", None) if spec is not None else None

    def _may_pass_unanswered(self) -> bool:
        """Whether the task's evaluators can pass before an answer (string_match needs one)."""
        assert self.task is not None
        types = (self.task.get("eval") or {}).get("eval_types") or []
        return bool(types) and "string_match" not in types

    def _execute(self, action: Action) -> str:
        """Run one parsed action; returns an error message ('' if it worked)."""
        try:
            self.browser.execute(action)
            return ""
        except Exception as exc:  # noqa: BLE001  (every failure is a message for the agent)
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            msg = msg.replace("Locator.", "").replace("Page.", "")[:300]
            if not self.browser.alive():
                return self._recover(f"{action.name} failed: the browser crashed ({msg})")
            if self.server is not None and not self.server.alive():
                return self._recover(f"{action.name} failed: the site server died ({msg})")
            return f"{action.name} failed: {msg}"

    def _page_text(self, url: str, locator: str, prep: list[str] | None = None) -> str:
        page = self.browser.page
        if page is not None and page.url.rstrip("/") == url.rstrip("/"):
            return self._read_text(page, locator, prep or [])
        with self.browser.scratch_page() as page:
            page.goto(url, wait_until="domcontentloaded")
            return self._read_text(page, locator, prep or [])

    @staticmethod
    def _read_text(page: Any, locator: str, prep: list[str]) -> str:
        for script in prep:  # WebArena's prep_actions: scripts that reveal what the locator reads
            page.evaluate(f"() => {{ {script} }}")
        if not locator:
            return page.inner_text("body")
        if locator.startswith("func:"):
            raise ValueError(
                "WebArena's func: helpers run WebArena's own Python code; use a JS or CSS locator"
            )
        if locator.startswith(("document.", "[...document")):
            return str(page.evaluate(locator))  # runs in the page's sandbox, not in Python
        return page.locator(locator).first.inner_text(timeout=2000)

    def _page_items(self, url: str, locator: str) -> list[str]:
        """Inner texts of every ``locator`` match on ``url`` (the active page when it is that URL)."""
        page = self.browser.page
        if page is not None and page.url == url:
            return [str(t) for t in page.locator(locator).all_inner_texts()]
        cached = self._ref_items.get((url, locator))
        if cached is not None:  # reference pages are read once an episode (end_on_success reads them often)
            return cached
        with self.browser.scratch_page() as page:
            page.goto(url, wait_until="domcontentloaded")
            items = [str(t) for t in page.locator(locator).all_inner_texts()]
        self._ref_items[(url, locator)] = items
        return items

    def evaluate(self, answer: str | None = None, infeasible: bool = False) -> tuple[float, list[str]]:
        """Score the current state of the episode as if it ended now with ``answer``.

        Returns:
            (score in [0, 1], one message per evaluator).
        """
        if self.task is None:
            raise RuntimeError("call reset() before evaluate()")
        self.answer, self.infeasible = answer, infeasible
        return self._evaluate()

    def _evaluate(self) -> tuple[float, list[str]]:
        assert self.task is not None
        if self.browser is not None:
            self.browser.forget_observation()  # scoring may run scripts on the page (prep_actions)
        db = {}
        if self.server is not None:
            db = {s: self.server.db_path(s) for s in self.server.sites}
        ctx = EvalContext(
            answer=self.answer,
            infeasible=self.infeasible,
            url=self.browser.page.url if self.browser.page else "",
            sites=self.urls,
            page_text=self._page_text,
            db=db,
            page_items=self._page_items,
            intent=str(self.task.get("intent", "")),
            judge=self.judge,
        )
        try:
            if self.evaluation == "webarena":
                return self._evaluate_webarena(ctx)
            return evaluate(self.task, ctx)
        except Exception as exc:  # noqa: BLE001  (a broken task file must not kill the episode loop)
            return 0.0, [f"evaluation failed: {type(exc).__name__}: {exc}"]

    def _evaluate_webarena(self, ctx: EvalContext) -> tuple[float, list[str]]:
        """WebArena's rules (:mod:`.webarena_eval`), with WebArena's answer for an episode without one."""
        from lynn.envs.liveweb import webarena_eval

        assert self.task is not None
        if self.infeasible:
            ctx.answer = "N/A"  # BrowserGym's mapping of report_infeasible onto WebArena's answer
        elif ctx.answer is None:
            ctx.answer = f"Early stop: Reach max steps {self._step_limit()}" if self._truncated else ""
        with contextlib.ExitStack() as stack:
            opened: list[Any] = []

            def read(url: str | None, locator: str, prep: list[str]) -> str:
                if url is not None:  # WebArena opens the URL in the page it reads; "last" then reads it
                    if not opened:
                        opened.append(stack.enter_context(self.browser.scratch_page()))
                    opened[0].goto(url, wait_until="load")
                page = opened[0] if opened else self.browser.page
                return _webarena_select(page, locator, prep)

            return webarena_eval.evaluate(self.task, ctx, read, self.judge)

    def render(self) -> np.ndarray | None:
        if self.render_mode == "rgb_array" and self.browser is not None and self.browser.page is not None:
            return self.browser.screenshot()
        return None

    def close(self) -> None:
        if self.browser is not None:
            self.browser.close()
            self.browser = None
        if self.server is not None:
            self.server.close()
            self.server = None
        super().close()

    def process_ids(self) -> list[int]:
        """PIDs of the processes this env owns (site server, chromium), for leak checks."""
        pids = []
        if self.server is not None and self.server.alive():
            pids.append(self.server.pid)
        if self.browser is not None:
            pids += self.browser.browser_pids()
        return pids
