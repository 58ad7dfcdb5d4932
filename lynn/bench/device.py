"""Every figure that waits for a GPU machine, in one run: ``scripts/device_check.sh`` / ``lynn bench device``.

One run (at most ~8 minutes on 16 cores and one H200) makes, in order, each with its own time limit:

1. **speculative decoding** (``lynn bench specdec --device cuda``): strict / MARS / typical / HF assisted /
   greedy at batch 1 and 8 on the in-repo demo pair (trained on the machine; acceptance and wall time);
2. **memory-bound target**: cached forward costs of a random-weight LLaMA large enough to be memory-bound
   (``--big``, default ~1.4B parameters in bf16) for k = 1..γ+1 new tokens at batch 1 and 8, and the
   demo draft's; from these and step 1's target/draft forwards per token, each method's **projected**
   speed-up over greedy on that target (random weights are fine for speed, acceptance comes from the pair);
3. **vLLM backend tests** (``tests/lm/test_backends.py -k vllm``; skipped, and said so, without vllm);
4. **LiveWeb step** at the machine's cores (``lynn bench liveweb``);
5. **GRPO co-located against push_pull** (``benchmarks/bench_grpo.py``) on a small EVMQuest LM trained first.

It writes ``OUT/device_check.json``: per step its command, exit status, seconds, figures and the tail of its
output. ``--dry-run`` runs the same plan on CPU at toy sizes (a test runs it, so the script works the first
time it meets a GPU), each step's same command line in a fork of a process that imported torch and transformers
once (:func:`run_forked`) instead of a fresh interpreter. A step that fails is recorded and the run goes on.

    scripts/device_check.sh [--out results/device] [--dry-run]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# (hidden, layers, mlp, heads) of the memory-bound target: ~1.4B parameters, 2.8 GB in bf16.
BIG_SHAPE = (2048, 24, 5632, 16)
TOY_SHAPE = (64, 2, 128, 4)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The device check's flags."""
    ap.add_argument(
        "--out", default="results/device", help="folder of device_check.json and each step's files"
    )
    ap.add_argument("--dry-run", action="store_true", help="the same plan on CPU at toy sizes")
    ap.add_argument("--only", help="comma-separated subset of steps: specdec,bigtarget,vllm,liveweb,grpo")
    ap.add_argument("--device", default="", help="torch device (default: cuda, or cpu with --dry-run)")


def plan(out: Path, dry: bool, device: str) -> list[dict[str, Any]]:
    """The steps: name, command (argv), time limit in seconds, what it measures."""
    py = sys.executable
    demo = out / "specdec_demo"
    spec = [
        py, "-m", "lynn.cli", "bench", "specdec", "--demo", str(demo), "--device", device, "--out",
        str(out / "specdec"), "--threads", "1" if dry else "8",
    ]  # fmt: skip
    spec += (
        ["--demo-steps", "3", "--demo-docs", "40", "--n-prompts", "2", "--max-new-tokens", "8"]
        if dry
        else ["--n-prompts", "16", "--max-new-tokens", "64"]
    )
    grpo_model = out / "grpo_model"
    grpo = [
        py, str(ROOT / "benchmarks" / "bench_grpo.py"), "--model", str(grpo_model), "--out", str(out / "grpo"),
        "--configs", "colocated", "push_pull:2",
    ]  # fmt: skip
    grpo += (
        ["--updates", "1", "--groups", "1", "--group-size", "2", "--workers", "1", "--max-new-tokens", "8",
         "--tasks", "bnb_transfer_basic"]
        if dry
        else ["--updates", "6", "--workers", "4", "--max-new-tokens", "160"]
    )  # fmt: skip
    liveweb = [py, "-m", "lynn.cli", "bench", "liveweb", "--json", str(out / "liveweb.json")]
    liveweb += ["--cycles", "2", "--resets", "1"] if dry else ["--cycles", "12", "--resets", "8"]
    return [
        {"name": "specdec", "cmd": spec, "limit": 900 if dry else 180,
         "what": "strict/MARS/typical/HF assisted/greedy, batch 1 and 8, on the demo pair"},
        {"name": "bigtarget", "cmd": [py, "-m", "lynn.bench.device", "--big-target", str(out), "--device", device]
         + (["--toy"] if dry else []), "limit": 300 if dry else 90,
         "what": "forward costs of a memory-bound random target; projected speed-ups with step 1's acceptance"},
        {"name": "vllm", "cmd": [py, "-m", "pytest", str(ROOT / "tests/lm/test_backends.py"), "-k", "vllm",
                                 "-q", "-rs", "-p", "no:cacheprovider"], "limit": 600 if dry else 120,
         "what": "the vLLM backend's tests (equal to transformers greedy)",
         # The tests' own skip condition: no pytest start (a conftest, a collection) just to skip them.
         "skip": None if importlib.util.find_spec("vllm") else "vllm is not installed (the tests skip without it)"},
        {"name": "liveweb", "cmd": liveweb, "limit": 900 if dry else 120,
         "what": "LiveWeb step and reset: ours vs Playwright vs the CDP floor at this machine's cores"},
        {"name": "grpo_model", "cmd": [py, "-m", "lynn.bench.device", "--grpo-model", str(grpo_model)]
         + (["--toy"] if dry else []), "limit": 600 if dry else 40,
         "what": "a small EVMQuest LM for the GRPO comparison (oracle demos, fixed steps)"},
        {"name": "grpo", "cmd": grpo, "limit": 900 if dry else 150,
         "what": "GRPO through Echo: co-located vs push_pull (wall, learner utilisation, groups/s)"},
    ]  # fmt: skip


