"""The one place that finds and explains the external programs Lynn uses.

The envs (``lynn.envs.evmquest.chain``, ``lynn.envs.liveweb.browser``) and ``lynn doctor`` both call
:func:`find`, so what the doctor reports is what an env will start. Every lookup has one fixed order;
the first hit wins and :attr:`Tool.searched` lists every place that was tried, so a miss explains
itself:

=================  ===========================================================================
``chromium``       ``LYNN_CHROMIUM``, then ``chromium`` / ``chromium-browser`` on ``PATH``
``anvil``          ``LYNN_ANVIL``, then each node_modules folder's native binary
                   (``@foundry-rs/anvil-<platform>/bin/anvil``), then its ``.bin/anvil`` shim
                   (needs node), then ``anvil`` on ``PATH``, then ``~/.foundry/bin/anvil``
``node``           ``LYNN_NODE``, then ``node`` / ``nodejs`` on ``PATH``
``solc``           ``LYNN_SOLC``, then each node_modules folder's ``solc`` package (solc-js, run
                   with node), then ``solc`` on ``PATH`` (a native compiler)
``transformers``   ``LYNN_TRANSFORMERS``, then the ``transformers`` console script beside this
                   interpreter (the venv's ``transformers serve``), then ``PATH``
=================  ===========================================================================

An environment variable that is set but names no file is reported as a miss (it is never silently
passed over). The node_modules folders (:func:`node_modules_dirs`) are, in order: each entry of
``LYNN_NODE_MODULES`` (``os.pathsep``-separated; the folder itself or a project folder that holds
one), every ``node_modules`` from the current directory up to the file-system root (Node's own
resolution), and the source checkout's ``node_modules`` when Lynn runs from one. So a user who
installed the wheel runs ``npm install @foundry-rs/anvil solc`` in a project folder and works there,
or points ``LYNN_NODE_MODULES`` at it.

This module imports only the standard library (``import lynn`` must stay fast).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "TOOLS",
    "Tool",
    "find",
    "find_all",
    "find_npm_package",
    "node_modules_dirs",
    "which",
]

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Tool:
    """The result of one lookup.

    Attributes:
        name: the tool (``"anvil"``, ``"chromium"``, ...).
        path: the executable (or, for solc-js, the package folder); ``None`` when not found.
        source: where ``path`` came from (``"LYNN_ANVIL"``, ``"node_modules (…)"``, ``"PATH"``), or
            why nothing was found.
        searched: every place tried, in order.
        fix: the command (or variable) that makes the tool available.
        command: the argv prefix that runs the tool (``["node", ".../solc.js"]`` for solc-js).
    """

    name: str
    path: str | None
    source: str
    searched: tuple[str, ...] = ()
    fix: str = ""
    command: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """Whether the tool was found."""
        return self.path is not None

    def explain(self) -> str:
        """One line for people: where it was found, or what was searched and how to fix it."""
        if self.ok:
            return f"{self.name}: {self.path} (from {self.source})"
        return f"{self.name}: not found ({self.source}); searched {', '.join(self.searched)}; fix: {self.fix}"

    def version(self, timeout: float = 10.0) -> str | None:
        """The tool's own version line (runs it once), or ``None`` if it cannot say."""
        if not self.ok:
            return None
        if self.name == "solc" and self.command and self.command[0] != self.path:
            package = Path(self.path or "") / "package.json"
            try:
                return str(json.loads(package.read_text())["version"])
            except (OSError, ValueError, KeyError):
                return None
        if self.name == "transformers":  # its CLI imports torch to print a version: read the metadata
            if Path(self.path or "").parent != Path(sys.executable).parent:
                return None
            try:
                return f"transformers {importlib.metadata.version('transformers')}"
            except importlib.metadata.PackageNotFoundError:
                return None
        try:
            proc = subprocess.run(
                [*self.command, "--version"], capture_output=True, text=True, timeout=timeout, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None
        lines = (proc.stdout or proc.stderr).strip().splitlines()
        return lines[0].strip() if proc.returncode == 0 and lines else None


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _from_env(var: str, name: str, fix: str, searched: list[str]) -> Tool | None:
    """The tool named by ``var`` if set (a miss when the file is not there), else ``None``."""
    value = os.environ.get(var)
    if not value:
        searched.append(f"${var} (unset)")
        return None
    searched.append(f"${var}={value}")
    if _is_executable(Path(value)):
        return Tool(name, value, var, tuple(searched), fix, (value,))
    why = f"{var}={value} is not an executable file (unset it to search the usual places)"
    return Tool(name, None, why, tuple(searched), fix)


def _on_path(name: str, programs: tuple[str, ...], fix: str, searched: list[str]) -> Tool | None:
    for program in programs:
        searched.append(f"PATH:{program}")
        hit = shutil.which(program)
        if hit:
            return Tool(name, hit, "PATH", tuple(searched), fix, (hit,))
    return None


def _miss(name: str, fix: str, searched: list[str]) -> Tool:
    return Tool(name, None, "no candidate exists", tuple(searched), fix)


def node_modules_dirs(cwd: str | os.PathLike[str] | None = None) -> list[Path]:
    """The existing node_modules folders searched for npm packages, in lookup order.

    Args:
        cwd: where the upward search starts (default: the current directory).
    """
    candidates: list[Path] = []
    for entry in os.environ.get("LYNN_NODE_MODULES", "").split(os.pathsep):
        if entry.strip():
            p = Path(entry.strip()).expanduser()
            candidates.append(p if p.name == "node_modules" else p / "node_modules")
    here = Path(cwd if cwd is not None else os.getcwd()).resolve()
    candidates += [d / "node_modules" for d in (here, *here.parents)]
    candidates.append(REPO_ROOT / "node_modules")
    seen: set[Path] = set()
    out = []
    for c in candidates:
        key = c.resolve() if c.exists() else c
        if key not in seen and c.is_dir():
            seen.add(key)
            out.append(c)
    return out


def find_npm_package(package: str, cwd: str | os.PathLike[str] | None = None) -> Path | None:
    """The folder of npm ``package`` (e.g. ``"solc"``, ``"@openzeppelin/contracts"``) or ``None``."""
    for d in node_modules_dirs(cwd):
        if (d / package / "package.json").is_file():
            return d / package
    return None


def _anvil_platform() -> str:
    system = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform, sys.platform)
    machine = platform.machine().lower()
    arch = "arm64" if machine in ("arm64", "aarch64") else "amd64"
    return f"{system}-{arch}"


