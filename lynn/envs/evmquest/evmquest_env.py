"""Lynn/EVMQuest-v0: natural-language transaction tasks on a real EVM chain (EVM-QuestBench)."""

from __future__ import annotations

import json
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from lynn.envs.evmquest.scoring import SCORINGS
from lynn.envs.evmquest.spec import SPLITS, TaskInstance, TaskSpec, instantiate, load_specs
from lynn.envs.spaces import UnicodeText

ACTION_MODES = ("script", "tx", "skill")
SCRIPT_LANGUAGES = ("python", "typescript")
MAX_TEXT = 200_000


def implemented_specs(split: str | None = None) -> list[TaskSpec]:
    """Task specs that have a validator and an oracle, optionally of one split."""
    from lynn.envs.evmquest.catalog import LOGIC

    if split not in (None, *SPLITS):
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    return [s for s in load_specs().values() if s.task_id in LOGIC and split in (None, "all", s.split)]


class EVMQuestEnv(gym.Env[dict[str, Any], str]):
    """
    ## Description
    EVM-QuestBench as a Gymnasium env. Each episode is one task instance: a natural-language
    instruction ("Send 0.042 BNB to 0x…", "Swap 12.5 USDT for BUSD on PancakeSwap V2", "How many
    CAKE are waiting to be harvested?") rendered from one of the task's templates with freshly
    drawn parameters. The chain is real: OpenZeppelin tokens, WETH9, Uniswap V2 (named
    PancakeSwap under the ``bsc`` profile), staking pools and small helper contracts, deployed
    once and restored from a snapshot at every reset.

    ## Action Space
    Text (any Unicode). ``action_mode="script"``: Python source defining
    ``execute_skill(w3, agent_address, contracts)`` that returns an unsigned transaction dict
    (``to``, ``data``, ``value``; optional ``gas`` and fee fields) or ``{"query_result": value}``.
    It runs in a contained sandbox worker and reaches the chain only through a read-only
    JSON-RPC proxy (``eth_signTypedData_v4`` is signed by the env for the agent's own address).
    A Python script may write ``abi("<Contract>", "<fn>", ...)`` for those functions of one of the env's
    published contract ABIs (the compact form, :mod:`lynn.envs.evmquest.compact`); the env expands it
    to the ``json.loads('<ABI JSON>')`` literal before running the script.
    ``action_mode="tx"``: the same as JSON — ``{"to", "data", "value"}``, ``{"contract",
    "function", "args", "value"}``, or ``{"query_result": ...}``. In both modes ``{"done": true}``
    ends a composite task. ``action_mode="skill"``: ``Discrete(n)`` over the parameterised skills
    of :mod:`lynn.envs.evmquest.skills` (each parses its arguments from the instruction); wrap the
    env in :class:`lynn.envs.evmquest.wrappers.HashedInstructionObs` for a Box observation (SB3).

    ## Observation Space
    Dict: ``instruction`` (text), ``prompt`` (a complete LLM prompt: role, chain, contracts and
    their functions, the script contract, the task), ``agent_address`` (text), ``contracts``
    (Dict name -> address text), ``chain_id`` and ``step`` (int64 scalars), ``last_result`` (text:
    receipt summary, query echo or error).

    ## Rewards
    0 until the episode ends, then ``score / 100`` where ``score`` is the sum of the weights of
    the validator's passing checks (``info["checks"]``). Composite tasks multiply by the
    step-efficiency factor ``min(1, optimal_steps / steps)``.

    ## Episode End
    Atomic tasks end after the first successful transaction or answer, or after 3 attempts.
    Composite tasks end on ``{"done": true}`` or after ``2 × optimal_steps`` steps.
    ``info["success"]``: every check passed (composites: and at least one round ran); the
    reward keeps partial credit. Query answers are strict: one value per asked quantity in the
    documented unit (:mod:`lynn.envs.evmquest.answers`; the prompt and ``info["answer_format"]``
    at reset state it); a malformed answer gives ``info["error"]`` and costs the step.

    ## Arguments
    ``task`` (id or list of ids; default all of ``split``), ``split`` (``"atomic"``,
    ``"composite"``, ``"all"``), ``chain`` (``"bsc"`` or ``"ethereum"`` profile), ``backend``
    (``"embedded"``, ``"anvil"``, ``"rpc"``), ``rpc_url``, ``fork_url`` (anvil forks it),
    ``action_mode`` (``"script"``, ``"tx"``, ``"skill"``), ``script_timeout_s`` (wall limit per script),
    ``script_language`` (``"python"``: web3.py ``execute_skill``; ``"typescript"``: ethers v6
    ``export async function executeSkill(providerUrl, agentAddress, deployedContracts)`` run by Bun in
    the same containment, :mod:`lynn.envs.evmquest.typescript`; the prompt states which is expected).

    ## Version History
    * v0: initial release.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        task: str | list[str] | None = None,
        split: str = "atomic",
        chain: str = "bsc",
        backend: str = "embedded",
        action_mode: str = "script",
        rpc_url: str | None = None,
        fork_url: str | None = None,
        script_timeout_s: float = 10.0,
        script_language: str = "python",
        scoring: str = "default",
        render_mode: str | None = None,
    ) -> None:
        from lynn.envs.evmquest.world import PROFILES, role_names

        if chain not in PROFILES:
            raise ValueError(f"unknown chain profile {chain!r}; choose one of {', '.join(PROFILES)}")
        if action_mode not in ACTION_MODES:
            raise ValueError(f"unknown action_mode {action_mode!r}; choose one of {', '.join(ACTION_MODES)}")
        if scoring not in SCORINGS:
            raise ValueError(f"unknown scoring {scoring!r}; choose one of {', '.join(SCORINGS)}")
        if backend not in ("embedded", "anvil", "rpc"):
            raise ValueError(f"unknown backend {backend!r}; choose one of embedded, anvil, rpc")
        specs = {s.task_id: s for s in implemented_specs(split)}
        if task is not None:
            wanted = [task] if isinstance(task, str) else list(task)
            all_specs = {s.task_id: s for s in implemented_specs("all")}
            unknown = [t for t in wanted if t not in all_specs]
            if unknown:
                raise ValueError(
                    f"unknown or unimplemented task(s) {unknown}; see `lynn tasks Lynn/EVMQuest-v0`"
                )
            specs = {t: all_specs[t] for t in wanted}
        if not specs:
            raise ValueError(f"no implemented task in split {split!r}")
        self.specs = specs
        self.scoring = scoring
        self.scorer = SCORINGS[scoring]()  # the profile's rules: steps, set-up, measure, score, answers
        self.split = split
        self.profile = PROFILES[chain]
        self.backend_name = backend
        self.rpc_url = rpc_url
        self.fork_url = fork_url
        self.action_mode = action_mode
        self.script_timeout_s = script_timeout_s
        if script_language not in SCRIPT_LANGUAGES:
            raise ValueError(
                f"unknown script_language {script_language!r}; choose one of {', '.join(SCRIPT_LANGUAGES)}"
            )
        self.script_language = script_language
        self.render_mode = render_mode
        self.names = role_names(self.profile)
        if action_mode == "skill":
            from lynn.envs.evmquest.skills import SKILLS

            self.action_space: spaces.Space[Any] = spaces.Discrete(len(SKILLS))
        else:
            self.action_space = UnicodeText(MAX_TEXT)
        self.observation_space = spaces.Dict(
            {
                "instruction": UnicodeText(MAX_TEXT),
                "prompt": UnicodeText(MAX_TEXT),
                "agent_address": UnicodeText(64),
                "contracts": spaces.Dict({name: UnicodeText(64) for name in sorted(self.names.values())}),
                "chain_id": spaces.Box(0, np.iinfo(np.int64).max, shape=(), dtype=np.int64),
                "step": spaces.Box(0, 1_000, shape=(), dtype=np.int64),
                "last_result": UnicodeText(MAX_TEXT),
            }
        )
        self.chain: Any = None
        self.world: Any = None
        self.sandbox: Any = None
        self._snapshot: Any = None
        self.instance: TaskInstance | None = None
        self._reset_state()

    # ------------------------------------------------------------------ set-up
    def _reset_state(self) -> None:
        self.steps = 0
        self.done = False
        self.txs: list[Any] = []
        self.answers: list[Any] = []
        self.before: dict[str, Any] = {}
        self.last_result = ""
        self._closed_by_done = False

    def _ensure_chain(self) -> None:
        if self.world is not None:
            return
        from lynn.envs.evmquest.chain import make_chain
        from lynn.envs.evmquest.world import genesis_world

        self.chain = make_chain(
            self.backend_name, self.profile.chain_id, rpc_url=self.rpc_url, fork_url=self.fork_url
        )
        self.world = genesis_world(self.chain, self.profile)
        self._snapshot = self.chain.snapshot()

    # The script sandbox's fork server is shared with the process's other EVMQuest envs (each
    # script still runs in a fresh contained child); False gives this env a server of its own.
    shared_sandbox = True

    def _ensure_sandbox(self) -> Any:
        if self.sandbox is None:
            from lynn.envs.evmquest.sandbox import Sandbox, SandboxLimits

            if self.script_language == "typescript":
                from lynn.envs.evmquest.typescript import TypeScriptSandbox

                self.sandbox = TypeScriptSandbox(
                    SandboxLimits(wall_s=self.script_timeout_s), shared=self.shared_sandbox
                )
            else:
                self.sandbox = Sandbox(
                    SandboxLimits(wall_s=self.script_timeout_s), shared=self.shared_sandbox
                )
        return self.sandbox

    @classmethod
    def list_tasks(cls, split: str | None = None, **env_kwargs: Any) -> list[dict[str, Any]]:
        """Implemented tasks (``task_id``, ``split``, ``description``, ``category``, ``optimal_steps``)."""
        return [
            {
                "task_id": s.task_id,
                "split": s.split,
                "description": s.description,
                "category": s.category,
                "optimal_steps": s.optimal_steps,
            }
            for s in implemented_specs(split)
        ]

    @property
    def agent_address(self) -> str:
        from lynn.envs.evmquest.world import AGENT

        return AGENT.address

    @property
    def task_instance(self) -> tuple[TaskInstance, dict[str, str], dict[str, Any]]:
        """Privileged agents' view (the oracle): ``(instance, role -> contract name, state measured at reset)``."""
        if self.instance is None:
            raise RuntimeError("no task instance yet: call reset() first")
        return self.instance, self.names, self.before

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        from lynn.envs.evmquest.catalog import LOGIC
        from lynn.envs.evmquest.world import FRIEND

        t0 = time.perf_counter()
        restarted = None
        if self.chain is not None and not self.chain.alive():
            # A crashed node loses the snapshot: start a new one from genesis and say so.
            restarted = f"the {self.chain.name} node had died; restarted it with a fresh genesis"
            self._drop_chain()
        self._ensure_chain()
        t_chain = time.perf_counter()
        options = options or {}
        task_id = options.get("task_id")
        if task_id is None:
            ids = sorted(self.specs)
            task_id = ids[int(self.np_random.integers(len(ids)))]
        elif task_id not in self.specs:
            all_specs = {s.task_id: s for s in implemented_specs("all")}
            if task_id not in all_specs:
                raise ValueError(f"unknown or unimplemented task_id {task_id!r}")
            self.specs[task_id] = all_specs[task_id]
        spec = self.specs[task_id]
        t_revert = time.perf_counter()
        self._snapshot = self.chain.revert(self._snapshot)
        t_reverted = time.perf_counter()
        self.world.forget_nonces()
        self._reset_state()
        globals_ = {"native": self.profile.native, "wrapped": self.profile.wrapped, "dex": self.profile.dex}
        spec = self.scorer.spec_for(spec)
        self.instance = instantiate(
            spec,
            self.np_random,
            self.agent_address,
            self.names,
            globals_,
            {"agent": self.agent_address, "friend": FRIEND.address},
        )
        from lynn.envs.evmquest import noise

        self.instance.scoring = self.scoring
        noise.reset_node_defaults(self.world)
        logic = LOGIC[task_id]
        self.scorer.setup(self.world, logic, self.instance, self.np_random)
        self.world.forget_nonces()
        # The pre-state reads in one JSON-RPC batch where the backend takes one (same values).
        self.before = self.chain.read_batched(lambda: self._measure(logic))
        t_end = time.perf_counter()
        info = {
            "task_id": task_id,
            "split": spec.split,
            "answer_format": self.answer_format(),
            "scoring": self.scoring,
            "error": restarted,
            "timings": {
                "genesis_s": t_chain - t0,
                "revert_s": t_reverted - t_revert,
                "setup_s": t_end - t_reverted,
                "reset_s": t_end - t0,
            },
        }
        return self._obs(), info

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        if self.instance is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            return (
                self._obs(),
                0.0,
                True,
                False,
                {"task_id": self.instance.task_id, "error": "episode is over; call reset()", "timings": {}},
            )
        spec = self.instance.spec
        timings: dict[str, float] = {}
        self.steps += 1
        error: str | None = None
        outcome: str = "none"
        value, error, script_info = self._run_action(action, timings)
        if error is None:
            outcome, error = self._apply(value, timings)
        node_died = self.chain is not None and not self.chain.alive()
        if node_died:  # nothing more can happen in this episode; reset() restarts the node
            error = (
                f"the {self.chain.name} node died during this step ({error or 'no error seen'}); call reset()"
            )
        self._closed_by_done = outcome == "done"
        self.last_result = error if error else self._describe(outcome)
        terminated = False
        if spec.split == "atomic":
            terminated = outcome in ("tx_ok", "answer") or self.steps >= self.max_steps(spec)
        else:
            terminated = outcome == "done" or self.steps >= self.max_steps(spec)
        terminated = terminated or node_died
        truncated = False
        info: dict[str, Any] = {
            "task_id": spec.task_id,
            "error": error,
            "outcome": outcome,
            "attempt": self.steps,
            **script_info,
        }
        reward = 0.0
        if node_died:
            info.update(success=False, score=0.0, checks=[])
            self.done = True
        elif terminated:
            t0 = time.perf_counter()
            reward, score_info = self._score()
            timings["validate_s"] = time.perf_counter() - t0
            info.update(score_info)
            self.done = True
        info["timings"] = timings
        return self._obs(), reward, terminated, truncated, info

    # ------------------------------------------------------------------ actions
    def _run_action(self, action: Any, timings: dict[str, float]) -> tuple[Any, str | None, dict[str, Any]]:
        t0 = time.perf_counter()
        if self.action_mode == "skill":
            return self._run_skill(action, timings)
        if not isinstance(action, str):
            return None, f"action must be a string, got {type(action).__name__}", {}
        stripped = action.strip()
        if stripped.startswith("{"):
            try:
                parsed = json.loads(stripped)
                if isinstance(parsed, dict) and parsed.get("done") is True:
                    return parsed, None, {}
            except ValueError:
                parsed = None
            if self.action_mode == "tx":
                if not isinstance(parsed, dict):
                    return None, "tx action is not a JSON object", {}
                timings["parse_s"] = time.perf_counter() - t0
                return self._from_tx_json(parsed)
        if self.action_mode == "tx":
            return None, 'tx action must be a JSON object such as {"to": ..., "data": ..., "value": ...}', {}
        if not stripped:
            return None, "empty script", {}
        if self.script_language == "python" and "abi(" in action:
            from lynn.envs.evmquest.compact import expand_script

            action = expand_script(action)  # the compact form's abi("Contract", "fn") -> its published ABI
        result = self._ensure_sandbox().run(
            action, self.agent_address, self.world.contracts, self._handle_rpc
        )
        timings["script_s"] = time.perf_counter() - t0
        extra = {"script_stdout": result.stdout, "rpc_calls": result.rpc_calls}
        if result.violations:
            return (
                None,
                f"script used methods the read-only proxy refuses: {', '.join(result.violations)}",
                extra,
            )
        if not result.ok:
            return None, f"script failed: {result.error}", extra
        return result.value, None, extra

    def _run_skill(self, action: Any, timings: dict[str, float]) -> tuple[Any, str | None, dict[str, Any]]:
        from lynn.envs.evmquest.skills import SKILL_NAMES, SkillContext, run_skill

        assert self.instance is not None
        try:
            index = int(action)
        except (TypeError, ValueError):
            return None, f"skill action must be an integer, got {action!r}", {}
        ctx = SkillContext(
            self.instance.instruction, self.names, self.world.addresses, self.agent_address, self.world
        )
        t0 = time.perf_counter()
        value, error = run_skill(index, ctx)
        timings["skill_s"] = time.perf_counter() - t0
        extra = {"skill": SKILL_NAMES[index] if 0 <= index < len(SKILL_NAMES) else None}
        return value, error, extra

    def _from_tx_json(self, obj: dict[str, Any]) -> tuple[Any, str | None, dict[str, Any]]:
        if "contract" not in obj:
            return obj, None, {}
        from lynn.envs.evmquest.world import ROLE_ARTIFACT, artifact

        by_name = {name: role for role, name in self.names.items()}
        role = by_name.get(str(obj["contract"]))
        if role is None:
            return None, f"unknown contract {obj['contract']!r}; known: {', '.join(sorted(by_name))}", {}
        try:
            contract = self.chain.w3.eth.contract(
                address=self.world.addresses[role], abi=artifact(ROLE_ARTIFACT[role])["abi"]
            )
            data = contract.encode_abi(str(obj["function"]), args=list(obj.get("args", [])))
        except Exception as exc:
            return None, f"cannot encode {obj.get('function')!r} on {obj['contract']}: {exc}", {}
        return {"to": self.world.addresses[role], "data": data, "value": obj.get("value", 0)}, None, {}

    def _handle_rpc(self, method: str, params: list[Any]) -> Any:
        from eth_account import Account

        from lynn.envs.evmquest.world import AGENT

        if method == "eth_accounts":
            return [AGENT.address]
        if method == "eth_signTypedData_v4":
            if (
                len(params) != 2
                or not isinstance(params[0], str)
                or params[0].lower() != AGENT.address.lower()
            ):
                raise PermissionError("eth_signTypedData_v4 signs only for the agent's own address")
            typed = json.loads(params[1]) if isinstance(params[1], str) else params[1]
            signed = Account.sign_typed_data(AGENT.key, full_message=typed)
            return "0x" + bytes(signed.signature).hex()
        return self.chain.raw_request(method, params)

    def _apply(self, value: Any, timings: dict[str, float]) -> tuple[str, str | None]:
        if not isinstance(value, dict):
            return (
                "none",
                f"execute_skill must return a dict (transaction or {{'query_result': ...}}), got {type(value).__name__}",
            )
        if value.get("done") is True:
            return "done", None
        if "query_result" in value:
            from lynn.envs.evmquest.catalog import LOGIC

            assert self.instance is not None
            spec = LOGIC[self.instance.task_id].answer
            composite = self.instance.spec.split == "composite"
            problem = self.scorer.check_answer(value["query_result"], spec, composite)
            if problem:
                return "bad_answer", problem
            self.answers.append(value["query_result"])
            return "answer", None
        t0 = time.perf_counter()
        record, error = self._send(value)
        timings["chain_s"] = time.perf_counter() - t0
        if error:
            return "tx_error", error
        self.txs.append(record)
        return ("tx_ok" if record.status == 1 else "tx_reverted"), (
            None if record.status == 1 else "transaction reverted"
        )

    def _send(self, tx: dict[str, Any]) -> tuple[Any, str | None]:
        from eth_utils import is_address, to_checksum_address

        from lynn.envs.evmquest.taskkit import TxRecord
        from lynn.envs.evmquest.world import AGENT, MAX_FEE, PRIORITY_FEE

        allowed = {
            "to",
            "data",
            "input",
            "value",
            "gas",
            "gasPrice",
            "maxFeePerGas",
            "maxPriorityFeePerGas",
            "from",
            "nonce",
            "chainId",
            "type",
        }
        unknown = set(tx) - allowed
        if unknown:
            return None, f"unknown transaction fields {sorted(unknown)}"
        sender = tx.get("from")
        if sender is not None and (not isinstance(sender, str) or sender.lower() != AGENT.address.lower()):
            return (
                None,
                f"transaction 'from' {sender!r} is not the agent's address {AGENT.address}; only the agent's own transactions are signed",
            )
        to = tx.get("to")
        if not isinstance(to, str) or not is_address(to):
            return None, f"transaction 'to' must be an address, got {to!r}"
        try:
            value = _to_int(tx.get("value", 0))
            data = tx.get("data", tx.get("input", "0x")) or "0x"
            if isinstance(data, (bytes, bytearray)):
                data = "0x" + bytes(data).hex()
            if not isinstance(data, str) or not data.startswith("0x"):
                raise ValueError("'data' must be 0x-prefixed hex")
            bytes.fromhex(data[2:])
            if value < 0:
                raise ValueError("'value' is negative")
        except (ValueError, TypeError) as exc:
            return None, f"bad transaction: {exc}"
        w3 = self.chain.w3
        to = to_checksum_address(to)
        base = {"from": AGENT.address, "to": to, "value": value, "data": data}
        try:
            if "gas" in tx:
                gas = _to_int(tx["gas"])
            else:
                try:
                    # Generous headroom: the estimate runs one block earlier (e.g. rewards that accrue per block
                    # add a transfer the estimate did not see).
                    gas = int(w3.eth.estimate_gas(base) * 1.5) + 50_000
                except Exception:
                    gas = 1_000_000  # it will revert on chain; the receipt records the failure
            full: dict[str, Any] = {
                **base,
                "gas": gas,
                "chainId": self.chain.chain_id,
                "nonce": w3.eth.get_transaction_count(AGENT.address),
            }
            full.pop("from")
            if "gasPrice" in tx:
                full["gasPrice"] = _to_int(tx["gasPrice"])
            else:
                full["maxFeePerGas"] = _to_int(tx.get("maxFeePerGas", MAX_FEE))
                full["maxPriorityFeePerGas"] = _to_int(tx.get("maxPriorityFeePerGas", PRIORITY_FEE))
            signed = AGENT.sign_transaction(full)
            tx_hash = w3.eth.send_raw_transaction(signed.raw_transaction)
            receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30, poll_latency=0.01)
        except Exception as exc:
            return None, f"transaction not accepted: {str(exc)[:500]}"
        fee = int(receipt["gasUsed"]) * int(receipt.get("effectiveGasPrice", full.get("gasPrice", 0)))
        record = TxRecord(
            to=to, data=data.lower(), value=value, status=int(receipt["status"]), gas_used=int(receipt["gasUsed"]),
            fee=fee, tx_hash="0x" + bytes(tx_hash).hex(), logs=list(receipt.get("logs", [])), gas_limit=gas,
        )  # fmt: skip
        return record, None

    # ------------------------------------------------------------------ scoring
    def max_steps(self, spec: TaskSpec) -> int:
        """Steps an episode of ``spec`` may take under this env's scoring profile."""
        return self.scorer.max_steps(spec)

    @property
    def split_name(self) -> str:
        """The split as leaderboards should show it: ``atomic``, or ``atomic/reference`` under the reference profile."""
        return self.scorer.split_name(self.split)

    def _measure(self, logic: Any) -> dict[str, Any]:
        """The task's measured state; under the reference profile plus what its snapshot holds."""
        assert self.instance is not None
        return self.scorer.measure(self.world, logic, self.instance)

    def _score(self) -> tuple[float, dict[str, Any]]:
        from lynn.envs.evmquest.catalog import LOGIC
        from lynn.envs.evmquest.taskkit import Ctx

        assert self.instance is not None
        spec = self.instance.spec
        logic = LOGIC[spec.task_id]
        # Every execution round counts (failed ones too); the closing {"done": true} does not.
        rounds = self.steps - (1 if self._closed_by_done else 0)
        try:
            after = self._measure(logic)
            ctx = Ctx(self.world, self.instance.params, self.before, after, self.txs, self.answers)
            return self.scorer.score(spec, logic, ctx, rounds)
        except Exception as exc:  # a validator must not take the env down
            return 0.0, {"checks": [], "score": 0.0, "success": False, "error": f"validation failed: {exc}"}

    # ------------------------------------------------------------------ observation
    def _describe(self, outcome: str) -> str:
        if outcome == "answer":
            return f"answer recorded: {json.dumps(self.answers[-1], default=str)[:500]}"
        if outcome in ("tx_ok", "tx_reverted"):
            tx = self.txs[-1]
            return f"transaction {tx.tx_hash} status={tx.status} gas_used={tx.gas_used}"
        if outcome == "done":
            return "done"
        return ""

    def _contract_lines(self) -> list[str]:
        # Static for the life of the chain: built once, not at every observation.
        cached = getattr(self, "_contract_lines_cache", None)
        if cached is None:
            from lynn.envs.evmquest.world import ROLE_ARTIFACT, artifact, function_summary

            cached = []
            for role, name in sorted(self.names.items(), key=lambda kv: kv[1]):
                fns = function_summary(artifact(ROLE_ARTIFACT[role])["abi"])
                cached.append(f"- {name}: {self.world.addresses[role]} — {'; '.join(fns[:40])}")
            self._contract_lines_cache = cached
        return cached

    def prompt(self) -> str:
        """A complete prompt for an LLM agent."""
        from lynn.envs.evmquest.world import MAX_FEE

        assert self.instance is not None
        p = self.profile
        lines = [
            f"You are an agent operating an account on an EVM chain ({p.name} profile, chain id {p.chain_id}, "
            f"native coin {p.native}, DEX {p.dex}).",
            f"Your address: {self.agent_address}",
            "",
            "Contracts (name: address — functions):",
        ]
        lines += self._contract_lines()
        mode = (
            "Reply with Python source defining execute_skill(w3, agent_address, contracts) -> dict. `w3` is a web3.py "
            "Web3 connected through a read-only JSON-RPC proxy (eth_call, eth_getBalance, ...; eth_signTypedData_v4 "
            "for your own address). Return an unsigned transaction {'to', 'data', 'value'} (the environment signs and "
            "sends it; optional 'gas', 'maxFeePerGas') or {'query_result': value} for questions. No network, files or "
            "subprocesses are available."
            if self.action_mode == "script" and self.script_language == "python"
            else "Reply with TypeScript source (ethers v6) exporting async function executeSkill(providerUrl: string, "
            'agentAddress: string, deployedContracts: Record<string, string>). `import { ethers } from "ethers"`; '
            "new ethers.JsonRpcProvider(providerUrl) reaches a read-only JSON-RPC proxy (eth_call, eth_getBalance, ...; "
            "eth_signTypedData_v4 for your own address; no signer). Return an unsigned transaction {to, data, value} "
            "(bigint is fine; the environment signs and sends it; optional gasLimit, maxFeePerGas) or "
            "{query_result: value} for questions. It runs under Bun; no network, files or subprocesses are available."
            if self.action_mode == "script"
            else "Reply with JSON: {'to', 'data', 'value'} or {'contract': name, 'function': fn, 'args': [...], 'value': wei} "
            "or {'query_result': value}."
        )
        lines += [
            "",
            mode,
            f"Default fees when omitted: maxFeePerGas {MAX_FEE // 10**9} gwei, priority 1 gwei. Token amounts use 18 decimals.",
            *([f"Answer format: {fmt}"] if (fmt := self.answer_format()) else []),
            f'This task allows {self.max_steps(self.instance.spec)} step(s); for multi-step tasks send {{"done": true}} when finished.',
            "",
            f"Task: {self.instance.instruction}",
        ]
        return "\n".join(lines)

    def answer_format(self) -> str | None:
        """How the current task's answer must look (None when it asks no question)."""
        from lynn.envs.evmquest.catalog import LOGIC

        assert self.instance is not None
        spec = LOGIC[self.instance.task_id].answer
        return None if spec is None else self.scorer.answer_format(self.instance, spec, self.names)

    def _obs(self) -> dict[str, Any]:
        assert self.instance is not None
        return {
            "instruction": self.instance.instruction,
            "prompt": self.prompt(),
            "agent_address": self.agent_address,
            "contracts": {name: self.world.addresses[role] for role, name in self.names.items()},
            "chain_id": np.array(self.profile.chain_id, dtype=np.int64),
            "step": np.array(self.steps, dtype=np.int64),
            "last_result": self.last_result,
        }

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.instance is None:
            return None
        return f"[{self.instance.task_id}] step {self.steps}: {self.instance.instruction}\n{self.last_result}"

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        self._drop_chain()
        super().close()

    def _drop_chain(self) -> None:
        if self.chain is not None:
            self.chain.close()
            self.chain = None
            self.world = None
            self._contract_lines_cache = None


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError("boolean is not an amount")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != int(value):
            raise ValueError(f"non-integer amount {value}")
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    raise TypeError(f"cannot read an integer from {type(value).__name__}")
