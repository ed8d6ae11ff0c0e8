// Lab 05 Part 4's "Run it in the page": the reader types a prompt and the model the page describes runs in their
// browser (onnx-worker.js, a Web Worker, so the page stays responsive). Nothing is fetched before the button, which
// says how many MB it fetches (summed from the files at build time: residlab/course/lab05/run_in_page.py), and
// everything comes from this site. Shown per position: every boundary's norm, the cosine between consecutive
// boundaries, each write's norm, the logit lens' top tokens at every boundary; then one write zeroed (its total
// effect: everything after it recomputed), or one block input patched from a second prompt (its patch recovery, as
// residlab audit defines it), and the logit difference of two tokens the reader names, before and after.
(function () {
  "use strict";

  const SCRIPT = document.currentScript ? document.currentScript.src : location.href;
  const LOAD_LIMIT_S = 300; // the model's and the runtime's download and start, on a slow connection
  let worker = null, nextId = 0;
  const waiting = new Map();

  function element(tag, attributes = {}, children = []) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    node.append(...[].concat(children));
    return node;
  }

  function ask(request) {
    if (!worker) {
      worker = new Worker(new URL("onnx-worker.js", SCRIPT), { type: "module" });
      worker.onmessage = ({ data }) => { const resolve = waiting.get(data.id); waiting.delete(data.id); if (resolve) resolve(data); };
      worker.onerror = (event) => { event.preventDefault(); for (const resolve of waiting.values()) resolve({ type: "error", message: "the model could not start in this browser" }); waiting.clear(); };
    }
    const id = ++nextId;
    return new Promise((resolve) => {
      // A worker that gave no answer in time is ended, so the next press starts afresh rather than queueing behind it.
      const timer = setTimeout(() => {
        worker.terminate();
        worker = null;
        const answered = [...waiting.values()];
        waiting.clear();
        answered.forEach((answer) => answer({ type: "error", message: `no answer within ${LOAD_LIMIT_S} s; press again to start afresh` }));
      }, LOAD_LIMIT_S * 1000);
      waiting.set(id, (answer) => { clearTimeout(timer); resolve(answer); });
      worker.postMessage({ id, ...request });
    });
  }

  const quoted = (piece) => JSON.stringify(piece);
  const fixed = (value, digits = 3) => (Object.is(Number(value.toFixed(digits)), -0) ? 0 : value).toFixed(digits);

  // The vector of output `name` at one position: a view into its (1, T, width) data.
  function vector(outputs, name, position) {
    const { dims, data } = outputs[name];
    const width = dims[dims.length - 1];
    return data.subarray(position * width, (position + 1) * width);
  }
  const norm = (v) => Math.sqrt(v.reduce((sum, x) => sum + x * x, 0));
  const dot = (a, b) => a.reduce((sum, x, i) => sum + x * b[i], 0);
  const difference = (a, b) => a.map((x, i) => x - b[i]);

  // H_0..H_L: every block's input, then the last block's output.
  function boundaryNames(depth) {
    return [...Array.from({ length: depth }, (_, b) => `blocks.${b}.resid_pre`), `blocks.${depth - 1}.resid_post`];
  }

  function table(caption, headers, rows, id) {
    return element("div", { class: "rl-table-box", id }, element("table", { class: "table rl-table rl-wide" }, [
      element("caption", {}, caption),
      element("thead", {}, element("tr", {}, headers.map((h) => element("th", { scope: "col" }, h)))),
      element("tbody", {}, rows.map((row) => element("tr", {}, row.map((cell, i) => element(i ? "td" : "th", i ? {} : { scope: "row" }, cell))))),
    ]));
  }

  function build(root, data) {
    const depth = data.depth, k = data.lens_top_k;
    const megabytes = (data.download_bytes / 1e6).toFixed(1);
    const prompt = element("input", { type: "text", id: "onnx-prompt", value: "The capital of France is", "aria-label": "Prompt", style: "width: 100%; max-width: 36em" });
    const runButton = element("button", { type: "button", class: "btn btn-primary btn-sm", id: "onnx-run" }, `Download ${megabytes} MB and run`);
    const fetchNote = element("p", { id: "onnx-fetch-note" },
      `Nothing is downloaded until you press the button: then ${megabytes} MB (the model and its runtime) from this site, once. The model runs in your browser; nothing you type leaves it.`);
    // A status box has a fixed height (a longer message never moves the page) and is a tab stop, so a keyboard can
    // scroll a message longer than it.
    const status = element("p", { class: "rl-status", id: "onnx-status", role: "status", "aria-live": "polite", tabindex: "0" },
      "Not run yet.");
    const results = element("div", { id: "onnx-results", hidden: "" });
    const position = element("select", { id: "onnx-position", "aria-label": "Position" });
    const tables = element("div");
    const site = element("select", { id: "onnx-write", "aria-label": "Write to zero" });
    for (let b = 0; b < depth; b++) {
      site.append(element("option", { value: `attn_write:${b}` }, `block ${b}, attention`), element("option", { value: `mlp_write:${b}` }, `block ${b}, MLP`));
    }
    const zeroPosition = element("select", { id: "onnx-zero-position", "aria-label": "Position of the write" });
    const target = element("input", { type: "text", id: "onnx-target", value: " Paris", "aria-label": "Target token" });
    const rival = element("input", { type: "text", id: "onnx-rival", value: " Madrid", "aria-label": "Rival token" });
    const zeroButton = element("button", { type: "button", class: "btn btn-outline-primary btn-sm", id: "onnx-zero" }, "Zero this write");
    const effect = element("p", { class: "rl-status rl-summary", id: "onnx-effect", role: "status", "aria-live": "polite", tabindex: "0" },
      "Zeroing a write removes it at one position and recomputes everything after it: the change in the logit difference is the write's total effect, the audit's M(clean) − M(write zeroed).");
    const changes = element("div");
    const source = element("input", { type: "text", id: "onnx-source", value: "The capital of Spain is", "aria-label": "Second prompt", style: "width: 100%; max-width: 36em" });
    const patchBlock = element("select", { id: "onnx-patch-block", "aria-label": "Block whose input is patched" });
    for (let b = 1; b < depth; b++) patchBlock.append(element("option", { value: String(b) }, `block ${b}'s input (H${b})`));
    const patchPosition = element("select", { id: "onnx-patch-position", "aria-label": "Position of the patch" });
    const patchButton = element("button", { type: "button", class: "btn btn-outline-primary btn-sm", id: "onnx-patch" }, "Patch this block input");
    const patchEffect = element("p", { class: "rl-status rl-summary", id: "onnx-patch-effect", role: "status", "aria-live": "polite", tabindex: "0" },
      "Patching runs the second prompt, then yours with one block's input at one position taken from it, everything after recomputed: patching clean " +
      "(the second prompt) into corrupt (yours), whose patch recovery R = (M(yours, patched) − M(yours)) / (M(second) − M(yours)) is the share of the gap " +
      "the patch restores (1 all, 0 none). It is carried by the last write before that block's input, block b − 1's MLP write; block 0's input, the " +
      `embedding, has none, so blocks 1 to ${depth - 1} are offered.`);
    const patchChanges = element("div");
    results.append(
      element("div", { class: "rl-controls-row" }, element("label", {}, ["Position ", position])),
      tables,
      element("fieldset", {}, [element("legend", {}, "Tokens whose logit difference is measured (one each)"), element("label", {}, ["target ", target]), element("label", {}, [" rival ", rival])]),
      element("p", { class: "rl-heading" }, "Zero one write"),
      element("fieldset", {}, [element("legend", {}, "Write"), site, zeroPosition]),
      zeroButton, effect, changes,
      element("p", { class: "rl-heading" }, "Patch one block input from a second prompt"),
      element("fieldset", {}, [element("legend", {}, "Second prompt (as many tokens as yours)"), source]),
      element("fieldset", {}, [element("legend", {}, "Block input"), patchBlock, patchPosition]),
      patchButton, patchEffect, patchChanges,
    );
    root.replaceChildren(element("p", { class: "rl-heading", id: "onnx-model-line" }, data.first_line),
      fetchNote, element("label", { for: "onnx-prompt" }, "Your prompt"), prompt, element("div", {}, runButton), status, results);

    let last = null; // the last run: {ids, tokens, lensTokens, clean}
    const say = (text, error = false) => { status.textContent = text; status.classList.toggle("rl-error", error); };

    function showPosition() {
      const p = Number(position.value), names = boundaryNames(depth);
      const states = names.map((name) => vector(last.clean, name, p));
      const boundaryRows = names.map((name, i) => {
        const cosine = i ? dot(states[i], states[i - 1]) / (norm(states[i]) * norm(states[i - 1])) : null;
        const lens = last.lensTokens.slice(((i * last.ids.length) + p) * k, ((i * last.ids.length) + p + 1) * k).map(quoted).join(", ");
        return [`H${i} (${name})`, fixed(norm(states[i])), cosine === null ? "—" : fixed(cosine), lens];
      });
      const writeRows = Array.from({ length: depth }, (_, b) => [`block ${b}`,
        fixed(norm(vector(last.clean, `blocks.${b}.attn_write`, p))), fixed(norm(vector(last.clean, `blocks.${b}.mlp_write`, p)))]);
      tables.replaceChildren(
        table(`Every boundary at position ${p} (${quoted(last.tokens[p])})`, ["boundary", "norm", "cosine with the previous", `logit lens, top ${k}`], boundaryRows, "onnx-boundaries"),
        table(`Every write at position ${p}`, ["block", "attention write norm", "MLP write norm"], writeRows, "onnx-writes"));
      window.residlabScrollBoxes?.watch(tables.querySelectorAll(".rl-table-box"));
    }

    async function runPrompt() {
      runButton.disabled = true;
      say(worker ? "Running…" : `Downloading ${megabytes} MB from this site and starting the model…`);
      const started = performance.now();
      const answer = await ask({ type: "run", text: prompt.value, zero: null });
      runButton.disabled = false;
      if (answer.type === "error") return say(`Not run: ${answer.message}.`, true);
      runButton.textContent = "Run";
      last = answer;
      const options = answer.tokens.map((token, p) => element("option", { value: String(p) }, `${p}: ${quoted(token)}`));
      position.replaceChildren(...options);
      zeroPosition.replaceChildren(...options.map((option) => option.cloneNode(true)));
      patchPosition.replaceChildren(...options.map((option) => option.cloneNode(true)));
      position.value = zeroPosition.value = patchPosition.value = String(answer.ids.length - 1);
      results.hidden = false;
      changes.replaceChildren();
      patchChanges.replaceChildren();
      showPosition();
      const seconds = (performance.now() - started) / 1000;
      say(`${answer.ids.length} tokens, run in ${seconds.toFixed(1)} s in this browser.`);
    }

    async function single(text, what) {
      const answer = await ask({ type: "tokenize", strings: [text] });
      if (answer.type === "error") throw new Error(answer.message);
      if (answer.ids[0].length !== 1) throw new Error(`the ${what} ${quoted(text)} is ${answer.ids[0].length} tokens; name one token`);
      return answer.ids[0][0];
    }

    // M = logit(target) − logit(rival) at the last position, the audit's metric.
    async function metricOf() {
      const targetId = await single(target.value, "target"), rivalId = await single(rival.value, "rival");
      if (targetId === rivalId) throw new Error("the target and the rival are the same token");
      const end = last.ids.length - 1;
      return (logits) => logits.data[end * logits.dims[2] + targetId] - logits.data[end * logits.dims[2] + rivalId];
    }
    const metricName = () => `Logit difference ${quoted(target.value)} − ${quoted(rival.value)} at the last position`;

    // How far each boundary from H_first on moved (norm of the change) at `at` and at the last position.
    function changeTable(into, caption, first, before, after, at, id) {
      const end = last.ids.length - 1;
      const rows = boundaryNames(depth).slice(first).map((name, i) => [`H${first + i} (${name})`,
        fixed(norm(difference(vector(after, name, at), vector(before, name, at)))),
        fixed(norm(difference(vector(after, name, end), vector(before, name, end))))]);
      into.replaceChildren(table(caption, ["boundary", `at position ${at}`, `at the last position ${end}`], rows, id));
      window.residlabScrollBoxes?.watch(into.querySelectorAll(".rl-table-box"));
    }

    async function zeroWrite() {
      if (!last) return;
      zeroButton.disabled = true;
      try {
        const [write, block] = site.value.split(":"), at = Number(zeroPosition.value);
        const metric = await metricOf();
        const answer = await ask({ type: "run", ids: last.ids, zero: { site: write, block: Number(block), position: at } });
        if (answer.type === "error") throw new Error(answer.message);
        const before = metric(answer.clean.logits), after = metric(answer.zeroed.logits);
        effect.textContent = `${metricName()}: ` +
          `${fixed(before, 4)} with every write, ${fixed(after, 4)} with block ${block}'s ${write === "attn_write" ? "attention" : "MLP"} write ` +
          `zeroed at position ${at}. Total effect of that write: ${fixed(before - after, 4)}.`;
        changeTable(changes, "How far each boundary moved when the write was zeroed (norm of the change)", 0, answer.clean, answer.zeroed, at, "onnx-changes");
      } catch (error) {
        effect.textContent = `Not zeroed: ${error.message}.`;
      }
      zeroButton.disabled = false;
    }

    // R as a sentence chosen from its value, read as the audit's patch_recovery (undefined when the gap is zero).
    function recoveryWords(recovery) {
      if (recovery === null) return "undefined: the two prompts give the same logit difference, so there is no gap to recover";
      const r = Number(fixed(recovery, 4));
      const where = r === 0 ? "leaves it where it was" : r < 0 ? "moves it away from the second prompt's"
        : r < 1 ? "moves it part of the way to the second prompt's" : r === 1 ? "brings it all the way to the second prompt's" : "moves it past the second prompt's";
      return `${fixed(recovery, 4)}: the patch ${where}`;
    }

    async function patchInput() {
      if (!last) return;
      patchButton.disabled = true;
      try {
        const block = Number(patchBlock.value), at = Number(patchPosition.value);
        const metric = await metricOf();
        const answer = await ask({ type: "run", ids: last.ids, patch: { text: source.value, block, position: at } });
        if (answer.type === "error") throw new Error(answer.message);
        const yours = metric(answer.clean.logits), second = metric(answer.source.logits), patched = metric(answer.patched.logits);
        const gap = second - yours, recovery = gap === 0 ? null : (patched - yours) / gap;
        patchEffect.textContent = `${metricName()}: ${fixed(yours, 4)} for your prompt, ${fixed(second, 4)} for the second, ` +
          `${fixed(patched, 4)} for yours with block ${block}'s input at position ${at} (${quoted(last.tokens[at])}) taken from the second ` +
          `(${quoted(answer.sourceTokens[at])}), through block ${block - 1}'s MLP write there. Patch recovery R of your prompt's logit difference: ${recoveryWords(recovery)}.`;
        patchChanges.replaceChildren();
        changeTable(patchChanges, `How far each boundary from block ${block}'s input on moved when it was patched (norm of the change; earlier boundaries do not move)`,
          block, answer.clean, answer.patched, at, "onnx-patch-changes");
      } catch (error) {
        patchEffect.textContent = `Not patched: ${error.message}.`;
      }
      patchButton.disabled = false;
    }

    runButton.addEventListener("click", runPrompt);
    prompt.addEventListener("keydown", (event) => { if (event.key === "Enter") runPrompt(); });
    position.addEventListener("change", showPosition);
    zeroButton.addEventListener("click", zeroWrite);
    patchButton.addEventListener("click", patchInput);
    source.addEventListener("keydown", (event) => { if (event.key === "Enter") patchInput(); });
  }

  for (const root of document.querySelectorAll("#onnx-explorer")) {
    const source = document.getElementById(root.dataset.source);
    if (source) build(root, JSON.parse(source.textContent));
  }
})();
