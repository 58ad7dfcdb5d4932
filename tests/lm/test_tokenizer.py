"""The in-repo tokenizer: lossless round trips, a prefix-stable chat template, assistant-only labels."""

from __future__ import annotations

import pytest

from lynn.lm.tokenizer import EOS, encode_chat, encode_example, train_tokenizer

CORPUS = [
    "def execute_skill(w3, agent_address, contracts):\n    return {'to': contracts['WBNB'], 'value': 10}",
    '[e12] button "Add to cart"\n  [e13] link "Ünïcödé — naïve café" 价格 €12.50',
    "Send 0.081 BNB to 0xF599CC052535d5CeC0AD06783F60ec83760457A1.",
] * 20


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(CORPUS, vocab_size=400, min_frequency=1)


@pytest.mark.parametrize(
    "text",
    [
        *CORPUS[:3],
        "",
        "  leading and trailing  \n\n\t",
        "emoji 🦊🚀 and control \x00\x07 and rare 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "0x" + "ab" * 20 + " 123456789012345678901234567890",
    ],
)
def test_round_trip_is_lossless(tok, text: str) -> None:
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    assert len(tok) > 256 and len(ids) <= max(1, len(text.encode()))


def test_digits_are_single_tokens(tok) -> None:
    ids = tok("1234567", add_special_tokens=False)["input_ids"]
    assert [tok.decode([i]) for i in ids] == list("1234567")


def test_chat_prompt_is_a_prefix_and_labels_cover_only_the_reply(tok) -> None:
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Send 0.5 BNB"},
        {"role": "assistant", "content": "```python\nreturn 1\n```"},
    ]
    prompt = encode_chat(tok, msgs[:-1])
    full = encode_chat(tok, msgs, add_generation_prompt=False)
    assert full[: len(prompt)] == prompt
    ex = encode_example(tok, msgs, max_len=512)
    reply = [t for t, lab in zip(ex["input_ids"], ex["labels"], strict=True) if lab != -100]
    assert tok.decode(reply) == msgs[-1]["content"] + EOS
    assert ex["labels"][: len(prompt)] == [-100] * len(prompt)


def test_long_prompts_are_cut_from_the_left_never_the_reply(tok) -> None:
    msgs = [{"role": "user", "content": "x y z " * 400}, {"role": "assistant", "content": "click('e1')"}]
    ex = encode_example(tok, msgs, max_len=64)
    assert len(ex["input_ids"]) == 64
    reply = [t for t, lab in zip(ex["input_ids"], ex["labels"], strict=True) if lab != -100]
    assert tok.decode(reply) == "click('e1')" + EOS
    assert encode_example(tok, [msgs[0], {"role": "assistant", "content": "a " * 400}], max_len=64) is None
