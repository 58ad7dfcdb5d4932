"""Language-model plumbing shared by envs and agents.

- :mod:`lynn.lm.data`: the chat-format demonstration schema (JSONL) and its reader/writer.
- :mod:`lynn.lm.prompts`: observation -> chat messages renderers, one per env, and their output parsers.
- :mod:`lynn.lm.tokenizer`: byte-level BPE tokenizers trained in-repo, with a chat template.
- :mod:`lynn.lm.train`: ``lynn train lm`` (target) and draft distillation, on transformers' ``Trainer``.
- :mod:`lynn.lm.backends`: one :class:`~lynn.lm.backends.Generator` interface over transformers,
  any OpenAI-compatible server and vLLM.
- :mod:`lynn.lm.speculative`: our batched speculative decoding (strict, MARS, typical).

Nothing here imports an env, an agent, the CLI, eval or the wrappers; heavy modules (torch,
transformers) are imported inside the functions that need them.
"""

from __future__ import annotations
