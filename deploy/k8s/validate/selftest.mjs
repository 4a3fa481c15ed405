// The validator must catch what it claims to: each case breaks one thing in a rendered, valid
// deployment and expects a problem that names it. Exits 1 if any case goes unnoticed.
//   node selftest.mjs RENDERED.yaml   (overlays/prometheus-keda: it has every kind of object)
import { readObjects, validate } from "./validate.mjs";

const path = process.argv[2];
const fresh = () => readObjects(path);
const kind = (objs, k, name) => objs.find((o) => o.kind === k && o.metadata.name.startsWith(name));
const worker = (objs) => kind(objs, "Deployment", "pagoda-worker").spec.template.spec;
const router = (objs) => kind(objs, "Deployment", "pagoda-router").spec.template.spec;

const cases = [
  ["a missing required field", /schema/, (o) => { delete worker(o).containers[0].name; }],
  ["a wrong type", /schema/, (o) => { kind(o, "Deployment", "pagoda-worker").spec.replicas = "two"; }],
  ["a missing label", /missing label/, (o) => { delete kind(o, "Service", "pagoda").metadata.labels; }],
  ["an HTTP readiness probe", /readinessProbe must be a grpc probe/,
   (o) => { router(o).containers[0].readinessProbe = { httpGet: { port: 8080, path: "/" } }; }],
  ["liveness on readiness", /livenessProbe must check service "liveness"/,
   (o) => { delete worker(o).containers[0].livenessProbe.grpc.service; }],
  ["a proxy sidecar without liveness", /sidecar h2-proxy needs a livenessProbe/,
   (o) => { delete router(o).containers.find((c) => c.name === "h2-proxy").livenessProbe; }],
  ["too little worker memory", /memory .* MiB/,
   (o) => { worker(o).containers[0].resources.limits.memory = "512Mi"; }],
  ["cpu not matching threads", /cpu .* WORKER_THREADS/,
   (o) => { worker(o).containers[0].resources.requests.cpu = "3"; }],
  ["a router hidden while not ready", /publishNotReadyAddresses/,
   (o) => { delete kind(o, "Service", "pagoda-router-workers").spec.publishNotReadyAddresses; }],
  ["the worker port open to all", /only worker pods/,
   (o) => { delete kind(o, "NetworkPolicy", "pagoda-router").spec.ingress[1].from; }],
  ["the KV transfer port open to all", /only worker pods to the KV transfer port/,
   (o) => { delete kind(o, "NetworkPolicy", "pagoda-worker").spec.ingress[1].from; }],
  ["a KV transfer address peers cannot reach", /--advertise-address/,
   (o) => { const c = worker(o).containers[0];
            c.args = c.args.filter((a) => !a.startsWith("--advertise-address")); }],
  ["no PodDisruptionBudget", /PodDisruptionBudget/,
   (o) => { o.splice(o.indexOf(kind(o, "PodDisruptionBudget", "pagoda-worker")), 1); }],
  ["a short startup probe", /startup probe/,
   (o) => { worker(o).containers[0].startupProbe.failureThreshold = 3; }],
  ["root", /non-root/, (o) => { delete worker(o).securityContext.runAsNonRoot; }],
  ["a model claim that is not there", /missing claim/,
   (o) => { o.splice(o.indexOf(kind(o, "PersistentVolumeClaim", "pagoda-model")), 1); }],
  ["a worker without the token", /PAGODA_WORKER_TOKEN/,
   (o) => { worker(o).containers[0].env = worker(o).containers[0].env.filter(
                (e) => e.name !== "PAGODA_WORKER_TOKEN"); }],
  ["the token from another key", /PAGODA_WORKER_TOKEN/,
   (o) => { router(o).containers[0].env.find((e) => e.name === "PAGODA_WORKER_TOKEN")
                .valueFrom.secretKeyRef.key = "password"; }],
  ["a router without metrics", /--metrics-port/,
   (o) => { const c = router(o).containers[0];
            c.args = c.args.filter((a) => !a.startsWith("--metrics-port")); }],
  ["the metrics port open to all", /metrics port/,
   (o) => { kind(o, "NetworkPolicy", "pagoda-router").spec.ingress.push({ ports: [{ port: 9090 }] }); }],
  ["the metrics port closed", /metrics port/,
   (o) => { const p = kind(o, "NetworkPolicy", "pagoda-router");
            p.spec.ingress = p.spec.ingress.filter((r) => !r.ports.some((x) => x.port === 9090)); }],
  ["a ServiceMonitor on a port no Service has", /ServiceMonitor/,
   (o) => { kind(o, "ServiceMonitor", "pagoda-router").spec.endpoints[0].port = "http"; }],
  ["a ServiceMonitor that is not one", /schema/,
   (o) => { kind(o, "ServiceMonitor", "pagoda-router").spec.endpoints = "metrics"; }],
  ["workers not spread", /topologySpreadConstraints/,
   (o) => { delete worker(o).topologySpreadConstraints; }],
  ["autoscaling the router", /not the workers/,
   (o) => { kind(o, "ScaledObject", "pagoda-worker").spec.scaleTargetRef.name = "pagoda-router"; }],
  ["autoscaling on something else", /pagoda_num_requests_waiting/,
   (o) => { kind(o, "ScaledObject", "pagoda-worker").spec.triggers[0].metadata.query = "sum(up)"; }],
  ["replicas beside an autoscaler", /fights the autoscaler/,
   (o) => { kind(o, "Deployment", "pagoda-worker").spec.replicas = 2; }],
  ["a ScaledObject without triggers", /schema/,
   (o) => { delete kind(o, "ScaledObject", "pagoda-worker").spec.triggers; }],
];

let missed = 0;
const baseline = validate(fresh(), path);
if (baseline.length > 0) {
  console.error(`the unbroken manifests must pass first:\n${baseline.join("\n")}`);
  process.exit(1);
}
for (const [name, expected, breakIt] of cases) {
  const objects = fresh();
  breakIt(objects);
  const found = validate(objects, path);
  if (!found.some((p) => expected.test(p))) {
    console.error(`not caught: ${name} (problems: ${found.join("; ") || "none"})`);
    ++missed;
  }
}
if (missed > 0) process.exit(1);
console.log(`ok: ${cases.length} broken variants caught`);
