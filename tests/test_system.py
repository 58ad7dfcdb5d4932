"""lynn.system: every lookup path of every external program, and envs + doctor agreeing on the result.

The programs are the real ones (the repo's anvil, solc-js, Debian's chromium), placed in temporary
node_modules / PATH folders by symlink so that each lookup path is exercised on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lynn import system
from tests.conftest import run_lynn

REPO_NM = system.REPO_ROOT / "node_modules"
NATIVE_PKG = f"@foundry-rs/anvil-{system._anvil_platform()}"
REAL_ANVIL = REPO_NM / NATIVE_PKG / "bin" / "anvil"
REAL_SOLC = REPO_NM / "solc"
needs_anvil = pytest.mark.skipif(not REAL_ANVIL.exists(), reason="npm ci not run (no anvil in node_modules)")
needs_solc = pytest.mark.skipif(not REAL_SOLC.exists(), reason="npm ci not run (no solc in node_modules)")


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No LYNN_* variable, cwd in an empty folder, the source checkout's node_modules out of sight."""
    for var in (
        "LYNN_ANVIL",
        "LYNN_CHROMIUM",
        "LYNN_NODE",
        "LYNN_SOLC",
        "LYNN_TRANSFORMERS",
        "LYNN_NODE_MODULES",
    ):
        monkeypatch.delenv(var, raising=False)
    empty = tmp_path / "cwd"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.setattr(system, "REPO_ROOT", tmp_path / "no-checkout")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def _native_anvil_in(node_modules: Path) -> Path:
    target = node_modules / NATIVE_PKG / "bin" / "anvil"
    target.parent.mkdir(parents=True)
    target.symlink_to(REAL_ANVIL)
    (node_modules / NATIVE_PKG / "package.json").write_text("{}")
    return target


