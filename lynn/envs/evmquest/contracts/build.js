#!/usr/bin/env node
// Compile Lynn/EVMQuest-v0's Solidity with the pinned solc-js and write ABI/bytecode artifacts.
// Also copies WETH9 (canonical-weth) and Uniswap V2 factory/pair/router02 from their npm builds,
// so the Python runtime needs no node. Output is deterministic: same inputs, same bytes.
"use strict";
const fs = require("fs");
const path = require("path");

const ROOT = path.resolve(__dirname, "..", "..", "..", "..");
const NODE_MODULES = path.join(ROOT, "node_modules");
const solc = require(path.join(NODE_MODULES, "solc"));
const OUT = process.argv[2] ? path.resolve(process.argv[2]) : path.join(__dirname, "..", "artifacts");
const SOURCES = ["Tokens.sol", "Staking.sol", "Simple.sol"];

function findImport(importPath) {
  const candidate = path.join(NODE_MODULES, importPath);
  if (fs.existsSync(candidate)) return { contents: fs.readFileSync(candidate, "utf8") };
  return { error: `not found: ${importPath}` };
}

function write(name, artifact) {
  const ordered = { contractName: name, source: artifact.source, abi: artifact.abi, bytecode: artifact.bytecode };
  fs.writeFileSync(path.join(OUT, `${name}.json`), JSON.stringify(ordered, null, 1) + "\n");
}

function main() {
  fs.mkdirSync(OUT, { recursive: true });
  const sources = {};
  for (const file of SOURCES) sources[file] = { content: fs.readFileSync(path.join(__dirname, file), "utf8") };
  const input = {
    language: "Solidity",
    sources,
    settings: {
      evmVersion: "cancun", // py-evm has no osaka (solc 0.8.28's default is cancun; pinned anyway)
      optimizer: { enabled: true, runs: 200 },
      // No metadata hash: bytecode then depends on the sources and settings only.
      metadata: { bytecodeHash: "none" },
      outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImport }));
  const errors = (output.errors || []).filter((e) => e.severity === "error");
  if (errors.length) {
    for (const e of errors) console.error(e.formattedMessage);
    process.exit(1);
  }
  const names = [];
  for (const file of SOURCES) {
    for (const [name, contract] of Object.entries(output.contracts[file]).sort()) {
      write(name, { source: `lynn/envs/evmquest/contracts/${file} (solc ${solc.version()})`, abi: contract.abi, bytecode: "0x" + contract.evm.bytecode.object });
      names.push(name);
    }
  }
  const vendored = [
    ["WETH9", "canonical-weth/build/contracts/WETH9.json"],
    ["UniswapV2Factory", "@uniswap/v2-core/build/UniswapV2Factory.json"],
    ["UniswapV2Pair", "@uniswap/v2-core/build/UniswapV2Pair.json"],
    ["UniswapV2Router02", "@uniswap/v2-periphery/build/UniswapV2Router02.json"],
  ];
  for (const [name, rel] of vendored) {
    const raw = JSON.parse(fs.readFileSync(path.join(NODE_MODULES, rel), "utf8"));
    let bytecode = raw.bytecode || (raw.evm && raw.evm.bytecode && raw.evm.bytecode.object);
    if (!bytecode.startsWith("0x")) bytecode = "0x" + bytecode;
    const pkg = rel.split("/build/")[0];
    const version = JSON.parse(fs.readFileSync(path.join(NODE_MODULES, pkg, "package.json"), "utf8")).version;
    write(name, { source: `npm ${pkg}@${version}`, abi: raw.abi, bytecode });
    names.push(name);
  }
  console.log(`wrote ${names.length} artifacts to ${OUT}: ${names.join(", ")}`);
}

main();
