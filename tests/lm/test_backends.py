"""The Generator backends: transformers in-process, the openai client over a real `transformers serve`,
and vLLM where it imports (GPU machines)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lynn.lm.backends import Generation, OpenAIGenerator, TransformersGenerator, cut_at_stop, make_generator
from lynn.lm.data import read_demos


def _prompts(evm_demos: Path) -> list:
    demos = read_demos(evm_demos)
    return [d.messages[:-1] for d in demos[::7]][:5] + ["Task: Send 0.5 BNB to"]


def test_stop_strings_cut_at_the_earliest() -> None:
    assert cut_at_stop("a END b STOP", ["STOP", "END"]) == ("a ", True)
    assert cut_at_stop("abc", ["x"]) == ("abc", False)


def test_batched_generation_equals_one_by_one(tiny_lm: Path, evm_demos: Path) -> None:
    gen = TransformersGenerator(tiny_lm, threads=1)
    prompts = _prompts(evm_demos)
    batched = gen.generate(prompts, max_new_tokens=24, batch_size=8)
    single = [gen.generate([p], max_new_tokens=24)[0] for p in prompts]
    assert [g.text for g in batched] == [g.text for g in single]
    assert all(isinstance(g, Generation) and g.prompt_tokens > 0 for g in batched)
    assert all(0 < g.completion_tokens <= 24 for g in batched)


def test_sampling_is_seeded(tiny_lm: Path, evm_demos: Path) -> None:
    gen = TransformersGenerator(tiny_lm, threads=1)
    p = _prompts(evm_demos)[:2]
    a = gen.generate(p, max_new_tokens=16, temperature=1.0, seed=3)
    b = gen.generate(p, max_new_tokens=16, temperature=1.0, seed=3)
    assert [g.text for g in a] == [g.text for g in b]


def test_missing_model_and_bad_options_are_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="lynn train lm"):
        TransformersGenerator(tmp_path)
    with pytest.raises(ValueError, match="llm_url"):
        make_generator(model="m", backend="openai")
    with pytest.raises(ValueError, match="unknown backend"):
        make_generator(model="m", backend="tgi")


@pytest.mark.slow
def test_openai_backend_over_transformers_serve_equals_in_process(tiny_lm: Path, evm_demos: Path) -> None:
    from lynn.lm.serve import ModelServer

    prompts = _prompts(evm_demos)
    local = TransformersGenerator(tiny_lm, threads=1).generate(prompts, max_new_tokens=24)
    with ModelServer(tiny_lm) as server:
        remote = OpenAIGenerator(server.base_url, server.model).generate(prompts, max_new_tokens=24)
        pid = server.proc.pid
    assert [g.text for g in remote] == [g.text for g in local]
    assert len({g.text for g in local}) > 1  # the prompts really lead to different replies
    assert [g.prompt_tokens for g in remote] == [g.prompt_tokens for g in local]
    assert [g.completion_tokens for g in remote] == [g.completion_tokens for g in local]
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is GPU-only here (optional extra)")
def test_vllm_backend_equals_transformers_greedy(tiny_lm: Path, evm_demos: Path) -> None:
    from lynn.lm.backends import VLLMGenerator

    prompts = _prompts(evm_demos)
    local = TransformersGenerator(tiny_lm, device="cuda").generate(prompts, max_new_tokens=24)
    remote = VLLMGenerator(tiny_lm, gpu_memory_utilization=0.2).generate(prompts, max_new_tokens=24)
    assert [g.text for g in remote] == [g.text for g in local]
