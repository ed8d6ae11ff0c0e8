// Lab 05 toy trace explorer: the arithmetic of residlab/course/lab05/toy.py (build_report), in the browser, exactly.
//
// Entries are exact fractions of BigInts; a norm keeps its exact form "sqrt(N)" (or its root when N is a
// rational square) next to its float; a float is the nearest double to the exact value, printed the way
// Python's repr prints it, so every value reads as the runner's JSON report does. Every output element names
// the report field it shows (data-field), which is how the site's tests compare the two.
(function () {
  "use strict";

  const ENTRY_MAX_CHARACTERS = 40; // bounds the work per keystroke (and keeps every float finite)
  const EXPONENT_LIMIT = 30;
  const DEFAULT_INPUT = ["1", "2", "-1"];
  const DEFAULT_SECOND = ["-2", "0", "3"];
  // The explorer opens on another input than the lab's, so it shows none of Parts 1 and 2's answers before the
  // learner has worked them (they type the lab's input to check their trace).
  const START_INPUT = ["2", "-1", "3"];
  const START_SECOND = ["1", "-3", "2"];
  const SUBSCRIPTS = ["₁", "₂", "₃"];

  // ---- exact fractions -------------------------------------------------------------------------------

  const abs = (n) => (n < 0n ? -n : n);
  function gcd(a, b) {
    a = abs(a); b = abs(b);
    while (b) [a, b] = [b, a % b];
    return a;
  }
  function frac(numerator, denominator = 1n) {
    if (denominator < 0n) { numerator = -numerator; denominator = -denominator; }
    const divisor = gcd(numerator, denominator) || 1n;
    return { n: numerator / divisor, d: denominator / divisor };
  }
  const ZERO = frac(0n);
  const add = (a, b) => frac(a.n * b.d + b.n * a.d, a.d * b.d);
  const sub = (a, b) => frac(a.n * b.d - b.n * a.d, a.d * b.d);
  const mul = (a, b) => frac(a.n * b.n, a.d * b.d);
  const neg = (a) => frac(-a.n, a.d);
  const equal = (a, b) => a.n === b.n && a.d === b.d;
  const greater = (a, b) => a.n * b.d > b.n * a.d;
  const exactText = (a) => (a.d === 1n ? a.n.toString() : `${a.n}/${a.d}`);

  function bitLength(n) { return n === 0n ? 0 : n.toString(2).length; }

  // The double nearest to n/d (ties to even), as Python's int / int gives it.
  function toFloat(a) {
    const negative = a.n < 0n;
    let p = abs(a.n), q = a.d;
    if (p === 0n) return 0;
    const shift = bitLength(p) - bitLength(q) - 60; // keep ~60 significant bits in the quotient
    if (shift > 0) q <<= BigInt(shift); else p <<= BigInt(-shift);
    let quotient = p / q;
    if (quotient * q !== p) quotient |= 1n; // sticky bit: the quotient is inexact
    const value = Number(quotient) * Math.pow(2, shift); // Number() rounds once; 2**shift is exact here
    return negative ? -value : value;
  }

  function isqrt(n) { // floor(sqrt(n)) for n >= 0
    if (n < 2n) return n;
    let x = BigInt(Math.floor(Math.sqrt(Number(n))));
    for (;;) { // Newton from a close start; settles within a few steps
      const y = (x + n / x) >> 1n;
      if (abs(y - x) <= 1n) { x = y; break; }
      x = y;
    }
    while (x * x > n) x -= 1n;
    while ((x + 1n) * (x + 1n) <= n) x += 1n;
    return x;
  }

  // ---- Python's float repr ---------------------------------------------------------------------------

  function pyFloat(x) {
    if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
    const sign = x < 0 ? "-" : "";
    const [mantissa, exponentText] = Math.abs(x).toExponential().split("e"); // shortest round-trip digits
    const digits = mantissa.replace(".", "");
    const exponent = Number(exponentText);
    const point = exponent + 1; // digits d1 d2 ... times 10**(point - len)
    if (point <= -4 || point > 16) {
      const rest = digits.slice(1);
      const power = Math.abs(exponent).toString().padStart(2, "0");
      return `${sign}${digits[0]}${rest ? "." + rest : ""}e${exponent < 0 ? "-" : "+"}${power}`;
    }
    if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
    if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}.0`;
    return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
  }

  // ---- vectors, norms, the update rules (residlab.course.lab05.toy) -------------------------------------------------

  const vectorText = (v) => "[" + v.map(exactText).join(", ") + "]";
  const vAdd = (a, b) => a.map((value, i) => add(value, b[i]));
  const vSub = (a, b) => a.map((value, i) => sub(value, b[i]));
  const dot = (a, b) => a.reduce((sum, value, i) => add(sum, mul(value, b[i])), ZERO);
  const zeros = () => [ZERO, ZERO, ZERO];
  const sameVector = (a, b) => a.every((value, i) => equal(value, b[i]));
  const F = (x) => [neg(x[0]), frac(2n), ZERO];
  const G = (y) => [y[1], neg(y[1]), mul(frac(2n), y[0])];
  const readout = (z) => z[2];

  function norm(v) {
    const squared = dot(v, v);
    const root = isqrt(squared.n * squared.d); // sqrt(p/q) = sqrt(p*q)/q
    const rational = root * root === squared.n * squared.d;
    return {
      squared,
      exact: rational ? exactText(frac(root, squared.d)) : `sqrt(${exactText(squared)})`,
      float: Math.sqrt(toFloat(squared)),
    };
  }

  function sequential(x, suppressFirst, suppressSecond) {
    const first = suppressFirst ? zeros() : F(x);
    const intermediate = vAdd(x, first);
    const second = suppressSecond ? zeros() : G(intermediate);
    return { input: x, first_update: first, intermediate, second_update: second, final: vAdd(intermediate, second) };
  }

  // The report's fields this explorer shows, keyed by their path in build_report's JSON.
  function report(x, secondPosition) {
    const fields = {};
    const vector = (path, v) => { fields[path + ".exact"] = vectorText(v); };
    const traced = (path, v) => {
      const n = norm(v);
      vector(path, v);
      fields[path + ".norm.exact"] = n.exact;
      fields[path + ".norm.float"] = pyFloat(n.float);
    };
    const number = (path, value) => {
      fields[path + ".exact"] = exactText(value);
      fields[path + ".float"] = pyFloat(toFloat(value));
    };

    const baseline = sequential(x, false, false);
    for (const name of ["input", "first_update", "intermediate", "second_update", "final"]) traced("baseline." + name, baseline[name]);
    number("baseline.readout", readout(baseline.final));
    const totalChange = vSub(baseline.final, baseline.input);
    traced("total_change", totalChange);

    const firstNorm = norm(baseline.first_update), secondNorm = norm(baseline.second_update);
    const updateDot = dot(baseline.first_update, baseline.second_update);
    fields["norm_comparison.sum_of_update_norms.exact"] = `${firstNorm.exact} + ${secondNorm.exact}`;
    fields["norm_comparison.sum_of_update_norms.float"] = pyFloat(firstNorm.float + secondNorm.float);
    const totalNorm = norm(totalChange);
    fields["norm_comparison.total_change_norm.exact"] = totalNorm.exact;
    fields["norm_comparison.total_change_norm.float"] = pyFloat(totalNorm.float);
    number("norm_comparison.update_dot_product", updateDot);
    const defined = firstNorm.squared.n !== 0n && secondNorm.squared.n !== 0n;
    fields["norm_comparison.update_cosine"] = defined
      ? pyFloat(toFloat(updateDot) / (firstNorm.float * secondNorm.float))
      : "undefined (an update is zero)";

    const cases = {
      first_suppressed: sequential(x, true, false),
      second_suppressed: sequential(x, false, true),
    };
    for (const [name, trace] of Object.entries(cases)) {
      vector(`interventions.${name}.second_update`, trace.second_update);
      vector(`interventions.${name}.final`, trace.final);
    }
    const parallelSecond = G(x);
    const parallelFinal = vAdd(vAdd(x, F(x)), parallelSecond);
    vector("interventions.parallel.second_update", parallelSecond);
    vector("interventions.parallel.final", parallelFinal);
    const shortcut = vSub(baseline.final, baseline.first_update);
    vector("shortcut", shortcut);
    fields["shortcut.equals_first_suppressed"] = sameVector(shortcut, cases.first_suppressed.final) ? "yes" : "no";

    const readouts = {
      baseline: readout(baseline.final),
      first_suppressed: readout(cases.first_suppressed.final),
      second_suppressed: readout(cases.second_suppressed.final),
      parallel: readout(parallelFinal),
      shortcut: readout(shortcut),
    };
    for (const [name, value] of Object.entries(readouts)) number("readouts." + name, value);

    const rows = [x, secondPosition].map((row) => sequential(row, false, false));
    rows.forEach((trace, i) => {
      for (const [key, name] of [["array", "input"], ["first_update", "first_update"], ["intermediate", "intermediate"],
        ["second_update", "second_update"], ["final", "final"]]) {
        fields[`positions.${key}.exact.${i}`] = vectorText(trace[name]);
      }
    });
    const norms = [norm(baseline.input), norm(baseline.intermediate), norm(baseline.final)];
    fields["predictions.each_addition_increases_norm.answer"] =
      greater(norms[1].squared, norms[0].squared) && greater(norms[2].squared, norms[1].squared) ? "yes" : "no";
    return fields;
  }

  // ---- reading the entries -----------------------------------------------------------------------------

  // residlab/course/lab05/notation.py's grammar, as the runner reads: Python's Fraction("...") grammar (digit
  // groups split by single underscores); the page's minus signs and slashes read as - and /.
  const MINUS_SIGNS = /[\u2212\u2012\u2013\uFE63\uFF0D]/g, SLASHES = /[\u2044\u2215\u00F7]/g;
  const DIGITS = "\\d+(?:_\\d+)*";
  const NUMBER = new RegExp(`^([+-]?)(?:(${DIGITS})/(${DIGITS})|(${DIGITS})?(?:\\.(${DIGITS})?)?(?:[eE]([+-]?${DIGITS}))?)$`);
  const digitsOf = (text) => (text || "").replaceAll("_", "");

  // An entry's exact value, or a sentence saying what is wrong with it.
  function parseEntry(text, name) {
    const trimmed = text.trim().replace(MINUS_SIGNS, "-").replace(SLASHES, "/");
    if (trimmed === "") return { error: `${name} is empty: enter a number such as 2, -0.5 or 1/3.` };
    if (trimmed.length > ENTRY_MAX_CHARACTERS) {
      return { error: `${name} has ${trimmed.length} characters; the explorer takes at most ${ENTRY_MAX_CHARACTERS} (the runner takes more).` };
    }
    const match = NUMBER.exec(trimmed);
    const [, sign, numerator, denominator, whole, decimals, exponent] = (match || []).map((part, i) => (i ? part && digitsOf(part) : part));
    if (!match || (numerator === undefined && !whole && !decimals)) {
      const word = /^[+-]?(nan|inf|infinity)$/i.test(trimmed) ? "not finite" : "not a number";
      return { error: `${name} is “${trimmed}”, which is ${word}: enter an integer, a decimal such as 0.5 or a fraction such as 1/3.` };
    }
    const negative = sign === "-";
    let value;
    if (numerator !== undefined) {
      if (BigInt(denominator) === 0n) return { error: `${name} is “${trimmed}”, a fraction with a zero denominator.` };
      value = frac(BigInt(numerator), BigInt(denominator));
    } else {
      const power = exponent === undefined ? 0 : Number(exponent);
      if (Math.abs(power) > EXPONENT_LIMIT) {
        return { error: `${name} has exponent ${power}; the explorer takes exponents from -${EXPONENT_LIMIT} to ${EXPONENT_LIMIT}.` };
      }
      const places = (decimals || "").length;
      const shift = power - places;
      const digits = BigInt((whole || "") + (decimals || "") || "0");
      value = shift >= 0 ? frac(digits * 10n ** BigInt(shift)) : frac(digits, 10n ** BigInt(-shift));
    }
    return { value: negative ? neg(value) : value };
  }

  // notation.py's vector: its entries, split by , (a row), ; (a column) or spaces; null when , and ; mix.
  const TRANSPOSED = /([\])])\s*(?:\^\s*)?(?:\u1D40|T|\{T\}|\\mathsf\{T\})\s*$/;
  function vectorPieces(text) {
    let inner = text.trim().replace(TRANSPOSED, "$1");
    const close = { "[": "]", "(": ")" }[inner[0]];
    if (close && inner.endsWith(close)) inner = inner.slice(1, -1).trim();
    if (inner.includes(";") && inner.includes(",")) return null;
    const separator = inner.includes(";") ? ";" : (inner.includes(",") ? "," : null);
    return separator ? inner.split(separator).map((piece) => piece.trim()) : inner.split(/\s+/).filter(Boolean);
  }

  // ---- the page ----------------------------------------------------------------------------------------

  function element(tag, attributes = {}, children = []) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    for (const child of [].concat(children)) node.append(child);
    return node;
  }

  const out = (field) => element("output", { "data-field": field }, "—");

  // One labelled line: label, then its values; the value box has a fixed height and scrolls sideways.
  function line(label, parts) {
    return element("div", { class: "rl-line" }, [
      element("div", { class: "rl-label" }, label),
      element("div", { class: "rl-value" }, parts),
    ]);
  }
  const traced = (label, path) => line(label, [out(path + ".exact"), " norm ", out(path + ".norm.exact"), " ≈ ", out(path + ".norm.float")]);
  const scalar = (label, path) => line(label, [out(path + ".exact"), " ≈ ", out(path + ".float")]);

  function vectorInputs(legend, idPrefix, values) {
    const inputs = values.map((value, i) => element("input", {
      type: "text", id: `${idPrefix}-${i + 1}`, value, inputmode: "text", autocomplete: "off", spellcheck: "false",
      size: "8", "aria-describedby": "toy-explorer-status",
    }));
    const set = element("fieldset", { class: "rl-vector" }, [element("legend", {}, legend)]);
    inputs.forEach((input, i) => set.append(element("label", { for: input.id }, `${legend.startsWith("x̃") ? "x̃" : "x"}${SUBSCRIPTS[i]}`), input));
    return { set, inputs };
  }

  function build(root) {
    const first = vectorInputs("x (position 1)", "toy-x", START_INPUT);
    const second = vectorInputs("x̃ (position 2)", "toy-second", START_SECOND);
    const status = element("p", { class: "rl-status", id: "toy-explorer-status", role: "status", "aria-live": "polite" });
    let groups = 0;
    const section = (title, lines) => {
      const id = `toy-explorer-group-${++groups}`;
      return element("div", { class: "rl-group", role: "group", "aria-labelledby": id }, [element("p", { class: "rl-heading", id }, title), ...lines]);
    };
    root.replaceChildren(
      element("form", { class: "rl-controls", "aria-label": "Toy trace inputs" }, [first.set, second.set]),
      status,
      section("Trace of x", [
        traced("x", "baseline.input"), traced("F(x)", "baseline.first_update"), traced("y = x + F(x)", "baseline.intermediate"),
        traced("G(y)", "baseline.second_update"), traced("z = y + G(y)", "baseline.final"), traced("z − x", "total_change"),
      ]),
      section("Norms of the updates", [
        line("‖F(x)‖ + ‖G(y)‖", [out("norm_comparison.sum_of_update_norms.exact"), " ≈ ", out("norm_comparison.sum_of_update_norms.float")]),
        line("‖z − x‖", [out("norm_comparison.total_change_norm.exact"), " ≈ ", out("norm_comparison.total_change_norm.float")]),
        scalar("F(x) · G(y)", "norm_comparison.update_dot_product"),
        line("cos(F(x), G(y))", [out("norm_comparison.update_cosine")]),
        line("each addition raises ‖·‖", [out("predictions.each_addition_increases_norm.answer")]),
      ]),
      section("Three changes, the shortcut and the readout s = [0, 0, 1] z", [
        line("baseline", ["G reads y: ", out("baseline.second_update.exact"), ", z = ", out("baseline.final.exact"), ", s = ", out("readouts.baseline.exact"), " ≈ ", out("readouts.baseline.float")]),
        line("first branch suppressed", ["G reads x: ", out("interventions.first_suppressed.second_update.exact"), ", z = ", out("interventions.first_suppressed.final.exact"), ", s = ", out("readouts.first_suppressed.exact"), " ≈ ", out("readouts.first_suppressed.float")]),
        line("second branch suppressed", ["G writes ", out("interventions.second_suppressed.second_update.exact"), ", z = ", out("interventions.second_suppressed.final.exact"), ", s = ", out("readouts.second_suppressed.exact"), " ≈ ", out("readouts.second_suppressed.float")]),
        line("parallel x + F(x) + G(x)", ["G(x) = ", out("interventions.parallel.second_update.exact"), ", z = ", out("interventions.parallel.final.exact"), ", s = ", out("readouts.parallel.exact"), " ≈ ", out("readouts.parallel.float")]),
        line("shortcut: old z − old F(x)", [out("shortcut.exact"), ", s = ", out("readouts.shortcut.exact"), " ≈ ", out("readouts.shortcut.float"), "; equals the first-suppressed z: ", out("shortcut.equals_first_suppressed")]),
      ]),
      section("Two positions, each row traced on its own", [0, 1].map((i) => line(i === 0 ? "row 1 (x)" : "row 2 (x̃)", [
        out(`positions.array.exact.${i}`), " → F ", out(`positions.first_update.exact.${i}`), " → y ", out(`positions.intermediate.exact.${i}`),
        " → G ", out(`positions.second_update.exact.${i}`), " → z ", out(`positions.final.exact.${i}`),
      ]))),
    );
    const inputs = [...first.inputs, ...second.inputs];
    const outputs = [...root.querySelectorAll("output[data-field]")];
    const names = [...DEFAULT_INPUT.map((_, i) => `x${SUBSCRIPTS[i]}`), ...DEFAULT_SECOND.map((_, i) => `x̃${SUBSCRIPTS[i]}`)];

    function update() {
      const parsed = inputs.map((input, i) => parseEntry(input.value, names[i]));
      const errors = parsed.filter((entry) => entry.error).map((entry) => entry.error);
      inputs.forEach((input, i) => input.setAttribute("aria-invalid", parsed[i].error ? "true" : "false"));
      if (errors.length) {
        status.textContent = errors.join(" ");
        status.classList.add("rl-error");
        for (const output of outputs) output.textContent = "—";
        return;
      }
      const values = parsed.map((entry) => entry.value);
      const fields = report(values.slice(0, 3), values.slice(3));
      for (const output of outputs) output.textContent = fields[output.dataset.field];
      status.classList.remove("rl-error");
      status.textContent = `Exact arithmetic for x = ${vectorText(values.slice(0, 3))} and x̃ = ${vectorText(values.slice(3))}.`;
    }
    // A value box that scrolls sideways must be reachable by keyboard to be scrolled; one that fits need not: the
    // site's one mechanism (accessibility.html), told again when the values' text changes.
    const boxes = root.querySelectorAll(".rl-value");
    const keyboardScroll = () => window.residlabScrollBoxes?.watch(boxes);
    for (const input of inputs) input.addEventListener("input", () => { update(); keyboardScroll(); });
    root.querySelector("form").addEventListener("submit", (event) => event.preventDefault());
    update();
    keyboardScroll();
  }

  // The explorer's arithmetic on six typed entries, as the page runs it: the site's tests call it directly.
  function compute(entries) {
    const parsed = entries.map((text, i) => parseEntry(text, `entry ${i}`));
    const failed = parsed.find((entry) => entry.error);
    if (failed) return { error: failed.error };
    const values = parsed.map((entry) => entry.value);
    return { fields: report(values.slice(0, 3), values.slice(3)) };
  }
  window.residlabToyExplorer = Object.freeze({ compute });
  // The same exact arithmetic for Lab 05's answer checker (answer-checker.js), so both agree by construction.
  window.residlabToyArithmetic = Object.freeze({
    frac, add, sub, mul, neg, equal, greater, exactText, toFloat, parseEntry, vectorPieces, MINUS_SIGNS, SLASHES, norm,
    sequential, F, G, readout, vAdd, vSub, vectorText, DEFAULT_INPUT,
  });
  // a checker that ran before this script could (answer-checker.js, when this one failed to load) starts now
  if (typeof window.residlabAwaitingToyArithmetic === "function") window.residlabAwaitingToyArithmetic();

  function start() {
    const root = document.getElementById("toy-explorer");
    if (root) build(root);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
