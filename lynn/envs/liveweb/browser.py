"""One Chromium per env, driven by Playwright's sync API: a clean context per episode (a fresh one, or the
last one with its state cleared, see :meth:`BrowserSession.new_context`), origin allow-list, BrowserGym-style
observations (accessibility tree with stable element ids) and safe action execution.
"""

from __future__ import annotations

import ast
import asyncio
import atexit
import contextlib
import functools
import json
import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import numpy as np

from lynn.envs.liveweb.actions import Action
from lynn.system import find as find_tool

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
_ATTR = re.compile(r"\[([^\]]+)\]")
_REF_RUN = re.compile(r"(?: ?\[[^\[\]]+\])*? ?\[ref=([a-z0-9]+)\](?: \[[^\[\]]+\])*")


def chromium_executable() -> str | None:
    """Debian's chromium (or ``LYNN_CHROMIUM``); ``None`` lets Playwright use its own browser."""
    return find_tool("chromium").path


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def descendant_pids(root: int | None = None) -> list[int]:
    """Live (non-zombie) descendants of ``root`` (default: this process), from /proc."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


def cmdline(pid: int) -> str:
    try:
        return (
            (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def format_axtree(snapshot: str) -> str:
    """Turn Playwright's ``aria_snapshot(mode="ai")`` YAML into BrowserGym-like lines.

    ``- button "Add to cart" [ref=e31]`` becomes ``[e31] button "Add to cart"``; pointer hints are
    dropped, other attributes ([level=1], [checked], [selected]) are kept.
    """
    out = []
    for line in snapshot.splitlines():
        stripped = line.lstrip(" ")
        indent = line[: len(line) - len(stripped)]
        if stripped.startswith("- "):
            stripped = stripped[2:]
        runs = list(_REF_RUN.finditer(stripped))
        if not runs:
            out.append(indent + stripped)
            continue
        run = runs[-1]  # the attribute run around the last [ref=..] (a name cannot hold one: it is quoted)
        start, end = run.start(), run.end()
        attrs = [a for a in _ATTR.findall(stripped[start:end]) if not a.startswith("cursor=")]
        ref = run.group(1)
        rest = " ".join(f"[{a}]" for a in attrs if not a.startswith("ref="))
        body, tail = stripped[:start].rstrip(), stripped[end:]
        if body.startswith("'") and tail.startswith("'"):  # YAML quoted a line holding ':' or '#'
            body, tail = body[1:].replace("''", "'"), tail[1:]
        out.append(f"{indent}[{ref}] {body}" + (f" {rest}" if rest else "") + tail)
    return "\n".join(out)


def prune_html(html: str) -> str:
    """Drop scripts, styles, comments and redundant whitespace (BrowserGym's ``pruned_html`` idea)."""
    html = re.sub(r"<(script|style|noscript)\b.*?</\1>", "", html, flags=re.S | re.I)
    html = re.sub(r"<!--.*?-->", "", html, flags=re.S)
    return re.sub(r"\s+", " ", html).strip()


# Runs in every page before its own scripts: flags a click or window.open that will open a new tab, so
# that the observation after the action can wait for that tab (it arrives asynchronously).
_POPUP_WATCH = """(() => {
  document.addEventListener('click', (e) => {
    const t = e.target instanceof Element ? e.target : null;
    const form = t && t.closest('form');
    if (t && (t.closest('a[target=_blank]') || (form && form.target === '_blank'))) window.__lynnPopup = 1;
  }, true);
  const open = window.open;
  window.open = function (...args) { window.__lynnPopup = 1; return open.apply(this, args); };
  // The fast snapshot reads (and clears) the flag from Playwright's utility world, which does not see this
  // world's globals: it dispatches this event, and a cancelled event means "a new tab was asked for".
  window.addEventListener('__lynnpopup', (e) => { if (window.__lynnPopup) { window.__lynnPopup = 0; e.preventDefault(); } });
})();"""
_PAGE_STATE = (
    "() => { const p = window.__lynnPopup || 0; window.__lynnPopup = 0; return [document.title, p]; }"
)


def _weak(method: Any) -> Any:
    """A handler that calls ``method`` while its object lives: Playwright keeps handlers for as long as the
    browser runs, and a bound method would keep the session (and so the browser) alive forever."""
    ref = weakref.WeakMethod(method)

    def handler(*args: Any) -> Any:
        bound = ref()
        return None if bound is None else bound(*args)

    return handler


def _fresh_stack(fn: Any, *args: Any) -> Any:
    """Call ``fn`` in a new greenlet. Playwright stores the caller's frame of its latest call (for stack
    traces); from here that frame chain ends at this greenlet instead of reaching the env's frames, so a
    dropped env can be garbage-collected (and its processes stopped) without waiting for another call."""
    import greenlet

    return greenlet.greenlet(fn).switch(*args)


def _grab(page: Any, viewport: tuple[int, int]) -> np.ndarray:
    import io

    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(page.screenshot(type="png"))).convert("RGB"), dtype=np.uint8)
    w, h = viewport
    if img.shape != (h, w, 3):  # a page zoomed or sized differently: pad/crop to the declared Box
        out = np.zeros((h, w, 3), dtype=np.uint8)
        out[: min(h, img.shape[0]), : min(w, img.shape[1])] = img[:h, :w]
        img = out
    return img


# The fast click's one round trip before the mouse: scroll the element into view if needed, then the point
# Playwright would click (the centre of its first box) if a real click there reaches it right now — visible,
# enabled, not animating, and the hit test finds it (or an element inside it) on top. Anything else returns
# why, and the click goes through Playwright's locator, which waits for the element and reports an error
# (e.g. "... intercepts pointer events") when it stays covered: a covered element is never clicked by point.
_CLICK_POINT = """(e) => {
  if (window !== window.top) return 'in a frame';  // the mouse takes the top page's coordinates
  if (!e.isConnected || e.closest('[disabled], [aria-disabled=true]') || e.getAnimations().length) return 'busy';
  const style = getComputedStyle(e);
  if (style.visibility !== 'visible' || style.pointerEvents === 'none') return 'hidden';
  const box = () => Array.from(e.getClientRects()).find((r) => r.width >= 1 && r.height >= 1);
  let r = box();
  if (!r) return 'no box';
  if (r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth) {
    e.scrollIntoViewIfNeeded(true);
    r = box();
    if (!r) return 'no box';
  }
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const hit = document.elementFromPoint(x, y);
  if (!hit) return 'covered';
  if (hit !== e && !e.contains(hit)) {
    const attrs = ['id', 'href', 'role', 'aria-label'].filter((a) => hit.hasAttribute(a)).map((a) => ` ${a}="${hit.getAttribute(a).slice(0, 60)}"`);
    return `covered by <${hit.tagName.toLowerCase()}${attrs.join('')}> at (${Math.round(x)}, ${Math.round(y)})`;
  }
  // Whether the click will most likely ask for a navigation of this tab (a link, a form's submit button): then the
  // first call after it is a plain flush, not a snapshot of a page that is going away (a hint only: both are right).
  const link = e.closest('a[href]'), control = e.closest('button, input'), form = control && control.form;
  const navigates = link ? !link.target && !/^(#|javascript:)/i.test(link.getAttribute('href'))
    : !!form && /^(submit|image)$/.test(control.type) && !form.target;
  // Whether it opens a file chooser (a file input, or a label of one): Chromium reports the chooser after the click
  // returns, so the click waits for it (else the agent's note about it would come one step late).
  const label = e.closest('label'), file = e.closest('input[type=file]') || (label && label.control);
  return [x, y, navigates, !!file && file.type === 'file'];
}"""


