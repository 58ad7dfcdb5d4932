from __future__ import annotations

import json

import gymnasium as gym
import pytest

import lynn
from lynn.registry import ENTRIES
from tests.conftest import run_python


def test_env_ids_are_the_registered_lynn_ids() -> None:
    registered = sorted(k for k in gym.registry if k.startswith("Lynn/"))
    assert sorted(lynn.ENV_IDS) == registered
    assert len(set(lynn.ENV_IDS)) == len(lynn.ENV_IDS)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_spec_uses_string_entry_point_and_step_limit(entry) -> None:
    spec = gym.spec(entry.id)
    assert isinstance(spec.entry_point, str) and ":" in spec.entry_point
    assert spec.max_episode_steps is not None and spec.max_episode_steps > 0
    assert spec.nondeterministic == entry.nondeterministic
    assert entry.description and "\n" not in entry.description


def test_import_lynn_is_light() -> None:
    # The registry must not drag in the heavy stacks; envs import them when made.
    proc = run_python(
        "import sys, lynn; heavy = ['torch', 'web3', 'playwright', 'ray', 'transformers', 'stable_baselines3'];"
        "print(__import__('json').dumps([m for m in heavy if m in sys.modules]))"
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_reimport_registers_once_without_warnings() -> None:
    proc = run_python(
        "import warnings; warnings.simplefilter('error'); import importlib, lynn, lynn.registry;"
        "importlib.reload(lynn.registry); print('ok')"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


@pytest.mark.parametrize("env_id", lynn.ENV_IDS)
def test_make_in_fresh_interpreter_both_ways(env_id: str) -> None:
    # With defaults, like every Gymnasium id (the world-model env loads the zoo's models).
    code = (
        "import gymnasium as gym\n"
        f"env = gym.make('lynn:{env_id}'); env.reset(seed=0); env.close()\n"
        "import lynn\n"
        f"env = gym.make('{env_id}'); env.reset(seed=0); env.close()\n"
        "print('made')\n"
    )
    proc = run_python(code, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "made" in proc.stdout


def test_plain_id_without_import_fails_as_documented() -> None:
    # Gymnasium 1.x has no plugin loader: users need `import lynn` or the `lynn:` prefix.
    if not lynn.ENV_IDS:
        pytest.skip("no env registered yet")
    proc = run_python(f"import gymnasium as gym; gym.make('{lynn.ENV_IDS[0]}')")
    assert proc.returncode != 0
    assert "Namespace" in proc.stderr or "namespace" in proc.stderr
