"""Run Gymnasium's own ``tests/vector`` with ``EchoVectorEnv`` in place of ``AsyncVectorEnv``.

Gymnasium's sdist has no tests, so point this at a checkout of its repository (the tag or commit of the
installed version, e.g. the ``Update to v1.4.0`` commit for 1.4.0)::

    python scripts/gymnasium_vector_suite.py /path/to/Gymnasium [pytest args...]
    python scripts/gymnasium_vector_suite.py /path/to/Gymnasium --anchor   # AsyncVectorEnv itself

It copies the checkout's ``tests`` folder to a temporary directory, adds a ``conftest.py`` that binds
``gymnasium.vector.AsyncVectorEnv`` to ``EchoVectorEnv`` before the test modules import it, and runs
pytest there (default: the five files that exercise AsyncVectorEnv). Comparing with ``--anchor``
separates rows that fail for the machine (e.g. pygame missing for render tests) from ours.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FILES = [
    "tests/vector/test_async_vector_env.py",
    "tests/vector/test_autoreset_mode.py",
    "tests/vector/test_observation_mode.py",
    "tests/vector/test_vector_env.py",
    "tests/vector/test_vector_env_info.py",
]
CONFTEST = """import os
import gymnasium.vector
import gymnasium.vector.async_vector_env as ave

if os.environ.get("LYNN_ANCHOR") != "1":
    from lynn.wrappers.echo.vector import EchoVectorEnv

    gymnasium.vector.AsyncVectorEnv = EchoVectorEnv
    ave.AsyncVectorEnv = EchoVectorEnv
"""


def main(argv: list[str]) -> int:
    if not argv or not (Path(argv[0]) / "tests" / "vector").is_dir():
        print(__doc__)
        return 2
    checkout, rest = Path(argv[0]), argv[1:]
    env = dict(os.environ)
    if "--anchor" in rest:
        rest.remove("--anchor")
        env["LYNN_ANCHOR"] = "1"
    with tempfile.TemporaryDirectory(prefix="gym-vector-suite-") as tmp:
        shutil.copytree(checkout / "tests", Path(tmp) / "tests")
        (Path(tmp) / "conftest.py").write_text(CONFTEST)
        (Path(tmp) / "pytest.ini").write_text("[pytest]\n")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *(rest or FILES)]
        return subprocess.call(cmd, cwd=tmp, env=env)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
