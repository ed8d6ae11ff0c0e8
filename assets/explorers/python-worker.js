// Lab 05 Part 3: Python in a Web Worker (a module worker started by python-editor.js on the first Run, Check or
// "Run it here"). Pyodide, CPython compiled to WebAssembly, loads from the site's own copy in assets/pyodide/
// (residlab/build/pyodide_files.py puts it there); nothing is fetched from anywhere else, and nothing leaves the
// browser. A program runs here, off the page's thread, so a runaway loop never freezes the page: the page ends
// this worker when a run passes its time limit and starts a new one for the next run.
//
// A request: {id, files: {name: text}, fetch: {name: url}, argv: [script, ...args], check}. The files are written
// into the working folder (fetched ones once, then kept), argv[0] runs as __main__ with sys.argv = argv, and the
// answer is {id, type: "done", output (stdout and stderr as printed), exitCode, python}. Before running it says
// {id, type: "started"}, so that the page times the program, not the interpreter's download. argv[0] is compiled
// first: a syntax or indentation error is reported at once, with its line, as python3 reports it.
// With check: {ended: [names]}, argv[0] is check_toy.py and its check_main runs instead of its __main__ block, told
// to say {id, type: "function", name} as each function's checks start (the page gives each its own time limit:
// Pyodide has no threads) and to name the functions in ended (ended by the page in an earlier try) without calling
// them (residlab/course/lab05/code_check.py).
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
// shows only the learner's frames. check_with: check_toy.py's check_main with the page's hooks, not its __main__.
const RUN = `
import sys, traceback, types
def _residlab_run(argv, check_with=None):
    sys.argv = list(argv)
    path = argv[0]
    try:
        with open(path, encoding="utf-8") as source:
            code = compile(source.read(), path, "exec")
    except SyntaxError as error:  # before anything runs: shown at once, with its line, as python3 shows it
        sys.stderr.write("".join(traceback.format_exception_only(type(error), error)))
        sys.stderr.flush()
        return 1
    # check_toy.py as the module check_toy (in sys.modules, as an import puts it: its dataclasses look it up there)
    module = types.ModuleType("__main__" if check_with is None else "check_toy")
    module.__file__ = path
    if check_with is not None:
        sys.modules[module.__name__] = module
    namespace = module.__dict__
    try:
        exec(code, namespace)
        if check_with is not None:
            return namespace["check_main"](list(argv[1:]), before_function=check_with["started"],
                                           ended=list(check_with["ended"]))
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
  const { id, files = {}, fetch: toFetch = {}, argv, check } = data;
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
  const python = { pyodide: pyodide.version,
    cpython: pyodide.runPython("import sys, platform; f'CPython {platform.python_version()} ({sys.platform})'") };
  pyodide.runPython(RUN);
  output = "";
  self.postMessage({ id, type: "started", python });
  const checkWith = check ? pyodide.toPy({ ended: check.ended || [],
    started: (name) => self.postMessage({ id, type: "function", name }) }) : undefined;
  let exitCode;
  try {
    exitCode = pyodide.globals.get("_residlab_run")(argv, checkWith);
  } catch (error) { // the interpreter itself failed (its stack overflowed, say): the page hears it, not a silence
    output += `\nThe interpreter stopped: ${error.message}\n`;
    exitCode = null;
  } finally {
    if (checkWith) checkWith.destroy();
  }
  self.postMessage({ id, type: "done", output: output + decoder.decode(), exitCode, python });
};
