"""Byte-level BPE tokenizers trained in-repo on demonstrations, with a chat template.

Built with Hugging Face ``tokenizers`` and wrapped as ``PreTrainedTokenizerFast(tokenizer_object=…)``
(building ``GPT2TokenizerFast`` from vocab/merges files silently gave an empty tokenizer here, see
FIELD-NOTES). Two choices differ from GPT-2's tokenizer, for the texts agents write:

- **no regex pre-split** (``ByteLevel(use_regex=False)``): merges may cross punctuation and spaces, so
  the boilerplate of scripts (ABI JSON, ``w3.eth.contract(address=…``) and of axtrees becomes a few
  tokens instead of hundreds — a 4k-token vocabulary halves EVMQuest script length or better;
- **digits split one by one** (``Digits(individual_digits=True)``): amounts and addresses are copied
  digit by digit, which small models learn far more easily than arbitrary multi-digit tokens.

Chat format: ``<|system|>…<|end|><|user|>…<|end|><|assistant|>…<|end|>``, no newlines around the
role tokens, so the tokens of a prompt are always a prefix of the tokens of prompt + reply (the
assistant-only loss mask relies on it; a test checks it). ``<|end|>`` is the end-of-turn (EOS) token.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SPECIAL_TOKENS = ["<|pad|>", "<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
PAD, BOS, EOS = "<|pad|>", "<|endoftext|>", "<|end|>"
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096, min_frequency: int = 2) -> Any:
    """Train a byte-level BPE on ``texts``; returns a ``PreTrainedTokenizerFast`` with the chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        max_token_length=48,  # long enough for boilerplate runs, short enough to keep merges general
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=None,
        additional_special_tokens=["<|system|>", "<|user|>", "<|assistant|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"  # batched generation pads on the left
    return fast


def chat_texts(demos: Iterable[Any]) -> Iterable[str]:
    """The raw message texts of demonstrations (tokenizer training corpus)."""
    for d in demos:
        for m in d.messages:
            yield m["content"]


def encode_chat(
    tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool = True
) -> list[int]:
    """Token ids of ``messages`` in the tokenizer's chat format (a prompt when the last turn is the user's)."""
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_generation_prompt)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 may return a BatchEncoding
        ids = ids["input_ids"]
    return list(ids)


def encode_example(
    tokenizer: Any, messages: list[dict[str, str]], max_len: int
) -> dict[str, list[int]] | None:
    """``input_ids`` and ``labels`` (-100 outside the assistant's reply) for a demonstration.

    The prompt is cut from the left of the user turn when too long (the reply is never cut); returns
    ``None`` when even the reply plus a minimal prompt does not fit ``max_len``.
    """
    prompt = encode_chat(tokenizer, messages[:-1], add_generation_prompt=True)
    full = encode_chat(tokenizer, messages, add_generation_prompt=False)
    if full[: len(prompt)] != prompt:
        raise ValueError(
            "chat template is not prefix-stable: prompt tokens are not a prefix of the full chat"
        )
    reply = full[len(prompt) :]
    if len(reply) + 8 > max_len:
        return None
    if len(full) > max_len:
        keep = max_len - len(reply)
        prompt = prompt[-keep:]
        full = prompt + reply
    labels = [-100] * len(prompt) + reply
    return {"input_ids": full, "labels": labels}
