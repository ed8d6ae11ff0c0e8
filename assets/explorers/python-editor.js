// Lab 05 Part 3's editor (Run, Check, Download, Reset) and "Run it here". The site's loader fetches this script when
// either nears the screen (assets/site/explorers.html), after the editor's CodeMirror bundle (assets/editor/, built
// by residlab/build/editor_bundle.py); if that bundle did not load, the code is edited in a plain textarea instead.
// This script builds the editor and the runner at once, whichever block neared first, so both blocks name the
// bundle before it.
// Python runs in python-worker.js, started by the first run: a run past the editor's data-limit (s) ends the worker,
// and Check gives each function data-function-limit (s), then checks the others again in a fresh worker.
// Code stays in local storage.
(function () {
  "use strict";

  let runLimit = 10; // seconds, from when the interpreter is ready
  let functionLimit = 5; // seconds for one function's checks
  const START_LIMIT_S = 120; // the interpreter's download and start
  const STORE = "residlab.lab05.my_toy.py";
  const INDENT = "    ";
  const SCRIPT = document.currentScript ? document.currentScript.src : location.href;
  let worker = null, pending = null, nextId = 0;

  function element(tag, attributes = {}, children = []) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    node.append(...[].concat(children));
    return node;
  }

  function endWorker() {
    worker.terminate();
    worker = null;
    pending = null;
  }

  // One run at a time: {files, fetch, argv, check} -> {output, exitCode, python}, {stopped}, or for a Check whose
  // function ran past its limit {ended: name} (the worker is ended; the caller checks again without it).
  function run(request, show) {
    if (pending) return Promise.resolve(null);
    const fresh = !worker;
    if (fresh) worker = new Worker(new URL("python-worker.js", SCRIPT), { type: "module" });
    const id = ++nextId;
    return new Promise((resolve) => {
      let timer = null;
      const limit = (seconds, ended) => {
        clearTimeout(timer);
        timer = setTimeout(() => { endWorker(); resolve(ended); }, seconds * 1000);
      };
      const stopped = (seconds, what) => ({ stopped: `Stopped: ${what} did not finish within ${seconds} s, so the ` +
        "interpreter was ended; the next run starts a fresh one." });
      limit(START_LIMIT_S, stopped(START_LIMIT_S, "the interpreter's start"));
      pending = id;
      show(fresh ? "Starting Python in this page (the first time, it downloads from this site)…" : "Running…");
      worker.onmessage = ({ data }) => {
        if (data.id !== id) return;
        if (data.type === "started") { limit(runLimit, stopped(runLimit, "the program")); show("Running…"); return; }
        if (data.type === "function") { limit(functionLimit, { ended: data.name }); show(`Checking ${data.name}…`); return; }
        clearTimeout(timer);
        pending = null;
        resolve(data);
      };
      worker.postMessage({ id, ...request });
    });
  }

  // Check: each function its own time limit. One that runs past it is named by the checker (it is passed as ended)
  // and the others are checked again in a fresh interpreter, each try ending at most one more function.
  async function check(request, show) {
    const ended = [];
    for (;;) {
      const note = ended.length ? `${ended.join(", ")} did not finish within ${functionLimit} s; checking the others ` +
        "again in a fresh interpreter. " : "";
      const result = await run({ ...request, check: { ended } }, (text) => show(note + text));
      if (!result || !result.ended) return result;
      ended.push(result.ended);
    }
  }

  const absolute = (url) => new URL(url, document.baseURI).href;

  // The output box holds what the program printed, exactly (a runner's JSON report can be copied from it whole);
  // what ran it, its exit status, or why it stopped is said in the status line above it.
  function outputBoxes(id, label) {
    const status = element("p", { class: "rl-python-status", id: `${id}-status`, role: "status", "aria-live": "polite" });
    const box = element("pre", { class: "rl-python-output", id, tabindex: "0", role: "region", "aria-label": label });
    return [status, box];
  }

  function showing(status, box) {
    return (text) => { status.textContent = text; box.textContent = ""; };
  }

  function finished(result, status, box) {
    if (!result) return;
    if (result.stopped) { status.textContent = result.stopped; return; }
    box.textContent = result.output || "";
    const ran = result.python ? `Ran with ${result.python.cpython}, Pyodide ${result.python.pyodide}, in this page` : "Did not run";
    const exit = result.exitCode === null || result.exitCode === undefined ? "" : `; exit status ${result.exitCode}`;
    status.textContent = `${ran}${exit}${result.output ? "." : "; it printed nothing."}`;
  }

  // The code: CodeMirror when its bundle loaded (window.residlabCodeEditor), else a textarea that indents with Tab.
  function codeField(label, help, onChange) {
    const editor = window.residlabCodeEditor;
    if (editor) {
      const parent = element("div", { class: "rl-python-code", id: "toy-editor-code" });
      const view = editor.create({ parent, labelledBy: label.id, describedBy: help.id, onChange });
      return { node: parent, get: view.get, set: view.set };
    }
    const code = element("textarea", { id: "toy-editor-code", class: "rl-python-code", rows: "22", spellcheck: "false",
      autocapitalize: "off", autocomplete: "off", wrap: "off", "aria-labelledby": label.id, "aria-describedby": help.id });
    let tabFree = false; // after Esc, Tab leaves the editor
    code.addEventListener("keydown", (event) => {
      if (event.key === "Escape") { tabFree = true; return; }
      if (event.key === "Enter" && !event.shiftKey) {
        const start = code.selectionStart, line = code.value.slice(code.value.lastIndexOf("\n", start - 1) + 1, start);
        const indent = line.match(/^\s*/)[0] + (/:\s*$/.test(line) ? INDENT : "");
        event.preventDefault();
        code.setRangeText("\n" + indent, start, code.selectionEnd, "end");
      } else if (event.key === "Tab" && !tabFree && !event.altKey && !event.ctrlKey && !event.metaKey) {
        event.preventDefault();
        const { value, selectionStart: start, selectionEnd: end } = code;
        if (!event.shiftKey && !value.slice(start, end).includes("\n")) {
          code.setRangeText(INDENT, start, end, "end");
        } else { // every line the selection touches
          const lineStart = value.lastIndexOf("\n", start - 1) + 1;
          const lines = value.slice(lineStart, end).split("\n");
          const changed = lines.map((line) => (event.shiftKey ? line.replace(/^ {1,4}/, "") : INDENT + line)).join("\n");
          code.setRangeText(changed, lineStart, end, start === end ? "end" : "select");
        }
      } else {
        return;
      }
      onChange();
    });
    code.addEventListener("blur", () => { tabFree = false; });
    code.addEventListener("input", onChange);
    return { node: code, get: () => code.value, set: (text) => { code.value = text; } };
  }

  let field = null; // the editor's code field, once built

  function buildEditor(root) {
    const [skeleton, checker] = [root.dataset.skeleton, root.dataset.checker].map(absolute);
    const label = element("p", { id: "toy-editor-label", class: "rl-heading" }, "Your toy (my_toy.py)");
    const help = element("p", { id: "toy-editor-help", class: "rl-python-help" },
      "Tab indents and Shift+Tab removes an indent; to leave the editor with the keyboard, press Esc, then Tab. " +
      "Your code is kept in this browser.");
    const save = () => { try { localStorage.setItem(STORE, field.get()); } catch (error) { /* storage off */ } };
    field = codeField(label, help, save);
    const buttons = ["Run", "Check", "Download as .py", "Reset to skeleton"].map((text) =>
      element("button", { type: "button", class: "btn btn-sm " + (text.length < 6 ? "btn-primary" : "btn-outline-secondary") }, text));
    const [runButton, checkButton, downloadButton, resetButton] = buttons;
    const [status, box] = outputBoxes("toy-editor-output", "What your code printed");
    root.replaceChildren(label, help, field.node, element("div", { class: "rl-checker-actions" }, buttons), status, box);

    const loadSkeleton = () => fetch(skeleton).then((response) => response.text());
    // The learner's kept code, or the skeleton (fetched now: this script came when the editor neared the screen).
    let kept = null;
    try { kept = localStorage.getItem(STORE); } catch (error) { /* storage off */ }
    if (kept !== null) field.set(kept);
    else {
      status.textContent = "Loading the skeleton…";
      loadSkeleton().then((text) => {
        if (!field.get()) field.set(text);
        status.textContent = "";
      });
    }

    const files = () => ({ "my_toy.py": field.get() });
    runButton.addEventListener("click", async () => {
      finished(await run({ files: files(), argv: ["my_toy.py"] }, showing(status, box)), status, box);
    });
    checkButton.addEventListener("click", async () => {
      finished(await check({ files: files(), fetch: { "check_toy.py": checker }, argv: ["check_toy.py", "my_toy.py"] },
        showing(status, box)), status, box);
    });
    downloadButton.addEventListener("click", () => {
      const link = element("a", { href: URL.createObjectURL(new Blob([field.get()], { type: "text/x-python" })), download: "my_toy.py" });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 1000);
    });
    let armed = null;
    resetButton.addEventListener("click", async () => {
      if (!armed) { // only a second press within 5 s replaces the code
        resetButton.textContent = "Press again to replace your code";
        armed = setTimeout(() => { armed = null; resetButton.textContent = "Reset to skeleton"; }, 5000);
        return;
      }
      clearTimeout(armed);
      armed = null;
      resetButton.textContent = "Reset to skeleton";
      field.set(await loadSkeleton());
      save();
      box.textContent = "";
      status.textContent = "The skeleton is back.";
    });
  }

  function buildRunner(root) {
    const { name } = root.dataset, script = absolute(root.dataset.script);
    const argumentsInput = element("input", { type: "text", id: "toy-runner-arguments", value: root.dataset.arguments,
      class: "rl-python-arguments", spellcheck: "false", autocomplete: "off" });
    const button = element("button", { type: "button", class: "btn btn-sm btn-primary" }, "Run it here");
    const [status, box] = outputBoxes("toy-runner-output", "The runner's report");
    root.replaceChildren(element("label", { for: argumentsInput.id }, `python3 ${name}`), " ", argumentsInput, " ", button,
      status, box);
    button.addEventListener("click", async () => {
      const argv = [name, ...argumentsInput.value.trim().split(/\s+/).filter(Boolean)];
      finished(await run({ fetch: { [name]: script }, argv }, showing(status, box)), status, box);
    });
  }

  function start() {
    const block = document.querySelector(".residlab-python[data-limit]");
    if (Number(block?.dataset.limit) > 0) runLimit = Number(block.dataset.limit);
    if (Number(block?.dataset.functionLimit) > 0) functionLimit = Number(block.dataset.functionLimit);
    document.querySelectorAll(".residlab-python[data-skeleton]").forEach(buildEditor);
    document.querySelectorAll(".residlab-python[data-script]").forEach(buildRunner);
    // For the browser tests: the limits, and the code whichever field holds it.
    window.residlabPython = Object.freeze({ started: () => nextId > 0, limitSeconds: () => runLimit,
      functionLimitSeconds: () => functionLimit, codeEditor: () => (window.residlabCodeEditor ? "codemirror" : "textarea"),
      code: () => field && field.get(), setCode: (text) => { field.set(text); try { localStorage.setItem(STORE, text); } catch (error) { /* storage off */ } } });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
