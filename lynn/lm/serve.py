"""A local OpenAI-compatible server over a model folder: transformers' own ``transformers serve``.

:class:`ModelServer` starts it on a free loopback port with no hub access (``HF_HUB_OFFLINE=1``), waits
until ``GET /v1/models`` answers, and stops it (process group) on ``close()``, on context exit and on
garbage collection. It is what the ``openai`` backend is tested against, and what a user runs to serve
an in-repo model to any OpenAI client::

    with ModelServer("models/lm") as server:
        gen = OpenAIGenerator(server.base_url, server.model)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any


def serve_command() -> list[str]:
    """``[transformers, serve]`` from :func:`lynn.system.find` (the venv's console script first)."""
    from lynn.system import find

    tool = find("transformers")
    if not tool.ok:
        raise FileNotFoundError(tool.explain())
    return [*tool.command, "serve"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ModelServer:
    """``transformers serve MODEL`` on ``127.0.0.1:port``.

    Args:
        model: local model folder (with tokenizer and chat template).
        port: port (default: a free one).
        startup_timeout: seconds to wait for the server to answer.
        threads: torch threads of the server process (``OMP_NUM_THREADS``).
    """

    def __init__(
        self, model: str | Path, port: int | None = None, startup_timeout: float = 180.0, threads: int = 1
    ) -> None:
        self.model = str(Path(model).resolve())
        if not (Path(self.model) / "config.json").exists():
            raise FileNotFoundError(f"no model at {self.model}")
        self.port = port or _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "OMP_NUM_THREADS": str(threads),
            "LYNN_TORCH_THREADS": str(threads),
        }
        cmd = [
            *serve_command(),
            self.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--device",
            "cpu",
        ]
        self.log = open(os.devnull, "wb")  # noqa: SIM115  (closed in close())
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            self._wait(startup_timeout)
        except BaseException:
            self.close()
            raise

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"transformers serve exited with code {self.proc.returncode} before answering"
                )
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                    json.loads(r.read())
                    return
            except (OSError, ValueError):
                time.sleep(0.5)
        raise TimeoutError(f"transformers serve did not answer on port {self.port} within {timeout:.0f} s")

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)
        if not self.log.closed:
            self.log.close()

    def __enter__(self) -> ModelServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass
