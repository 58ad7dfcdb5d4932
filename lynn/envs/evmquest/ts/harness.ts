// Lynn/EVMQuest-v0: runs one agent TypeScript script inside the contained Bun process.
//
// The Python side (lynn/envs/evmquest/typescript.py) has already entered the network and mount
// namespaces, chrooted into a tmpfs holding only this bundle, the Bun binary and its libc,
// set rlimits, dropped to uid 65534 and loaded a seccomp filter (no socket, fork, clone of a
// process, ptrace, mount, ...). The job (source, agent address, contracts) is /job.json, read
// and removed first. File descriptor 3 is the only way out: newline-delimited JSON-RPC requests
// the env answers from its read-only whitelist, then the result line. ethers' transport and
// `fetch` are routed to it for the providerUrl only; any other URL is refused.
import * as ethers from "ethers";
import { readFileSync, readSync, unlinkSync, writeSync } from "node:fs";

const FD = 3;
const PROVIDER_URL = "http://evmquest-rpc.sandbox/";
let pending = Buffer.alloc(0);
let nextId = 0;
const captured: string[] = [];
let capturedLen = 0;

function sendLine(obj: unknown): void {
  const data = Buffer.from(JSON.stringify(obj) + "\n");
  let off = 0;
  while (off < data.length) off += writeSync(FD, data, off, data.length - off);
}

function readLine(): string {
  const chunk = Buffer.alloc(65536);
  while (true) {
    const nl = pending.indexOf(10);
    if (nl >= 0) {
      const line = pending.subarray(0, nl).toString("utf8");
      pending = pending.subarray(nl + 1);
      return line;
    }
    const n = readSync(FD, chunk, 0, chunk.length, null);
    if (n <= 0) throw new Error("RPC proxy closed");
    pending = Buffer.concat([pending, chunk.subarray(0, n)]);
  }
}

function rpc(request: any): any {
  const id = request?.id ?? null;
  nextId += 1;
  sendLine({ id: nextId, method: String(request?.method), params: Array.isArray(request?.params) ? request.params : [] });
  const reply = JSON.parse(readLine());
  const out: any = { jsonrpc: "2.0", id };
  if (reply.error !== undefined) out.error = reply.error;
  else out.result = reply.result;
  return out;
}

function answerBody(body: string): string {
  const parsed = JSON.parse(body);
  return JSON.stringify(Array.isArray(parsed) ? parsed.map(rpc) : rpc(parsed));
}

function sameUrl(url: string): boolean {
  return url.replace(/\/+$/, "") === PROVIDER_URL.replace(/\/+$/, "");
}

function denied(url: string): Error {
  return new Error(`network access is not available in the EVMQuest sandbox: ${url} (only providerUrl reaches the read-only proxy)`);
}

ethers.FetchRequest.registerGetUrl(async (req: ethers.FetchRequest) => {
  if (!sameUrl(req.url)) throw denied(req.url);
  const body = req.body ? Buffer.from(req.body).toString("utf8") : "null";
  return {
    statusCode: 200,
    statusMessage: "OK",
    headers: { "content-type": "application/json" },
    body: new Uint8Array(Buffer.from(answerBody(body))),
  };
});

const realFetch = globalThis.fetch;
(globalThis as any).fetch = async (input: any, init?: any): Promise<Response> => {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : String(input?.url);
  if (!sameUrl(url)) throw denied(url);
  let body = init?.body;
  if (body === undefined && input instanceof Request) body = await input.text();
  if (body instanceof Uint8Array) body = Buffer.from(body).toString("utf8");
  return new Response(answerBody(String(body ?? "null")), { status: 200, headers: { "content-type": "application/json" } });
};
void realFetch;

