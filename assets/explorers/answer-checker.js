// Lab 05 "Check your trace": the learner types the vectors, norms and readouts of their hand trace and gets,
// per entry, right or wrong with a hint that does not give the answer away. Nothing is shown until asked.
//
// The expected values are computed here, in the page, by the toy explorer's exact arithmetic
// (toy-trace.js exports it as window.residlabToyArithmetic): fractions of BigInts, a norm kept as the root
// of its exact square. A typed value is one of
//   a number as the toy explorer and the runner read it (toy-trace.js's parseEntry: an integer, a fraction such as
//   -1/2, a decimal such as 4.123), or a root with an optional rational factor and divisor (sqrt(17), 2*sqrt(2),
//   √8, sqrt(17)/2), compared exactly (sqrt(32) equals 4*sqrt(2)). A decimal of d places is right when it equals
//   the value or, with d >= 3, lies less than 10^-d from it (rounded or truncated); with fewer places and as
//   close, "imprecise". A vector is three such values as the toy reads one (vectorPieces: [1, 2, 0], [3;-2;0]ᵀ).
// What the site prints is read as the page means it (asTyped), so a copied label, hint or solution reads right.
// Each entry element names the toy quantity it asks for (data-key); the site's tests type into the form and
// compare every verdict with residlab.course.lab05.toy.
(function () {
  "use strict";

  const INPUT_MAX_CHARACTERS = 80;
  const ORDINALS = ["first", "second", "third"];

  // ---- the entries: what each asks for, and how to recompute it without being told the answer ---------------

  const VECTOR = "vector", NORM = "norm", SCALAR = "scalar";
  const ENTRIES = {
    1: [
      ["first_update", "F(x)", VECTOR, "F(x) = [−x₁, 2, 0], read from x."],
      ["intermediate", "y = x + F(x)", VECTOR, "add F(x) to x coordinate by coordinate."],
      ["second_update", "G(y)", VECTOR, "G(y) = [y₂, −y₂, 2y₁], read from y, not from x."],
      ["final", "z = y + G(y)", VECTOR, "add G(y) to y coordinate by coordinate."],
      ["total_change", "z − x", VECTOR, "subtract x from z coordinate by coordinate."],
      ["input.norm", "‖x‖", NORM, "x"],
      ["first_update.norm", "‖F(x)‖", NORM, "F(x)"],
      ["intermediate.norm", "‖y‖", NORM, "y"],
      ["second_update.norm", "‖G(y)‖", NORM, "G(y)"],
      ["final.norm", "‖z‖", NORM, "z"],
      ["total_change.norm", "‖z − x‖", NORM, "z − x"],
    ],
    2: [
      ["first_suppressed.final", "z, first branch suppressed", VECTOR, "F writes zeros, so G reads x itself."],
      ["second_suppressed.final", "z, second branch suppressed", VECTOR, "G writes zeros; F's update still happens."],
      ["parallel.final", "z_parallel = x + F(x) + G(x)", VECTOR, "G reads the original x here."],
      ["shortcut", "old z − old F(x)", VECTOR, "subtract the baseline F(x) from the baseline z."],
      ["readout.baseline", "s, baseline", SCALAR, "s = [0, 0, 1] z reads the third coordinate of the baseline z."],
      ["readout.first_suppressed", "s, first branch suppressed", SCALAR, "s reads the third coordinate of this case's z."],
      ["readout.second_suppressed", "s, second branch suppressed", SCALAR, "s reads the third coordinate of this case's z."],
      ["readout.parallel", "s, parallel", SCALAR, "s reads the third coordinate of z_parallel."],
      ["effect.first_suppressed", "|change in s|, first branch suppressed", SCALAR, "the size of the difference between this case's s and the baseline s."],
      ["effect.second_suppressed", "|change in s|, second branch suppressed", SCALAR, "the size of the difference between this case's s and the baseline s."],
    ],
  };

  // ---- exact values: sign * sqrt(square), square a non-negative fraction -----------------------------------

  function expectedValues(T) {
    const x = T.DEFAULT_INPUT.map((text) => T.parseEntry(text, "x").value);
    const baseline = T.sequential(x, false, false);
    const cases = { first_suppressed: T.sequential(x, true, false), second_suppressed: T.sequential(x, false, true) };
    const parallel = T.vAdd(T.vAdd(x, T.F(x)), T.G(x));
    const vectors = {
      input: x, first_update: baseline.first_update, intermediate: baseline.intermediate,
      second_update: baseline.second_update, final: baseline.final, total_change: T.vSub(baseline.final, x),
      "first_suppressed.final": cases.first_suppressed.final, "second_suppressed.final": cases.second_suppressed.final,
      "parallel.final": parallel, shortcut: T.vSub(baseline.final, baseline.first_update),
    };
    const values = {};
    for (const [key, vector] of Object.entries(vectors)) {
      values[key] = { kind: VECTOR, value: vector.map(rational), shown: T.vectorText(vector) };
      const norm = T.norm(vector);
      values[key + ".norm"] = { kind: NORM, value: { sign: norm.squared.n === 0n ? 0 : 1, square: norm.squared }, shown: norm.exact };
    }
    const s = { baseline: T.readout(baseline.final), first_suppressed: T.readout(cases.first_suppressed.final),
      second_suppressed: T.readout(cases.second_suppressed.final), parallel: T.readout(parallel) };
    for (const [name, value] of Object.entries(s)) values["readout." + name] = { kind: SCALAR, value: rational(value), shown: T.exactText(value) };
    for (const name of ["first_suppressed", "second_suppressed"]) {
      const change = T.sub(s[name], s.baseline);
      const size = change.n < 0n ? T.neg(change) : change;
      values["effect." + name] = { kind: SCALAR, value: rational(size), shown: T.exactText(size) };
    }
    return values;

    function rational(q) { return { sign: q.n === 0n ? 0 : (q.n < 0n ? -1 : 1), square: T.mul(q, q) }; }
  }

  // ---- reading what the learner typed ------------------------------------------------------------------

  // The toy's minus signs and slashes, and a root's multiplication signs, as ASCII; Unicode spaces are \s.
  const asTyped = (T, text) =>
    text.replace(T.MINUS_SIGNS, "-").replace(T.SLASHES, "/").replace(/[\u00D7\u00B7\u22C5\u2219]/g, "*");

  const NUMBER = "(\\d+(?:\\.\\d*)?(?:/\\d+)?|\\.\\d+)";
  const TYPED = new RegExp(`^([+-]?)(?:${NUMBER}(?:\\*(?=sqrt|√))?)?(?:(?:sqrt|√)\\(?${NUMBER}\\)?)?(?:/(\\d+))?$`, "i");

  const unreadable = (text) => `“${text.trim()}” is not a number I can read: type an integer, a fraction such as -1/2, a root such as 2*sqrt(2), or a decimal such as 4.123.`;

  // {value: {sign, square}, decimals} (decimals: places typed, or null for an exact form) or {error}.
  function readNumber(T, text) {
    const compact = text.replace(/\s+/g, "");
    if (compact && !/sqrt|√/i.test(compact)) { // a rational number: the toy's own grammar
      const entry = T.parseEntry(text, "it"); // spaces inside a number are refused, as the toy refuses them
      if (entry.error) return { error: /zero denominator/.test(entry.error) ? `“${text.trim()}” divides by zero.` : unreadable(text) };
      const decimal = /^[+-]?[\d_]*\.([\d_]*)$/.exec(compact);
      const value = entry.value;
      return { value: { sign: value.n === 0n ? 0 : (value.n < 0n ? -1 : 1), square: T.mul(value, value) },
        decimals: decimal ? decimal[1].replaceAll("_", "").length : null, rational: value };
    }
    const match = TYPED.exec(compact);
    if (!compact || !match || (match[2] === undefined && match[3] === undefined)) return { error: unreadable(text) };
    const [, sign, factorText, radicandText, divisorText] = match;
    const parts = [factorText, radicandText].map((piece) => (piece === undefined ? { value: T.frac(1n) } : T.parseEntry(piece, "a part")));
    if (parts.some((piece) => piece.error && !/zero denominator/.test(piece.error))) return { error: unreadable(text) };
    if (parts.some((piece) => piece.error) || (divisorText !== undefined && BigInt(divisorText) === 0n)) {
      return { error: `“${text.trim()}” divides by zero.` };
    }
    let factor = parts[0].value;
    if (divisorText !== undefined) factor = T.mul(factor, T.frac(1n, BigInt(divisorText)));
    const radicand = parts[1].value;
    const square = T.mul(T.mul(factor, factor), radicand);
    const negative = sign === "-";
    const value = { sign: square.n === 0n ? 0 : (negative ? -1 : 1), square };
    return { value, decimals: null, rational: negative ? T.neg(factor) : factor }; // a root is an exact form
  }

  function readVector(T, text) {
    const pieces = T.vectorPieces(text);
    if (pieces === null) return { error: `“${text.trim()}” mixes commas and semicolons: separate the coordinates one way, as in [1, -1/2, 0] or [1; -1/2; 0].` };
    if (pieces.length !== 3 || pieces.some((piece) => !piece)) {
      return { error: `a vector here has 3 coordinates, such as [1, -1/2, 0] or [1; -1/2; 0]; “${text.trim()}” has ${pieces.filter(Boolean).length}.` };
    }
    const numbers = pieces.map((piece) => readNumber(T, piece));
    const bad = numbers.find((number) => number.error);
    return bad ? { error: bad.error } : { numbers };
  }

  // ---- comparing -----------------------------------------------------------------------------------------

  const sameValue = (a, b) => a.sign === b.sign && a.square.n === b.square.n && a.square.d === b.square.d;

  // |typed - expected| < bound, with the typed decimal exact and the expected value sign * sqrt(square).
  function closerThan(T, typed, expected, bound) {
    let low = T.sub(typed, bound), high = T.add(typed, bound);
    if (expected.sign < 0) [low, high] = [T.neg(high), T.neg(low)]; // the open interval for sqrt(square)
    if (high.n <= 0n) return false;
    return T.greater(T.mul(high, high), expected.square) && (low.n < 0n || T.greater(expected.square, T.mul(low, low)));
  }

  // "right", "imprecise" (a decimal of fewer than three places, right to the places it has) or "wrong".
  function numberVerdict(T, typed, expected) {
    if (sameValue(typed.value, expected)) return "right";
    if (typed.decimals === null || !closerThan(T, typed.rational, expected, T.frac(1n, 10n ** BigInt(typed.decimals)))) return "wrong";
    return typed.decimals >= 3 ? "right" : "imprecise";
  }
  const IMPRECISE_HINT = "right to the places you gave: give a decimal to three places, or the exact form (a fraction or a root).";

  function judge(T, expected, kind, how, text) {
    if (!text.trim()) return { verdict: "empty", hint: "" };
    if (text.length > INPUT_MAX_CHARACTERS) return { verdict: "malformed", hint: `that is ${text.length} characters; an answer here needs far fewer.` };
    text = asTyped(T, text);
    if (kind === VECTOR) {
      const typed = readVector(T, text);
      if (typed.error) return { verdict: "malformed", hint: typed.error };
      const verdicts = typed.numbers.map((number, i) => numberVerdict(T, number, expected.value[i]));
      const wrong = verdicts.map((verdict, i) => (verdict === "wrong" ? i : null)).filter((i) => i !== null);
      if (!wrong.length) return verdicts.includes("imprecise") ? { verdict: "imprecise", hint: IMPRECISE_HINT } : { verdict: "right", hint: "" };
      if (wrong.length === 1) {
        const i = wrong[0];
        const flipped = { sign: -typed.numbers[i].value.sign, square: typed.numbers[i].value.square };
        const what = sameValue(flipped, expected.value[i]) && expected.value[i].sign !== 0 ? "the sign of the" : "the";
        return { verdict: "wrong", hint: `check ${what} ${ORDINALS[i]} coordinate: ${how}` };
      }
      return { verdict: "wrong", hint: `check the ${wrong.map((i) => ORDINALS[i]).join(" and ")} coordinates: ${how}` };
    }
    const typed = readNumber(T, text);
    if (typed.error) return { verdict: "malformed", hint: typed.error };
    const verdict = numberVerdict(T, typed, expected.value);
    if (verdict !== "wrong") return { verdict, hint: verdict === "imprecise" ? IMPRECISE_HINT : "" };
    if (kind === NORM) {
      if (typed.value.sign < 0) return { verdict: "wrong", hint: "a norm is never negative." };
      const squaredNorm = expected.value.square; // typed that number itself: its square is squaredNorm squared
      if (typed.value.sign > 0 && T.equal(typed.value.square, T.mul(squaredNorm, squaredNorm))) {
        return { verdict: "wrong", hint: `that is the squared norm of ${how}: take its square root.` };
      }
      return { verdict: "wrong", hint: `square each coordinate of ${how}, add the squares, then take the square root.` };
    }
    const flipped = { sign: -typed.value.sign, square: typed.value.square };
    if (sameValue(flipped, expected.value)) return { verdict: "wrong", hint: `check the sign: ${how}` };
    return { verdict: "wrong", hint: how };
  }

  // ---- the page ----------------------------------------------------------------------------------------

  function element(tag, attributes = {}, children = []) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    for (const child of [].concat(children)) node.append(child);
    return node;
  }

  const VERDICT_TEXT = { right: "right", imprecise: "nearly", wrong: "not yet", malformed: "can't read this", empty: "" };

  function build(T, values, root) {
    const part = root.dataset.part;
    const prefix = `checker-${part}`;
    const status = element("p", { class: "rl-status", id: `${prefix}-status`, role: "status", "aria-live": "polite" },
      "Nothing is checked or shown until you ask.");
    const rows = ENTRIES[part].map(([key, label, kind, how]) => {
      const id = `${prefix}-${key.replaceAll(".", "-")}`;
      const input = element("input", {
        type: "text", id, name: key, "data-key": key, autocomplete: "off", spellcheck: "false", autocapitalize: "off",
        inputmode: "text", "aria-describedby": `${id}-verdict`,
        // a norm is never negative: its example says so
        placeholder: kind === VECTOR ? "[a, b, c]" : kind === NORM ? "e.g. 2*sqrt(3) or 5/3" : "e.g. 2*sqrt(3) or -1/3",
      });
      const verdict = element("span", { class: "rl-verdict", id: `${id}-verdict`, "data-verdict": "" });
      const answer = element("span", { class: "rl-answer", "data-answer-for": key, hidden: "" });
      return { key, kind, how, input, verdict, answer,
        node: element("div", { class: "rl-check-row" }, [element("label", { for: id }, label), input, verdict, answer]) };
    });
    const check = element("button", { type: "submit", class: "btn btn-primary btn-sm" }, "Check my answers");
    const reveal = element("button", { type: "button", class: "btn btn-outline-secondary btn-sm", "aria-expanded": "false",
      "aria-controls": rows.map((row) => row.answer.id = `${row.input.id}-answer`).join(" ") }, "Show the answers");
    const form = element("form", { class: "rl-checker-form", "aria-label": `Check your trace, Part ${part}`, novalidate: "" },
      [...rows.map((row) => row.node), element("div", { class: "rl-checker-actions" }, [check, reveal])]);
    root.replaceChildren(form, status);

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const counts = { right: 0, imprecise: 0, wrong: 0, malformed: 0, empty: 0 };
      const notes = [];
      for (const row of rows) {
        const result = judge(T, values[row.key], row.kind, row.how, row.input.value);
        counts[result.verdict] += 1;
        row.verdict.dataset.verdict = result.verdict;
        row.verdict.className = `rl-verdict rl-${result.verdict}`;
        row.verdict.textContent = result.hint ? `${VERDICT_TEXT[result.verdict]}: ${result.hint}` : VERDICT_TEXT[result.verdict];
        row.input.setAttribute("aria-invalid", result.verdict === "wrong" || result.verdict === "malformed" ? "true" : "false");
        if (result.verdict !== "right" && result.verdict !== "empty") notes.push(`${row.node.querySelector("label").textContent}: ${row.verdict.textContent}`);
      }
      const answered = rows.length - counts.empty;
      status.textContent = `${counts.right} of ${answered} answered ${answered === 1 ? "entry is" : "entries are"} right` +
        (counts.empty ? ` (${counts.empty} left empty)` : "") + "." + (notes.length ? " " + notes.join(" ") : "");
    });
    reveal.addEventListener("click", () => {
      const open = reveal.getAttribute("aria-expanded") !== "true";
      for (const row of rows) {
        row.answer.textContent = open ? `answer: ${values[row.key].shown}` : "";
        row.answer.hidden = !open;
      }
      reveal.setAttribute("aria-expanded", String(open));
      reveal.textContent = open ? "Hide the answers" : "Show the answers";
      status.textContent = open ? `The answers for Part ${part} are shown beside each entry.` : "The answers are hidden again.";
    });
  }

  function start() {
    const T = window.residlabToyArithmetic;
    if (!T) return;
    const values = expectedValues(T);
    document.querySelectorAll(".residlab-checker[data-part]").forEach((root) => build(T, values, root));
    // What the page runs, for the site's tests: the verdict on one typed entry.
    window.residlabAnswerChecker = Object.freeze({
      judge(key, text) {
        const entry = Object.values(ENTRIES).flat().find(([name]) => name === key);
        return judge(T, values[key], entry[2], entry[3], text);
      },
      // How typed rational numbers, or a vector of them, are read (tests/unit/course/test_notation.py): their exact
      // values ("p/q"), or the error.
      read(text, kind) {
        const typed = kind === VECTOR ? readVector(T, asTyped(T, text)) : readNumber(T, asTyped(T, text));
        return typed.error ? { error: typed.error } : { values: (typed.numbers || [typed]).map((number) => T.exactText(number.rational)) };
      },
      keys: Object.freeze(Object.fromEntries(Object.entries(ENTRIES).map(([part, entries]) => [part, entries.map(([key, , kind]) => [key, kind])]))),
    });
  }
  // Each checker's block names toy-trace.js (its arithmetic) before this script, and the site's loader runs a
  // block's scripts in that order (assets/site/explorers.html); if toy-trace.js failed to load (offline), the
  // checkers start when the loader's next try brings it.
  if (window.residlabToyArithmetic) start();
  else window.residlabAwaitingToyArithmetic = start;
})();
