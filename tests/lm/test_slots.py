"""Literal slots (``lynn.lm.slots``): task-line literals become ``@A1``/``@N1`` and come back exactly."""

from __future__ import annotations

import json
import re
from pathlib import Path

from lynn.lm.data import read_demos
from lynn.lm.slots import mask_messages, mask_prompt, unmask

USER = (
    "Task: Send 25% of my CAKE (about 135.62) to 0x21D7D982F8Bd1045b8e8Cd4eA93D7D0A1Df04213, NFT #5.\n"
    "Address: 0x869055C910142a4D698Ab32d7942F6bb67D5D054\nStep: 100\n"
    "Last result: transaction 0x6ba01c40c451ae09b5b704855127ffeb74d3aa0982e8e4f0dbd07ca37c5430a7 gas_used=46701"
)


def test_task_and_result_literals_are_masked_and_the_rest_is_not() -> None:
    masked, slots = mask_prompt(USER)
    assert slots == {
        "@A1": "0x21D7D982F8Bd1045b8e8Cd4eA93D7D0A1Df04213",
        "@N1": "135.62",
        "@A2": "0x6ba01c40c451ae09b5b704855127ffeb74d3aa0982e8e4f0dbd07ca37c5430a7",
        "@N2": "46701",
    }
    task = masked.splitlines()[0]
    assert task == "Task: Send 25% of my CAKE (about @N1) to @A1, NFT #5."  # short numbers stay
    assert "Address: 0x869055C910142a4D698Ab32d7942F6bb67D5D054\nStep: 100\n" in masked  # fixed lines stay
    assert masked.endswith("transaction @A2 gas_used=@N2")


def test_a_reply_round_trips_and_digits_inside_hex_are_not_numbers() -> None:
    msgs = [
        {"role": "user", "content": USER},
        {
            "role": "assistant",
            "content": "x = '0x21D7D982F8Bd1045b8e8Cd4eA93D7D0A1Df04213'; y = 135.62 * 1135.62; z = 0xab135.62",
        },
    ]
    masked, slots = mask_messages(msgs)
    assert masked[1]["content"] == "x = '@A1'; y = @N1 * 1135.62; z = 0xab135.62"
    assert unmask(masked[1]["content"], slots) == msgs[1]["content"]
    assert unmask("'@A9' @N1", slots) == "'@A9' 135.62"  # an unknown slot is left as written


def test_every_oracle_demo_round_trips_with_no_long_literal_left_to_copy(evm_demos: Path) -> None:
    demos = read_demos(evm_demos)
    assert len(demos) > 20
    for d in demos:
        masked, slots = mask_messages(d.messages)
        assert unmask(masked[-1]["content"], slots) == d.messages[-1]["content"], d.task_id
        task = next(m["content"] for m in masked if m["role"] == "user").splitlines()[0]
        assert not re.search(r"0x[0-9a-fA-F]{8,}", task), task
        for lit in slots.values():
            assert lit not in masked[-1]["content"].replace("@", ""), (d.task_id, lit)


def test_the_policy_masks_as_its_model_was_trained(tiny_lm: Path, tmp_path: Path) -> None:
    import shutil

    from lynn.agents.llm import LMPolicy

    plain = LMPolicy(env_id="Lynn/EVMQuest-v0", model=str(tiny_lm), threads=1)
    assert plain.slots is False
    slotted = tmp_path / "slotted"
    shutil.copytree(tiny_lm, slotted, ignore=shutil.ignore_patterns("checkpoints"))
    summary = json.loads((slotted / "lynn_train.json").read_text())
    summary["config"]["slots"] = True
    (slotted / "lynn_train.json").write_text(json.dumps(summary))
    assert LMPolicy(env_id="Lynn/EVMQuest-v0", model=str(slotted), threads=1).slots is True
    assert LMPolicy(env_id="Lynn/EVMQuest-v0", model=str(slotted), threads=1, slots=False).slots is False


def test_the_policy_decodes_as_its_card_was_measured(tiny_lm: Path, tmp_path: Path) -> None:
    """A model folder's ``lynn_decode.json`` sets the default constraint; an explicit argument overrides it."""
    import shutil

    from lynn.agents.llm import LMPolicy
    from lynn.lm.constraints import LiteralCopyConstraint

    folder = tmp_path / "decoded"
    shutil.copytree(tiny_lm, folder, ignore=shutil.ignore_patterns("checkpoints"))
    assert LMPolicy(env_id="Lynn/EVMQuest-v0", model=str(folder), threads=1).generator.constraint is None
    (folder / "lynn_decode.json").write_text(json.dumps({"constraint": "copy_literals"}))
    agent = LMPolicy(env_id="Lynn/EVMQuest-v0", model=str(folder), threads=1)
    assert isinstance(agent.generator.constraint, LiteralCopyConstraint)
    off = LMPolicy(env_id="Lynn/EVMQuest-v0", model=str(folder), threads=1, constraint="none")
    assert off.generator.constraint is None