def _find_anvil() -> Tool:
    fix = "npm install @foundry-rs/anvil (in the repo: npm ci), or set LYNN_ANVIL=/path/to/anvil"
    searched: list[str] = []
    hit = _from_env("LYNN_ANVIL", "anvil", fix, searched)
    if hit is not None:
        return hit
    exe = "anvil.exe" if sys.platform == "win32" else "anvil"
    native_pkg = f"@foundry-rs/anvil-{_anvil_platform()}"
    node = _find_node().path  # the .bin shim is a node script
    for d in node_modules_dirs():
        native = d / native_pkg / "bin" / exe
        searched.append(str(native))
        if _is_executable(native):
            return Tool("anvil", str(native), f"node_modules ({d})", tuple(searched), fix, (str(native),))
        shim = d / ".bin" / "anvil"
        searched.append(str(shim))
        if shim.exists() and node and _is_executable(shim.resolve()):
            return Tool(
                "anvil", str(shim), f"node_modules ({d}) via node", tuple(searched), fix, (str(shim),)
            )
    hit = _on_path("anvil", ("anvil",), fix, searched)
    if hit is not None:
        return hit
    foundry = Path.home() / ".foundry" / "bin" / exe
    searched.append(str(foundry))
    if _is_executable(foundry):
        return Tool(
            "anvil", str(foundry), "foundryup (~/.foundry/bin)", tuple(searched), fix, (str(foundry),)
        )
    return _miss("anvil", fix, searched)


def _env_then_path(name: str, var: str, programs: tuple[str, ...], fix: str) -> Tool:
    searched: list[str] = []
    return (
        _from_env(var, name, fix, searched)
        or _on_path(name, programs, fix, searched)
        or _miss(name, fix, searched)
    )


def _find_chromium() -> Tool:
    fix = "apt-get install -y chromium, or set LYNN_CHROMIUM=/path/to/chromium"
    return _env_then_path("chromium", "LYNN_CHROMIUM", ("chromium", "chromium-browser"), fix)


def _find_node() -> Tool:
    fix = "apt-get install -y nodejs npm, or set LYNN_NODE=/path/to/node"
    return _env_then_path("node", "LYNN_NODE", ("node", "nodejs"), fix)


def _find_solc() -> Tool:
    fix = "npm install solc@0.8.28 (in the repo: npm ci), or set LYNN_SOLC=/path/to/solc"
    searched: list[str] = []
    hit = _from_env("LYNN_SOLC", "solc", fix, searched)
    if hit is not None:
        return hit
    node = _find_node()
    for d in node_modules_dirs():
        pkg = d / "solc"
        searched.append(str(pkg))
        if (pkg / "package.json").is_file() and (pkg / "solc.js").is_file():
            if node.path is None:
                return Tool("solc", None, f"solc-js in {d} but no node", tuple(searched), node.fix)
            cmd = (node.path, str(pkg / "solc.js"))
            return Tool("solc", str(pkg), f"node_modules ({d}), solc-js", tuple(searched), fix, cmd)
    return _on_path("solc", ("solc",), fix, searched) or _miss("solc", fix, searched)


def _find_transformers() -> Tool:
    fix = f"{sys.executable} -m pip install 'transformers[serving]' (the llm extra), or set LYNN_TRANSFORMERS"
    searched: list[str] = []
    hit = _from_env("LYNN_TRANSFORMERS", "transformers", fix, searched)
    if hit is not None:
        return hit
    exe = "transformers.exe" if sys.platform == "win32" else "transformers"
    beside = Path(sys.executable).parent / exe
    searched.append(str(beside))
    if _is_executable(beside):
        return Tool(
            "transformers", str(beside), "this interpreter's scripts", tuple(searched), fix, (str(beside),)
        )
    return _on_path("transformers", ("transformers",), fix, searched) or _miss("transformers", fix, searched)


#: Tool name -> lookup. ``lynn doctor`` checks each; add a program here, not in an env.
TOOLS: dict[str, Callable[[], Tool]] = {
    "chromium": _find_chromium,
    "node": _find_node,
    "anvil": _find_anvil,
    "solc": _find_solc,
    "transformers": _find_transformers,
}


def find(name: str) -> Tool:
    """Look ``name`` up (no caching: a changed environment variable is seen at once).

    Raises:
        KeyError: for a name not in :data:`TOOLS` (the message lists them).
    """
    try:
        lookup = TOOLS[name]
    except KeyError:
        raise KeyError(f"unknown tool {name!r}; known: {', '.join(TOOLS)}") from None
    return lookup()


def which(name: str) -> str | None:
    """The path :func:`find` gives for ``name``, or ``None``."""
    return find(name).path


def find_all() -> list[Tool]:
    """Every tool in :data:`TOOLS`, looked up now."""
    return [lookup() for lookup in TOOLS.values()]
