"""``lynn sites serve`` (the bundled sites for a person to click through); ``lynn collect`` lives in
:mod:`lynn.eval.collect`. Heavy imports happen inside the commands."""

from __future__ import annotations

import argparse
import time
from typing import Any

from lynn.errors import UsageError


def register(sub: Any) -> None:
    """Add ``lynn sites serve`` to the ``lynn`` parser (listed in :data:`lynn.cli.COMMANDS`)."""
    p = sub.add_parser("sites", help="the bundled LiveWeb sites (shop, forum, admin)")
    sp = p.add_subparsers(dest="sites_command", required=True, metavar="ACTION")
    s = sp.add_parser("serve", help="serve the bundled sites until Ctrl-C")
    s.add_argument("--sites", default="shop,forum,admin", help="comma-separated subset of shop,forum,admin")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument(
        "--port", type=int, default=0, help="first port (sites get PORT, PORT+1, ...; 0 = ephemeral)"
    )
    s.add_argument("--data", help="folder for the working databases (default: a temporary copy)")
    s.add_argument("--seconds", type=float, default=None, help="stop after this long (default: until Ctrl-C)")
    s.set_defaults(func=cmd_sites_serve)


def cmd_sites_serve(args: argparse.Namespace) -> int:
    from lynn.envs.liveweb.sites.seed import ADMIN_PASSWORD, ADMIN_USER, DEFAULT_PASSWORD
    from lynn.envs.liveweb.sites.server import SITE_NAMES, SiteServer

    sites = tuple(s.strip() for s in args.sites.split(",") if s.strip())
    bad = [s for s in sites if s not in SITE_NAMES]
    if bad or not sites:
        raise UsageError(f"unknown sites {bad}; choose from {', '.join(SITE_NAMES)}")
    ports = {s: args.port + i for i, s in enumerate(sites)} if args.port else None
    try:
        server = SiteServer(sites, host=args.host, ports=ports, data_dir=args.data)
    except RuntimeError as exc:
        raise UsageError(str(exc).splitlines()[-1]) from exc
    with server:
        for site, url in server.urls.items():
            print(f"{site:6} {url}")
        print(
            f"logins: shop/forum users (e.g. alice.anders, alice<NN>) password {DEFAULT_PASSWORD!r}; "
            f"admin {ADMIN_USER!r} / {ADMIN_PASSWORD!r}",
            flush=True,
        )
        deadline = None if args.seconds is None else time.monotonic() + args.seconds
        try:
            while server.alive() and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
    return 0
