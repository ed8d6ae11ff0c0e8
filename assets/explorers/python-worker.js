// Lab 05 Part 3: Python in a Web Worker (a module worker started by python-editor.js on the first Run, Check or
// "Run it here"). Pyodide, CPython compiled to WebAssembly, loads from the site's own copy in assets/pyodide/
// (residlab/build/pyodide_files.py puts it there); nothing is fetched from anywhere else, and nothing leaves the
// browser. A program runs here, off the page's thread, so a runaway loop never freezes the page: the page ends
// this worker when a run passes its time limit and starts a new one for the next run.
//
// A request: {id, files: {name: text}, fetch: {name: url}, argv: [script, ...args]}. The files are written into
// the working folder (fetched ones once, then kept), argv[0] runs as __main__ with sys.argv = argv, and the answer
// is {id, type: "done", output (stdout and stderr as printed), exitCode, python}. Before running it says
// {id, type: "started"}, so that the page times the program, not the interpreter's download.
import { loadPyodide } from "../pyodide/pyodide.mjs";

let output = "";
const decoder = new TextDecoder();
const write = (buffer) => { output += decoder.decode(buffer, { stream: true }); return buffer.length; };
const ready = loadPyodide({ indexURL: new URL("../pyodide/", import.meta.url).href }).then((pyodide) => {
  pyodide.setStdout({ write });
  pyodide.setStderr({ write });
  return pyodide;
});
const fetched = new Map();

// Runs argv[0] as a script, as `python3 script args` would: SystemExit gives the exit status, and a traceback
// shows only the learner's frames.
const RUN = `
import os, sys, traceback
def _residlab_run(argv):
    sys.argv = list(argv)
    path = argv[0]
    with open(path, encoding="utf-8") as source:
        code = compile(source.read(), path, "exec")
    try:
        exec(code, {"__name__": "__main__", "__file__": path})
    except SystemExit as stop:
        return 0 if stop.code is None else (stop.code if isinstance(stop.code, int) else 1)
    except BaseException as error:
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        return 1
    finally:
        sys.stdout.flush(); sys.stderr.flush()
    return 0
`;

self.onmessage = async ({ data }) => {
  const { id, files = {}, fetch: toFetch = {}, argv } = data;
  let pyodide;
  try {
    pyodide = await ready;
    for (const [name, url] of Object.entries(toFetch)) {
      if (!fetched.has(name)) {
        const response = await fetch(url);
        if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
        fetched.set(name, await response.text());
      }
      pyodide.FS.writeFile(name, fetched.get(name));
    }
    for (const [name, text] of Object.entries(files)) pyodide.FS.writeFile(name, text);
  } catch (error) {
    self.postMessage({ id, type: "done", output: `The interpreter could not start: ${error.message}\n`, exitCode: null });
    return;
  }
  pyodide.runPython(RUN);
  const python = pyodide.runPython("import sys, platform; f'CPython {platform.python_version()} ({sys.platform})'");
  output = "";
  self.postMessage({ id, type: "started", python: { pyodide: pyodide.version, cpython: python } });
  const exitCode = pyodide.globals.get("_residlab_run")(argv);
  self.postMessage({ id, type: "done", output: output + decoder.decode(), exitCode, python: { pyodide: pyodide.version, cpython: python } });
};
