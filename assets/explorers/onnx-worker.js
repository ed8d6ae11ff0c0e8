// Lab 05 Part 4: the model the page describes, run in a Web Worker (a module worker the page starts when the reader
// presses the button), so the page stays responsive while the model loads and runs. The exported graph
// (residlab/pythia/onnx_export.py) and its tokenizer come from the site's own assets/onnx-model/, onnxruntime-web and
// @huggingface/tokenizers from assets/onnx-runtime/ (residlab/build/onnx_files.py puts them there); nothing is fetched
// from anywhere else, and nothing leaves the browser.
//
// Requests, each {id, type, ...}; every answer carries the request's id:
// - {type: "load"}: fetch the manifest, the tokenizer and the model, start a session -> {type: "ready", manifest}.
// - {type: "tokenize", strings} -> {type: "ids", ids: [[...], ...]} (fetches the tokenizer alone).
// - {type: "run", text | ids, zero: null | {site: "attn_write" | "mlp_write", block, position},
//   patch: null | {text, block, position}} -> {type: "result", ids, tokens, lensTokens, clean, zeroed, source,
//   sourceTokens, patched}: lensTokens the clean run's lens ids decoded, in their order; clean, zeroed, source and patched map
//   every output name to {dims, data} (data a typed array; null without their request). Zeroing is the graph's
//   additive input for that write set to minus the write the clean run carried there, everything downstream
//   recomputed: the write's total effect, as residlab audit measures it. Patching runs `patch.text` (source, the
//   same number of tokens), then this prompt with block `block`'s input at `position` replaced by the source's:
//   the graph has no additive input before block 0, so the difference is added to the last write before block
//   `block`'s input, block `block - 1`'s MLP write, at that position (blocks 1 to depth - 1).
// Any failure -> {type: "error", message}: one line.
import * as ort from "../onnx-runtime/ort.wasm.min.mjs";
import { Tokenizer } from "../onnx-runtime/tokenizers.min.mjs";

const MODEL = new URL("../onnx-model/", import.meta.url);
// The site is not cross-origin isolated (static hosts send no COOP/COEP headers): one thread, the site's own copy.
ort.env.wasm.numThreads = 1;
ort.env.wasm.wasmPaths = new URL("../onnx-runtime/", import.meta.url).href;

let session = null, tokenizer = null, manifest = null;

async function fetched(name, as) {
  const response = await fetch(new URL(name, MODEL));
  if (!response.ok) throw new Error(`${name}: the site answered ${response.status}`);
  return as === "json" ? response.json() : response;
}

async function loadTokenizer() {
  if (tokenizer) return;
  manifest = await fetched("manifest.json", "json");
  tokenizer = new Tokenizer(await fetched("tokenizer.json", "json"), {});
}

async function load() {
  if (session) return manifest;
  await loadTokenizer();
  session = await ort.InferenceSession.create(new URL("model.onnx", MODEL).href, {
    executionProviders: ["wasm"],
    externalData: [{ path: "model.onnx.data", data: new URL("model.onnx.data", MODEL).href }],
  });
  return manifest;
}

const encode = (text) => tokenizer.encode(text, { add_special_tokens: false }).ids;

function deltas(length) {
  const shape = [manifest.depth, 1, length, manifest.width];
  const size = shape.reduce((a, b) => a * b, 1);
  return Object.fromEntries(manifest.inputs.slice(1).map((name) => [name, new ort.Tensor("float32", new Float32Array(size), shape)]));
}

async function forward(ids, feeds) {
  const input = new ort.Tensor("int64", BigInt64Array.from(ids, (id) => BigInt(id)), [1, ids.length]);
  const outputs = await session.run({ input_ids: input, ...feeds });
  return Object.fromEntries(Object.entries(outputs).map(([name, tensor]) => [name, {
    dims: tensor.dims, data: tensor.type === "int64" ? Int32Array.from(tensor.data, Number) : tensor.data,
  }]));
}

const at = (outputs, name, position) => outputs[name].data.subarray(position * manifest.width, (position + 1) * manifest.width);

// This prompt run again with `added` (a vector) added to block `block`'s `site` write at `position`.
function adding(ids, site, block, position, added) {
  const feeds = deltas(ids.length), width = manifest.width;
  feeds[`${site}.delta`].data.set(added, (block * ids.length + position) * width);
  return forward(ids, feeds);
}

async function run({ text, ids, zero, patch }) {
  await load();
  ids = ids || encode(text);
  if (!ids.length) throw new Error("the prompt has no tokens: type some text");
  if (ids.length > 512) throw new Error(`the prompt is ${ids.length} tokens; this page runs at most 512`);
  const clean = await forward(ids, deltas(ids.length));
  let zeroed = null, source = null, patched = null, sourceTokens = null;
  if (zero) {
    const { site, block, position } = zero;
    if (!(block >= 0 && block < manifest.depth && position >= 0 && position < ids.length)) {
      throw new Error(`no write ${site} in block ${block} at position ${position}`);
    }
    zeroed = await adding(ids, site, block, position, at(clean, `blocks.${block}.${site}`, position).map((x) => -x));
  }
  if (patch) {
    const { block, position } = patch, from = encode(patch.text);
    if (from.length !== ids.length) {
      throw new Error(`the second prompt is ${from.length} tokens and yours ${ids.length}; patching needs the same number`);
    }
    if (!(block >= 1 && block < manifest.depth && position >= 0 && position < ids.length)) {
      throw new Error(`no block input to patch in block ${block} at position ${position}`);
    }
    source = await forward(from, deltas(from.length));
    sourceTokens = from.map((id) => tokenizer.decode([id]));
    const name = `blocks.${block}.resid_pre`, into = at(clean, name, position);
    patched = await adding(ids, "mlp_write", block - 1, position, at(source, name, position).map((x, i) => x - into[i]));
  }
  const tokens = ids.map((id) => tokenizer.decode([id]));
  const lensTokens = Array.from(clean["lens.top_ids"].data, (id) => tokenizer.decode([id]));
  return { ids, tokens, lensTokens, clean, zeroed, source, sourceTokens, patched };
}

self.onmessage = async ({ data }) => {
  const { id, type } = data;
  try {
    if (type === "load") self.postMessage({ id, type: "ready", manifest: await load() });
    else if (type === "tokenize") { await loadTokenizer(); self.postMessage({ id, type: "ids", ids: data.strings.map(encode) }); }
    else if (type === "run") self.postMessage({ id, type: "result", ...(await run(data)) });
    else throw new Error(`unknown request ${type}`);
  } catch (error) {
    self.postMessage({ id, type: "error", message: String((error && error.message) || error).split("\n")[0] });
  }
};
