// `node --import` this file to run the MCP conformance suite on Node 20. The suite's published
// build imports `globSync` from "fs", which Node has only from 22 on. Where it is missing, a
// module hook hands the suite (and only the suite) an "fs" that is Node's own plus a globSync
// from the `glob` package; the suite's files run as published. On Node 22+ this does nothing.
import fs from "node:fs";
import { register } from "node:module";
import { isMainThread } from "node:worker_threads";

const FACADE = new URL("?fs-with-globsync", import.meta.url).href;
const SUITE = "/node_modules/@modelcontextprotocol/conformance/";

export async function resolve(specifier, context, nextResolve) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL?.includes(SUITE)) {
    return { url: FACADE, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}

export async function load(url, context, nextLoad) {
  if (url !== FACADE) return nextLoad(url, context);
  const source = `
    import fs from "node:fs";
    import { globSync as glob } from "glob";
    export * from "node:fs";
    export default fs;
    export function globSync(pattern, options = {}) {
      return glob(pattern, { cwd: options.cwd ?? process.cwd() });
    }
  `;
  return { format: "module", source, shortCircuit: true };
}

// The hooks run in a thread of their own, which loads this file again: register once, from the main thread.
if (typeof fs.globSync !== "function" && isMainThread) register(import.meta.url);