# The fast snapshot (BrowserSession.fast_snapshot). Playwright computes ``aria_snapshot`` with its injected
# script in its utility world, which it injects (a 330 KB script, plus its UtilityScript) into every new document
# on first use: three round trips to the renderer and a compile, most of a first snapshot's time. This hook, added
# to that same world of a tab (Page.addScriptToEvaluateOnNewDocument), makes a copy of Playwright's own injected
# script (read from the installed driver) at document start; a snapshot is then one Runtime.evaluate. When
# Playwright makes its own instance in that document (a locator action, or its aria_snapshot), the hook sees the
# constructor's assignment of ``_stableRafCount`` (an accessor on the world's Object.prototype) and makes that
# instance share ours: its ``ariaSnapshotJSON`` runs ours (one ref counter: ``lastRef`` is per script instance)
# and its ``_lastAriaSnapshotForQuery`` (what ``aria-ref=`` locators resolve against) is ours. Element refs are
# kept on the elements in that world, so both see them. The isolated world is invisible to the page.
_ARIA_HOOK = """(() => {
  if (globalThis.__lynnAria) return;
  const st = globalThis.__lynnAria = { ours: null, pw: null, predicted: false, bad: false };
  let making = true;
  Object.defineProperty(Object.prototype, '_stableRafCount', { configurable: true, set(v) {
    Object.defineProperty(this, '_stableRafCount', { value: v, writable: true, enumerable: true, configurable: true });
    const ours = st.ours;
    if (making || !ours || typeof this.ariaSnapshotJSON !== 'function' || typeof this.querySelectorAll !== 'function') return;
    if (st.predicted && ours._frameSeq !== this._frameSeq) st.bad = true;  // a snapshot used another prefix
    ours._frameSeq = this._frameSeq;
    st.pw = this;
    this.ariaSnapshotJSON = (node, options) => ours.ariaSnapshotJSON(node, options);
    Object.defineProperty(this, '_lastAriaSnapshotForQuery', { configurable: true,
      get: () => ours._lastAriaSnapshotForQuery, set: (v) => { ours._lastAriaSnapshotForQuery = v; } });
  } });
  try {
    const module = {};
__SOURCE__
    st.ours = new (module.exports.InjectedScript())(globalThis, { isUnderTest: false, sdkLanguage: 'python',
      frameSeq: 0, testIdAttributeName: 'data-testid', stableRafCount: 1, browserName: 'chromium',
      shouldPrependErrorPrefix: false, isUtilityWorld: true, customEngines: [] });
    making = false;
  } catch (e) {}
})();"""
# Playwright's page.aria_snapshot(mode="ai") for a page without frames, computed by the shared instance: the
# element Playwright's "body,frameset" selector finds first, ariaSnapshotJSON with the same options, the same
# YAML renderer; then what _PAGE_STATE reads in the main world (the title, whether a new tab was asked for). ``seq`` is Playwright's frame sequence number of the document (the "f<seq>" ref prefix) as the
# tab's _NavWatch counts it (-1: unknown); Playwright's own instance, once made, says it. null: use Playwright.
_ARIA_FAST = """(seq) => {
  const st = globalThis.__lynnAria;
  if (!st || !st.ours) return null;
  if (st.bad) return 'bad';
  const inj = st.ours;
  if (st.pw) seq = st.pw._frameSeq;
  else if (seq < 0) return null;
  else { inj._frameSeq = seq; st.predicted = true; }
  const root = inj.querySelectorAll(inj.parseSelector('body,frameset'), document)[0];
  if (!root) return null;
  const yaml = inj.ariaSnapshot(root, { mode: 'ai' });
  if (inj._lastAriaSnapshotForQuery.iframeRefs.length) return null;  // Playwright adds the frames' snapshots
  const popup = !window.dispatchEvent(new Event('__lynnpopup', { cancelable: true }));  // see _POPUP_WATCH
  return [yaml, seq, document.title, popup];
}"""
# What the fast click waits with in the document it left while the navigation it asked for has not committed.
_NAP = "new Promise((r) => setTimeout(r, 25))"
# The same once the document has reached DOMContentLoaded (and its DOMContentLoaded listeners have all run: the
# snapshot is taken in a task after the event, as Playwright's would be after its wait for that load state). Sent
# by the fast click as soon as the new document's utility world exists, so the wait for DOMContentLoaded and the
# snapshot cost one round trip instead of an event to Python and a call back.
_ARIA_SETTLED = (
    "async (seq) => { if (document.readyState === 'loading') await new Promise((r) => "
    "document.addEventListener('DOMContentLoaded', () => setTimeout(r, 0), { once: true })); "
    f"return ({_ARIA_FAST})(seq); }}"
)


@functools.lru_cache(maxsize=1)
def _aria_hook() -> str | None:
    """:data:`_ARIA_HOOK` with the installed Playwright's injected script, or ``None`` where it cannot be read
    or does not have what the hook relies on (the fast snapshot is then off)."""
    try:
        import playwright

        text = (Path(playwright.__file__).parent / "driver" / "package" / "lib" / "coreBundle.js").read_text()
        at = text.index("// packages/playwright-core/src/generated/injectedScriptSource.ts")
        match = re.compile(r"\n\s*\w+ = '").search(text, at)
        if match is None:
            return None
        start = match.end() - 1
        source = ast.literal_eval(text[start : text.index("';\n", start) + 1])
    except Exception:  # noqa: BLE001  (another Playwright layout: Playwright's own snapshot only)
        return None
    needed = (
        "this._stableRafCount = options.stableRafCount;",
        "this._frameSeq = options.frameSeq;",
        "ariaSnapshotJSON(node, options) {",
        "this._lastAriaSnapshotForQuery = ariaSnapshot;",
        "var lastRef = 0;",
        "parseSelector(selector) {",
    )
    if not isinstance(source, str) or not all(n in source for n in needed):
        return None
    head, tail = _ARIA_HOOK.split("__SOURCE__")
    return head + source + tail


class _NavWatch:
    """CDP ``Page`` events of one tab, on a session of our own: which navigations the last click caused.

    Chromium reports ``Page.frameRequestedNavigation`` from the renderer while it handles the click, so a
    round trip to the same renderer after the click is enough to know whether one was asked for; then the
    wait is for that navigation only (its commit and DOMContentLoaded, or the load stopping: a download,
    a 204), and a click that navigates nowhere waits for nothing.

    With :meth:`arm_aria` it also keeps the execution contexts of the tab's current document (Playwright's
    utility world, the main world) and Playwright's frame sequence number of the document, for the fast
    snapshot (see :data:`_ARIA_HOOK`).
    """

    def __init__(self, cdp: Any, timeout_ms: float | None = None, tree: dict[str, Any] | None = None) -> None:
        """``tree``: the tab's ``Page.getFrameTree`` result, already read; then ``Page.enable`` is left to the
        caller (:meth:`BrowserSession._clear_context` sends the tab's set-up calls together)."""
        self.cdp = cdp
        self.timeout = timeout_ms  # for each call (None: none); a tab whose renderer is gone never answers
        enable = tree is None
        if tree is None:
            tree = cdp.send("Page.getFrameTree", timeout=timeout_ms)["frameTree"]
        self.main = tree["frame"]["id"]
        self.url = tree["frame"].get("url", "")
        self.requested = self.committed = self.loaded = self.stopped = False
        self.docs = 0  # documents committed in the main frame since the watch began
        self.changes = 0  # navigations of the main frame asked for or made since the watch began
        # Playwright numbers a tab's frames from one counter: the main frame 0, every child frame the next, and
        # the main frame the next again at each new document unless it comes from about:blank. Counted only for
        # a tab watched from its first (blank) document without child frames; -1: unknown.
        self.seq = 0 if self.url in ("", "about:blank") and not tree.get("childFrames") else -1
        self.armed = False  # arm_aria tried (BrowserSession._arm)
        self.tracking = False  # Runtime events on
        self.hooked = False  # the snapshot hook is added to the utility world (for documents from then on)
        self.world = ""  # Playwright's utility world's name in this tab, once armed
        self.contexts: dict[str, str] = {}  # "utility"/"main" -> uniqueId of the current document's context
        for event, handler in (
            ("Page.frameRequestedNavigation", self._requested),
            ("Page.frameNavigated", self._navigated),
            ("Page.navigatedWithinDocument", self._within),
            ("Page.domContentEventFired", self._dcl),
            ("Page.frameStoppedLoading", self._stopped),
            ("Page.frameAttached", self._attached),
        ):
            cdp.on(event, handler)
        if enable:
            cdp.send("Page.enable", timeout=timeout_ms)

    def track(self) -> None:
        """Listen for the tab's execution contexts (``Runtime.enable`` is the caller's, once)."""
        self.tracking = True
        self.cdp.on("Runtime.executionContextCreated", self._context)
        self.cdp.on("Runtime.executionContextsCleared", lambda _ev: self.contexts.clear())

    def arm_aria(self, hook: str) -> bool:
        """Track the tab's execution contexts and add the snapshot hook to Playwright's utility world (it runs
        in the documents that start from now on). False if that world is not known yet: a later call adds the
        hook once it is (on a loaded machine a new tab's utility world can come after the first call)."""
        cdp = self.cdp
        if not self.tracking:
            self.track()
            cdp.send("Runtime.enable", timeout=self.timeout)  # reports the existing contexts first
        if not self.world:
            return False
        if not self.hooked:
            cdp.send(
                "Page.addScriptToEvaluateOnNewDocument",
                {"source": hook, "worldName": self.world},
                timeout=self.timeout,
            )
            self.hooked = True
        return True

    def _context(self, ev: dict[str, Any]) -> None:
        ctx = ev.get("context", {})
        aux = ctx.get("auxData", {})
        if aux.get("frameId") != self.main:
            return
        name = ctx.get("name", "")
        if aux.get("isDefault"):
            self.contexts["main"] = ctx.get("uniqueId", "")
        elif name.startswith("__playwright_utility_world_"):
            self.world = self.world or name
            if name == self.world:
                self.contexts["utility"] = ctx.get("uniqueId", "")

    def _attached(self, _ev: dict[str, Any]) -> None:
        self.seq = -1  # a child frame takes a number from the counter: no longer predictable here

    def arm(self) -> None:
        self.requested = self.committed = self.loaded = self.stopped = False

    def _requested(self, ev: dict[str, Any]) -> None:
        if ev.get("frameId") == self.main and ev.get("disposition", "currentTab") == "currentTab":
            self.requested = True
            self.changes += 1

    def _navigated(self, ev: dict[str, Any]) -> None:
        frame = ev.get("frame", {})
        if not frame.get("parentId"):
            self.committed, self.loaded = True, False
            self.docs += 1
            self.changes += 1
            self.contexts.clear()
            if self.seq >= 0 and self.url and self.url != "about:blank":
                self.seq += 1
            self.url = frame.get("url", "")

    def _within(self, ev: dict[str, Any]) -> None:
        if ev.get("frameId") == self.main:
            self.committed = self.loaded = True
            self.changes += 1
            self.url = ev.get("url", self.url)

    def _dcl(self, _ev: dict[str, Any]) -> None:
        if self.committed:
            self.loaded = True

    def _stopped(self, ev: dict[str, Any]) -> None:
        if ev.get("frameId") == self.main:
            self.stopped = True

    def settled(self) -> bool:
        return not self.requested or (self.committed and self.loaded) or self.stopped


