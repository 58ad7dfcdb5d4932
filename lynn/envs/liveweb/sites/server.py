"""Run the bundled sites in a child process and restore their databases between episodes.

The child (``python -m lynn.envs.liveweb.sites.server``) binds one loopback socket per site (port 0 =
ephemeral), prints ``{"shop": port, ...}`` as one JSON line and serves every site from one uvicorn
event loop. A separate process survives a browser crash, can be killed in fault tests, and dies on
its own when its parent dies (it watches ``getppid``), so a SIGKILLed env leaks nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

from lynn.envs.liveweb.sites import seed as seed_module
from lynn.envs.liveweb.sites.seed import DATA_VERSION, build_all

SITE_NAMES: tuple[str, ...] = ("shop", "forum", "admin")
SITE_DB: dict[str, str] = {"shop": "shop.db", "admin": "shop.db", "forum": "forum.db"}
PLACEHOLDERS: dict[str, str] = {"shop": "__SHOP__", "forum": "__FORUM__", "admin": "__ADMIN__"}


def pristine_dir() -> Path:
    """Where the pristine databases are cached (``LYNN_CACHE`` or ``~/.cache/lynn``), built on first use."""
    root = Path(os.environ.get("LYNN_CACHE") or Path.home() / ".cache" / "lynn")
    # Keyed by the generator's own source too, so an edited seed.py never reuses a stale cache.
    digest = hashlib.sha256(Path(seed_module.__file__).read_bytes()).hexdigest()[:12]
    folder = root / "liveweb" / f"data-v{DATA_VERSION}-{digest}"
    build_all(folder)
    return folder


def _app(site: str, data: Path):  # noqa: ANN202  (Starlette imported lazily)
    if site == "shop":
        from lynn.envs.liveweb.sites.shop import create_app
    elif site == "forum":
        from lynn.envs.liveweb.sites.forum import create_app
    elif site == "admin":
        from lynn.envs.liveweb.sites.admin import create_app
    else:
        raise ValueError(f"unknown site {site!r}; choose from {SITE_NAMES}")
    return create_app(data / SITE_DB[site])


def _watch_parent(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(0.5)


def serve(
    data: Path,
    sites: list[str],
    host: str = "127.0.0.1",
    ports: dict[str, int] | None = None,
    parent: int | None = None,
) -> None:
    """Serve ``sites`` on ``data`` until killed (the child's main)."""
    import asyncio

    import uvicorn

    socks, servers = {}, []
    for site in sites:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, (ports or {}).get(site, 0)))
        sock.listen(128)  # connections queue in the backlog until the loop runs: ready right now
        socks[site] = sock
        config = uvicorn.Config(_app(site, data), log_level="warning", access_log=False, lifespan="off")
        servers.append((uvicorn.Server(config), sock))
    print(json.dumps({s: sock.getsockname()[1] for s, sock in socks.items()}), flush=True)
    if parent:
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()

    async def main() -> None:
        await asyncio.gather(*(server.serve(sockets=[sock]) for server, sock in servers))

    asyncio.run(main())


class SiteServer:
    """The sites of one env instance: a private copy of the databases and a server child process.

    Args:
        sites: which bundled sites to serve.
        host: interface to bind (loopback by default: the sites are never exposed).
        ports: fixed ports per site (default: ephemeral).
        data_dir: where the working databases live (default: a fresh temporary folder, removed on close).
    """

    def __init__(
        self,
        sites: tuple[str, ...] = SITE_NAMES,
        host: str = "127.0.0.1",
        ports: dict[str, int] | None = None,
        data_dir: str | Path | None = None,
    ) -> None:
        unknown = [s for s in sites if s not in SITE_NAMES]
        if unknown:
            raise ValueError(f"unknown bundled sites {unknown}; choose from {list(SITE_NAMES)}")
        self.sites = tuple(sites)
        self.host = host
        self.fixed_ports = dict(ports or {})
        self.pristine = pristine_dir()
        self._own_dir = data_dir is None
        self.data = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="lynn-liveweb-"))
        self.data.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[str] | None = None
        self.ports: dict[str, int] = {}
        self._clean: dict[str, tuple[int, int]] = {}
        self.restore()
        self.start()
        self._finalizer = weakref.finalize(self, SiteServer._cleanup, self.__dict__)

    @property
    def urls(self) -> dict[str, str]:
        """``{site: "http://127.0.0.1:PORT"}``."""
        return {s: f"http://{self.host}:{p}" for s, p in self.ports.items()}

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start (or restart) the server child; waits for its ports line (≈ 0.5 s)."""
        self.stop()
        cmd = [
            sys.executable,
            "-m",
            "lynn.envs.liveweb.sites.server",
            "--data",
            str(self.data),
            "--sites",
            ",".join(self.sites),
            "--host",
            self.host,
            "--parent",
            str(os.getpid()),
        ]
        # Reuse the ports of a previous run so that URLs already in the browser stay valid after a restart.
        ports = {**self.ports, **self.fixed_ports}
        if ports:
            cmd += ["--ports", json.dumps(ports)]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.strip():
            err = self.proc.stderr.read() if self.proc.stderr else ""
            self.proc.kill()
            self.proc.wait()
            if ports and "address already in use" in err.lower() and not self.fixed_ports:
                self.ports = {}  # the old ports were taken meanwhile: fall back to fresh ones
                return self.start()
            raise RuntimeError(f"site server failed to start: {err.strip()[-800:]}")
        self.ports = {k: int(v) for k, v in json.loads(line).items()}

    def restore(self) -> None:
        """Make the working databases equal to the pristine ones (SQLite backup API: a few ms).

        The backup goes through SQLite's own locking, so a server holding the file open sees the
        restored content on its next query.
        """
        for name in sorted({SITE_DB[s] for s in self.sites}):
            target = self.data / name
            if not target.exists():
                shutil.copyfile(self.pristine / name, target)
            elif self._stamp(target) != self._clean.get(name):  # untouched since the last restore: skip
                src = sqlite3.connect(f"file:{self.pristine / name}?mode=ro", uri=True)
                dst = sqlite3.connect(target, timeout=10)
                try:
                    src.backup(dst)
                finally:
                    src.close()
                    dst.close()
            self._clean[name] = self._stamp(target)

    @staticmethod
    def _stamp(path: Path) -> tuple[int, int]:
        """(mtime_ns, size): every committed write to a rollback-journal SQLite file changes it."""
        st = path.stat()
        return st.st_mtime_ns, st.st_size

    def db_path(self, site: str) -> Path:
        """The working database file of ``site``."""
        return self.data / SITE_DB[site]

    def stop(self) -> None:
        """Kill the server child (SIGKILL: there is no state to flush, the DB commits per request)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream:
                    stream.close()

    def close(self) -> None:
        """Stop the server and remove the working databases."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data, ignore_errors=True)

    @staticmethod
    def _cleanup(state: dict) -> None:
        proc = state.get("proc")
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if state.get("_own_dir"):
            shutil.rmtree(state["data"], ignore_errors=True)

    def __enter__(self) -> SiteServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Serve the bundled Lynn sites (child process of SiteServer).")
    p.add_argument("--data", required=True)
    p.add_argument("--sites", default=",".join(SITE_NAMES))
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--ports", default=None, help='JSON {"shop": 8001, ...}')
    p.add_argument("--parent", type=int, default=None)
    a = p.parse_args(argv)
    serve(Path(a.data), a.sites.split(","), a.host, json.loads(a.ports) if a.ports else None, a.parent)


if __name__ == "__main__":
    main()
