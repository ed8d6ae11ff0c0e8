// Lab 07 patching explorer: the block x position grids of activation patching on the induction model, read from the
// JSON that residlab/course/lab07/figures.py wrote into the page (every number computed when the page was built).
// The reader chooses the design, the direction (denoising or noising) and the site kind; hovering or focusing a
// cell shows its numbers: both directions' shares, the attribution estimate and its error, and the two bend
// measures. Nothing is computed here but the formatting ("{:.3f}" as Python prints it) and the colours, with the
// same scale as the figures drawn at build time (figures.colour).
(function () {
  "use strict";

  // As Python's "{:.3f}" of measures.shown(value): a negative value that rounds to zero prints 0.000, not -0.000.
  const fixed = (value) => (value === null || value === undefined ? "undefined" : value.toFixed(3).replace(/^-(0\.0+)$/, "$1"));

  function colour(value) {
    if (value === null || value === undefined) return "#bbbbbb";
    const v = Math.max(-1, Math.min(1, value));
    const fade = Math.round(255 * (1 - Math.abs(v))).toString(16).padStart(2, "0");
    return v >= 0 ? `#ff${fade}${fade}` : `#${fade}${fade}ff`;
  }

  function element(tag, attributes = {}, children = []) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    for (const child of [].concat(children)) node.append(child);
    return node;
  }

  function choice(id, label, options) {
    const select = element("select", { id }, options.map(([value, text]) => element("option", { value }, text)));
    return { select, box: element("div", {}, [element("label", { for: id }, label), select]) };
  }

  function build(root, data) {
    const names = Object.keys(data.designs);
    const design = choice("patching-design", "Design", names.map((name) => [name, name.replace("_", " ")]));
    const direction = choice("patching-direction", "Direction",
      data.directions.map((d) => [d, d === "denoising" ? "denoising (clean into corrupt)" : "noising (corrupt into clean)"]));
    const kind = choice("patching-kind", "Site kind", data.kinds.map((k) => [k, data.kind_labels[k]]));
    const table = element("table", { class: "rl-table rl-patching-grid", id: "patching-grid" });
    const details = element("p", { class: "rl-status rl-summary", id: "patching-cell", role: "status", "aria-live": "polite" },
      "Hover over or focus a cell to see its numbers.");
    const legend = element("p", { class: "rl-grid-legend" },
      "\u2022 fixed by construction (an identity, two decimals); \u25e6 hybrid prompt, observed (not an identity); " +
      "\u25ab the same intervention as block 0's output, observed; columns before the first *: 0 by construction; " +
      "every other share observed (three decimals). Colour: share of the gap, blue \u22121 or less, white 0, red +1 or more.");
    root.replaceChildren(element("div", { class: "rl-controls-row" }, [design.box, direction.box, kind.box]),
      element("div", { class: "rl-table-box", tabindex: "0" }, table), legend, details);

    // What the page says of a cell: an identity (fixed by construction), a hybrid prompt's run (mirror) or another
    // cell's intervention under this name (equals); undefined for an observed cell.
    function identityOf(d, k, b, p) {
      return d.identities.find((c) => (c.kind === null && p < Math.min(...d.changed)) ||
        (c.kind === k && c.block === b && (c.positions ? c.positions.includes(p) : c.position === null || c.position === p)));
    }

    // A share fixed by construction in two decimals, as the page prints an identity; an observed one in three.
    function shareText(identity, value) {
      return identity && !identity.mirror && !identity.equals && value !== null ? value.toFixed(2) : fixed(value);
    }

    // The marks of the figures drawn at build time, decided there (figures.py, "marks"): a filled dot for an
    // identity, a ring for a hybrid prompt's run, a square for another cell's intervention under this name.
    const SYMBOLS = { identity: "\u2022", hybrid: "\u25e6", same: "\u25ab" };
    const mark = (name) => (name ? "\u2009" + SYMBOLS[name] : "");

    function describe(cell) {
      const d = data.designs[design.select.value];
      const k = kind.select.value, b = Number(cell.dataset.block), p = Number(cell.dataset.position);
      const bend = d.bends[k][b][p];
      const dir = direction.select.value;
      const over = d.over_pairs[dir][k][b][p];
      const identity = identityOf(d, k, b, p);
      const share = (value) => shareText(identity, value);
      details.textContent = `blocks.${b}.${k}, position ${p}` +
        `${d.changed.includes(p) ? " (the prompts differ here)" : ""}: ` +
        `denoising ${share(d.activation.denoising[k][b][p])}, noising ${share(d.activation.noising[k][b][p])}, ` +
        `attribution of the denoising share ${fixed(d.attribution[k][b][p])} (error against denoising ${fixed(d.error[k][b][p])}: final LayerNorm ` +
        `${fixed(bend.final_norm_shapley)}, upstream ${fixed(bend.upstream_shapley)} by the Shapley split; upstream ` +
        `first: final LayerNorm ${fixed(bend.final_norm)}, upstream ${fixed(bend.upstream)}; final LayerNorm first: final ` +
        `LayerNorm ${fixed(bend.final_norm_final_first)}, upstream ${fixed(bend.upstream_final_first)}); block 1 attention at the readout moved ` +
        `${fixed(bend.attention_moved)} (the largest total-variation distance over its heads, 0 to 1). Over ${data.pairs} held-out pairs, ${dir} ${fixed(over[0])} ` +
        `[${fixed(over[1])}, ${fixed(over[2])}] (mean [${data.interval}]).` + (identity ? (identity.mirror
          ? ` A hybrid prompt, observed (fixed by construction is only that the patched run is that prompt's run): ${identity.why}.`
          : identity.equals
            ? ` The same intervention as blocks.${identity.equals[1]}.${identity.equals[0]} here, counted once (its value observed): ${identity.why}.`
            : ` An identity, fixed by construction: ${identity.why}.`) : "") +
        (d.readable ? "" : " Not read: this design's gap is within the reach of its null pairs.");
    }

    function draw() {
      const d = data.designs[design.select.value];
      const grid = d.activation[direction.select.value][kind.select.value];
      const k = kind.select.value;
      const header = element("tr", {}, [element("th", { scope: "col", class: "rl-grid-corner" }, "block \\ position"),
        ...d.clean.map((_, p) => element("th", { scope: "col" }, d.changed.includes(p) ? `${p}*` : String(p)))]);
      const rows = grid.map((row, b) => element("tr", {}, [element("th", { scope: "row", title: `blocks.${b}.${k}` }, `block ${b}`),
        ...row.map((value, p) => {
          const identity = identityOf(d, k, b, p);
          const text = shareText(identity, value);
          const cell = element("td", { tabindex: "0", "data-block": String(b), "data-position": String(p),
            "data-value": text, style: `background:${colour(value)};color:#000`,
            "aria-label": `blocks.${b}.${k}, position ${p}: ${text}` }, text + mark(d.marks[k][b][p]));
          cell.addEventListener("mouseenter", () => describe(cell));
          cell.addEventListener("focus", () => describe(cell));
          return cell;
        })]));
      table.replaceChildren(element("thead", {}, header), element("tbody", {}, rows));
    }

    // Arrow keys move between cells; Tab still walks through them in order.
    table.addEventListener("keydown", (event) => {
      const cell = event.target.closest("td");
      if (!cell) return;
      const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
      if (!(event.key in moves)) return;
      const [db, dp] = moves[event.key];
      const next = table.querySelector(`td[data-block="${Number(cell.dataset.block) + db}"][data-position="${Number(cell.dataset.position) + dp}"]`);
      if (next) { next.focus(); event.preventDefault(); }
    });
    for (const control of [design, direction, kind]) control.select.addEventListener("change", draw);
    draw();
  }

  function start() {
    const root = document.getElementById("patching-explorer");
    if (!root) return;
    let data;
    try {
      data = JSON.parse(document.getElementById(root.dataset.source).textContent);
    } catch (error) {
      root.textContent = `The patching explorer could not read its data: ${error.message}`;
      return;
    }
    build(root, data);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
