// Lab 05 Part 4 capture explorer: every token position of the capture on the page, read from the JSON that
// residlab/course/lab05/explorer_data.py wrote into the page (the capture's observations.json, which
// observe_position wrote for each position). Nothing is computed here but the formatting and the drawing: norms and
// cosines with 4 decimals, probabilities with 3 significant digits in exponent form, exactly as Python's "{:.4f}" and
// "{:.2e}" print them. A reader's own run, verified by open-capture.js, is shown by the same build().
(function () {
  "use strict";

  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 360, HEIGHT = 180, LEFT = 40, RIGHT = 10, TOP = 12, BOTTOM = 28;

  const fixed = (value) => (value === null ? "undefined" : value.toFixed(4));
  function probability(value) {
    const [mantissa, exponent] = value.toExponential(2).split("e");
    const power = Number(exponent);
    return `${mantissa}e${power < 0 ? "-" : "+"}${String(Math.abs(power)).padStart(2, "0")}`;
  }
  const quoted = (piece) => JSON.stringify(piece);

  function element(tag, attributes = {}, children = []) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    for (const child of [].concat(children)) node.append(child);
    return node;
  }
  function svgElement(tag, attributes = {}, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // A fixed-size SVG (viewBox) with a y axis from 0 to the tallest value; x positions are slots.
  function frame(svg, slots, tallest, xLabels) {
    svg.replaceChildren();
    const plotWidth = WIDTH - LEFT - RIGHT, plotHeight = HEIGHT - TOP - BOTTOM;
    const x = (slot) => LEFT + (slot + 0.5) * (plotWidth / slots);
    const y = (value) => TOP + plotHeight * (1 - value / (tallest || 1));
    svg.append(svgElement("line", { class: "rl-axis", x1: LEFT, y1: TOP, x2: LEFT, y2: HEIGHT - BOTTOM }));
    svg.append(svgElement("line", { class: "rl-axis", x1: LEFT, y1: HEIGHT - BOTTOM, x2: WIDTH - RIGHT, y2: HEIGHT - BOTTOM }));
    svg.append(svgElement("text", { x: LEFT - 4, y: TOP + 4, "text-anchor": "end" }, tallest.toFixed(2)));
    svg.append(svgElement("text", { x: LEFT - 4, y: HEIGHT - BOTTOM, "text-anchor": "end" }, "0"));
    xLabels.forEach((label, slot) => svg.append(svgElement("text", { x: x(slot), y: HEIGHT - BOTTOM + 16, "text-anchor": "middle" }, label)));
    return { x, y, slotWidth: plotWidth / slots };
  }

  function build(root, data) {
    const first = data.positions[0];
    const labels = first.boundaries.map((row) => row.label);
    const positionSelect = element("select", { id: "capture-position" },
      data.tokens.map((token) => element("option", { value: String(token.position) },
        `${token.position}: ${quoted(token.piece)}${token.position === data.selected_position ? " (the tables' position)" : ""}`)));
    positionSelect.value = String(data.selected_position);
    const boundarySelect = element("select", { id: "capture-boundary" },
      first.boundaries.map((row) => element("option", { value: String(row.index) },
        row.index === 0 ? `${row.label}: the first block's input` : `${row.label}: block ${row.index - 1}'s raw output`)));
    boundarySelect.value = String(labels.length - 1);

    const summary = element("p", { class: "rl-status rl-summary", id: "capture-summary", role: "status", "aria-live": "polite" });
    const normsFigure = svgElement("svg", { class: "rl-figure", id: "capture-norms-figure", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img" });
    const writesFigure = svgElement("svg", { class: "rl-figure", id: "capture-writes-figure", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img" });
    const boundaryBody = element("tbody");
    const lensBody = element("tbody");
    const table = (caption, headers, body) => element("div", { class: "rl-table-box" }, element("table", { class: headers.length > 4 ? "table rl-table rl-wide" : "table rl-table" }, [
      element("caption", {}, caption),
      element("thead", {}, element("tr", {}, headers.map((header) => element("th", { scope: "col" }, header)))),
      body,
    ]));

    root.replaceChildren(
      element("div", { class: "rl-controls-row" }, [
        element("div", {}, [element("label", { for: "capture-position" }, "Token position"), positionSelect]),
        element("div", {}, [element("label", { for: "capture-boundary" }, "Boundary"), boundarySelect]),
      ]),
      summary,
      element("p", { class: "rl-heading" }, "Raw state norm along depth"),
      normsFigure,
      element("p", { class: "rl-heading" }, "Attention and MLP write norms per block"),
      writesFigure,
      table("Every boundary at this position (the figures' numbers)",
        ["boundary", "norm", "‖attention write‖", "‖MLP write‖", "‖update‖", "cos with previous", "cos(update, incoming)"], boundaryBody),
      table("Logit-lens top 5 at the chosen boundary", ["rank", "token id", "piece", "probability"], lensBody),
    );

    function show() {
      const position = Number(positionSelect.value), boundary = Number(boundarySelect.value);
      const observation = data.positions[position];
      const rows = observation.boundaries;
      const updates = observation.block_updates; // update i leads from H_i to H_(i+1)
      const token = data.tokens[position];
      const chosen = rows[boundary];
      const incoming = boundary > 0 ? updates[boundary - 1] : null;

      summary.textContent = `Position ${position} (${quoted(token.piece)}), ${chosen.label}: norm ${fixed(chosen.norm)}. ` + (incoming
        ? `Block ${incoming.block} wrote attention ${fixed(incoming.attn_write_norm)} and MLP ${fixed(incoming.mlp_write_norm)}, an update of ${fixed(incoming.difference_norm)}; cosine with the previous state ${fixed(incoming.cosine_consecutive)}.`
        : "The first block's input: no block has written yet.");

      boundaryBody.replaceChildren(...rows.map((row) => {
        const update = row.index > 0 ? updates[row.index - 1] : null;
        const cells = [row.label, fixed(row.norm)].concat(update
          ? [fixed(update.attn_write_norm), fixed(update.mlp_write_norm), fixed(update.difference_norm), fixed(update.cosine_consecutive), fixed(update.cosine_update_with_incoming)]
          : ["—", "—", "—", "—", "—"]);
        const tr = element("tr", row.index === boundary ? { class: "rl-chosen", "aria-current": "true" } : {});
        cells.forEach((cell, i) => tr.append(element(i === 0 ? "th" : "td", i === 0 ? { scope: "row" } : {}, cell)));
        return tr;
      }));
      lensBody.replaceChildren(...chosen.logit_lens_top.map((entry, rank) => element("tr", {}, [
        element("td", {}, String(rank + 1)), element("td", {}, String(entry.id)),
        element("td", { title: quoted(entry.piece) }, quoted(entry.piece)), element("td", {}, probability(entry.probability)),
      ])));

      const norms = rows.map((row) => row.norm);
      const axes = frame(normsFigure, norms.length, Math.max(...norms), labels);
      const points = norms.map((value, i) => `${axes.x(i)},${axes.y(value)}`).join(" ");
      normsFigure.append(svgElement("polyline", { points, fill: "none", stroke: "#0d6efd", "stroke-width": 2 }));
      norms.forEach((value, i) => normsFigure.append(svgElement("circle", {
        cx: axes.x(i), cy: axes.y(value), r: i === boundary ? 6 : 3.5, fill: i === boundary ? "#d63384" : "#0d6efd",
      })));
      normsFigure.setAttribute("aria-label", `Line chart of the raw state's norm at position ${position}, ${labels.map((label, i) => `${label} ${fixed(norms[i])}`).join(", ")}; ${chosen.label} is marked.`);

      const writes = updates.flatMap((row) => [row.attn_write_norm, row.mlp_write_norm]);
      const bars = frame(writesFigure, updates.length, Math.max(...writes), updates.map((row) => `b${row.block}`));
      updates.forEach((row, i) => {
        const width = bars.slotWidth * 0.35;
        const marked = incoming && incoming.block === row.block;
        [[row.attn_write_norm, -width, "#198754"], [row.mlp_write_norm, 0, "#fd7e14"]].forEach(([value, offset, colour]) => {
          writesFigure.append(svgElement("rect", {
            x: bars.x(i) + offset, y: bars.y(value), width, height: HEIGHT - BOTTOM - bars.y(value), fill: colour,
            stroke: marked ? "#212529" : "none", "stroke-width": marked ? 2 : 0,
          }));
        });
      });
      writesFigure.append(svgElement("rect", { x: WIDTH - 150, y: 4, width: 10, height: 10, fill: "#198754" }));
      writesFigure.append(svgElement("text", { x: WIDTH - 136, y: 13 }, "attention"));
      writesFigure.append(svgElement("rect", { x: WIDTH - 80, y: 4, width: 10, height: 10, fill: "#fd7e14" }));
      writesFigure.append(svgElement("text", { x: WIDTH - 66, y: 13 }, "MLP"));
      writesFigure.setAttribute("aria-label", `Bar chart of the write norms at position ${position}: ${updates.map((row) => `block ${row.block} attention ${fixed(row.attn_write_norm)}, MLP ${fixed(row.mlp_write_norm)}`).join("; ")}.` + (incoming ? ` Block ${incoming.block} is outlined.` : ""));
    }
    positionSelect.addEventListener("change", show);
    boundarySelect.addEventListener("change", show);
    show();
    // A table box that scrolls sideways (on a phone) must be reachable by keyboard to be scrolled.
    window.residlabScrollBoxes?.watch(root.querySelectorAll(".rl-table-box"));  // the site's one mechanism (accessibility.html)
  }

  // open-capture.js shows a reader's verified run in this same explorer, and the page's own capture again.
  window.residlabCaptureExplorer = { build };

  function start() {
    const root = document.getElementById("capture-explorer");
    if (!root) return;
    const source = document.getElementById(root.dataset.source);
    let data;
    try {
      data = JSON.parse(source.textContent);
    } catch (error) {
      root.textContent = `The capture explorer could not read its data: ${error.message}`;
      return;
    }
    build(root, data);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
