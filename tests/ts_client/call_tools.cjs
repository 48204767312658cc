// Drive a stdio MCP server with the official TypeScript SDK client (what Claude Code and the
// MCP Inspector are built on) and print what that client returns for each call, as JSON.
//
//   node call_tools.cjs SDK_DIR SPEC_JSON
//
// SDK_DIR holds node_modules/@modelcontextprotocol/sdk. SPEC_JSON:
//   {"command": "...", "args": [...], "cwd": "...", "env": {...}, "calls": [[name, args], ...],
//    "prompts": [[name, args], ...] (optional)}
// Output: {"sdk": version, "instructions": text, "tools": {name: hasOutputSchema},
//          "calls": [{result} | {thrown}], "prompt_list": [...], "prompts": [{result} | {thrown}]}
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const { createRequire } = require("node:module");

async function main() {
  const [sdkDir, specJson] = process.argv.slice(2);
  const spec = JSON.parse(specJson);
  const req = createRequire(path.join(sdkDir, "package.json"));
  const { Client } = req("@modelcontextprotocol/sdk/client/index.js");
  const { StdioClientTransport } = req("@modelcontextprotocol/sdk/client/stdio.js");
  // The package's exports map hides its package.json; read it next to the resolved entry.
  const entry = req.resolve("@modelcontextprotocol/sdk/client/index.js");
  const version = JSON.parse(
    fs.readFileSync(path.join(entry.split(`${path.sep}dist${path.sep}`)[0], "package.json"), "utf8"),
  ).version;

  const transport = new StdioClientTransport({
    command: spec.command,
    args: spec.args,
    cwd: spec.cwd,
    env: spec.env,
    stderr: "inherit",
  });
  const client = new Client({ name: "gateway-ts-test", version: "1.0.0" });
  await client.connect(transport);
  const tools = {};
  // Listing first is what makes the client validate results against each outputSchema.
  for (const tool of (await client.listTools()).tools) {
    tools[tool.name] = tool.outputSchema !== undefined;
  }
  const calls = [];
  for (const [name, args] of spec.calls) {
    try {
      calls.push({ result: await client.callTool({ name, arguments: args }) });
    } catch (err) {
      calls.push({ thrown: { code: err.code ?? null, message: String(err.message ?? err) } });
    }
  }
  const out = { sdk: version, instructions: client.getInstructions() ?? null, tools, calls };
  if (spec.prompts) {
    out.prompt_list = (await client.listPrompts()).prompts;
    out.prompts = [];
    for (const [name, args] of spec.prompts) {
      try {
        out.prompts.push({ result: await client.getPrompt({ name, arguments: args }) });
      } catch (err) {
        out.prompts.push({ thrown: { code: err.code ?? null, message: String(err.message ?? err) } });
      }
    }
  }
  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
  process.stderr.write(`call_tools.cjs: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