def _path_with(monkeypatch: pytest.MonkeyPatch, folder: Path, **links: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, target in links.items():
        (folder / name.replace("_", "-")).symlink_to(target)
    monkeypatch.setenv("PATH", str(folder))


# --- anvil -----------------------------------------------------------------------------------------
@needs_anvil
def test_anvil_from_lynn_anvil(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LYNN_ANVIL", str(REAL_ANVIL))
    tool = system.find("anvil")
    assert (tool.path, tool.source) == (str(REAL_ANVIL), "LYNN_ANVIL")
    assert tool.version() is not None and "anvil" in tool.version().lower()


def test_lynn_anvil_naming_nothing_is_a_miss_that_says_why(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _path_with(monkeypatch, clean / "bin", anvil=Path("/bin/true"))  # something else would be found
    monkeypatch.setenv("LYNN_ANVIL", "/no/such/anvil")
    tool = system.find("anvil")
    assert tool.path is None and not tool.ok
    assert "LYNN_ANVIL=/no/such/anvil is not an executable file" in tool.explain()
    assert "npm install @foundry-rs/anvil" in tool.fix


@needs_anvil
def test_anvil_from_lynn_node_modules(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = clean / "project"
    expected = _native_anvil_in(project / "node_modules")
    monkeypatch.setenv("LYNN_NODE_MODULES", str(project))  # a project folder that holds node_modules
    assert system.find("anvil").path == str(expected)
    monkeypatch.setenv("LYNN_NODE_MODULES", os.pathsep.join(["/no/where", str(project / "node_modules")]))
    tool = system.find("anvil")
    assert tool.path == str(expected) and tool.source == f"node_modules ({project / 'node_modules'})"


@needs_anvil
def test_anvil_from_node_modules_above_the_current_directory(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = clean / "project"
    expected = _native_anvil_in(project / "node_modules")
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert system.find("anvil").path == str(expected)
    assert system.node_modules_dirs()[0] == project / "node_modules"


@needs_anvil
def test_anvil_from_the_source_checkout(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system, "REPO_ROOT", REPO_NM.parent)
    assert system.find("anvil").path == str(REAL_ANVIL)


@needs_anvil
def test_anvil_through_the_npm_bin_shim_needs_node(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nm = clean / "project" / "node_modules"
    (nm / ".bin").mkdir(parents=True)
    (nm / ".bin" / "anvil").symlink_to(REAL_ANVIL)  # no native package folder: only the shim
    monkeypatch.setenv("LYNN_NODE_MODULES", str(nm))
    node = system.find("node").path
    if node is None:
        pytest.skip("no node")
    _path_with(monkeypatch, clean / "bin", node=Path(node))
    assert system.find("anvil").path == str(nm / ".bin" / "anvil")
    monkeypatch.setenv("PATH", str(clean / "empty-bin"))  # no node: the shim cannot run
    assert system.find("anvil").path is None


@needs_anvil
def test_anvil_from_path_then_foundryup(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _path_with(monkeypatch, clean / "bin", anvil=REAL_ANVIL)
    tool = system.find("anvil")
    assert (tool.path, tool.source) == (str(clean / "bin" / "anvil"), "PATH")
    monkeypatch.setenv("PATH", str(clean / "empty-bin"))
    foundry = clean / "home" / ".foundry" / "bin"
    foundry.mkdir(parents=True)
    (foundry / "anvil").symlink_to(REAL_ANVIL)
    assert system.find("anvil").path == str(foundry / "anvil")


def test_anvil_missing_everywhere_lists_what_was_searched(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(clean / "empty-bin"))
    tool = system.find("anvil")
    assert tool.path is None
    assert "$LYNN_ANVIL (unset)" in tool.searched and "PATH:anvil" in tool.searched
    assert str(clean / "home" / ".foundry" / "bin" / "anvil") in tool.searched


# --- chromium, node, solc, transformers ------------------------------------------------------------
def test_chromium_from_variable_then_path(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = Path("/bin/true")  # any executable stands in for the lookup; running it is not the point
    monkeypatch.setenv("LYNN_CHROMIUM", str(real))
    assert system.find("chromium").path == str(real)
    monkeypatch.delenv("LYNN_CHROMIUM")
    _path_with(monkeypatch, clean / "bin", chromium_browser=real)
    tool = system.find("chromium")
    assert tool.path == str(clean / "bin" / "chromium-browser") and tool.searched[-2:] == (
        "PATH:chromium",
        "PATH:chromium-browser",
    )
    monkeypatch.setenv("PATH", str(clean / "empty-bin"))
    assert "apt-get install -y chromium" in system.find("chromium").fix


def test_node_from_variable_then_path(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LYNN_NODE", "/bin/true")
    assert system.find("node").source == "LYNN_NODE"
    monkeypatch.delenv("LYNN_NODE")
    _path_with(monkeypatch, clean / "bin", nodejs=Path("/bin/true"))
    assert system.find("node").path == str(clean / "bin" / "nodejs")


@needs_solc
def test_solc_js_from_node_modules_runs_with_node(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nm = clean / "project" / "node_modules"
    nm.mkdir(parents=True)
    (nm / "solc").symlink_to(REAL_SOLC)
    monkeypatch.setenv("LYNN_NODE_MODULES", str(nm))
    if system.find("node").path is None:
        pytest.skip("no node")
    tool = system.find("solc")
    assert tool.path == str(nm / "solc") and tool.command[1].endswith("solc.js")
    pinned = json.loads((REAL_SOLC / "package.json").read_text())["version"]
    assert tool.version() == pinned
    proc = subprocess.run([*tool.command, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and pinned in proc.stdout  # the real compiler answers
    assert system.find_npm_package("solc") == nm / "solc"
    assert system.find_npm_package("@no/such-package") is None


def test_solc_native_on_path_and_variable(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _path_with(monkeypatch, clean / "bin", solc=Path("/bin/true"))
    assert system.find("solc").source == "PATH"
    monkeypatch.setenv("LYNN_SOLC", "/bin/true")
    assert system.find("solc").source == "LYNN_SOLC"


def test_transformers_serve_script_beside_the_interpreter(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    beside = Path(sys.executable).parent / "transformers"
    tool = system.find("transformers")
    if beside.exists():
        assert tool.path == str(beside) and tool.source == "this interpreter's scripts"
        assert tool.version() is not None and tool.version().startswith("transformers ")
    monkeypatch.setenv("LYNN_TRANSFORMERS", "/bin/true")
    assert system.find("transformers").path == "/bin/true"


def test_unknown_tool_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known: chromium, node, anvil, solc, transformers"):
        system.find("nope")


# --- the envs and the doctor use the same lookup ---------------------------------------------------
@needs_anvil
def test_envs_and_doctor_find_the_same_binaries(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lynn.envs.evmquest.chain import AnvilChain, ChainError, anvil_binary
    from lynn.envs.liveweb.browser import chromium_executable

    project = clean / "project"
    expected = _native_anvil_in(project / "node_modules")
    monkeypatch.setenv("LYNN_NODE_MODULES", str(project))
    monkeypatch.setenv("LYNN_CHROMIUM", "/bin/true")
    assert anvil_binary() == system.which("anvil") == str(expected)
    assert chromium_executable() == system.which("chromium") == "/bin/true"

    chain = AnvilChain(31337)  # the env starts the anvil that the lookup found
    try:
        assert chain.w3.eth.chain_id == 31337
    finally:
        chain.close()

    proc = run_lynn("doctor", extra_env={"LYNN_NODE_MODULES": str(project), "LYNN_CHROMIUM": "/bin/true"})
    assert f"ok       anvil  {expected} (from node_modules ({project / 'node_modules'})" in proc.stdout
    assert "ok       chromium  /bin/true (from LYNN_CHROMIUM" in proc.stdout

    monkeypatch.setenv("LYNN_ANVIL", "/no/anvil")
    with pytest.raises(ChainError, match="LYNN_ANVIL=/no/anvil is not an executable file"):
        AnvilChain(31337)
