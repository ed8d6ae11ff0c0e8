// Lab 05 Part 3's editor (Run, Check, Download, Reset) and "Run it here". The site's loader fetches this script when
// either nears the screen (assets/site/explorers.html); Python runs in python-worker.js, started by the first run:
// a run past the editor's data-limit (s) ends the worker. Code stays in local storage.
(function () {
  "use strict";

  let runLimit = 10; // seconds, from when the interpreter is ready
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

  // One run at a time: {files, fetch, argv} -> {output, exitCode, python}, or {stopped}.
  function run(request, show) {
    if (pending) return Promise.resolve(null);
    const fresh = !worker;
    if (fresh) worker = new Worker(new URL("python-worker.js", SCRIPT), { type: "module" });
    const id = ++nextId;
    return new Promise((resolve) => {
      const stop = (seconds, what) => setTimeout(() => {
        worker.terminate();
        worker = null;
        pending = null;
        resolve({ stopped: `Stopped: ${what} did not finish within ${seconds} s, so the interpreter was ended; ` +
          "the next run starts a fresh one." });
      }, seconds * 1000);
      let timer = stop(START_LIMIT_S, "the interpreter's start");
      pending = id;
      show(fresh ? "Starting Python in this page (the first time, it downloads from this site)…" : "Running…");
      worker.onmessage = ({ data }) => {
        if (data.id !== id) return;
        clearTimeout(timer);
        if (data.type === "started") { timer = stop(runLimit, "the program"); show("Running…"); return; }
        pending = null;
        resolve(data);
      };
      worker.postMessage({ id, ...request });
    });
  }

  const absolute = (url) => new URL(url, document.baseURI).href;

  function outputBox(id, label) {
    return element("pre", { class: "rl-python-output", id, tabindex: "0", role: "status", "aria-live": "polite",
      "aria-label": label });
  }

  function finished(result, box, prefix) {
    if (!result) return;
    box.textContent = result.stopped ? result.stopped :
      prefix(result) + (result.output || "(nothing printed)") + (result.exitCode ? `\n[exit status ${result.exitCode}]` : "");
  }

  const interpreter = (result) => result.python ? `# ${result.python.cpython}, Pyodide ${result.python.pyodide}, in this page\n` : "";

  function buildEditor(root) {
    const [skeleton, checker] = [root.dataset.skeleton, root.dataset.checker].map(absolute);
    const help = element("p", { id: "toy-editor-help", class: "rl-python-help" },
      "Tab indents and Shift+Tab removes an indent; press Esc, then Tab, to move on. Your code is kept in this browser.");
    const code = element("textarea", { id: "toy-editor-code", class: "rl-python-code", rows: "22", spellcheck: "false",
      autocapitalize: "off", autocomplete: "off", wrap: "off", "aria-describedby": "toy-editor-help" });
    const buttons = ["Run", "Check", "Download as .py", "Reset to skeleton"].map((text) =>
      element("button", { type: "button", class: "btn btn-sm " + (text.length < 6 ? "btn-primary" : "btn-outline-secondary") }, text));
    const [runButton, checkButton, downloadButton, resetButton] = buttons;
    const box = outputBox("toy-editor-output", "What your code printed");
    root.replaceChildren(element("label", { for: code.id, class: "rl-heading" }, "Your toy (my_toy.py)"), help, code,
      element("div", { class: "rl-checker-actions" }, buttons), box);

    const save = () => { try { localStorage.setItem(STORE, code.value); } catch (error) { /* storage off */ } };
    const loadSkeleton = () => fetch(skeleton).then((response) => response.text());
    // The learner's kept code, or the skeleton (fetched now: this script came when the editor neared the screen).
    let kept = null;
    try { kept = localStorage.getItem(STORE); } catch (error) { /* storage off */ }
    if (kept !== null) code.value = kept;
    else {
      code.placeholder = "Loading the skeleton…";
      loadSkeleton().then((text) => { if (!code.value) code.value = text; code.placeholder = ""; });
    }

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
      save();
    });
    code.addEventListener("blur", () => { tabFree = false; });
    code.addEventListener("input", save);

    runButton.addEventListener("click", async () => {
      finished(await run({ files: { "my_toy.py": code.value }, argv: ["my_toy.py"] }, (text) => { box.textContent = text; }), box, interpreter);
    });
    checkButton.addEventListener("click", async () => {
      finished(await run({ files: { "my_toy.py": code.value }, fetch: { "check_toy.py": checker },
        argv: ["check_toy.py", "my_toy.py"] }, (text) => { box.textContent = text; }), box, interpreter);
    });
    downloadButton.addEventListener("click", () => {
      const link = element("a", { href: URL.createObjectURL(new Blob([code.value], { type: "text/x-python" })), download: "my_toy.py" });
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
      code.value = await loadSkeleton();
      save();
      box.textContent = "The skeleton is back.";
    });
  }

  function buildRunner(root) {
    const { name } = root.dataset, script = absolute(root.dataset.script);
    const argumentsInput = element("input", { type: "text", id: "toy-runner-arguments", value: root.dataset.arguments,
      class: "rl-python-arguments", spellcheck: "false", autocomplete: "off" });
    const button = element("button", { type: "button", class: "btn btn-sm btn-primary" }, "Run it here");
    const box = outputBox("toy-runner-output", "The runner's report");
    root.replaceChildren(element("label", { for: argumentsInput.id }, `python3 ${name}`), " ", argumentsInput, " ", button, box);
    button.addEventListener("click", async () => {
      const argv = [name, ...argumentsInput.value.trim().split(/\s+/).filter(Boolean)];
      finished(await run({ fetch: { [name]: script }, argv }, (text) => { box.textContent = text; }), box, interpreter);
    });
  }

  function start() {
    const limit = Number(document.querySelector(".residlab-python[data-limit]")?.dataset.limit);
    if (limit > 0) runLimit = limit;
    document.querySelectorAll(".residlab-python[data-skeleton]").forEach(buildEditor);
    document.querySelectorAll(".residlab-python[data-script]").forEach(buildRunner);
    window.residlabPython = Object.freeze({ started: () => nextId > 0, limitSeconds: () => runLimit });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
