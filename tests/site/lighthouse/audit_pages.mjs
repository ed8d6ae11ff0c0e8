// Lighthouse on each URL in turn, in the one Chromium already listening on --port (started by
// residlab/build/lighthouse.py): one JSON line per page on stdout, nothing else.
//
//   node audit_pages.mjs --port 9222 --preset mobile --categories performance,accessibility URL ...
//
// The preset is Lighthouse's own: "mobile" (its default: a mid-range phone, simulated slow 4G and a 4x slower
// CPU) or "desktop". Only the categories asked for run.
import lighthouse, {defaultConfig, desktopConfig} from "lighthouse";

const args = process.argv.slice(2);
const option = (name) => {
  const at = args.indexOf(`--${name}`);
  if (at === -1 || at + 1 >= args.length) throw new Error(`audit_pages.mjs: --${name} is required`);
  return args.splice(at, 2)[1];
};
const port = Number(option("port"));
const preset = option("preset");
const categories = option("categories").split(",");
if (!["mobile", "desktop"].includes(preset)) throw new Error(`audit_pages.mjs: unknown preset ${preset}`);

// Audits that count towards a category's score and did not pass, with what Lighthouse says about them.
function failures(lhr, category) {
  return lhr.categories[category].auditRefs
    .filter((ref) => ref.weight > 0)
    .map((ref) => lhr.audits[ref.id])
    .filter((audit) => audit.score !== null && audit.score < 1)
    .map((audit) => ({id: audit.id, score: audit.score, title: audit.title, shown: audit.displayValue ?? "",
                      items: (audit.details?.items ?? []).slice(0, 5).map((item) =>
                        item.node ? `${item.node.snippet} ${item.node.explanation ?? ""}`.trim()
                                  : item.url ?? item.source?.url ?? JSON.stringify(item).slice(0, 200))}));
}

// What no score counts is not run, nor are the artifacts only those audits need gathered (the stylesheets' usage,
// the script treemap, the back/forward-cache probe, which navigates away and back, ...): every audit of weight 0
// in all the categories asked for (both presets share the default config's categories), and the full-page
// screenshot. A score is a weighted mean of its category's audits, so it is the same with them or without.
// Kept, and run whichever categories are asked (Lighthouse adds onlyAudits to onlyCategories' audits): the one
// unweighted audit read below, the bytes transferred.
const READ_UNWEIGHTED = new Set(["total-byte-weight"]);
const weighted = new Set(categories.flatMap((c) => defaultConfig.categories[c].auditRefs)
  .filter((ref) => ref.weight > 0).map((ref) => ref.id));
const unweighted = [...new Set(categories.flatMap((c) => defaultConfig.categories[c].auditRefs)
  .filter((ref) => !weighted.has(ref.id) && !READ_UNWEIGHTED.has(ref.id)).map((ref) => ref.id))];

// Without performance, no audit reads what happens after the page has loaded and gone quiet: Lighthouse's waits
// for a quiet page (a second after the first paint and after load, a second without network or long tasks) are
// cut to a quarter second of quiet: each visit takes about a fifth less time on a 2-core machine.
const settle = categories.includes("performance") ? {}
  : {pauseAfterFcpMs: 0, pauseAfterLoadMs: 0, networkQuietThresholdMs: 250, cpuQuietThresholdMs: 250};

for (const url of args) {
  const flags = {port, output: "json", logLevel: "error", onlyCategories: categories, onlyAudits: [...READ_UNWEIGHTED],
                 disableFullPageScreenshot: true, skipAudits: unweighted, ...settle};
  const result = await lighthouse(url, flags, preset === "desktop" ? desktopConfig : undefined);
  const lhr = result.lhr;
  const numeric = (id) => lhr.audits[id]?.numericValue ?? null;
  console.log(JSON.stringify({
    url,
    requested: lhr.requestedUrl,
    runtimeError: lhr.runtimeError?.message ?? null,
    runWarnings: lhr.runWarnings,
    benchmarkIndex: lhr.environment.benchmarkIndex,
    scores: Object.fromEntries(categories.map((c) => [c, lhr.categories[c].score])),
    metrics: {
      largestContentfulPaintMs: numeric("largest-contentful-paint"),
      firstContentfulPaintMs: numeric("first-contentful-paint"),
      totalBlockingTimeMs: numeric("total-blocking-time"),
      cumulativeLayoutShift: numeric("cumulative-layout-shift"),
      speedIndexMs: numeric("speed-index"),
      transferredBytes: numeric("total-byte-weight"),
    },
    failures: Object.fromEntries(categories.map((c) => [c, failures(lhr, c)])),
  }));
}
