// How Lab 05's JavaScript reads typed input, for tests/unit/course/test_notation.py: the toy explorer's and the answer
// checker's scripts, as the page loads them, run in node with a bare window and document. Reads [[kind, text], ...]
// (kind "number" or "vector") on stdin; writes, per input, what each reads: its exact values ("p/q"), or null.
const vm = require("vm"), fs = require("fs");
const root = process.argv[2];
const window = {};
const document = { readyState: "complete", getElementById: () => null, querySelectorAll: () => [], addEventListener() {} };
const context = vm.createContext({ window, document });
for (const name of ["toy-trace.js", "answer-checker.js"]) vm.runInContext(fs.readFileSync(`${root}/assets/explorers/${name}`, "utf8"), context);
const T = window.residlabToyArithmetic, A = window.residlabAnswerChecker;
const cases = JSON.parse(fs.readFileSync(0, "utf8"));
const out = cases.map(([kind, text]) => {
  if (kind === "number") {
    const e = T.parseEntry(text, "entry");
    return { explorer: e.error ? null : [T.exactText(e.value)], checker: A.read(text, "scalar").values || null };
  }
  const pieces = T.vectorPieces(text);
  let explorer = null;
  if (pieces && pieces.length === 3) { const es = pieces.map((p) => T.parseEntry(p, "e")); if (!es.some((e) => e.error)) explorer = es.map((e) => T.exactText(e.value)); }
  return { explorer, checker: A.read(text, "vector").values || null };
});
process.stdout.write(JSON.stringify(out));