def _figures(name: str, out: Path) -> Any:
    """What a finished step left behind, as JSON."""
    files = {
        "specdec": out / "specdec" / "specdec.json",
        "bigtarget": out / "bigtarget.json",
        "liveweb": out / "liveweb.json",
        "grpo": out / "grpo" / "bench_grpo.json",
    }
    path = files.get(name)
    if path is None or not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError:
        return None


def run_plan(args: argparse.Namespace) -> int:
    """Run every step of :func:`plan` and write ``device_check.json``; returns 1 if a step failed."""
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    device = args.device or ("cpu" if args.dry_run else "cuda")
    steps = plan(out, args.dry_run, device)
    if args.only:
        keep = set(args.only.split(","))
        steps = [s for s in steps if s["name"] in keep or (s["name"] == "grpo_model" and "grpo" in keep)]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if args.dry_run:
        env.setdefault("LYNN_TORCH_THREADS", "1")
    # The dry run (a test runs it on 2 busy cores) forks each step from this process, which imports the steps'
    # heavy modules once: ~4 CPU-s a step less (run_forked). On the GPU machine each step is a fresh interpreter.
    forked = args.dry_run and hasattr(os, "fork")
    if forked:
        preload(DRY_RUN_PRELOAD)
    report: dict[str, Any] = {
        "dry_run": args.dry_run,
        "device": device,
        "cores": os.cpu_count(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "steps": [],
    }
    failed = False
    t_all = time.perf_counter()
    for step in steps:
        t0 = time.perf_counter()
        print(f"[device check] {step['name']}: {shlex.join(step['cmd'])}", flush=True)
        if step.get("skip"):
            rc, text = 0, f"not run: {step['skip']}"
        elif forked:
            rc, text = run_forked(step["cmd"], env, step["limit"])
        else:
            try:
                proc = subprocess.run(
                    step["cmd"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=step["limit"]
                )
                rc, text = proc.returncode, proc.stdout + proc.stderr
            except subprocess.TimeoutExpired as exc:
                rc, text = 124, f"timed out after {step['limit']} s\n" + str(exc.stdout or "")[-2000:]
        seconds = time.perf_counter() - t0
        skipped = bool(step.get("skip")) or (
            step["name"] == "vllm" and rc == 0 and " skipped" in text and " passed" not in text
        )
        entry = {
            "name": step["name"],
            "what": step["what"],
            "command": shlex.join(step["cmd"]),
            "returncode": rc,
            "status": "skipped" if skipped else ("ok" if rc == 0 else "failed"),
            "seconds": round(seconds, 1),
            "figures": _figures(step["name"], out),
            "output_tail": text[-3000:],
        }
        failed |= rc != 0
        report["steps"].append(entry)
        print(f"[device check] {step['name']}: {entry['status']} in {seconds:.0f} s", flush=True)
        (out / "device_check.json").write_text(json.dumps(report, indent=1))
    report["seconds"] = round(time.perf_counter() - t_all, 1)
    (out / "device_check.json").write_text(json.dumps(report, indent=1))
    print(f"[device check] wrote {out / 'device_check.json'} ({report['seconds']:.0f} s)")
    return 1 if failed else 0


# --- the dry run's steps: forked from a process that imported the heavy modules once ---------------------
#: What the dry run's steps import that costs seconds of CPU in each (torch, transformers, the trainer, the EVMQuest
#: chain): imported once by the plan's process, which then forks each step (see :func:`run_forked`).
DRY_RUN_PRELOAD = (
    "torch",
    "transformers",
    "transformers.models.llama.modeling_llama",
    "lynn.lm.train",
    "lynn.envs.evmquest.evmquest_env",
    "lynn.envs.evmquest.world",
)


def preload(modules: tuple[str, ...]) -> None:
    """Import ``modules`` (one that fails to import is left to the steps, which then import it themselves)."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (a step that needs it fails on its own, with its own message)
            pass


def run_forked(cmd: list[str], env: dict[str, str], limit: float) -> tuple[int, str]:
    """``(exit status, stdout + stderr)`` of ``cmd`` (``[python, -m, module, ...]`` or ``[python, script, ...]``)
    run as a fresh interpreter would run it, but in a fork of this process: what this process imported
    (:data:`DRY_RUN_PRELOAD`) is not imported again. The child gets ``env`` as its environment, the repo root as its
    working directory, the ``sys.argv`` and ``sys.path[0]`` that ``python -m`` / ``python script`` give, its own
    output file; its exit status is the interpreter's (``SystemExit``'s code, 1 on an exception, with the
    traceback on stderr; atexit handlers run). Past ``limit`` seconds it is killed: 124, as a time-out."""
    import signal
    import tempfile

    if len(cmd) < 2 or cmd[0] != sys.executable or (cmd[1] == "-m" and len(cmd) < 3):
        raise ValueError(f"not a python command: {cmd}")
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 1
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(out.fileno(), 2)
                code = _run_as_main(cmd[1:], env)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if not isinstance(exc.code, (int, type(None))):
                    print(exc.code, file=sys.stderr)
            except BaseException:  # noqa: BLE001  (as the interpreter does: a traceback and status 1)
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                try:
                    import atexit

                    atexit._run_exitfuncs()
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        deadline = time.monotonic() + limit
        timed_out = False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                timed_out = True
                break
            time.sleep(0.05)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if timed_out:
        return 124, f"timed out after {limit} s\n" + text[-2000:]
    return os.waitstatus_to_exitcode(status), text


def _run_as_main(args: list[str], env: dict[str, str]) -> int:
    """In the forked child: run ``python ARGS`` in this interpreter (see :func:`run_forked`)."""
    import runpy

    os.chdir(ROOT)
    os.environ.clear()
    os.environ.update(env)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if args[0] == "-m":
        sys.argv = [args[1], *args[2:]]  # runpy puts the module's file in argv[0]
        sys.path[0] = str(ROOT)  # ``python -m``: the working directory
        sys.path[1:1] = [p for p in extra if p not in sys.path]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(args)
        sys.path[0] = str(Path(args[0]).resolve().parent)  # ``python script``: the script's folder
        sys.path[1:1] = [p for p in extra if p not in sys.path]
        runpy.run_path(args[0], run_name="__main__")
    return 0


# --- step 2: the memory-bound target ------------------------------------------------------------------
def _forward_costs(model: Any, batch: int, prompt_len: int, ks: list[int], repeats: int) -> dict[int, float]:
    """Median seconds of one cached forward of ``k`` new tokens at ``batch`` (cache cropped back after each)."""
    import torch
    from transformers import DynamicCache

    dev = model.device
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    gen = torch.Generator(device="cpu").manual_seed(0)
    vocab = model.config.vocab_size
    out: dict[int, float] = {}

    def fwd(x: Any, cache: Any) -> None:
        try:  # transformers 5.x names it `cache`; older models take `past_key_values`
            model(input_ids=x, cache=cache, use_cache=True)
        except TypeError:
            model(input_ids=x, past_key_values=cache, use_cache=True)

    with torch.inference_mode():
        cache = DynamicCache()
        fwd(torch.randint(0, vocab, (batch, prompt_len), generator=gen).to(dev), cache)
        for k in ks:
            times = []
            for _ in range(repeats + 2):
                new = torch.randint(0, vocab, (batch, k), generator=gen).to(dev)
                sync()
                t0 = time.perf_counter()
                fwd(new, cache)
                sync()
                times.append(time.perf_counter() - t0)
                cache.crop(-k)  # back to the prompt (5.x takes only a negative count)
            out[k] = statistics.median(times[2:])
    return out


def big_target(out: Path, device: str, toy: bool) -> dict[str, Any]:
    """Step 2: forward costs of a random memory-bound target and the demo draft; projected speed-ups."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    hidden, layers, mlp, heads = TOY_SHAPE if toy else BIG_SHAPE
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    draft_dir = out / "specdec_demo" / "draft"
    draft = AutoModelForCausalLM.from_pretrained(draft_dir).eval().to(device) if draft_dir.exists() else None
    vocab = draft.config.vocab_size if draft is not None else 4096
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=4096,
    )  # fmt: skip
    with torch.device(device):  # initialised where it runs: ~1.4B random weights on the CPU take minutes
        target = LlamaForCausalLM(cfg).eval().to(dtype=dtype)
    params = sum(p.numel() for p in target.parameters())
    # Toy: one timed forward on a short prompt (the dry run checks the plumbing, its figures time nothing).
    gamma, repeats, prompt = 5, (1 if toy else 20), (16 if toy else 128)
    ks = list(range(1, gamma + 2))
    res: dict[str, Any] = {
        "target_params": params,
        "dtype": str(dtype),
        "shape": [hidden, layers, mlp, heads],
    }
    spec = json.loads((out / "specdec" / "specdec.json").read_text()) if (out / "specdec").exists() else None
    rows = spec.get("rows", []) if isinstance(spec, dict) else (spec or [])
    for batch in (1, 8):
        tt = _forward_costs(target, batch, prompt, ks, repeats)
        td = _forward_costs(draft, batch, prompt, [1], repeats)[1] if draft is not None else 0.0
        proj = {}
        for r in rows:
            if r.get("batch") != batch or not r.get("new_tokens"):
                continue
            fpt, dfpt = (
                r.get("target_forwards_per_token", r.get("forwards_per_token", 1.0)),
                r.get("draft_forwards_per_token", 0.0),
            )
            k = gamma + 1 if fpt < 0.999 else 1  # a speculative verification forward carries ~γ+1 tokens
            cost = fpt * tt[k] + dfpt * td
            proj[r["method"]] = round(tt[1] / cost, 3) if cost else None
        res[f"batch{batch}"] = {
            "target_ms": {k: round(v * 1e3, 3) for k, v in tt.items()},
            "target_k_over_1": {k: round(v / tt[1], 3) for k, v in tt.items()},
            "draft_ms": round(td * 1e3, 3),
            "projected_speedup_over_greedy": proj,
        }
        print(
            f"batch {batch}: target ms {res[f'batch{batch}']['target_ms']}, draft {td * 1e3:.2f} ms; {proj}"
        )
    (out / "bigtarget.json").write_text(json.dumps(res, indent=1))
    return res