function capture(...args: unknown[]): void {
  if (capturedLen > 8000) return;
  const text = args.map((a) => (typeof a === "string" ? a : safeString(a))).join(" ");
  captured.push(text);
  capturedLen += text.length + 1;
}
function safeString(a: unknown): string {
  try {
    return typeof a === "bigint" ? a.toString() : JSON.stringify(a, (_k, v) => (typeof v === "bigint" ? v.toString() : v));
  } catch {
    return String(a);
  }
}
for (const k of ["log", "info", "warn", "error", "debug", "trace"]) (console as any)[k] = capture;

// Results: bigint -> an exact JSON integer; Uint8Array -> 0x hex; ethers' gasLimit -> gas.
const BIG = "\u0000bigint:";
function toWire(value: unknown): string {
  const text = JSON.stringify(value, (_k, v) => {
    if (typeof v === "bigint") return BIG + v.toString();
    if (v instanceof Uint8Array) return ethers.hexlify(v);
    return v;
  });
  if (text === undefined) throw new TypeError("executeSkill returned undefined");
  return text.replace(/"\\u0000bigint:(-?\d+)"/g, "$1");
}
function normalise(value: any): any {
  if (value && typeof value === "object" && !Array.isArray(value) && !("query_result" in value)) {
    const out: any = {};
    for (const [k, v] of Object.entries(value)) {
      if (v === null || v === undefined) continue;
      out[k === "gasLimit" ? "gas" : k] = v;
    }
    return out;
  }
  return value;
}

let reported = false;
function report(obj: Record<string, unknown>): void {
  reported = true;
  const stdout = captured.join("\n").slice(-4000);
  let line = `{"type":"result","ok":${obj.ok ? "true" : "false"},"stdout":${JSON.stringify(stdout)}`;
  if (obj.ok) line += `,"value":${obj.value}`;
  else line += `,"error":${JSON.stringify(String(obj.error).slice(-3000))}`;
  line += "}\n";
  if (line.length > 1 << 20) line = `{"type":"result","ok":false,"error":"result is larger than 1048576 bytes"}\n`;
  const data = Buffer.from(line);
  let off = 0;
  while (off < data.length) off += writeSync(FD, data, off, data.length - off);
}

async function main(): Promise<void> {
  const job = JSON.parse(readFileSync("/job.json", "utf8"));
  unlinkSync("/job.json");
  Bun.plugin({
    name: "evmquest",
    setup(build) {
      build.module("ethers", () => ({ exports: ethers as any, loader: "object" }));
      build.module("evmquest:agent-script", () => ({ contents: String(job.source), loader: "ts" }));
    },
  });
  let mod: any;
  try {
    mod = await import("evmquest:agent-script");
  } catch (e: any) {
    report({ ok: false, error: `script does not compile or load: ${e?.name ?? "Error"}: ${e?.message ?? e}` });
    return;
  }
  const skill = mod?.executeSkill ?? mod?.default?.executeSkill ?? (typeof mod?.default === "function" ? mod.default : undefined);
  if (typeof skill !== "function") {
    report({ ok: false, error: "the script must export executeSkill(providerUrl, agentAddress, deployedContracts)" });
    return;
  }
  try {
    const value = normalise(await skill(PROVIDER_URL, String(job.agent_address), { ...job.contracts }));
    report({ ok: true, value: toWire(value) });
  } catch (e: any) {
    const stack = String(e?.stack ?? "").split("\n").filter((l) => l.includes("agent-script")).slice(0, 6).join("\n");
    const code = e?.code !== undefined ? ` [${e.code}${e?.syscall ? " " + e.syscall : ""}]` : "";
    report({ ok: false, error: `${e?.name ?? "Error"}${code}: ${e?.shortMessage ?? e?.message ?? e}${stack ? "\n" + stack : ""}` });
  }
}

process.on("beforeExit", () => {
  if (!reported) {
    report({ ok: false, error: "executeSkill never settled: its promise is pending with nothing left to wake it" });
    process.exit(1);
  }
});

main().then(
  () => process.exit(0),
  (e) => {
    try {
      report({ ok: false, error: `harness error: ${e?.message ?? e}` });
    } finally {
      process.exit(1);
    }
  },
);
