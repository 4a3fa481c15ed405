// The validator must catch what it claims to: each case breaks one thing in a rendered, valid
// deployment and expects a problem that names it. Exits 1 if any case goes unnoticed.
//   node selftest.mjs RENDERED.yaml [STAGES.yaml...]
// RENDERED: overlays/prometheus-keda (it has every kind of object); each STAGES: an overlay
// with a pipeline stage group (a LeaderWorkerSet or a StatefulSet), broken in its own ways.
import { readObjects, validate } from "./validate.mjs";

const [path, ...stagePaths] = process.argv.slice(2);
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

// Pipeline stage groups (issue 40). A case that names a kind runs only where the group is one.
const group = (o) => o.find((x) => ["LeaderWorkerSet", "StatefulSet"].includes(x.kind) &&
                                  x.metadata.name === "pagoda-stages");
const stage = (o) => {
  const g = group(o);
  return (g.kind === "LeaderWorkerSet" ? g.spec.leaderWorkerTemplate.workerTemplate
                                       : g.spec.template).spec.containers[0];
};
const config = (o) => o.find((x) => x.kind === "ConfigMap" && x.data?.STAGE_LAYERS).data;
const size = (o, change) => {
  const g = group(o);
  if (g.kind === "LeaderWorkerSet") g.spec.leaderWorkerTemplate.size += change;
  else g.spec.replicas += change;
};
const script = (o, from, to) => {
  const c = stage(o);
  const changed = c.command[2].replace(from, to);
  if (changed === c.command[2]) throw new Error(`the entrypoint has no ${from}`);
  c.command[2] = changed;
};

const stageCases = [
  ["a stage without --kv-transfer-port", /stage 0 .* needs one --kv-transfer-port/,
   (o) => { stage(o).args = stage(o).args.filter((a) => !a.startsWith("--kv-transfer-port")); }],
  ["an entrypoint that drops --layers", /stage 0 .* gets no --layers/,
   (o) => script(o, '--layers="$layers" ', "")],
  ["an entrypoint that names the worker itself", /must exec "\$0"/,
   (o) => script(o, 'exec "$0"', "exec /usr/local/bin/pagoda-worker")],
  ["an entrypoint that never starts the worker", /did not start the worker/,
   (o) => script(o, 'exec "$0"', 'exec "$1"')],
  ["a layer in no stage", /do not tile 0:\d+: layers 0:1 are in no stage/,
   (o) => { config(o).STAGE_LAYERS = config(o).STAGE_LAYERS.replace(/^0:/, "1:"); }],
  ["a layer in two stages", /are in two stages/,
   (o) => { config(o).STAGE_LAYERS =
                config(o).STAGE_LAYERS.replace(/^0:(\d+)/, (_, b) => `0:${Number(b) + 1}`); }],
  ["a model with more layers than the stages hold", /are in no stage/,
   (o) => { config(o).NUM_LAYERS = String(Number(config(o).NUM_LAYERS) + 1); }],
  ["more stages than ranges", /has no range for it/, (o) => size(o, +1)],
  ["fewer stages than ranges", /are in no stage/, (o) => size(o, -1)],
  ["no NUM_LAYERS", /need NUM_LAYERS/, (o) => { delete config(o).NUM_LAYERS; }],
  ["stages that cannot hold the model", /cannot hold the model/,
   (o) => { config(o).STAGE_MEMORY_MB = "100"; }],
  ["too little stage memory", /memory .* MiB \(stage/,
   (o) => { config(o).STAGE_MEMORY_MB = "4096"; }],
  ["a ConfigMap name kustomize did not rewrite", /missing ConfigMap pagoda-config$/,
   (o) => { stage(o).envFrom[0].configMapRef.name = "pagoda-config"; }],
  ["a stage that does not dial the router's Service", /worker dials/,
   (o) => { stage(o).args[0] = "--router=pagoda-router:50052"; }],
  ["a group that does not restart whole", /RecreateGroupOnPodRestart/,
   (o) => { group(o).spec.leaderWorkerTemplate.restartPolicy = "None"; }, "LeaderWorkerSet"],
  ["an unknown restart policy", /schema: .*restartPolicy/,
   (o) => { group(o).spec.leaderWorkerTemplate.restartPolicy = "Always"; }, "LeaderWorkerSet"],
  ["a misspelt LeaderWorkerSet field", /schema: .*additional properties \(startuppolicy\)/,
   (o) => { const spec = group(o).spec;
            spec.startuppolicy = spec.startupPolicy;
            delete spec.startupPolicy; }, "LeaderWorkerSet"],
  ["an unknown startup policy", /schema: .*startupPolicy/,
   (o) => { group(o).spec.startupPolicy = "LeaderFirst"; }, "LeaderWorkerSet"],
  ["a group of no pods", /schema: .*size/,
   (o) => { group(o).spec.leaderWorkerTemplate.size = 0; }, "LeaderWorkerSet"],
  ["a pod template that is not one", /schema: spec.leaderWorkerTemplate.workerTemplate/,
   (o) => { delete stage(o).name; }, "LeaderWorkerSet"],
  ["a StatefulSet without its headless Service", /headless Service/,
   (o) => { o.splice(o.indexOf(o.find((x) => x.kind === "Service" &&
                                             x.metadata.name === "pagoda-stages")), 1); },
   "StatefulSet"],
];

let missed = 0;
let caught = 0;
function selftest(file, cases) {
  const fresh = () => readObjects(file);
  const baseline = validate(fresh(), file);
  if (baseline.length > 0) {
    console.error(`the unbroken manifests must pass first:\n${baseline.join("\n")}`);
    process.exit(1);
  }
  for (const [name, expected, breakIt, kind] of cases) {
    const objects = fresh();
    if (kind && group(objects)?.kind !== kind) continue;
    breakIt(objects);
    const found = validate(objects, file);
    if (!found.some((p) => expected.test(p))) {
      console.error(`not caught in ${file}: ${name} (problems: ${found.join("; ") || "none"})`);
      ++missed;
    } else {
      ++caught;
    }
  }
}
selftest(path, cases);
for (const file of stagePaths) {
  if (!group(readObjects(file))) {
    console.error(`${file}: no stage group (a LeaderWorkerSet or StatefulSet pagoda-stages)`);
    process.exit(1);
  }
  selftest(file, stageCases);
}
if (missed > 0) process.exit(1);
console.log(`ok: ${caught} broken variants caught`);
