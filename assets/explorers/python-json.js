// JSON as residlab's Python reads and writes it, for the pages that open a reader's own files (Lab 05's capture,
// Lab 06's packet). Python's json.loads keeps 5 an int and 5.0 a float, and the audit hashes records as
//   json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
// (residlab/audit/runs.py canonical_json), which prints each float as Python's repr does. JSON.parse forgets which
// numbers were floats and JavaScript prints some floats differently (1e-7 for Python's 1e-07, 1e+21 for 1e+21 but
// 100000000000000000000 for Python's 1e+20), so this file parses JSON itself, keeping each number's kind, and prints
// canonical JSON byte for byte as Python does. It also sums as Python's math.fsum does (exactly rounded), formats
// as Python's "{:.Nf}" does (exact, ties to even), and hashes with Web Crypto; and the few DOM helpers both openers
// use (text is always set as text, never as HTML).
(function () {
  "use strict";

  const MAX_DEPTH = 512; // deeper nesting is refused, so a hostile file cannot exhaust the stack

  class JsonError extends Error {}

  // A number as Python's json.loads gives it: an int (kept exactly, as its digits) or a float.
  class PyNumber {
    constructor(text, isInt) {
      this.isInt = isInt;
      this.value = Number(text);
      this.digits = isInt ? BigInt(text).toString() : null; // "-0" is the int 0, as in Python
    }
  }

  function parse(text) {
    let at = 0;
    const where = () => {
      const before = text.slice(0, at);
      const line = (before.match(/\n/g) || []).length + 1;
      return `line ${line} column ${at - before.lastIndexOf("\n")}`;
    };
    const fail = (what) => { throw new JsonError(`${what} at ${where()}`); };
    const space = () => { while (at < text.length && " \t\n\r".includes(text[at])) at++; };
    const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?/y;

    function string() {
      at++; // the opening quote
      let out = "";
      for (;;) {
        if (at >= text.length) fail("an unterminated string");
        const c = text[at++];
        if (c === '"') return out;
        if (c < " ") fail("a control character inside a string");
        if (c !== "\\") { out += c; continue; }
        const e = text[at++];
        const simple = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" }[e];
        if (simple !== undefined) { out += simple; continue; }
        if (e !== "u" || !/^[0-9a-fA-F]{4}$/.test(text.slice(at, at + 4))) fail("an invalid escape in a string");
        out += String.fromCharCode(parseInt(text.slice(at, at + 4), 16));
        at += 4;
      }
    }

    function value(depth) {
      if (depth > MAX_DEPTH) fail(`nesting deeper than ${MAX_DEPTH}`);
      space();
      const c = text[at];
      if (c === "{") {
        at++;
        const entries = new Map(); // a repeated key keeps its last value, as in Python
        space();
        if (text[at] === "}") { at++; return entries; }
        for (;;) {
          space();
          if (text[at] !== '"') fail("expected a property name in double quotes");
          const key = string();
          space();
          if (text[at++] !== ":") fail("expected ':'");
          entries.set(key, value(depth + 1));
          space();
          const next = text[at++];
          if (next === "}") return entries;
          if (next !== ",") fail("expected ',' or '}'");
        }
      }
      if (c === "[") {
        at++;
        const items = [];
        space();
        if (text[at] === "]") { at++; return items; }
        for (;;) {
          items.push(value(depth + 1));
          space();
          const next = text[at++];
          if (next === "]") return items;
          if (next !== ",") fail("expected ',' or ']'");
        }
      }
      if (c === '"') return string();
      for (const [word, result] of [["true", true], ["false", false], ["null", null]]) {
        if (text.startsWith(word, at)) { at += word.length; return result; }
      }
      for (const word of ["NaN", "Infinity", "-Infinity"]) {
        if (text.startsWith(word, at)) fail(`a non-finite number (${word})`);
      }
      NUMBER.lastIndex = at;
      const match = NUMBER.exec(text);
      if (!match) fail(c === undefined ? "unexpected end of the file" : `unexpected ${JSON.stringify(c)}`);
      at = NUMBER.lastIndex;
      const number = new PyNumber(match[0], match[1] === undefined && match[2] === undefined);
      if (!Number.isFinite(number.value) && !number.isInt) fail(`a number too large to be finite (${match[0].slice(0, 40)})`);
      return number;
    }

    const result = value(0);
    space();
    if (at < text.length) fail("extra data after the JSON value");
    return result;
  }

  // The parsed tree as ordinary JavaScript values: objects, arrays, strings, numbers, booleans, null.
  function plain(node) {
    if (node instanceof PyNumber) return node.value;
    if (Array.isArray(node)) return node.map(plain);
    if (node instanceof Map) {
      const out = {};
      // defineProperty, not assignment: a key "__proto__" is data, never the object's prototype.
      for (const [key, item] of node) Object.defineProperty(out, key, { value: plain(item), enumerable: true, writable: true, configurable: true });
      return out;
    }
    return node;
  }

  // Python's repr of a float: the shortest digits that round-trip, in exponent form when the exponent is below -4
  // or at least 16 (two exponent digits at least, a sign always), otherwise positional with at least ".0".
  function floatRepr(x) {
    if (!Number.isFinite(x)) throw new JsonError(`${x} is not finite: Python's canonical JSON refuses it (allow_nan=False)`);
    if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
    const [mantissa, exponentText] = Math.abs(x).toExponential().split("e");
    const digits = mantissa.replace(".", "");
    const exponent = Number(exponentText);
    let body;
    if (exponent < -4 || exponent >= 16) {
      body = (digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits) +
        `e${exponent < 0 ? "-" : "+"}${String(Math.abs(exponent)).padStart(2, "0")}`;
    } else if (exponent < 0) {
      body = `0.${"0".repeat(-exponent - 1)}${digits}`;
    } else if (digits.length <= exponent + 1) {
      body = `${digits}${"0".repeat(exponent + 1 - digits.length)}.0`;
    } else {
      body = `${digits.slice(0, exponent + 1)}.${digits.slice(exponent + 1)}`;
    }
    return (x < 0 ? "-" : "") + body;
  }

  // A string as json.dumps(ensure_ascii=True) writes it: everything outside ' '..'~' escaped, lowercase hex.
  const SHORT_ESCAPES = { '"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t" };
  function stringJson(text) {
    let out = '"';
    for (let i = 0; i < text.length; i++) {
      const c = text[i], code = text.charCodeAt(i);
      if (SHORT_ESCAPES[c]) out += SHORT_ESCAPES[c];
      else if (code < 0x20 || code > 0x7e) out += `\\u${code.toString(16).padStart(4, "0")}`;
      else out += c;
    }
    return out + '"';
  }

  // Python sorts keys by code point; JavaScript's default sort compares UTF-16 units, which differs above U+FFFF.
  function byCodePoint(a, b) {
    const x = [...a], y = [...b];
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      const d = x[i].codePointAt(0) - y[i].codePointAt(0);
      if (d) return d;
    }
    return x.length - y.length;
  }

  // json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False), byte for byte.
  function canonical(node) {
    if (node === null) return "null";
    if (node === true) return "true";
    if (node === false) return "false";
    if (typeof node === "string") return stringJson(node);
    if (node instanceof PyNumber) return node.isInt ? node.digits : floatRepr(node.value);
    if (typeof node === "number") return floatRepr(node);
    if (Array.isArray(node)) return `[${node.map(canonical).join(",")}]`;
    if (node instanceof Map) {
      return `{${[...node.keys()].sort(byCodePoint).map((key) => `${stringJson(key)}:${canonical(node.get(key))}`).join(",")}}`;
    }
    throw new JsonError(`cannot write ${typeof node} as JSON`);
  }

  // math.fsum: the exactly rounded sum (Shewchuk's partials, rounded as CPython's mathmodule.c does).
  function fsum(values) {
    const partials = [];
    for (let x of values) {
      let i = 0;
      for (let y of partials) {
        if (Math.abs(x) < Math.abs(y)) [x, y] = [y, x];
        const hi = x + y, lo = y - (hi - x);
        if (lo !== 0) partials[i++] = lo;
        x = hi;
      }
      partials.length = i;
      partials.push(x);
    }
    let n = partials.length, hi = 0, lo = 0;
    if (n > 0) {
      hi = partials[--n];
      while (n > 0) {
        const x = hi, y = partials[--n];
        hi = x + y;
        lo = y - (hi - x);
        if (lo !== 0) break;
      }
      if (n > 0 && ((lo < 0 && partials[n - 1] < 0) || (lo > 0 && partials[n - 1] > 0))) {
        const y = lo * 2, x = hi + y;
        if (y === x - hi) hi = x;
      }
    }
    return hi;
  }

  // Python's f"{x:.{digits}f}": the exact binary value rounded half to even, the sign of -0.0 kept.
  function fixed(x, digits) {
    if (!Number.isFinite(x)) return String(x);
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, Math.abs(x));
    const bits = view.getBigUint64(0);
    let exponent = Number((bits >> 52n) & 0x7ffn);
    let mantissa = bits & ((1n << 52n) - 1n);
    if (exponent === 0) exponent = 1; else mantissa |= 1n << 52n;
    exponent -= 1075; // |x| = mantissa * 2^exponent exactly
    let numerator = mantissa * 10n ** BigInt(digits), denominator = 1n;
    if (exponent >= 0) numerator <<= BigInt(exponent); else denominator <<= BigInt(-exponent);
    let quotient = numerator / denominator;
    const twice = 2n * (numerator % denominator);
    if (twice > denominator || (twice === denominator && (quotient & 1n) === 1n)) quotient += 1n;
    const text = quotient.toString().padStart(digits + 1, "0");
    const shown = digits > 0 ? `${text.slice(0, -digits)}.${text.slice(-digits)}` : text;
    return (x < 0 || Object.is(x, -0) ? "-" : "") + shown;
  }

  // A number's whole digits grouped by threes with commas, as Python's f"{n:,}" writes them. Not toLocaleString:
  // its first call loads the browser's locale data, tens of milliseconds on a phone while the page loads.
  function grouped(n) {
    const [whole, fraction] = String(n).split(".");
    return whole.replace(/\B(?=(\d{3})+$)/g, ",") + (fraction === undefined ? "" : `.${fraction}`);
  }

  // Python's f"{x:.{precision}g}": significant digits, exponent form below 1e-4 or from 10**precision on.
  function general(x, precision) {
    if (!Number.isFinite(x)) return String(x);
    if (x === 0) return Object.is(x, -0) ? "-0" : "0";
    const exponent = Number(Math.abs(x).toExponential(precision - 1).split("e")[1]);
    const strip = (text) => (text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text);
    if (exponent < -4 || exponent >= precision) {
      const mantissa = Math.abs(x).toExponential(precision - 1).split("e")[0];
      return `${x < 0 ? "-" : ""}${strip(mantissa)}e${exponent < 0 ? "-" : "+"}${String(Math.abs(exponent)).padStart(2, "0")}`;
    }
    return strip(fixed(x, precision - 1 - exponent));
  }

  // element("td", {class: "x"}, ["text", child]): text always as text, never parsed as HTML.
  function element(tag, attributes = {}, children = []) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    for (const child of [].concat(children)) node.append(child);
    return node;
  }

  // A table in a box that scrolls sideways on a phone (and then takes the keyboard focus, so it can be scrolled).
  function table(caption, headers, rows, wide = false) {
    const body = element("tbody", {}, rows.map((cells) => element("tr", {}, cells.map((cell, i) =>
      element(i === 0 ? "th" : "td", i === 0 ? { scope: "row" } : {}, String(cell))))));
    const box = element("div", { class: "rl-table-box" }, element("table", { class: `table rl-table rl-open-table${wide ? " rl-wide" : ""}` }, [
      element("caption", {}, caption),
      element("thead", {}, element("tr", {}, headers.map((header) => element("th", { scope: "col" }, header)))),
      body,
    ]));
    return box;
  }
  // A table box that scrolls sideways must be reachable by keyboard: the site's one mechanism (accessibility.html).
  function keyboardScroll(root) {
    window.residlabScrollBoxes?.watch(root.querySelectorAll(".rl-table-box"));
  }

  class NoCryptoError extends Error {}

  async function sha256Hex(bytes) {
    const subtle = window.crypto && window.crypto.subtle;
    if (!subtle || typeof subtle.digest !== "function") {
      throw new NoCryptoError("this browser offers no SHA-256 here (Web Crypto needs a secure context: https, localhost, or a file opened from disk)");
    }
    const digest = new Uint8Array(await subtle.digest("SHA-256", bytes));
    return [...digest].map((byte) => byte.toString(16).padStart(2, "0")).join("");
  }

  // A chosen file's bytes and text, refused before it is read when it is larger than the limit. Only UTF-8 is
  // accepted (as Python's read_text(encoding="utf-8")); a byte-order mark stays in the text and is refused as JSON.
  async function readFile(file, limit) {
    if (file.size > limit) throw new JsonError(`${grouped(file.size)} bytes, more than the ${grouped(limit)} bytes allowed: not read`);
    const bytes = new Uint8Array(await file.arrayBuffer());
    if (bytes.length > limit) throw new JsonError(`grew past the ${grouped(limit)} bytes allowed while being read`);
    let text;
    try {
      text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
    } catch (error) {
      throw new JsonError("not UTF-8 text");
    }
    return { bytes, text };
  }

  function readJson(text) {
    try {
      return parse(text);
    } catch (error) {
      if (error instanceof JsonError) throw new JsonError(`not valid JSON (${error.message})`);
      throw new JsonError(`not valid JSON (${error.name})`); // e.g. a stack exhausted by a pathological file
    }
  }

  // Sets a list of files on a drop target and a file input to one callback; both work by keyboard or pointer.
  function acceptFiles(input, dropTarget, onFiles) {
    input.addEventListener("change", () => { if (input.files.length) onFiles([...input.files]); });
    dropTarget.addEventListener("dragover", (event) => { event.preventDefault(); dropTarget.classList.add("rl-dragging"); });
    dropTarget.addEventListener("dragleave", () => dropTarget.classList.remove("rl-dragging"));
    dropTarget.addEventListener("drop", (event) => {
      event.preventDefault();
      dropTarget.classList.remove("rl-dragging");
      if (event.dataTransfer && event.dataTransfer.files.length) onFiles([...event.dataTransfer.files]);
    });
  }

  window.residlabPythonJson = {
    parse, plain, canonical, floatRepr, fsum, fixed, general, grouped, sha256Hex, readFile, readJson, acceptFiles,
    element, table, keyboardScroll, JsonError, NoCryptoError, PyNumber,
  };
})();
