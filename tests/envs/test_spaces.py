"""``lynn.envs.spaces.UnicodeText``: the one text space of every env (DESIGN: any Unicode, a working sample)."""

from __future__ import annotations

import pickle

import pytest
from gymnasium.error import CustomSpaceError
from gymnasium.spaces.utils import flatten
from gymnasium.vector.utils import create_shared_memory

from lynn.envs.spaces import MAX_TEXT, UnicodeText


def test_contains_any_unicode_up_to_max_length_and_nothing_else() -> None:
    space = UnicodeText(8)
    for text in ("", "héllo", "漢字🙂", "e\u0301\u200b", "\x00\n\t"):
        assert space.contains(text) and text in space
    assert not space.contains("123456789")  # 9 > max_length
    assert not space.contains(b"bytes") and not space.contains(None) and not space.contains(7)
    assert UnicodeText().max_length == MAX_TEXT


def test_sample_is_short_seeded_and_contained() -> None:
    a, b = UnicodeText(seed=5), UnicodeText(seed=5)
    draws = [a.sample() for _ in range(50)]
    assert draws == [b.sample() for _ in range(50)]
    assert all(isinstance(s, str) and len(s) <= 63 and s in a for s in draws)
    small = UnicodeText(3, seed=1)
    assert all(len(small.sample()) <= 3 for _ in range(50))


def test_equality_repr_and_pickle() -> None:
    space = UnicodeText(64)
    assert space == UnicodeText(64) and space != UnicodeText(65) and space != "UnicodeText(max_length=64)"
    assert repr(space) == "UnicodeText(max_length=64)"
    assert pickle.loads(pickle.dumps(space)) == space


def test_charset_helpers_refuse_it_up_front() -> None:
    # Gymnasium's Text layout holds charset indices only; a Unicode space must not pretend to fit it.
    space = UnicodeText(16)
    assert not space.is_np_flattenable
    with pytest.raises(CustomSpaceError):
        create_shared_memory(space)
    with pytest.raises(NotImplementedError):
        flatten(space, "héllo")


def test_every_env_uses_this_class() -> None:
    from lynn.envs.evmquest import evmquest_env
    from lynn.envs.liveweb import liveweb_env
    from lynn.envs.worldmodel import worldmodel_env

    assert evmquest_env.UnicodeText is liveweb_env.UnicodeText is worldmodel_env.UnicodeText is UnicodeText
