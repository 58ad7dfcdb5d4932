#!/usr/bin/env bash
# Every figure that waits for a GPU machine (16 cores + one H200), in one run of at most ~8 minutes:
# speculative decoding (strict / MARS / typical / HF assisted / greedy, batch 1 and 8) on the demo pair and
# on a memory-bound random target, the vLLM backend's tests, the LiveWeb step at the machine's cores, and
# GRPO co-located vs push_pull. Writes OUT/device_check.json (figures + the command of each step).
#   scripts/device_check.sh [--out results/device] [--dry-run] [--only specdec,bigtarget,vllm,liveweb,grpo]
# --dry-run: the same plan on CPU at toy sizes (tests/bench/test_device_check.py runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
exec "$PY" -m lynn.bench.device "$@"
