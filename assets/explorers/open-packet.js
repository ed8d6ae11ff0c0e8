// Lab 06, "open your packet": the four records of an audit packet, read in the browser (nothing is uploaded), every
// link checked here: each record's body (the record without links, record and schema; audit/packet.py record_body)
// is written as the audit's canonical JSON, byte for byte as Python's json.dumps(sort_keys=True, separators=(",",
// ":"), ensure_ascii=True, allow_nan=False) writes it (python-json.js), hashed with Web Crypto, and compared with the
// SHA-256 and per-field digests the other three records hold (as audit/verify.py check_links does). The values are
// not re-run: that is the runner's `verify`. Records are shown generically (the measurement table is every result
// field that holds a `value`), so fields a later schema adds are shown, not refused. Text from the files is only
// ever set as text, never as HTML.
(function () {
  "use strict";
  const J = window.residlabPythonJson;
  const { element, table } = J;
  const ENVELOPE = ["links", "record", "schema"];

  class Refusal extends Error {}
  const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

  const body = (tree) => new Map([...tree].filter(([key]) => !ENVELOPE.includes(key)));
  const digest = (node) => J.sha256Hex(new TextEncoder().encode(J.canonical(node)));
  const get = (node, key) => (node instanceof Map ? node.get(key) : undefined);

  async function readPacket(files, config) {
    const byName = new Map();
    const names = config.records.map((name) => `${name}.json`);
    for (const file of files) {
      if (!names.includes(file.name)) throw new Refusal(`${file.name}: not one of a packet's records (${names.join(", ")})`);
      if (byName.has(file.name)) throw new Refusal(`${file.name}: chosen twice`);
      byName.set(file.name, file);
    }
    const missing = names.filter((name) => !byName.has(name));
    if (missing.length) throw new Refusal(`${missing.join(", ")}: missing; choose the four records of one packet together`);
    const trees = {};
    for (const name of config.records) {
      const file = `${name}.json`;
      let tree;
      try {
        tree = J.readJson((await J.readFile(byName.get(file), config.max_bytes)).text);
      } catch (error) {
        throw new Refusal(`${file}: ${error.message}`);
      }
      if (!(tree instanceof Map)) throw new Refusal(`${file}: does not hold a JSON object`);
      if (get(tree, "record") !== name || get(tree, "schema") !== config.schema) throw new Refusal(`${file}: not a ${config.schema} ${name} record`);
      trees[name] = tree;
    }
    return trees;
  }

  // Every link against the record it names: the whole body's SHA-256, and each field's.
  async function checkLinks(trees, config) {
    const records = config.records;
    const bodies = {}, actual = {}, fieldDigests = {};
    for (const name of records) {
      bodies[name] = body(trees[name]);
      actual[name] = await digest(bodies[name]);
      fieldDigests[name] = new Map();
      for (const [key, value] of bodies[name]) fieldDigests[name].set(key, await digest(value));
    }
    const failures = [], links = [];
    let fieldsChecked = 0, fieldsMatched = 0;
    for (const name of records) {
      const doubters = [];
      for (const other of records.filter((record) => record !== name)) {
        const link = get(get(trees[other], "links"), name);
        const recorded = get(link, "sha256");
        const ok = recorded === actual[name];
        links.push([other, name, typeof recorded === "string" ? recorded : "(none)", ok ? "yes" : "NO"]);
        if (!ok) { doubters.push(link); continue; }
        const fields = get(link, "fields");
        const keys = new Set([...(fields instanceof Map ? fields.keys() : []), ...fieldDigests[name].keys()]);
        for (const key of [...keys].sort()) {
          fieldsChecked += 1;
          if (get(fields, key) === fieldDigests[name].get(key)) fieldsMatched += 1;
          else failures.push(`record ${other}, field links.${name}.fields.${key}: names a SHA-256 that is not the digest of record ${name}'s field ${key}`);
        }
      }
      if (doubters.length === records.length - 1) {
        const fields = get(doubters[0], "fields");
        const keys = new Set([...(fields instanceof Map ? fields.keys() : []), ...fieldDigests[name].keys()]);
        const changed = [...keys].sort().filter((key) => get(fields, key) !== fieldDigests[name].get(key));
        failures.push(`record ${name} was changed: field(s) ${changed.join(", ") || "(unknown)"} no longer match the digests the other three records hold`);
      } else {
        links.filter(([other, target, , ok]) => target === name && ok === "NO")
          .forEach(([other]) => failures.push(`record ${other}, field links.${name}: names a SHA-256 that is not record ${name}'s`));
      }
    }
    return { failures, links, fieldsChecked, fieldsMatched };
  }

  // ---- showing a packet whose links hold ---------------------------------------------------------------------
  function field(records, path) {
    const [record, ...keys] = path.split(".");
    let value = records[record];
    for (const key of keys) {
      if (!isObject(value) || !(key in value)) throw new Refusal(`${record}.json: no field ${path.slice(record.length + 1)}, which the page shows`);
      value = value[key];
    }
    return value;
  }
  const text = (value) => (typeof value === "string" ? value : value === null ? "none" : JSON.stringify(value));
  const ids = (value) => (Array.isArray(value) ? value.map(text).join(", ") : text(value));

  function measurementColumns(results, config) {
    const measured = new Set();
    results.forEach((row) => Object.entries(row).forEach(([key, entry]) => { if (isObject(entry) && "value" in entry) measured.add(key); }));
    const known = Object.keys(config.columns).filter((key) => measured.has(key));
    return known.concat([...measured].filter((key) => !(key in config.columns)).sort());
  }
  function cell(entry, config) {
    const value = isObject(entry) ? entry.value : undefined;
    if (value === null) return "n/a";
    return typeof value === "number" ? shown(value, config.decimals) : "—";
  }
  // As residlab.audit.measures.shown: a value that rounds to zero prints without a sign (0.000, never -0.000).
  function shown(value, decimals) {
    return J.fixed(value, decimals).replace(/^-(0\.0+)$/, "$1");
  }

  function describe(records, config) {
    const source = field(records, "model.source");
    const specimen = isObject(source) && source.kind === "specimen";
    const results = field(records, "measurement.results");
    const sites = field(records, "intervention.declared_sites");
    if (!Array.isArray(results) || !results.every(isObject)) throw new Refusal("measurement.json: results is not a list of objects");
    if (!Array.isArray(sites) || !sites.every(isObject)) throw new Refusal("intervention.json: declared_sites is not a list of objects");
    const columns = measurementColumns(results, config);
    const baseline = (which) => { const value = field(records, `measurement.baseline.${which}.value`); return typeof value === "number" ? shown(value, config.decimals) : text(value); };
    const command = `${config.python} ${config.runner} verify PACKET-DIR${specimen ? "" : " --model MODEL-DIR"}`;
    return [
      specimen ? element("p", { class: "rl-status rl-error rl-open-status" }, `Random-weight ${text(source.name)} specimen (seed ${text(source.seed)}): these numbers describe no trained model.`) : "",
      table("Model (model.json)", ["what", "recorded"], [
        ["model", `${text(field(records, "model.model_class"))} (${text(field(records, "model.block_type"))}, ${text(field(records, "model.blocks"))} blocks, width ${text(field(records, "model.width"))}, vocabulary ${text(field(records, "model.vocab_size"))})`],
        ["source", specimen ? `specimen ${text(source.name)}, seed ${text(source.seed)}` : text(isObject(source) ? source.kind : source)],
        ["parameters digest", text(field(records, "model.parameters.digest"))],
      ]),
      table("Input (input.json)", ["what", "recorded"], [
        ["clean ids", ids(field(records, "input.clean.ids"))], ["clean text", text(field(records, "input.clean.text"))],
        ["corrupt ids", ids(field(records, "input.corrupt.ids"))], ["corrupt text", text(field(records, "input.corrupt.text"))],
        ["target id (text)", `${text(field(records, "input.target.id"))} (${text(field(records, "input.target.text"))})`],
        ["rival id (text)", `${text(field(records, "input.rival.id"))} (${text(field(records, "input.rival.text"))})`],
        ["readout position", text(field(records, "input.readout_position"))],
      ]),
      table("Declared sites (intervention.json)", ["site", "component", "block", "position"],
        sites.map((site) => [text(site.name), text(site.component), text(site.block), text(site.position)])),
      element("p", {}, `Metric ${text(field(records, "measurement.metric"))}: clean ${baseline("clean")}, corrupt ${baseline("corrupt")}.`),
      table("Measurement (measurement.json), as recorded", ["write", "position", ...columns.map((key) => config.columns[key] || key)],
        results.map((row) => [text(row.site), text(row.position), ...columns.map((key) => cell(row[key], config))]), true),
      element("p", { class: "rl-open-caveat" }, [
        "Links checked, values not re-run: your browser checked that the four records are the ones linked to each other; it did not run the model. " +
        "To re-run every intervention and compare every value, run ", element("code", {}, command), " in the directory holding the runner.",
      ]),
    ];
  }

  function start() {
    const root = document.getElementById("open-packet");
    if (!root || !J) return;
    const config = JSON.parse(document.getElementById(root.dataset.config).textContent);
    const names = config.records.map((name) => `${name}.json`).join(", ");
    const input = element("input", { type: "file", id: "open-packet-files", multiple: "", accept: ".json,application/json" });
    const status = element("p", { class: "rl-status rl-open-status", id: "open-packet-status", role: "status", "aria-live": "polite" }, "No packet opened.");
    const details = element("div", { id: "open-packet-details" });
    root.replaceChildren(
      element("p", {}, [element("label", { for: "open-packet-files" }, `Choose your packet's four records (${names}) all at once`), input]),
      element("p", { class: "rl-hint" }, `…or drop them anywhere in this box. They are read by your browser only; nothing is uploaded. Each may be up to ${J.grouped(config.max_bytes / 1048576)} MiB.`),
      status, details,
    );

    async function open(files) {
      status.classList.remove("rl-error");
      status.textContent = "Checking…";
      details.replaceChildren();
      try {
        const trees = await readPacket(files, config);
        const links = await checkLinks(trees, config);
        const linkTable = table("Every link, checked in your browser", ["from record", "to record", "SHA-256 it names", "matches"], links.links, true);
        if (links.failures.length) {
          status.classList.add("rl-error");
          status.textContent = `NOT verified: ${links.failures.join("; ")}.`;
          details.replaceChildren(linkTable);
        } else {
          const records = Object.fromEntries(Object.entries(trees).map(([name, tree]) => [name, J.plain(tree)]));
          details.replaceChildren(...describe(records, config), linkTable);
          status.textContent = `Links verified in your browser: ${links.links.length} of ${links.links.length} record digests and ` +
            `${links.fieldsMatched} of ${links.fieldsChecked} field digests match. Values were not re-run.`;
        }
      } catch (error) {
        status.classList.add("rl-error");
        details.replaceChildren();
        if (error instanceof J.NoCryptoError) status.textContent = `Your packet cannot be verified in this browser: ${error.message}. It is not shown.`;
        else if (error instanceof Refusal) status.textContent = `Refused: ${error.message}.`;
        else status.textContent = `Refused: the files could not be read (${error.name}).`;
      }
      J.keyboardScroll(root);
    }
    J.acceptFiles(input, root, (files) => { open(files); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
