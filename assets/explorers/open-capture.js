// Lab 05 Part 4, "open your own run": the reader's manifest.json, observations.json and captures.json, read in the
// browser (nothing is uploaded) and refused, naming the file and the check, unless they are one run: the manifest
// records the size and SHA-256 of the other two (hashed here with Web Crypto), observations.json is of the page's
// schema (every position observed, the boundaries named resid_pre and resid_post; an older one is refused with the
// command that writes it afresh), the token ids agree, and every number of every position agrees with the captured
// tensors within the page's tolerance, each recomputed here from captures.json exactly as
// residlab/course/models/capture_page.py recomputed_observation computes it (float64, math.fsum). A
// verified run is shown in the page's capture explorer (capture-explorer.js) as observations.json holds it. The
// limits and names come from the page (residlab/course/lab05/open_run.py); nothing read from the files
// is ever inserted as HTML.
(function () {
  "use strict";
  const J = window.residlabPythonJson;
  const { element, table } = J;
  const MANIFEST = "manifest.json", OBSERVATIONS = "observations.json", CAPTURES = "captures.json";
  const UPDATE_FIELDS = ["difference_norm", "relative_difference", "cosine_consecutive", "cosine_update_with_incoming",
    "attn_write_norm", "mlp_write_norm", "cosine_attn_mlp_writes"];
  const FINAL_FIELDS = ["raw_norm", "normalised_norm", "difference_norm", "cosine"];

  class Refusal extends Error {
    constructor(file, message) { super(`${file}: ${message}`); }
  }
  const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
  const isNumber = (value) => typeof value === "number" && Number.isFinite(value);
  const isInt = (value) => Number.isSafeInteger(value);
  function need(condition, file, message) { if (!condition) throw new Refusal(file, message); }

  // ---- the arithmetic the page states (capture_page.recomputed_observation) ----------------------------------
  const norm = (v) => Math.sqrt(J.fsum(v.map((x) => x * x)));
  function cosine(a, b) {
    const na = norm(a), nb = norm(b);
    return na === 0 || nb === 0 ? null : J.fsum(a.map((x, i) => x * b[i])) / (na * nb);
  }
  const minus = (a, b) => a.map((x, i) => x - b[i]);

  function recompute(tensors, names, position) {
    const states = names.states.map((name) => tensors.get(name)[position]);
    const updates = names.attn.map((attnName, block) => {
      const before = states[block], after = states[block + 1];
      const attn = tensors.get(attnName)[position], mlp = tensors.get(names.mlp[block])[position];
      const change = minus(after, before);
      return {
        block,
        difference_norm: norm(change),
        relative_difference: norm(before) > 0 ? norm(change) / norm(before) : null,
        cosine_consecutive: cosine(before, after),
        cosine_update_with_incoming: cosine(change, before),
        attn_write_norm: norm(attn),
        mlp_write_norm: norm(mlp),
        cosine_attn_mlp_writes: cosine(attn, mlp),
      };
    });
    const last = states[states.length - 1], normalised = tensors.get(names.final)[position];
    return {
      position,
      boundaries: states.map((state, index) => ({ index, name: names.states[index], label: `H_${index}`, norm: norm(state) })),
      block_updates: updates,
      final_normalisation: { raw_norm: norm(last), normalised_norm: norm(normalised), difference_norm: norm(minus(normalised, last)), cosine: cosine(last, normalised) },
    };
  }

  // ---- checks -----------------------------------------------------------------------------------------------
  function checkManifest(manifest) {
    need(isObject(manifest), MANIFEST, "not a JSON object");
    for (const key of ["repository", "revision"]) need(typeof manifest[key] === "string", MANIFEST, `no ${key} (a string)`);
    need(typeof manifest.synthetic === "boolean", MANIFEST, "does not say whether the specimen was synthetic (synthetic: true or false)");
    need(isObject(manifest.versions), MANIFEST, "records no library versions");
    need(isObject(manifest.results), MANIFEST, `records no results (the size and SHA-256 of ${OBSERVATIONS} and ${CAPTURES})`);
    for (const name of [OBSERVATIONS, CAPTURES]) {
      const entry = manifest.results[name];
      need(isObject(entry) && isInt(entry.size) && typeof entry.sha256 === "string" && /^[0-9a-f]{64}$/.test(entry.sha256),
        MANIFEST, `records no size and SHA-256 for ${name}`);
    }
  }

  // observations.json of another layout (written by an older observation): one line, with the command the manifest
  // records, which writes it afresh.
  function checkSchema(observations, manifest, config) {
    if (!isObject(observations) || observations.schema === config.observations_schema) return;
    const command = Array.isArray(manifest.command) ? manifest.command.map(String).join(" ") : "the observation that wrote it";
    const found = observations.schema === undefined ? 1 : JSON.stringify(observations.schema);
    throw new Refusal(OBSERVATIONS, `schema ${found}, not ${config.observations_schema} (${config.observations_layout}): refresh it by running \`${command}\` again into an empty folder`);
  }

  function checkObservation(observation, where, bad, blocks) {
    if (!isObject(observation)) throw bad(where);
    const { boundaries, block_updates: updates, final_normalisation: final } = observation;
    if (!Array.isArray(boundaries) || !Array.isArray(updates) || !updates.length || boundaries.length !== updates.length + 1 ||
        (blocks !== undefined && updates.length !== blocks)) throw bad(`${where}.boundaries and block_updates`);
    boundaries.forEach((row, i) => {
      if (!isObject(row) || row.index !== i || typeof row.label !== "string" || !isNumber(row.norm) || !Array.isArray(row.logit_lens_top)) throw bad(`${where}.boundaries[${i}]`);
      row.logit_lens_top.forEach((entry, k) => {
        if (!isObject(entry) || !isInt(entry.id) || typeof entry.piece !== "string" || !isNumber(entry.probability)) throw bad(`${where}.boundaries[${i}].logit_lens_top[${k}]`);
      });
    });
    updates.forEach((row, i) => {
      if (!isObject(row) || row.block !== i || UPDATE_FIELDS.some((key) => !(isNumber(row[key]) || row[key] === null))) throw bad(`${where}.block_updates[${i}]`);
    });
    if (!isObject(final) || FINAL_FIELDS.some((key) => !(isNumber(final[key]) || final[key] === null))) throw bad(`${where}.final_normalisation`);
  }

  function checkObservations(observations) {
    const bad = (what) => new Refusal(OBSERVATIONS, `${what}: not the structure the observation runner writes`);
    if (!isObject(observations)) throw bad("not a JSON object");
    const { tokens, positions } = observations;
    if (!Array.isArray(tokens) || !tokens.length) throw bad("no tokens");
    tokens.forEach((token, i) => {
      if (!isObject(token) || token.position !== i || !isInt(token.id) || typeof token.piece !== "string") throw bad(`tokens[${i}]`);
    });
    const selected = observations.selected_position;
    if (!isInt(selected) || selected < 0 || selected >= tokens.length) throw bad("selected_position is not one of the tokens");
    if (!Array.isArray(positions) || positions.length !== tokens.length) throw bad("positions (one observation per token)");
    positions.forEach((observation, i) => {
      if (!isObject(observation) || observation.position !== i) throw bad(`positions[${i}]`);
      checkObservation(observation, `positions[${i}]`, bad, i ? positions[0].block_updates.length : undefined);
    });
  }

  // captures.json's tensors by name, each (positions, width) once the batch of one is removed, checked against
  // observations.json: the same token ids, every site the page reads, every shape (1, n, d) and every value a number.
  function capturedTensors(captures, observations, config) {
    const bad = (what) => new Refusal(CAPTURES, what);
    if (!isObject(captures) || !Array.isArray(captures.token_ids) || !Array.isArray(captures.tensors)) throw bad("not the structure the observation runner writes (token_ids and tensors)");
    const ids = observations.tokens.map((token) => token.id);
    if (captures.token_ids.length !== ids.length || captures.token_ids.some((id, i) => id !== ids[i])) {
      throw bad(`its token ids are not those of ${OBSERVATIONS}: another run's file`);
    }
    const blocks = observations.positions[0].block_updates.length;
    const site = (block, kind) => config.site_pattern.replace("{block}", String(block)).replace("{site}", kind);
    const names = {
      states: [config.embedding_site, ...Array.from({ length: blocks }, (_, b) => site(b, "resid_post"))],
      attn: Array.from({ length: blocks }, (_, b) => site(b, "attn_write")),
      mlp: Array.from({ length: blocks }, (_, b) => site(b, "mlp_write")),
      final: config.final_norm_site,
    };
    const tensors = new Map();
    let width = null;
    for (const entry of captures.tensors) {
      if (!isObject(entry) || typeof entry.name !== "string") throw bad("a tensor without a name");
      const shape = entry.shape;
      if (!Array.isArray(shape) || shape.length !== 3 || shape[0] !== 1 || shape[1] !== ids.length || !isInt(shape[2]) || shape[2] < 1) {
        throw bad(`${entry.name} has shape ${JSON.stringify(shape)}, not (1, ${ids.length}, width)`);
      }
      width = width === null ? shape[2] : width;
      const rows = Array.isArray(entry.values) && entry.values.length === 1 ? entry.values[0] : null;
      if (shape[2] !== width || !Array.isArray(rows) || rows.length !== ids.length ||
          rows.some((row) => !Array.isArray(row) || row.length !== width || !row.every(isNumber))) {
        throw bad(`${entry.name}: its values are not ${JSON.stringify(shape)} finite numbers`);
      }
      tensors.set(entry.name, rows);
    }
    const outputs = [...tensors.keys()].filter((name) => name.endsWith(".resid_post")).length;
    if (outputs !== blocks) throw bad(`${outputs} block outputs, but ${OBSERVATIONS} observed ${blocks} blocks`);
    const missing = [...names.states, ...names.attn, ...names.mlp, names.final].filter((name) => !tensors.has(name));
    if (missing.length) throw bad(`no tensor ${missing.join(", ")}`);
    return { tensors, names };
  }

  // Where observations.json's observation of a position differs from its recomputation beyond the page's tolerance.
  function disagreement(shown, computed, where, tolerance) {
    if (computed === null || shown === null || shown === undefined) {
      return computed === null && shown === null ? null : `${where}: ${JSON.stringify(shown)}, the captured tensors give ${JSON.stringify(computed)}`;
    }
    if (typeof computed === "number") {
      return Math.abs(shown - computed) > tolerance.absolute + tolerance.relative * Math.abs(computed)
        ? `${where}: ${J.floatRepr(shown)}, the captured tensors give ${J.floatRepr(computed)}` : null;
    }
    return null;
  }
  function disagreements(observation, computed, where, tolerance) {
    const found = [];
    const add = (problem) => { if (problem) found.push(problem); };
    computed.boundaries.forEach((row, i) => add(disagreement(observation.boundaries[i].norm, row.norm, `${where}.boundaries[${i}].norm`, tolerance)));
    computed.block_updates.forEach((row, i) => UPDATE_FIELDS.forEach((key) =>
      add(disagreement(observation.block_updates[i][key], row[key], `${where}.block_updates[${i}].${key}`, tolerance))));
    FINAL_FIELDS.forEach((key) => add(disagreement(observation.final_normalisation[key], computed.final_normalisation[key], `${where}.final_normalisation.${key}`, tolerance)));
    return found;
  }

  // ---- reading the three files ------------------------------------------------------------------------------
  async function readRun(files, config) {
    const byName = new Map();
    for (const file of files) {
      need(config.files[file.name] !== undefined, file.name, `not one of the run's files (${Object.keys(config.files).join(", ")})`);
      need(!byName.has(file.name), file.name, "chosen twice");
      byName.set(file.name, file);
    }
    const missing = Object.keys(config.files).filter((name) => !byName.has(name));
    if (missing.length) throw new Refusal(missing.join(", "), "missing: choose the three files of one run together");
    const read = async (name) => {
      try {
        return await J.readFile(byName.get(name), config.files[name]);
      } catch (error) {
        throw new Refusal(name, error.message);
      }
    };
    const json = (name, text) => {
      try {
        return J.plain(J.readJson(text));
      } catch (error) {
        throw new Refusal(name, error.message);
      }
    };
    const manifest = json(MANIFEST, (await read(MANIFEST)).text);
    checkManifest(manifest);
    const parsed = {};
    for (const name of [OBSERVATIONS, CAPTURES]) {
      const recorded = manifest.results[name], file = byName.get(name);
      need(file.size === recorded.size, name, `${J.grouped(file.size)} bytes, but ${MANIFEST} records ${J.grouped(recorded.size)}: not the file of this run`);
      const { bytes, text } = await read(name);
      const digest = await J.sha256Hex(bytes); // NoCryptoError: the run cannot be verified here
      need(digest === recorded.sha256, name, `its SHA-256 is ${digest}, but ${MANIFEST} records ${recorded.sha256}: changed, or another run's file`);
      parsed[name] = json(name, text);
    }
    const observations = parsed[OBSERVATIONS];
    checkSchema(observations, manifest, config);
    checkObservations(observations);
    const { tensors, names } = capturedTensors(parsed[CAPTURES], observations, config);
    const computed = observations.tokens.map((token) => recompute(tensors, names, token.position));
    const problems = computed.flatMap((row, position) =>
      disagreements(observations.positions[position], row, `positions[${position}]`, config.agreement));
    if (problems.length) throw new Refusal(OBSERVATIONS, `disagrees with the tensors in ${CAPTURES}: ${problems.slice(0, 3).join("; ")}`);
    // Shown as the run recorded it, as the page shows its own capture; ``computed`` is what the check compared.
    return { manifest, observations, positions: observations.positions, computed };
  }

  // ---- showing a verified run -------------------------------------------------------------------------------
  const quoted = (piece) => JSON.stringify(piece);
  const number = (value, digits = 3) => (value === null ? "null (undefined)" : J.fixed(value, digits));
  const general = (value) => (isNumber(value) ? J.general(value, 3) : "—");

  function provenance(manifest) {
    const rows = [
      ["specimen", `${manifest.repository}${manifest.synthetic ? " (SYNTHETIC: random weights)" : ""}`],
      ["revision", manifest.revision],
      ["synthetic", manifest.synthetic ? "yes: random weights, NOT Pythia-14M's numbers" : "no: the weights of the revision above"],
    ];
    if (typeof manifest.created === "string") rows.push(["created", manifest.created]);
    if (Array.isArray(manifest.command)) rows.push(["command", manifest.command.map(String).join(" ")]);
    for (const [name, version] of Object.entries(manifest.versions)) rows.push([name === "python" ? "Python" : name, version === null ? "not installed" : String(version)]);
    for (const key of ["model_class", "attn_implementation", "residual_kind", "block_return_kind"]) {
      if (typeof manifest[key] === "string") rows.push([key.replace(/_/g, " "), manifest[key]]);
    }
    for (const entry of Array.isArray(manifest.files) ? manifest.files : []) {
      if (isObject(entry) && typeof entry.name === "string") {
        rows.push([entry.name, `${isInt(entry.size) ? J.grouped(entry.size) : "?"} bytes, sha256 ${typeof entry.sha256 === "string" ? entry.sha256.slice(0, 16) + "…" : "none"}`]);
      }
    }
    return table(`What ${MANIFEST} says was observed`, ["what", "recorded"], rows);
  }

  function observationTable(observation) {
    const rows = observation.boundaries.map((row) => {
      const update = row.index > 0 ? observation.block_updates[row.index - 1] : null;
      const top = row.logit_lens_top[0];
      return [row.label, row.name === undefined ? "" : String(row.name), number(row.norm), update ? number(update.difference_norm) : "",
        update ? number(update.cosine_consecutive) : "", top ? `${quoted(top.piece)} (${general(top.probability)})` : "—"];
    });
    const final = observation.final_normalisation;
    rows.push(["final LN", "", number(final.normalised_norm), `${number(final.difference_norm)} (normalisation)`, number(final.cosine), "same readout as the last row"]);
    return table(`Your run's selected position (${OBSERVATIONS})`, ["state", "site", "norm", "‖change from previous‖", "cosine with previous", "logit-lens top-1 (p)"], rows, true);
  }

  function checksTable(checks) {
    const rows = [];
    const identity = isObject(checks) && isObject(checks.identity) ? checks.identity : null;
    if (identity) {
      rows.push(["parallel identity, max abs error", general(identity.max_abs_error), identity.all_within_tolerance === true ? "yes" : "NO"]);
      rows.push(["same identity in transformers' own addition order", general(identity.max_abs_error_in_source_order), ""]);
    }
    if (isObject(checks)) {
      if (typeof checks.shapes_ok === "boolean") rows.push(["every captured shape", Array.isArray(checks.expected_shape) ? `expected (${checks.expected_shape.join(", ")})` : "", checks.shapes_ok ? "yes" : "NO"]);
      if (isObject(checks.repeat)) rows.push(["unchanged input repeated, max abs difference", general(checks.repeat.max_abs_difference), ""]);
      if (isObject(checks.model_hidden_states)) rows.push(["hidden_states[-1] vs raw H_L", general(checks.model_hidden_states.last_entry_vs_raw_last_block_output_max_abs), "differs, as it must"]);
    }
    return rows.length ? table(`The checks your run recorded (${OBSERVATIONS}, as measured on your machine)`, ["check", "measured", "within"], rows) : element("p", {}, `${OBSERVATIONS} records no checks.`);
  }

  function start() {
    const root = document.getElementById("open-capture");
    const explorer = document.getElementById("capture-explorer");
    if (!root || !J) return;
    const config = JSON.parse(document.getElementById(root.dataset.config).textContent);
    const input = element("input", { type: "file", id: "open-capture-files", multiple: "", accept: ".json,application/json" });
    const status = element("p", { class: "rl-status rl-open-status", id: "open-capture-status", role: "status", "aria-live": "polite" },
      "No run opened: the explorer shows the site's capture.");
    const details = element("div", { id: "open-capture-details" });
    const back = element("button", { type: "button", class: "btn btn-outline-secondary btn-sm", id: "open-capture-back", hidden: "" }, "Show the site's capture again");
    const limits = Object.entries(config.files).map(([name, limit]) => `${name} up to ${J.grouped(limit / 1048576)} MiB`).join(", ");
    root.replaceChildren(
      element("p", {}, [element("label", { for: "open-capture-files" }, "Choose your run's manifest.json, observations.json and captures.json (all three at once)"), input]),
      element("p", { class: "rl-hint" }, `…or drop the three files anywhere in this box. They are read by your browser only; nothing is uploaded. Sizes: ${limits}.`),
      status, back, details,
    );
    window.residlabOpenCapture = { lastRun: null };
    const siteData = () => JSON.parse(document.getElementById(explorer.dataset.source).textContent);
    let whose = null;
    function showSite() {
      if (whose) whose.remove();
      whose = null;
      back.hidden = true;
      details.replaceChildren();
      if (explorer) window.residlabCaptureExplorer.build(explorer, siteData());
    }
    back.addEventListener("click", () => { showSite(); status.textContent = "No run opened: the explorer shows the site's capture."; status.classList.remove("rl-error"); });

    async function open(files) {
      status.classList.remove("rl-error");
      status.textContent = "Checking…";
      let run;
      try {
        run = await readRun(files, config);
      } catch (error) {
        showSite(); // nothing unverified stays on the page
        status.classList.add("rl-error");
        if (error instanceof J.NoCryptoError) status.textContent = `Your run cannot be verified in this browser: ${error.message}. It is not shown.`;
        else if (error instanceof Refusal) status.textContent = `Refused: ${error.message}.`;
        else status.textContent = `Refused: the files could not be read (${error.name}).`;
        return;
      }
      window.residlabOpenCapture.lastRun = run; // for the tests: every number shown, before formatting
      const { manifest, observations } = run;
      const label = `Your run, not the site's: ${manifest.repository} at revision ${manifest.revision}` +
        (manifest.synthetic ? " (synthetic specimen: random weights, NOT Pythia-14M's numbers)." : ".");
      status.textContent = `Verified in your browser: ${OBSERVATIONS} and ${CAPTURES} have the sizes and SHA-256 digests ${MANIFEST} records, ` +
        `their token ids agree, and the ${OBSERVATIONS} numbers of every position agree with the captured tensors. ${label}`;
      if (explorer) {
        if (!whose) whose = element("p", { class: "rl-whose", id: "capture-whose" });
        whose.textContent = `${label} Every position is ${OBSERVATIONS}'s own, checked in your browser against ${CAPTURES}.`;
        explorer.before(whose);
        window.residlabCaptureExplorer.build(explorer, { tokens: observations.tokens, selected_position: observations.selected_position, positions: run.positions });
      }
      back.hidden = false;
      details.replaceChildren(
        element("p", { class: "rl-heading" }, label),
        provenance(manifest),
        table("Your run's tokens", ["position", "token id", "decoded piece", "selected"],
          observations.tokens.map((token) => [String(token.position), String(token.id), quoted(token.piece), token.position === observations.selected_position ? "yes" : ""])),
        observationTable(observations.positions[observations.selected_position]),
        checksTable(observations.checks),
      );
      J.keyboardScroll(root);
    }
    J.acceptFiles(input, root, (files) => { open(files).catch((error) => { status.classList.add("rl-error"); status.textContent = `Refused: ${error.name}.`; }); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
