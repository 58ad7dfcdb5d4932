"""Every task of Lynn/EVMQuest-v0 by id: the atomic and composite tables joined (``LOGIC``).

Both tables are written with :mod:`~lynn.envs.evmquest.taskkit` and import nothing back, so
any of the three modules may be imported first.
"""

from __future__ import annotations

from lynn.envs.evmquest.atomic import ATOMIC
from lynn.envs.evmquest.composites import COMPOSITES
from lynn.envs.evmquest.taskkit import TaskLogic

LOGIC: dict[str, TaskLogic] = {**ATOMIC, **COMPOSITES}