# A closed port (discard): requests that must not leave are sent to this proxy and fail at once.
_DEAD_PROXY = "http://127.0.0.1:9"


class BrowserCrashed(RuntimeError):
    """The browser process is gone; the env restarts it."""


class _ContextGone(RuntimeError):
    """A CDP call's execution context (its document) went away before it answered."""


@dataclass
class _State:
    """What the GC finalizer needs to shut the browser down without a reference to the session."""

    pw: Any = None
    browser: Any = None
    context: Any = None
    browser_cdp: Any = None  # a CDP session on the browser target (lists a context's pages for reuse)
    download_dir: str = ""
    pids: set[int] = field(default_factory=set)


# Playwright's sync API allows one driver per thread, so the envs of a thread share it (refcounted) while each
# keeps its own browser. The main thread's driver is kept when its last session closes, for the next session
# of the process (a driver's start and stop cost ~0.5 CPU-s: the test suite made ~36); it is stopped by
# shutdown_driver() and at exit. Another thread's driver stops with its last session (a thread's id is reused
# after it ends, and its driver can only be called from it).
_DRIVERS: dict[int, list[Any]] = {}  # thread id -> [driver, sessions using it, pid that started it]
_DRIVER_LOCK = threading.Lock()
_EXITING = False


def _acquire_driver() -> Any:
    close_collected_sessions()
    with _DRIVER_LOCK:
        me = threading.get_ident()
        entry = _DRIVERS.get(me)
        if entry is not None and entry[2] != os.getpid():  # inherited through a fork: the parent's pipe
            entry = None
        if entry is None:
            from playwright.sync_api import sync_playwright

            entry = _DRIVERS[me] = [sync_playwright().start(), 0, os.getpid()]
        elif entry[1] == 0:
            _unpark(entry[0])
        entry[1] += 1
        return entry[0]


def _park(pw: Any) -> None:
    """Leave this thread's asyncio state as a stopped driver leaves it. Between its sync calls Playwright marks
    its event loop as this thread's running loop (so ``asyncio.run`` refuses to start); while no session uses
    the kept driver, that mark is taken off, and :func:`_unpark` puts it back before the next call."""
    loop = getattr(pw, "_loop", None)
    if loop is not None and asyncio._get_running_loop() is loop:
        asyncio._set_running_loop(None)


def _unpark(pw: Any) -> None:
    loop = getattr(pw, "_loop", None)
    if loop is not None and asyncio._get_running_loop() is None:
        asyncio._set_running_loop(loop)  # the driver's loop is suspended mid-run; its code expects the mark


def _stop_driver(pw: Any) -> None:
    try:
        pw.stop()
    except Exception:  # noqa: BLE001  (the driver may already be gone)
        pass


def _release_driver(pw: Any) -> None:
    with _DRIVER_LOCK:
        for ident, entry in list(_DRIVERS.items()):
            if entry[0] is not pw:
                continue
            entry[1] -= 1
            keep = ident == threading.main_thread().ident and not _EXITING
            if entry[1] <= 0 and not keep:
                del _DRIVERS[ident]
                _stop_driver(pw)
            elif entry[1] <= 0:
                _park(pw)
            return
    # Not found: a driver inherited through a fork (the parent's: leave it) or already shut down.


def shutdown_driver() -> bool:
    """Stop this thread's Playwright driver if no browser session uses it (one is kept between sessions:
    see ``_DRIVERS``). Runs by itself at exit; call it to end the driver's process sooner (a test suite's
    leak check does). Returns whether one was stopped."""
    close_collected_sessions()
    with _DRIVER_LOCK:
        me = threading.get_ident()
        entry = _DRIVERS.get(me)
        if entry is None or entry[1] > 0 or entry[2] != os.getpid():
            return False
        del _DRIVERS[me]
    _unpark(entry[0])
    _stop_driver(entry[0])
    return True


def _forget_drivers() -> None:
    _DRIVERS.clear()  # a forked child's copies talk over the parent's pipes: never use or stop them


os.register_at_fork(after_in_child=_forget_drivers)


def _at_exit() -> None:
    global _EXITING
    _EXITING = True  # sessions the exit closes after this stop their driver with the last one
    close_collected_sessions()
    if threading.current_thread() is threading.main_thread():
        shutdown_driver()


# Sessions collected where Playwright's sync API cannot be called (see _sync_calls_allowed): their browser
# processes are killed at once, the rest of their shutdown (Playwright's close calls, the driver's release)
# waits for the next safe moment: a new session, a close(), a collection outside the loop, or the exit.
_DEFERRED: list[_State] = []


def _sync_calls_allowed(state: _State) -> bool:
    """False inside Playwright's own event loop (its dispatcher greenlet) or in another thread.

    The garbage collector runs finalizers wherever an allocation happens to trigger it, including inside
    the driver's asyncio loop while a sync call waits. A sync call from there switches to the dispatcher
    greenlet it is already in and waits for ever (seen as 900 s hangs in the test suite)."""
    obj = state.browser or state.context or state.pw
    fiber = getattr(obj, "_dispatcher_fiber", None)
    if fiber is None:
        return True
    import greenlet

    def root(g: Any) -> Any:  # a thread's main greenlet: greenlets never switch across threads
        while g.parent is not None:
            g = g.parent
        return g

    current = greenlet.getcurrent()
    return current is not fiber and root(current) is root(fiber)


def _kill_browser(state: _State) -> None:
    for pid in list(state.pids):  # a chromium that ignored the close would otherwise linger
        if Path(f"/proc/{pid}").exists() and "chrom" in cmdline(pid):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
    state.pids.clear()


def close_collected_sessions() -> None:
    """Finish the shutdown of sessions the garbage collector found inside Playwright's loop (their
    browsers are already killed; this closes their Playwright objects and releases the driver). Runs by
    itself at the next safe moment and at exit; call it where no session will follow (a test suite's end)."""
    if _DEFERRED and _sync_calls_allowed(_DEFERRED[-1]):
        while _DEFERRED:
            _shutdown(_DEFERRED.pop())


atexit.register(_at_exit)


def _shutdown(state: _State) -> None:
    if not _sync_calls_allowed(state):
        _kill_browser(state)
        _DEFERRED.append(state)
        return
    close_collected_sessions()
    for obj in (state.context, state.browser):
        if obj is None:
            continue
        try:
            obj.close()
        except Exception:  # noqa: BLE001  (the browser may already be gone; keep tearing down)
            pass
    state.context = state.browser = state.browser_cdp = None
    if state.pw is not None:
        pw, state.pw = state.pw, None
        _release_driver(pw)
    _kill_browser(state)
    if state.download_dir:
        shutil.rmtree(state.download_dir, ignore_errors=True)