def grpo_model(path: Path, toy: bool) -> None:
    """Step 5's model: oracle demos of a few atomic EVMQuest tasks and a fixed number of training steps."""
    from lynn.eval.collect import CollectConfig, collect
    from lynn.lm.train import TrainConfig, train_lm

    demos = path.parent / "grpo_demos"
    tasks = ["bnb_transfer_basic", "wbnb_deposit", "query_gas_price"]
    collect(
        CollectConfig(
            "Lynn/EVMQuest-v0",
            tasks=tasks,
            seeds=list(range(100_000, 100_004 if toy else 100_032)),
            out=str(demos),
            progress=False,
        )
    )
    train_lm(
        TrainConfig(
            data=str(demos),
            out=str(path),
            size="tiny" if toy else "base",
            steps=2 if toy else 200,
            batch_size=8,
            lr=3e-3,
            progress=False,
            threads=1 if toy else 0,
        )
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m lynn.bench.device``: the whole plan, or one of its in-process steps."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    ap.add_argument("--big-target", metavar="OUT", help=argparse.SUPPRESS)
    ap.add_argument("--grpo-model", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--toy", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.big_target:
        big_target(Path(args.big_target), args.device or "cpu", args.toy)
        return 0
    if args.grpo_model:
        grpo_model(Path(args.grpo_model), args.toy)
        return 0
    return run_plan(args)


def run(args: argparse.Namespace) -> int:
    """``lynn bench device``."""
    return run_plan(args)


if __name__ == "__main__":
    sys.exit(main())
