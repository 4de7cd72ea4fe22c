/**
 * An agent in TypeScript on Node: the official `openai` client (6.49.0, the newest release that
 * supports Node 20; 7.x needs Node 22) asking the Responses API at OPENAI_BASE_URL, and the
 * official MCP TypeScript SDK (`@modelcontextprotocol/sdk` 1.32.2) for its tools:
 * StreamableHTTPClientTransport at HARNESS_MCP_URL, or StdioClientTransport running the
 * shell-quoted HARNESS_MCP_COMMAND when AGENT_MCP=stdio. Compiled by `tsc` (typescript 7.0.2,
 * `npm run build`) to dist/agent.js, which `node` runs.
 *
 * State: the conversation (the Responses API's input items) in `conversation.json` in the
 * working folder, written atomically (temp file, fsync, rename, fsync of the folder) after
 * each model answer and after each tool result. A restart reads it back and carries on:
 * a function call the model asked for whose output the file does not hold is run (again),
 * then the model is asked, until it answers with text, which is printed (exit 0).
 */
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import OpenAI from "openai";
import type { ResponseInputItem } from "openai/resources/responses/responses";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const STATE = "conversation.json";
const TASK = "Carry out the task step by step with the tools you have, then say you are done.";

type Item = ResponseInputItem;

function load(): Item[] {
  try {
    return JSON.parse(readFileSync(STATE, "utf8")) as Item[];
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    return [{ role: "user", content: TASK }];
  }
}

function save(conversation: Item[]): void {
  const temp = `${STATE}.tmp`;
  const fd = openSync(temp, "w");
  writeFileSync(fd, JSON.stringify(conversation));
  fsyncSync(fd);
  closeSync(fd);
  renameSync(temp, STATE);
  const dir = openSync(".", "r");
  fsyncSync(dir);
  closeSync(dir);
}

async function connect(): Promise<Client> {
  const client = new Client({ name: "node-example-agent", version: "1.0.0" });
  if (process.env.AGENT_MCP === "stdio") {
    const command = process.env.HARNESS_MCP_COMMAND ?? "";
    const env = Object.fromEntries(
      Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined),
    );
    await client.connect(
      new StdioClientTransport({ command: "/bin/sh", args: ["-c", `exec ${command}`], env }),
    );
  } else {
    await client.connect(new StreamableHTTPClientTransport(new URL(process.env.HARNESS_MCP_URL!)));
  }
  return client;
}

async function runTool(mcp: Client, name: string, args: string): Promise<string> {
  try {
    const result = await mcp.callTool({ name, arguments: JSON.parse(args || "{}") });
    const content = (result.content ?? []) as { type: string; text?: string }[];
    return content.map((part) => (part.type === "text" ? part.text : "")).join("");
  } catch (error) {
    return `the tool call was interrupted, its outcome unknown: ${error}`;
  }
}

async function main(): Promise<number> {
  const conversation = load();
  const openai = new OpenAI(); // OPENAI_BASE_URL and OPENAI_API_KEY from the environment
  const mcp = await connect();
  const { tools: listed } = await mcp.listTools();
  const tools = listed.map((tool) => ({
    type: "function" as const,
    name: tool.name,
    description: tool.description ?? "",
    parameters: tool.inputSchema as Record<string, unknown>,
    strict: false,
  }));
  for (;;) {
    // The calls of the model's last answer whose output is not in the conversation yet.
    const answered = new Set(
      conversation.flatMap((i) => (i.type === "function_call_output" ? [i.call_id] : [])),
    );
    const waiting = conversation.flatMap((i) =>
      i.type === "function_call" && !answered.has(i.call_id) ? [i] : [],
    );
    if (waiting.length > 0) {
      for (const call of waiting) {
        const output = await runTool(mcp, call.name, call.arguments);
        conversation.push({ type: "function_call_output", call_id: call.call_id, output });
        save(conversation);
      }
      continue;
    }
    const response = await openai.responses.create({ model: "gpt-4.1", input: conversation, tools });
    conversation.push(...(response.output as Item[]));
    save(conversation);
    if (!response.output.some((item) => item.type === "function_call")) {
      console.log(response.output_text);
      await mcp.close();
      return 0;
    }
  }
}

process.exitCode = await main();
