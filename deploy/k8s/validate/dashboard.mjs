// Checks the Grafana dashboard's ConfigMap (`kubectl kustomize deploy/grafana`) against the
// dashboard file: a valid ConfigMap with the sidecar's label grafana_dashboard: "1" whose data is
// the file, byte for byte; and every PromQL expression of the dashboard parses (Prometheus's
// own grammar, @prometheus-io/lezer-promql). Then breaks each in turn and expects it caught.
// Which metrics the expressions read is tests/deploy/grafana_dashboard_test.cc's part: it
// compares them with a real router's /metrics.
//   node dashboard.mjs RENDERED.yaml pagoda-dashboard.json
import { readFileSync } from "node:fs";
import { parser } from "@prometheus-io/lezer-promql";
import { ConfigMap } from "kubernetes-models/v1/ConfigMap";
import { readObjects } from "./validate.mjs";

// Every string under a key "expr", anywhere in the dashboard.
function expressions(json, out = []) {
  if (Array.isArray(json)) {
    json.forEach((v) => expressions(v, out));
  } else if (json && typeof json === "object") {
    for (const [k, v] of Object.entries(json)) {
      if (k === "expr" && typeof v === "string") out.push(v);
      expressions(v, out);
    }
  }
  return out;
}

// Grafana's variables as Prometheus sees them once Grafana has filled them in.
function asPrometheusSees(expr) {
  return expr.replaceAll("$__rate_interval", "1m").replaceAll("$__interval", "1m");
}

// The offset of the first syntax error in `expr`, or -1.
function syntaxError(expr) {
  let at = -1;
  parser.parse(expr).iterate({
    enter: (node) => {
      if (at < 0 && node.type.isError) at = node.from;
      return at < 0;
    },
  });
  return at;
}

export function checkDashboard(objects, file) {
  const problems = [];
  const maps = objects.filter((o) => o.kind === "ConfigMap");
  if (objects.length !== 1 || maps.length !== 1) {
    return [`want exactly one ConfigMap, got ${objects.map((o) => o.kind).join(", ") || "none"}`];
  }
  const [map] = maps;
  try {
    new ConfigMap(map).validate();
  } catch (e) {
    problems.push(`schema: ${e.message}`);
  }
  if (map.metadata?.labels?.grafana_dashboard !== "1") {
    problems.push('missing label grafana_dashboard: "1" (the Grafana sidecar loads only those)');
  }
  for (const label of ["app.kubernetes.io/name", "app.kubernetes.io/part-of"]) {
    if (!map.metadata?.labels?.[label]) problems.push(`missing label ${label}`);
  }
  const keys = Object.keys(map.data ?? {});
  if (keys.length !== 1 || map.data[keys[0]] !== file) {
    problems.push(`data is not the dashboard file (keys: ${keys.join(", ")})`);
  }
  let dashboard;
  try {
    dashboard = JSON.parse(file);
  } catch (e) {
    return [...problems, `the dashboard is not JSON: ${e.message}`];
  }
  const exprs = expressions(dashboard);
  if (exprs.length === 0) problems.push("no PromQL expression in the dashboard");
  for (const expr of exprs) {
    const at = syntaxError(asPrometheusSees(expr));
    if (at >= 0) problems.push(`PromQL syntax error at ${at}: ${expr}`);
  }
  return problems;
}

const [rendered, path] = process.argv.slice(2);
if (!rendered || !path) {
  console.error("usage: node dashboard.mjs RENDERED.yaml pagoda-dashboard.json");
  process.exit(2);
}
const file = readFileSync(path, "utf8");
const found = checkDashboard(readObjects(rendered), file);
for (const p of found) console.error(`${rendered}: ${p}`);

// The checks above must catch what they claim to.
const broken = [
  ["no sidecar label", /grafana_dashboard/, (o) => { delete o[0].metadata.labels.grafana_dashboard; }],
  ["a drifted copy", /not the dashboard file/, (o) => { o[0].data[Object.keys(o[0].data)[0]] += " "; }],
  ["unbalanced PromQL", /PromQL syntax error/, (o, f) => f.replace(/\)\)"/, ')"')],
  ["a label matcher without its quote", /PromQL syntax error/,
   (o, f) => f.replace('model_name=\\"$model_name\\"}', 'model_name=$model_name\\"}')],
];
let missed = 0;
for (const [name, want, breakIt] of broken) {
  const objects = readObjects(rendered);
  const changed = breakIt(objects, file);
  const f = typeof changed === "string" ? changed : file;
  if (typeof changed === "string") objects[0].data[Object.keys(objects[0].data)[0]] = f;
  if (f === file && typeof changed === "string") {
    console.error(`selftest: "${name}" changed nothing`);
    missed++;
  } else if (!checkDashboard(objects, f).some((p) => want.test(p))) {
    console.error(`selftest: "${name}" went unnoticed`);
    missed++;
  }
}
if (found.length > 0 || missed > 0) process.exit(1);
console.log(`ok: ${rendered} (the dashboard's ConfigMap and PromQL; ${broken.length} breakages caught)`);
