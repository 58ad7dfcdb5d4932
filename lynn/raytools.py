"""Ray start-up in one place, for the eval runner (``--backend ray``) and the Echo actor-learner.

Ray is imported inside :func:`ray_init` (extra ``ray``), so importing this module costs nothing.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["ray_init"]


def ray_init(address: str | None = None, num_cpus: int | None = None, temp_dir: str | None = None) -> bool:
    """Start (or join, with ``address``) Ray unless it is already up.

    Lynn's defaults: no dashboard, worker logs not forwarded to the driver, Ray's logging left alone,
    and ``RAY_AUTH_MODE=disabled`` unless the caller set it (otherwise Ray writes an auth token under
    the home directory).

    Args:
        address: ``HOST:PORT`` of a running cluster to join; ``None`` starts a local one.
        num_cpus: CPUs of the local cluster (``None``: all); ignored when joining.
        temp_dir: Ray's session folder for a local cluster (default ``/tmp/ray``).

    Returns:
        True if this call started (or joined) Ray, so the caller owns the ``ray.shutdown()``.
    """
    import ray

    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address:
        kwargs["address"] = address
    else:
        kwargs["num_cpus"] = num_cpus
        if temp_dir:
            kwargs["_temp_dir"] = temp_dir
    ray.init(**kwargs)
    return True