class BrowserSession:
    """A Playwright browser reused across episodes, with a clean context per episode (the last one cleared,
    or a fresh one: :meth:`new_context`).

    Args:
        executable: chromium binary (default: :func:`chromium_executable`).
        viewport: (width, height) of the page.
        action_timeout_ms: how long an element action may wait for its element.
        nav_timeout_ms: how long a navigation may take before it is reported as an error.
        network_guard: how requests outside the task's sites are blocked. ``"proxy"`` (default): the
            context's proxy is a closed port and only the task's origins bypass it, so Chromium refuses
            everything else itself at no cost per request. ``"route"``: Playwright route interception,
            which pauses every request for the driver (measured ≈ +50 ms a navigation on a loaded
            2-core machine) but also works where a proxy cannot be set.
        noop_wait_ms: how long ``noop()`` without an argument waits (BrowserGym: 1000).
        fast_click: make a left ``click(bid)`` without modifiers by point after one in-page check (visible,
            enabled, not animating, hit test: a covered element is an error, never a click on what covers it)
            and wait only for the navigation it asked for (CDP ``Page`` events on a session of our own: none
            asked for, no wait), instead of Playwright's ``locator.click``; anything the check refuses still goes
            to the locator, which waits for the element. Coordinate clicks (``mouse_click``) wait the same way.
            On by default (since 2026-12-04, issue 27); ``False`` gives Playwright's own click and waits. Same
            observations and outcomes as Playwright's click on every bundled template
            (tests/envs/liveweb/test_fast_snapshot.py); settable as an attribute.
        fast_snapshot: compute the observation's ``aria_snapshot(mode="ai")`` in one CDP call with a copy of
            Playwright's injected script made at document start in Playwright's utility world, shared with
            Playwright's own instance (same refs, same ``aria-ref=`` locators; see ``_ARIA_HOOK``), instead of
            Playwright's call, which injects its script into every new document first; the title and the new-tab
            check come in the same call. With ``fast_click`` the click's point is found by the same instance, and
            the call that tells whether the click asked for a navigation is the observation itself (none asked
            for), or one call waits in the new document for DOMContentLoaded and takes it there
            (:meth:`_snapshot_caused`). Pages with frames, tabs whose frame numbering is unknown and anything
            unexpected take Playwright's call. On by default (since 2026-12-04); ``False`` gives Playwright's own
            snapshot. Byte-identical observations to Playwright's on every bundled template
            (tests/envs/liveweb/test_fast_snapshot.py); settable as an attribute (the hook is added to the tabs
            of episodes that start with it on).
        reuse_context: at a new episode, clear the last episode's context and keep it (and its first tab)
            instead of starting a fresh one, when the task's sites and geolocation are the same and no
            ``storage_state`` is given (see :meth:`new_context` for what is cleared, and when it falls back to
            a fresh context); settable as an attribute.

    Attributes:
        upload_dir: the folder ``upload_file``/``mouse_upload_file`` take files from (emptied at each
            new context).
    """

    def __init__(
        self,
        executable: str | None = None,
        viewport: tuple[int, int] = (1280, 720),
        action_timeout_ms: int = 3000,
        nav_timeout_ms: int = 8000,
        network_guard: str = "proxy",
        noop_wait_ms: float = 0.0,
        fast_click: bool = True,
        reuse_context: bool = True,
        fast_snapshot: bool = True,
    ) -> None:
        if network_guard not in ("proxy", "route"):
            raise ValueError("network_guard must be 'proxy' or 'route'")
        self.network_guard = network_guard
        self.executable = executable if executable is not None else chromium_executable()
        self.viewport = viewport
        self.action_timeout_ms = action_timeout_ms
        self.nav_timeout_ms = nav_timeout_ms
        self.allowed: set[str] = set()
        self.pages: list[Any] = []
        self.active = 0
        self.events: list[str] = []
        self.known_refs: set[str] = set()
        self._scratch = False
        self._cdp: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._nav: weakref.WeakKeyDictionary[Any, _NavWatch] = weakref.WeakKeyDictionary()
        # The fast click's observation of the page it settled on, for the observation that follows it:
        # (page, the tab's navigation count then, (snapshot, title, new tab asked for)); see _snapshot_caused.
        self._prefetch: tuple[Any, int, tuple[str, str, bool]] | None = None
        self.snapshot_via = ""  # where the last observation's snapshot came from: fast, click, playwright
        self.fast_click = fast_click
        self.reuse_context = reuse_context
        self.fast_snapshot = fast_snapshot
        self._context_key: tuple[Any, ...] | None = None  # what the current context was made for
        self._retired: weakref.WeakSet[Any] = weakref.WeakSet()  # tabs of earlier episodes (Playwright impls)
        self._next_tab: Any = None  # the new episode's tab, opened by the last clearing
        self.noop_wait_ms = float(noop_wait_ms)
        self._state = _State(download_dir=tempfile.mkdtemp(prefix="lynn-downloads-"))
        self.upload_dir = tempfile.mkdtemp(prefix="lynn-uploads-", dir=self._state.download_dir)
        self._choosing_files = False  # inside mouse_upload_file: its chooser is expected, not an event
        self._finalizer = weakref.finalize(self, _shutdown, self._state)

    # --- lifecycle -------------------------------------------------------------------------------
    @property
    def page(self) -> Any:
        return self.pages[self.active] if self.pages else None

    def alive(self) -> bool:
        b = self._state.browser
        return b is not None and b.is_connected()

    def _launch(self) -> None:
        st = self._state
        if st.pw is None:
            st.pw = _acquire_driver()
        if st.browser is not None:
            try:
                st.browser.close()
            except Exception:  # noqa: BLE001  (a crashed browser cannot be closed politely)
                pass
        before = set(descendant_pids())
        kwargs: dict[str, Any] = {"args": CHROMIUM_FLAGS, "headless": True}
        if self.executable:
            kwargs["executable_path"] = self.executable
        st.browser = st.pw.chromium.launch(**kwargs)
        st.pids |= {p for p in set(descendant_pids()) - before if "chrom" in cmdline(p)}
        st.context = st.browser_cdp = None
        self._context_key = None

    def browser_pids(self) -> list[int]:
        """PIDs of the chromium processes this session started that are still alive."""
        return sorted(p for p in self._state.pids if Path(f"/proc/{p}").exists() and "chrom" in cmdline(p))

    def new_context(
        self,
        allowed_origins: set[str],
        storage_state: str | None = None,
        geolocation: dict[str, float] | None = None,
    ) -> None:
        """A clean context for a new episode: no cookies, storage, tabs or history of the previous one;
        ``geolocation`` (WebArena's task field) is granted to the task's origins.

        With ``reuse_context`` (default), a context made for the same origins and geolocation (and no
        ``storage_state``) is kept and cleared instead of replaced, which saves making a new context
        (BENCHMARKS.md, LiveWeb, issue 27). The episode gets a new tab (so a tab's own state starts afresh:
        history, session storage, ``window.name``, held keys, and the count of its documents that prefixes
        element ids) and every other page is closed; then cookies; local storage, IndexedDB, Cache Storage,
        service workers and the other per-origin stores of every origin the context could reach (the
        allow-list: the network guard blocks all others); the HTTP cache; and permissions (geolocation
        granted again) are cleared. Chromium's own list of the context's pages is then checked: a tab the
        last episode was still opening, or any failure of the clearing, gives a fresh context instead (said
        in the events); a tab opened later by a closed tab is closed at once. Tests:
        tests/envs/liveweb/test_context_reuse.py.
        """
        if not self.alive():
            self._launch()
        self._new_context(allowed_origins, storage_state, geolocation)

    def _open_tab(self, ctx: Any) -> Any:
        """``ctx.new_page()``, failing after ``nav_timeout_ms`` instead of waiting for ever.

        Playwright's ``new_page`` has no timeout of its own, and it never returns when the renderer the tab is
        given dies as the tab opens (seen when every renderer, the spare one included, is killed just before a
        reset: tests/envs/liveweb/test_context_reuse.py); killing the browser does not end the wait either.
        So the call's coroutine runs under ``asyncio.wait_for`` through the sync API's own ``_sync`` (which
        takes any awaitable), and a timeout raises here like any other failure: the clearing falls back to a
        fresh context, a fresh context's failure to the env's browser restart."""
        import asyncio

        from playwright._impl._sync_base import mapping

        seconds = self.nav_timeout_ms / 1000
        try:
            return mapping.from_impl(ctx._sync(asyncio.wait_for(ctx._impl_obj.new_page(), seconds)))
        except TimeoutError:
            raise TimeoutError(f"the browser did not open a tab within {seconds:g} s") from None

    def _new_context(
        self, allowed_origins: set[str], storage_state: str | None, geolocation: dict[str, float] | None
    ) -> None:
        st = self._state
        origins = {origin(u) for u in allowed_origins}
        key = (frozenset(origins), tuple(sorted((geolocation or {}).items())), self.network_guard)
        note = ""
        if (
            self.reuse_context
            and storage_state is None
            and st.context is not None
            and key == self._context_key
        ):
            try:
                self._clear_context(geolocation)
            except Exception as exc:  # noqa: BLE001  (anything left unclear: a fresh context is always sound)
                note = f"the last episode's browser context could not be cleared ({str(exc).splitlines()[0][:160]}): a fresh one instead"
            else:
                self._start_episode(self._next_tab)
                return
        if st.context is not None:
            try:
                st.context.close()
            except Exception:  # noqa: BLE001
                pass
        self._context_key = None
        self.allowed = origins
        proxy = None
        if self.network_guard == "proxy":
            # "<-loopback>" removes Chromium's implicit proxy bypass for loopback, so that other local
            # services (and the env's other sites) are blocked too; the task's own origins bypass.
            hosts = ",".join(urlsplit(o).netloc for o in sorted(self.allowed))
            proxy = {"server": _DEAD_PROXY, "bypass": f"<-loopback>,{hosts}" if hosts else "<-loopback>"}
        st.context = st.browser.new_context(
            viewport={"width": self.viewport[0], "height": self.viewport[1]},
            accept_downloads=True,
            storage_state=storage_state,
            proxy=proxy,
            **({"geolocation": dict(geolocation), "permissions": ["geolocation"]} if geolocation else {}),
        )
        st.context.set_default_timeout(self.action_timeout_ms)
        st.context.set_default_navigation_timeout(self.nav_timeout_ms)
        if self.network_guard == "route":
            # A regex route is matched inside the Playwright driver: only the requests to block reach Python.
            allowed_re = "|".join(re.escape(o) for o in sorted(self.allowed)) or "(?!)"
            st.context.route(
                re.compile(rf"^(?!(?:{allowed_re})(?:[/?#]|$)|data:|about:|blob:)"), _weak(self._route)
            )
        else:
            st.context.on("requestfailed", _weak(self._on_request_failed))
        st.context.on("page", _weak(self._on_page))
        st.context.add_init_script(_POPUP_WATCH)
        self.pages = []
        self._open_tab(st.context)  # _on_page registers it
        self._start_episode(self.pages[0])
        if storage_state is None:
            self._context_key = key
        if note:
            self.events.append(note)

    def forget_observation(self) -> None:
        """Drop the observation the last fast click read as it settled (:meth:`_snapshot_caused`), so that the
        next :meth:`observe` reads the page afresh: call it after running anything on the page between an action
        and its observation (the env does before scoring: WebArena's ``prep_actions`` run scripts on the page)."""
        self._prefetch = None

    def _start_episode(self, page: Any) -> None:
        """The session's per-episode state, with ``page`` as the only tab."""
        self.pages, self.active, self.events, self.known_refs = [page], 0, [], set()
        self._prefetch = None
        if self.fast_snapshot:
            self._arm(page)  # while the tab is still blank: its frame numbering is known from the start
        shutil.rmtree(self.upload_dir, ignore_errors=True)  # a per-episode scratch dir
        os.makedirs(self.upload_dir, exist_ok=True)

    def _clear_context(self, geolocation: dict[str, float] | None) -> None:
        """Clear the current context for the next episode (see :meth:`new_context`); raises if anything
        could not be cleared or checked, or not within ``nav_timeout_ms``."""
        import asyncio

        from playwright._impl._sync_base import mapping

        ctx, st = self._state.context, self._state
        # The episode's tab is a new one: a tab's own state (history, session storage, window.name, keys and
        # buttons held, Playwright's count of the tab's documents, which prefixes the element ids) starts
        # afresh. It opens first so that the context always has a page to speak to the browser through.
        self._scratch = True  # not a tab of the (old) episode: no "new tab" event, no handlers yet
        try:
            tab = self._open_tab(ctx)
        finally:
            self._scratch = False
        old = [page for page in ctx.pages if page is not tab]  # the last episode's tabs, an evaluator's page
        for page in old:
            self._retire(page)
        if st.browser_cdp is None:
            st.browser_cdp = st.browser.new_browser_cdp_session()
        origins, timeout = sorted(self.allowed), self.nav_timeout_ms
        hook = _aria_hook() if self.fast_snapshot else None
        browser_cdp = st.browser_cdp._impl_obj
        made: dict[str, Any] = {}

        # The calls go out together through the driver's loop (asyncio.gather) instead of one round trip each:
        # the old tabs' closing and the clearing after it, beside the new tab's watch and snapshot hook. The hook
        # (Playwright's 330 KB script) takes the longest to send; it overlaps the closing and the clearing.
        async def close_and_clear(cdp: Any) -> list[dict[str, Any]]:
            # Without beforeunload; the old tabs' unload handlers run now, before the clearing.
            await asyncio.gather(*(page._impl_obj.close(False, None) for page in old))
            await asyncio.gather(
                *(
                    cdp.send("Storage.clearDataForOrigin", {"origin": o, "storageTypes": "all"}, None)
                    for o in origins
                ),
                cdp.send("Network.clearBrowserCache", None, None),
                ctx._impl_obj.clear_cookies(None, None, None),
                ctx._impl_obj.clear_permissions(),
            )
            if geolocation:
                await ctx._impl_obj.grant_permissions(["geolocation"], None)
            # Chromium's own list of the context's pages: a tab the last episode opened just before it ended
            # may not have reached Playwright yet (its "page" event would make it a tab of the new episode).
            return await asyncio.gather(  # type: ignore[no-any-return]
                cdp.send("Target.getTargetInfo", None, None),
                browser_cdp.send("Target.getTargets", None, None),
            )

        async def watch_tab(cdp_impl: Any) -> None:
            # The hook goes out with the first call: Playwright names the tab's utility world after the page's
            # guid, and the name is checked once Runtime.enable has reported the world.
            world = f"__playwright_utility_world_{tab._impl_obj._guid}"
            calls = [cdp_impl.send("Page.getFrameTree", None, timeout)]
            if hook is not None:
                params = {"source": hook, "worldName": world}
                calls.append(cdp_impl.send("Page.addScriptToEvaluateOnNewDocument", params, timeout))
            got = await asyncio.gather(*calls)
            watch = made["watch"] = _NavWatch(mapping.from_impl(cdp_impl), timeout, tree=got[0]["frameTree"])
            if hook is None:
                await cdp_impl.send("Page.enable", None, timeout)
                return
            watch.armed = True
            watch.track()
            await asyncio.gather(
                cdp_impl.send("Page.enable", None, timeout), cdp_impl.send("Runtime.enable", None, timeout)
            )
            if watch.world == world:
                watch.hooked = True
                return
            await cdp_impl.send(
                "Page.removeScriptToEvaluateOnNewDocument", {"identifier": got[1]["identifier"]}, timeout
            )
            if watch.world:  # else the first observation adds it (_arm)
                params = {"source": hook, "worldName": watch.world}
                await cdp_impl.send("Page.addScriptToEvaluateOnNewDocument", params, timeout)
                watch.hooked = True

        async def prepare() -> list[dict[str, Any]]:
            cdp_impl = await ctx._impl_obj.new_cdp_session(tab._impl_obj)
            got = await asyncio.gather(close_and_clear(cdp_impl), watch_tab(cdp_impl))
            return got[0]  # type: ignore[no-any-return]

        info, targets = ctx._sync(asyncio.wait_for(prepare(), timeout / 1000))
        self._nav[tab] = made["watch"]
        ctx.set_default_timeout(self.action_timeout_ms)
        ctx.set_default_navigation_timeout(self.nav_timeout_ms)
        info = info["targetInfo"]
        pages = [
            t
            for t in targets["targetInfos"]
            if t.get("browserContextId") == info.get("browserContextId") and t.get("type") == "page"
        ]
        if [t["targetId"] for t in pages] != [info["targetId"]]:
            raise RuntimeError(f"{len(pages)} pages in the context after closing all but the new one")
        if ctx.pages != [tab]:
            raise RuntimeError(
                f"{len(ctx.pages)} pages known to Playwright after closing all but the new one"
            )
        self._add_tab_handlers(tab)
        self._next_tab = tab

    def _retire(self, page: Any) -> None:
        impl = getattr(page, "_impl_obj", None)
        if impl is not None:
            self._retired.add(impl)

    @contextlib.contextmanager
    def scratch_page(self) -> Iterator[Any]:
        """A page of the episode's context (same cookies) that is not one of the agent's tabs: opening
        and closing it changes neither the active tab nor the events the agent sees."""
        self._scratch = True
        try:
            page = self._open_tab(self._state.context)
        finally:
            self._scratch = False
        try:
            yield page
        finally:
            try:
                page.close()
            except Exception:  # noqa: BLE001  (already gone with its browser)
                pass

    def add_cookies(self, cookies: list[dict[str, Any]]) -> None:
        """Add cookies (e.g. a login session) to the current context."""
        self._state.context.add_cookies(cookies)

    def close(self) -> None:
        self.pages = []
        self._finalizer()

    # --- events --------------------------------------------------------------------------------
    def _route(self, route: Any, *_: Any) -> None:
        url = route.request.url
        if url.startswith(("data:", "about:", "blob:")) or origin(url) in self.allowed:
            route.continue_()
        else:
            self.events.append(f"blocked request to {origin(url)} (not one of the task's sites)")
            route.abort("blockedbyclient")

    def _on_request_failed(self, request: Any, *_: Any) -> None:
        if "ERR_PROXY_CONNECTION_FAILED" in (request.failure or ""):
            self.events.append(f"blocked request to {origin(request.url)} (not one of the task's sites)")

    def _on_page(self, page: Any, *_: Any) -> None:
        page.on("dialog", _weak(self._on_dialog))
        if self._scratch:  # an evaluator's own page: not a tab of the agent's
            return
        opener = getattr(getattr(page, "_impl_obj", None), "_opener", None)  # kept even once it is closed
        if opener is not None and opener in self._retired:  # opened by a tab of an earlier episode
            self._retire(page)
            try:
                page.close()
            except Exception:  # noqa: BLE001
                pass
            return
        self._add_tab_handlers(page)
        self.pages.append(page)
        if len(self.pages) > 1:
            self.events.append(f"new tab opened (tab {len(self.pages) - 1}); it is now active")
        self.active = len(self.pages) - 1

    def _add_tab_handlers(self, page: Any) -> None:
        page.on("download", _weak(self._on_download))
        page.on("close", _weak(self._on_close))
        # Listening from the page's start turns on Chromium's file-chooser interception at once; enabling
        # it inside mouse_upload_file raced the click (Playwright sends that switch without waiting for a
        # reply), and then no chooser event came about 1 run in 2.
        page.on("filechooser", _weak(self._on_file_chooser))

    def _on_close(self, page: Any, *_: Any) -> None:
        if page in self.pages:
            idx = self.pages.index(page)
            self.pages.remove(page)
            if self.active >= idx:
                self.active = max(0, self.active - 1)

    def _on_file_chooser(self, chooser: Any, *_: Any) -> None:
        if not self._choosing_files:
            self.events.append(
                "a file chooser opened; choose files with upload_file(bid, file) or mouse_upload_file(x, y, file)"
            )

    def _on_dialog(self, dialog: Any, *_: Any) -> None:
        # Dialogs block the page until answered: accept so that the episode can go on, and tell the agent.
        self.events.append(f"{dialog.type} dialog: {dialog.message!r} (accepted)")
        try:
            dialog.accept()
        except Exception:  # noqa: BLE001
            pass

    def _on_download(self, download: Any, *_: Any) -> None:
        if getattr(download.page, "_impl_obj", None) in self._retired:  # a tab of an earlier episode
            try:
                download.cancel()
            except Exception:  # noqa: BLE001
                pass
            return
        name = os.path.basename(download.suggested_filename or "download")
        target = Path(self._state.download_dir) / name
        try:
            download.save_as(str(target))
            self.events.append(f"downloaded {name} ({target.stat().st_size} bytes)")
        except Exception as exc:  # noqa: BLE001
            self.events.append(f"download of {name} failed: {exc}")

    def pop_events(self) -> list[str]:
        events, self.events = self.events, []
        return events

    # --- actions -------------------------------------------------------------------------------
    def new_tab(self) -> None:
        """Open a blank tab; it becomes the active one."""
        self._open_tab(self._state.context)

    def goto(self, url: str) -> None:
        page = self.page
        if page is None:
            self._open_tab(self._state.context)
            page = self.page
        page.goto(url, wait_until="domcontentloaded")

    def _locator(self, bid: str) -> Any:
        if self.known_refs and bid not in self.known_refs:
            raise ValueError(f"no element [{bid}] on the current page; use an id from the axtree")
        return self.page.locator(f"aria-ref={bid}")

    def execute(self, action: Action) -> str | None:
        """Run ``action``; returns ``"stop"`` for the answer actions, else ``None``. Errors raise."""
        self._prefetch = None
        try:
            return self._execute(action)
        except Exception as exc:
            if "Timeout" in str(exc):
                self._stop_loading()
            raise

    def _stop_loading(self) -> None:
        """Abandon a navigation that timed out (CDP Page.stopLoading), so the page answers scripts again
        instead of blocking every later call until the server finally replies."""
        page = self.page
        if page is None:
            return
        try:
            cdp = self._state.context.new_cdp_session(page)
            cdp.send("Page.stopLoading")
            cdp.detach()
        except Exception:  # noqa: BLE001  (not chromium, or the page is gone: nothing to stop)
            pass

    def _files(self, file: str | list[str]) -> list[str]:
        """Paths of files to upload, each inside the episode's upload dir (relative names are taken from
        there; anything resolving outside it is refused)."""
        root = Path(self.upload_dir).resolve()
        out = []
        for name in [file] if isinstance(file, str) else file:
            path = (root / name).resolve()
            if not path.is_relative_to(root) or not path.is_file():
                raise ValueError(
                    f"no file {name!r} in the upload dir {root} (only files there can be uploaded)"
                )
            out.append(str(path))
        return out

    def _xy(self, x: float, y: float) -> tuple[float, float]:
        w, h = self.viewport
        return min(max(float(x), 0.0), w - 1.0), min(max(float(y), 0.0), h - 1.0)

    def _execute(self, action: Action) -> str | None:
        a, name = action.args, action.name
        page = self.page
        if name in ("send_msg_to_user", "report_infeasible"):
            return "stop"
        if name == "noop":
            wait = self.noop_wait_ms if a["wait_ms"] is None else a["wait_ms"]
            wait = min(max(float(wait), 0.0), 10_000.0)
            if wait:
                page.wait_for_timeout(wait)
            return None
        if name == "goto":
            if not a["url"].strip():
                raise ValueError("goto needs a URL, got ''")
            url = urljoin(page.url if page else "", a["url"].strip())
            if urlsplit(url).scheme not in ("http", "https") or origin(url) not in self.allowed:
                raise ValueError(
                    f"goto({a['url']!r}) is outside the task's sites: {', '.join(sorted(self.allowed))}"
                )
            self.goto(url)
        elif name == "go_back":
            page.go_back(wait_until="domcontentloaded")
        elif name == "go_forward":
            page.go_forward(wait_until="domcontentloaded")
        elif name == "new_tab":
            self._open_tab(self._state.context)
        elif name == "tab_close":
            last = len(self.pages) <= 1
            page.close()
            if last:  # BrowserGym: closing the last tab leaves a blank one
                self._open_tab(self._state.context)
        elif name == "tab_focus":
            if not 0 <= a["index"] < len(self.pages):
                raise ValueError(f"no tab {a['index']}; open tabs: 0..{len(self.pages) - 1}")
            self.active = a["index"]
            self.page.bring_to_front()
        elif name == "scroll":
            page.mouse.wheel(float(a["delta_x"]), float(a["delta_y"]))
        elif name == "scroll_at":
            page.mouse.move(*self._xy(a["x"], a["y"]))
            page.mouse.wheel(float(a["dx"]), float(a["dy"]))
        elif name == "mouse_move":
            page.mouse.move(*self._xy(a["x"], a["y"]))
        elif name in ("mouse_down", "mouse_up"):
            page.mouse.move(*self._xy(a["x"], a["y"]))
            getattr(page.mouse, name.split("_")[1])(button=a["button"])
        elif name == "mouse_click":
            self._await_navigation(lambda: page.mouse.click(*self._xy(a["x"], a["y"]), button=a["button"]))
        elif name == "mouse_dblclick":
            self._await_navigation(lambda: page.mouse.dblclick(*self._xy(a["x"], a["y"]), button=a["button"]))
        elif name == "mouse_drag_and_drop":
            page.mouse.move(*self._xy(a["from_x"], a["from_y"]))
            page.mouse.down()
            page.mouse.move(*self._xy(a["to_x"], a["to_y"]))
            page.mouse.up()
        elif name == "mouse_upload_file":
            files = self._files(a["file"])
            self._choosing_files = True
            try:
                with page.expect_file_chooser(timeout=self.action_timeout_ms) as chooser:
                    page.mouse.click(*self._xy(a["x"], a["y"]))
            finally:
                self._choosing_files = False
            chooser.value.set_files(files)
        elif name.startswith("keyboard_"):
            kind = name.removeprefix("keyboard_")
            value = a.get("key", a.get("text"))
            getattr(page.keyboard, kind)(value)
        elif name == "drag_and_drop":
            self._locator(a["from_bid"]).drag_to(self._locator(a["to_bid"]))
        else:
            loc = self._locator(a["bid"])
            if name == "click":
                why = "" if a["button"] != "left" or a["modifiers"] else self._click_fast(loc, a["bid"])
                if why is not None:
                    try:
                        loc.click(button=a["button"], modifiers=a["modifiers"])
                    except Exception as exc:
                        if why.startswith("covered by"):  # say what stayed on top, not just "Timeout"
                            raise RuntimeError(
                                f"[{a['bid']}] is {why} (still there after {self.action_timeout_ms} ms); "
                                "nothing was clicked"
                            ) from exc
                        raise
                else:
                    return None  # the fast click waited for what it caused (DOMContentLoaded included)
            elif name == "dblclick":
                loc.dblclick(button=a["button"], modifiers=a["modifiers"])
            elif name == "hover":
                loc.hover()
            elif name == "fill":
                value = a["value"]
                if a["enable_autocomplete_menu"] and value:
                    loc.fill(value[:-1])  # type the last character so that an autocomplete menu opens
                    loc.press_sequentially(value[-1])
                else:
                    loc.fill(value)
            elif name == "clear":
                loc.clear()
            elif name == "select_option":
                opts = a["options"]
                if isinstance(opts, list) and len(opts) > 1 and not loc.evaluate("e => !!e.multiple"):
                    raise ValueError(f"select_option: this select takes one option, got {len(opts)}")
                try:
                    loc.select_option(label=opts)
                except Exception:  # noqa: BLE001  (labels did not match: try option values)
                    loc.select_option(value=opts)
            elif name == "upload_file":
                loc.set_input_files(self._files(a["file"]))
            elif name == "press":
                loc.press(a["key_comb"])
            elif name == "focus":
                loc.focus()
            elif name == "check":
                loc.check()
            elif name == "uncheck":
                loc.uncheck()
        self._settle()
        return None

    def _watch(self, page: Any) -> _NavWatch | None:
        watch = self._nav.get(page)
        if watch is None:
            try:
                watch = self._nav[page] = _NavWatch(
                    self._state.context.new_cdp_session(page), self.nav_timeout_ms
                )
            except Exception:  # noqa: BLE001  (not chromium: every click takes Playwright's path)
                return None
        return watch

    def _arm(self, page: Any) -> _NavWatch | None:
        """The tab's watch with the fast snapshot's hook added (tried at once, then again at each observation
        until Playwright's utility world is known), or ``None``."""
        watch = self._watch(page)
        if watch is not None and not watch.hooked:
            watch.armed = True
            hook = _aria_hook()
            try:
                if hook is not None:
                    watch.arm_aria(hook)
            except Exception:  # noqa: BLE001  (a closing tab: Playwright's snapshot)
                pass
        return watch

    def _click_point(self, watch: _NavWatch, bid: str) -> Any:
        """``_CLICK_POINT`` on the element ``bid`` of the last snapshot, found by the fast snapshot's instance in
        the utility world (one round trip, no injection); ``None`` where that instance does not have it."""
        if not watch.hooked or "utility" not in watch.contexts:
            return None
        expr = (
            "((ref) => { const st = globalThis.__lynnAria;"
            " const q = st && st.ours && !st.bad && st.ours._lastAriaSnapshotForQuery;"
            " const info = q && q.info.get(ref);"
            " if (!info || !info.element.isConnected) return null;"
            f" return ({_CLICK_POINT})(info.element); }})({json.dumps(bid)})"
        )
        try:
            r = watch.cdp.send(
                "Runtime.evaluate",
                {"expression": expr, "uniqueContextId": watch.contexts["utility"], "returnByValue": True},
                timeout=min(self.action_timeout_ms, 500),
            )
        except Exception:  # noqa: BLE001
            return None
        return None if "exceptionDetails" in r else r.get("result", {}).get("value")

    def _click_fast(self, loc: Any, bid: str = "") -> str | None:
        """A left click without modifiers by point, as Playwright's would land, with a hit test first and a
        wait only for the navigation the click asked for. ``None``: clicked. Otherwise nothing was done and
        the reason is returned (an element that is covered, hidden, disabled or moving, or not there yet):
        the click goes to Playwright's locator, which waits for the element to become clickable.

        Playwright's ``locator.click`` spends several driver round trips on actionability checks (visible,
        stable over two animation frames, enabled, receives events) and then waits on its own navigation
        tracking; here one script answers all of them for an element that is ready now.
        """
        if not self.fast_click:
            return "off"
        page = self.page
        watch = self._watch(page)
        if watch is None:
            return "no CDP session"
        point = self._click_point(watch, bid) if self.fast_snapshot and bid else None
        if point is None:
            try:  # an element that is not there at once gets Playwright's wait (and its error)
                point = loc.evaluate(_CLICK_POINT, timeout=min(self.action_timeout_ms, 500))
            except Exception:  # noqa: BLE001
                return "not found at once"
        if not isinstance(point, list):
            return str(point)
        watch.arm()
        if len(point) > 3 and point[3]:
            try:  # the chooser event reaches _on_file_chooser inside this wait
                with page.expect_file_chooser(timeout=min(self.action_timeout_ms, 2000)):
                    page.mouse.click(float(point[0]), float(point[1]))
            except Exception as exc:  # noqa: BLE001  (no chooser came: a click that opened none)
                if "imeout" not in str(exc):
                    raise
        else:
            page.mouse.click(float(point[0]), float(point[1]))
        self._settle_caused(page, watch, navigates=len(point) > 2 and bool(point[2]))
        return None

    def _settle_caused(self, page: Any, watch: _NavWatch, navigates: bool = False) -> None:
        """After a mouse action: wait for what it caused; with the fast snapshot, keep the settled page's
        observation for :meth:`observe` (it costs the call that tells whether a navigation was asked for)."""
        if self.fast_snapshot and watch.hooked and "utility" in watch.contexts:
            got = self._snapshot_caused(watch, navigates)
            if got is not None:
                self._prefetch = (page, watch.changes, got)
        else:
            self._wait_caused(watch)

    def _await_navigation(self, act: Any, window_ms: float = 300.0) -> None:
        """Run a raw mouse action and give a navigation it starts ``window_ms`` to begin. Locator clicks
        wait for the navigations they start; ``page.mouse`` does not, so a form submitted by a
        coordinate click would otherwise be observed before it leaves the page (BrowserGym waits 500 ms
        before every observation by default; this waits only for coordinate clicks that navigate nowhere)."""
        page = self.page
        watch = self._watch(page) if self.fast_click else None
        if watch is not None:  # with fast_click: wait for the navigation the click asked for, or for nothing
            watch.arm()
            act()
            self._settle_caused(page, watch)
            return
        try:
            with self.page.expect_navigation(wait_until="commit", timeout=window_ms):
                act()
        except Exception as exc:  # noqa: BLE001  (no navigation in the window: a click that stays on the page)
            if "Timeout" not in str(exc) and "timeout" not in str(exc):
                raise

    def _wait_caused(self, watch: _NavWatch, flush: bool = True) -> None:
        """After a mouse action: wait until the navigation it asked for (if any) reached DOMContentLoaded."""
        page = self.page
        try:  # the renderer sends frameRequestedNavigation (if any) before it answers this
            if flush:
                watch.cdp.send("Runtime.evaluate", {"expression": "0"}, timeout=self.nav_timeout_ms)
        except Exception:  # noqa: BLE001  (the old document is already gone: the navigation is under way)
            watch.requested = True
        deadline = time.monotonic() + self.nav_timeout_ms / 1000
        while not watch.settled():
            if time.monotonic() > deadline:
                raise TimeoutError(f"Timeout {self.nav_timeout_ms} ms exceeded waiting for the navigation")
            page.wait_for_timeout(1)  # lets the driver deliver the page's events

    def _snapshot_caused(self, watch: _NavWatch, navigates: bool) -> tuple[str, str, bool] | None:
        """:meth:`_wait_caused` and the snapshot of the page it settles on, in as few round trips as can be.

        The snapshot is asked for at once in the document the action happened in (a plain flush instead where the
        click will most likely navigate: ``navigates``, the click point's hint): the renderer sends
        ``frameRequestedNavigation`` (if the action asked for one) before it answers, so with no navigation
        asked for the answer is the observation. Otherwise it is dropped, and as soon as the new document's
        utility world exists one call waits in the page for DOMContentLoaded and takes the snapshot
        (:data:`_ARIA_SETTLED`); a navigation inside the document, or one that stopped without a new document
        (a download, a 204), is snapshotted as it settles. Returns (snapshot, title, whether a new tab was asked
        for), or ``None``: the page is settled but the observation is left to :meth:`observe`.
        """
        uid, docs = watch.contexts["utility"], watch.docs
        snap: tuple[str, str, bool] | None = None
        try:
            if navigates:
                watch.cdp.send(
                    "Runtime.evaluate",
                    {"expression": "0", "uniqueContextId": uid},
                    timeout=self.nav_timeout_ms,
                )
            else:
                snap = self._aria_call(watch, uid, _ARIA_FAST)
        except TimeoutError:
            raise
        except Exception:  # noqa: BLE001  (the old document is already gone: the navigation is under way)
            watch.requested = True
        deadline = time.monotonic() + self.nav_timeout_ms / 1000
        old_doc: str | None = uid  # the document the action happened in, while it is known to be there
        while True:
            if not watch.requested:
                return self._aria_try(watch, uid, _ARIA_FAST) if navigates else snap
            if watch.docs == docs and (watch.stopped or (watch.committed and watch.loaded)):
                return self._aria_try(watch, uid, _ARIA_FAST)  # same document, settled: snapshot it now
            if watch.docs > docs:
                new_uid = watch.contexts.get("utility")
                if new_uid:
                    docs = watch.docs
                    try:
                        snap = self._aria_call(watch, new_uid, _ARIA_SETTLED, wait=True)
                    except _ContextGone:  # that document went too (a script's redirect): wait as before
                        snap = None
                    if snap is None or watch.docs != docs:
                        self._wait_caused(watch, flush=False)
                        return None
                    return snap
                if watch.loaded:  # a document without Playwright's utility world: nothing to ask
                    return None
            if time.monotonic() > deadline:
                raise TimeoutError(f"Timeout {self.nav_timeout_ms} ms exceeded waiting for the navigation")
            if old_doc is not None and watch.docs == docs:
                # Until the new document commits, wait in the old one: this call ends when it goes (or after
                # a while, to look at the events again: a navigation that stopped), so the wait costs one call,
                # not a poll of the driver every millisecond.
                try:
                    watch.cdp.send(
                        "Runtime.evaluate",
                        {"expression": _NAP, "uniqueContextId": old_doc, "awaitPromise": True},
                        timeout=self.nav_timeout_ms,
                    )
                except Exception:  # noqa: BLE001  (the old document went: what this waits for)
                    old_doc = None
            else:
                self.page.wait_for_timeout(1)  # lets the driver deliver the page's events

    def _aria_try(self, watch: _NavWatch, uid: str, fn: str) -> tuple[str, str, bool] | None:
        try:
            return self._aria_call(watch, uid, fn)
        except _ContextGone:
            return None

    def _aria_call(
        self, watch: _NavWatch, uid: str, fn: str, wait: bool = False
    ) -> tuple[str, str, bool] | None:
        """``fn`` (:data:`_ARIA_FAST` or :data:`_ARIA_SETTLED`) in the utility world ``uid``: (snapshot, title,
        whether a new tab was asked for), or ``None`` where Playwright's call must make the snapshot (then the
        new-tab flag is left for :meth:`_page_state`); :class:`_ContextGone` where that document is gone."""
        seq, cdp, timeout = watch.seq, watch.cdp, self.nav_timeout_ms
        params = {
            "expression": f"({fn})({seq})",
            "uniqueContextId": uid,
            "returnByValue": True,
            "awaitPromise": wait,
        }
        try:  # the lambda holds no reference to the session: see _fresh_stack
            r = _fresh_stack(lambda: cdp.send("Runtime.evaluate", params, timeout=timeout))
        except Exception as exc:  # noqa: BLE001  (the document went away, or no answer in time)
            if "Timeout" in str(exc) or "timeout" in str(exc):
                raise TimeoutError(f"Timeout {self.nav_timeout_ms} ms exceeded waiting for the page") from exc
            raise _ContextGone(str(exc)) from exc
        value = None if "exceptionDetails" in r else r.get("result", {}).get("value")
        if value == "bad" or (isinstance(value, list) and seq >= 0 and value[1] != seq):
            watch.seq = -1  # the count went wrong somewhere: rely on Playwright's own numbers from now on
        if not isinstance(value, list) or value == "bad":
            return None
        return str(value[0]), str(value[2]), bool(value[3])

    def _settle(self) -> None:
        """Wait for a navigation the action started to reach DOMContentLoaded (local sites: a few ms)."""
        page = self.page
        if page is None:
            return
        try:
            page.wait_for_load_state("domcontentloaded", timeout=self.nav_timeout_ms)
        except Exception as exc:  # noqa: BLE001
            if "closed" in str(exc).lower():
                raise
            self._stop_loading()
            self.events.append(f"page still loading after {self.nav_timeout_ms} ms: loading stopped")

    # --- observation ---------------------------------------------------------------------------
    def _page_state(self, page: Any) -> tuple[str, bool]:
        """(title, whether the last click asked for a new tab) in one round trip."""
        watch = self._nav.get(page) if self.fast_snapshot else None
        if watch is not None and "main" in watch.contexts:
            # Our session's evaluate in the main world: Playwright's page.evaluate would first inject its
            # UtilityScript into a new document (one more round trip to the renderer).
            cdp, timeout = watch.cdp, self.nav_timeout_ms
            params = {
                "expression": f"({_PAGE_STATE})()",
                "uniqueContextId": watch.contexts["main"],
                "returnByValue": True,
            }
            try:  # the lambda holds no reference to the session: see _fresh_stack
                r = _fresh_stack(lambda: cdp.send("Runtime.evaluate", params, timeout=timeout))
                title, popup = r["result"]["value"]
                return str(title), bool(popup)
            except Exception:  # noqa: BLE001  (a context gone mid-navigation: Playwright's call decides)
                pass
        try:
            title, popup = _fresh_stack(lambda: page.evaluate(_PAGE_STATE))
            return str(title), bool(popup)
        except Exception as exc:  # noqa: BLE001  (mid-navigation: the next observation will have it)
            if not self.alive() or "closed" in str(exc).lower():
                raise BrowserCrashed(str(exc)) from exc
            return "", False

    def _fast_snapshot(self, page: Any) -> str | None:
        """Playwright's ``aria_snapshot(mode="ai")`` of ``page`` in one round trip (see ``_ARIA_HOOK``), or
        ``None``: Playwright's call then makes it (and the tab gets the hook for its next documents)."""
        got = self._fast_observation(page)
        return None if got is None else got[0]

    def _fast_observation(self, page: Any) -> tuple[str, str, bool] | None:
        """(snapshot, title, whether a new tab was asked for) of ``page`` in one round trip, or ``None``."""
        watch = self._nav.get(page)
        if watch is None or not watch.hooked:
            self._arm(page)  # from the tab's next document on
            return None
        if "utility" not in watch.contexts:
            return None
        try:
            return self._aria_call(watch, watch.contexts["utility"], _ARIA_FAST)
        except Exception:  # noqa: BLE001  (the document went away, or no answer in time)
            return None

    def _snapshot(self, page: Any) -> tuple[str, bool, tuple[str, bool] | None]:
        """(aria snapshot, whether the page answered in time, (title, new tab asked for) where the fast snapshot
        read them in the same call, else ``None``)."""
        timeout = self.nav_timeout_ms
        prefetch, self._prefetch = self._prefetch, None
        if self.fast_snapshot:
            watch = self._nav.get(page)
            got = None
            if (
                prefetch is not None
                and prefetch[0] is page
                and watch is not None
                and watch.changes == prefetch[1]
            ):
                got, self.snapshot_via = prefetch[2], "click"
            else:
                got, self.snapshot_via = self._fast_observation(page), "fast"
            if got is not None:
                return got[0], True, (got[1], got[2])
        self.snapshot_via = "playwright"
        try:
            # Made from a fresh greenlet, like every last Playwright call of a reset/step: see _fresh_stack.
            return _fresh_stack(lambda: page.aria_snapshot(mode="ai", timeout=timeout)), True, None
        except Exception as exc:  # noqa: BLE001
            if not self.alive() or "closed" in str(exc).lower():
                raise BrowserCrashed(str(exc)) from exc
            return f"- text: (the page could not be read: {str(exc).splitlines()[0][:120]})", False, None

    def observe(
        self, screenshot: bool = False, html: bool = False, structured: bool = False
    ) -> dict[str, Any]:
        """url, title, axtree, open_pages (+ screenshot array, pruned html; with ``structured``, BrowserGym's
        ``axtree_object``/``dom_object``/``extra_element_properties``/``focused_element_bid`` and the
        tabs' ``open_pages_urls``/``open_pages_titles``)."""
        page = self.page
        if page is None:
            raise BrowserCrashed("no open page")
        timings: dict[str, float] = {}
        t = time.perf_counter()
        snap, responsive, state = self._snapshot(page)
        # Only a page that answered the snapshot (which has a timeout) gets the script call (which has none).
        title, popup = state or (self._page_state(page) if responsive else ("", False))
        if popup and self.pages[-1] is page:
            # A click asked for a new tab, which arrives asynchronously: wait so that this observation shows it.
            try:
                self._state.context.wait_for_event("page", timeout=self.nav_timeout_ms)
            except Exception:  # noqa: BLE001  (a popup blocker or a failed open: stay on this page)
                pass
        if self.page is not page:
            page = self.page
            try:
                page.wait_for_load_state("domcontentloaded", timeout=self.nav_timeout_ms)
            except Exception:  # noqa: BLE001
                self.events.append("the new tab is still loading")
            snap, responsive, state = self._snapshot(page)
            title = state[0] if state else self._page_state(page)[0] if responsive else ""
        timings["axtree_s"] = time.perf_counter() - t
        obs: dict[str, Any] = {"url": page.url, "title": title, "axtree": format_axtree(snap)}
        self.known_refs = set(re.findall(r"\[ref=([a-z0-9]+)\]", snap))
        obs["open_pages"] = "\n".join(
            f"{i}{'*' if i == self.active else ''} {p.url}" for i, p in enumerate(self.pages)
        )
        if structured:
            t = time.perf_counter()
            obs.update(self._structured(page, obs["axtree"]))
            obs["open_pages_urls"] = [p.url for p in self.pages]
            obs["open_pages_titles"] = [title if p is page else self._title(p) for p in self.pages]
            timings["structured_s"] = time.perf_counter() - t
        if screenshot:
            t = time.perf_counter()
            obs["screenshot"] = self.screenshot()
            timings["screenshot_s"] = time.perf_counter() - t
        if html:
            t = time.perf_counter()
            try:
                obs["html"] = prune_html(_fresh_stack(page.content))
            except Exception:  # noqa: BLE001
                obs["html"] = ""
            timings["html_s"] = time.perf_counter() - t
        obs["_timings"] = timings
        return obs

    def _title(self, page: Any) -> str:
        try:
            return str(_fresh_stack(page.title))
        except Exception:  # noqa: BLE001  (a tab mid-navigation)
            return ""

    def _structured(self, page: Any, axtree: str) -> dict[str, Any]:
        from lynn.envs.liveweb import browsergym_obs

        def grab() -> dict[str, Any]:
            cdp = self._cdp.get(page)
            if cdp is None:
                cdp = self._cdp[page] = self._state.context.new_cdp_session(page)
            return browsergym_obs.capture(cdp, axtree, self.viewport)

        try:
            return _fresh_stack(grab)
        except Exception as exc:  # noqa: BLE001  (mid-navigation: empty structures, the text is still there)
            self._cdp.pop(page, None)
            if not self.alive():
                raise BrowserCrashed(str(exc)) from exc
            return {
                "axtree_object": {"nodes": []},
                "dom_object": {"documents": [], "strings": []},
                "extra_element_properties": {},
                "focused_element_bid": "",
            }

    def screenshot(self) -> np.ndarray:
        """The active page as an (H, W, 3) uint8 array."""
        page, viewport = self.page, self.viewport
        return _fresh_stack(lambda: _grab(page, viewport))
