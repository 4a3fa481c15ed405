// Validates rendered Kubernetes manifests (`kubectl kustomize` output, one multi-document YAML
// file per argument): every object against the Kubernetes schema of its kind (the
// kubernetes-models package), then the rules Pagoda's deployment depends on. Prints every
// problem and exits 1 if there is any. selftest.mjs checks that broken manifests are caught.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { Namespace } from "kubernetes-models/v1/Namespace";
import { ConfigMap } from "kubernetes-models/v1/ConfigMap";
import { Service } from "kubernetes-models/v1/Service";
import { PersistentVolumeClaim } from "kubernetes-models/v1/PersistentVolumeClaim";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { StatefulSet } from "kubernetes-models/apps/v1/StatefulSet";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1/NetworkPolicy";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget";
import { Secret } from "kubernetes-models/v1/Secret";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject";

const MODELS = {
  "v1/Namespace": Namespace,
  "v1/ConfigMap": ConfigMap,
  "v1/Service": Service,
  "v1/PersistentVolumeClaim": PersistentVolumeClaim,
  "apps/v1/Deployment": Deployment,
  "apps/v1/StatefulSet": StatefulSet,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "v1/Secret": Secret,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor,
  "keda.sh/v1alpha1/ScaledObject": ScaledObject,
};
const TOKEN_ENV = "PAGODA_WORKER_TOKEN";
const TOKEN_SECRET = "pagoda-worker-token"; // key `token`; a generator may add a hash suffix
const OVERHEAD_MIB = 512; // activations, gRPC and the runtime, on top of weights and KV

let problems = [];
function problem(where, message) {
  problems.push(`${where}: ${message}`);
}

// "4Gi" -> MiB, "500m" -> 0.5 cores.
function mebibytes(q) {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti)?$/.exec(String(q));
  if (!m) return NaN;
  const scale = { Ki: 1 / 1024, Mi: 1, Gi: 1024, Ti: 1024 * 1024 }[m[2]] ?? 1 / (1024 * 1024);
  return Number(m[1]) * scale;
}
function cores(q) {
  const s = String(q);
  return s.endsWith("m") ? Number(s.slice(0, -1)) / 1000 : Number(s);
}

function matches(selector, labels) {
  return Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);
}

// The objects of a multi-document YAML file.
export function readObjects(path) {
  const objects = [];
  for (const doc of parseAllDocuments(readFileSync(path, "utf8"))) {
    if (doc.errors.length) throw new Error(`${path}: YAML: ${doc.errors[0].message}`);
    const obj = doc.toJS();
    if (obj && Object.keys(obj).length > 0) objects.push(obj);  // skip empty documents
  }
  return objects;
}

// Every problem found in one rendered deployment (`path` names it in the messages).
export function validate(objects, path) {
  problems = [];
  check(objects, path);
  return problems;
}

function check(objects, path) {
  if (objects.length === 0) problem(path, "no objects");

  // 1. The Kubernetes schemas (unknown fields, wrong types, missing required fields).
  for (const obj of objects) {
    const where = `${path}: ${obj.kind}/${obj.metadata?.name}`;
    const Model = MODELS[`${obj.apiVersion}/${obj.kind}`];
    if (!Model) {
      problem(where, `no schema for ${obj.apiVersion} ${obj.kind}`);
      continue;
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      problem(where, `schema: ${e.message}`);
    }
    // 2. Recommended labels on everything.
    for (const label of ["app.kubernetes.io/name", "app.kubernetes.io/part-of"]) {
      if (!obj.metadata?.labels?.[label]) problem(where, `missing label ${label}`);
    }
  }

  const find = (kind, pred = () => true) => objects.filter((o) => o.kind === kind && pred(o));
  const byComponent = (c) => (o) => o.metadata?.labels?.["app.kubernetes.io/component"] === c;
  const workloads = [...find("Deployment"), ...find("StatefulSet")];
  const [router] = workloads.filter(byComponent("router"));
  const [worker] = workloads.filter(byComponent("worker"));
  if (!router || !worker) {
    problem(path, "needs one router and one worker workload (app.kubernetes.io/component)");
    return;
  }
  const podLabels = (w) => w.spec.template.metadata.labels;
  const container = (w) => w.spec.template.spec.containers[0];

  // 3. Probes: grpc.health.v1 for startup, liveness and readiness; liveness and startup on the
  // "liveness" service, readiness on the overall ("") status.
  for (const w of [router, worker]) {
    const c = container(w);
    for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
      const p = c[probe];
      if (!p?.grpc) {
        problem(`${path}: ${w.metadata.name}`, `${probe} must be a grpc probe`);
        continue;
      }
      const want = probe === "readinessProbe" ? "" : "liveness";
      if ((p.grpc.service ?? "") !== want) {
        problem(`${path}: ${w.metadata.name}`, `${probe} must check service "${want}"`);
      }
    }
    for (const v of w.spec.template.spec.volumes ?? []) {
      const claim = v.persistentVolumeClaim?.claimName;
      if (claim && !find("PersistentVolumeClaim", (p) => p.metadata.name === claim).length) {
        problem(`${path}: ${w.metadata.name}`, `volume ${v.name} needs the missing claim ${claim}`);
      }
    }
    const sc = { ...w.spec.template.spec.securityContext, ...c.securityContext };
    if (!sc.runAsNonRoot) problem(`${path}: ${w.metadata.name}`, "must run as non-root");
  }
  // The router's sidecars (the h2-proxy component's HAProxy): restarted when dead or hung
  // (liveness), out of the Service while not up (readiness).
  for (const c of router.spec.template.spec.containers.slice(1)) {
    for (const probe of ["livenessProbe", "readinessProbe"]) {
      if (!c[probe]) problem(`${path}: ${router.metadata.name}`, `sidecar ${c.name} needs a ${probe}`);
    }
  }
  const startup = container(worker).startupProbe;
  if (startup?.periodSeconds * startup?.failureThreshold < 300) {
    problem(`${path}: ${worker.metadata.name}`, "startup probe allows under 5 min to load");
  }

  // 4. Worker resources follow from the config: cpu = threads; memory covers weights + KV.
  const [config] = find("ConfigMap", (o) => o.data?.WORKER_KV_CACHE_MB);
  if (!config) {
    problem(path, "no ConfigMap with WORKER_KV_CACHE_MB");
  } else {
    const threads = Number(config.data.WORKER_THREADS);
    const need = Number(config.data.MODEL_MEMORY_MB) + Number(config.data.WORKER_KV_CACHE_MB) +
      OVERHEAD_MIB;
    const res = container(worker).resources ?? {};
    for (const kind of ["requests", "limits"]) {
      const where = `${path}: ${worker.metadata.name} ${kind}`;
      if (cores(res[kind]?.cpu) !== threads) {
        problem(where, `cpu ${res[kind]?.cpu} != WORKER_THREADS ${threads}`);
      }
      if (!(mebibytes(res[kind]?.memory) >= need)) {
        problem(where, `memory ${res[kind]?.memory} < ${need} MiB (model + KV + overhead)`);
      }
    }
    const args = container(worker).args.join(" ");
    for (const flag of ["--threads=$(WORKER_THREADS)", "--kv-cache-mb=$(WORKER_KV_CACHE_MB)"]) {
      if (!args.includes(flag)) problem(`${path}: ${worker.metadata.name}`, `args lack ${flag}`);
    }
  }

  // 5. Services: the public port, and the worker port the workers dial (which must publish a
  // router that is not ready yet: it becomes ready only once workers are connected).
  const services = find("Service", (s) => matches(s.spec.selector, podLabels(router)));
  const publicPort = services.find((s) => s.spec.ports.some((p) => p.port === 50051));
  const workerPort = services.find((s) => s.spec.ports.some((p) => p.port === 50052));
  if (!publicPort) problem(path, "no Service exposes the router's public port 50051");
  if (!workerPort) {
    problem(path, "no Service exposes the router's worker port 50052");
  } else {
    if (!workerPort.spec.publishNotReadyAddresses) {
      problem(path, `${workerPort.metadata.name} must set publishNotReadyAddresses`);
    }
    const dial = container(worker).args.find((a) => a.startsWith("--router="));
    if (dial !== `--router=${workerPort.metadata.name}:50052`) {
      problem(path, `worker dials ${dial}, not the Service ${workerPort.metadata.name}:50052`);
    }
  }

  // 6. Only workers reach the router's worker port; a PodDisruptionBudget covers the workers.
  const policies = find("NetworkPolicy", (p) => matches(p.spec.podSelector.matchLabels,
                                                           podLabels(router)));
  const rule = policies.flatMap((p) => p.spec.ingress ?? [])
                   .find((r) => (r.ports ?? []).some((p) => p.port === 50052));
  const open = policies.flatMap((p) => p.spec.ingress ?? []).some(
      (r) => !r.from && (!r.ports || r.ports.some((p) => p.port === 50052)));
  if (policies.length === 0 || !rule || open ||
      !rule.from.every((f) => f.podSelector &&
                              matches(f.podSelector.matchLabels, podLabels(worker)) &&
                              !matches(f.podSelector.matchLabels, podLabels(router)))) {
    problem(path, "a NetworkPolicy must admit only worker pods to the router's port 50052");
  }
  // 6b. KV transfers (issue 28): a worker serving them advertises its pod IP, publishes the
  // port, and a NetworkPolicy admits only worker pods to it.
  const workerArgs = container(worker).args ?? [];
  const kvFlag = workerArgs.find((a) => a.startsWith("--kv-transfer-port="));
  const kvPort = Number(kvFlag?.split("=")[1] ?? 0);
  if (kvPort > 0) {
    const where = `${path}: ${worker.metadata.name}`;
    const podIp = (container(worker).env ?? []).find(
        (e) => e.valueFrom?.fieldRef?.fieldPath === "status.podIP");
    if (!podIp || !workerArgs.includes(`--advertise-address=$(${podIp.name}):${kvPort}`)) {
      problem(where, `--kv-transfer-port needs --advertise-address=$(POD_IP):${kvPort} from status.podIP`);
    }
    if (!(container(worker).ports ?? []).some((p) => p.containerPort === kvPort)) {
      problem(where, `no container port ${kvPort} (KV transfer)`);
    }
    const workerPolicies = find("NetworkPolicy", (p) => matches(p.spec.podSelector.matchLabels,
                                                                   podLabels(worker)));
    const kvRules = workerPolicies.flatMap((p) => p.spec.ingress ?? [])
                        .filter((r) => !r.ports || r.ports.some((p) => p.port === kvPort));
    if (kvRules.length === 0 ||
        !kvRules.every((r) => r.from && r.from.every(
            (f) => f.podSelector && matches(f.podSelector.matchLabels, podLabels(worker))))) {
      problem(path, `a NetworkPolicy must admit only worker pods to the KV transfer port ${kvPort}`);
    }
  }
  if (!find("PodDisruptionBudget", (p) => matches(p.spec.selector.matchLabels,
                                                  podLabels(worker))).length) {
    problem(path, "no PodDisruptionBudget selects the workers");
  }

  // 7. The worker token: router and workers read the same Secret key into PAGODA_WORKER_TOKEN.
  const tokenRef = (w) => (container(w).env ?? []).find((e) => e.name === TOKEN_ENV)
                              ?.valueFrom?.secretKeyRef;
  const refs = [router, worker].map(tokenRef);
  if (!refs.every((r) => r?.name?.startsWith(TOKEN_SECRET) && r.key === "token")) {
    problem(path, `router and worker need env ${TOKEN_ENV} from Secret ${TOKEN_SECRET}, key token`);
  } else if (refs[0].name !== refs[1].name) {
    problem(path, `router and worker read ${TOKEN_ENV} from different Secrets`);
  } else {
    const [secret] = find("Secret", (s) => s.metadata.name === refs[0].name);
    if (secret && !(secret.data?.token || secret.stringData?.token)) {
      problem(path, `Secret ${secret.metadata.name} has no key token`);
    }
  }

  // 8. Metrics: the router serves them on a named port that a NetworkPolicy opens to some
  // peers (Prometheus), not to all; a ServiceMonitor, if any, reaches it through a Service.
  const metricsFlag = container(router).args.find((a) => a.startsWith("--metrics-port="));
  const metricsPort = Number(metricsFlag?.split("=")[1]);
  const metricsName = (container(router).ports ?? []).find((p) => p.containerPort === metricsPort)
                          ?.name;
  if (!metricsFlag) {
    problem(`${path}: ${router.metadata.name}`, "router args lack --metrics-port");
  } else if (!metricsName) {
    problem(`${path}: ${router.metadata.name}`, `no named container port ${metricsPort} (metrics)`);
  } else {
    const ingress = policies.flatMap((p) => p.spec.ingress ?? []);
    const admits = ingress.some((r) => r.from?.length &&
                                       (r.ports ?? []).some((p) => p.port === metricsPort));
    const openToAll = ingress.some(
        (r) => !r.from && (!r.ports || r.ports.some((p) => p.port === metricsPort)));
    if (!admits || openToAll) {
      problem(path, `a NetworkPolicy must admit Prometheus, not everyone, to metrics port ${metricsPort}`);
    }
  }
  for (const sm of find("ServiceMonitor")) {
    const endpoints = Array.isArray(sm.spec.endpoints) ? sm.spec.endpoints : [];
    const reached = endpoints.every((e) => services.some(
        (s) => matches(sm.spec.selector?.matchLabels, s.metadata.labels) &&
               s.spec.ports.some((p) => p.name === e.port && metricsName &&
                                        [metricsName, metricsPort].includes(p.targetPort))));
    if (!endpoints.length || !reached) {
      problem(`${path}: ServiceMonitor/${sm.metadata.name}`,
              "its endpoints must name a Service port that leads to the router's metrics port");
    }
  }

  // 9. Workers spread over nodes; an autoscaler owns their replica count.
  const spread = worker.spec.template.spec.topologySpreadConstraints ?? [];
  if (!spread.some((t) => t.topologyKey === "kubernetes.io/hostname" &&
                          matches(t.labelSelector?.matchLabels, podLabels(worker)) &&
                          t.labelSelector?.matchLabels?.["app.kubernetes.io/name"])) {
    problem(`${path}: ${worker.metadata.name}`,
            "needs topologySpreadConstraints over kubernetes.io/hostname selecting its own pods");
  }
  for (const so of find("ScaledObject")) {
    const where = `${path}: ScaledObject/${so.metadata.name}`;
    const target = so.spec.scaleTargetRef;
    if (target.name !== worker.metadata.name || (target.kind ?? "Deployment") !== worker.kind) {
      problem(where, `scales ${target.kind ?? "Deployment"}/${target.name}, not the workers`);
    }
    if (!(so.spec.triggers ?? []).some((t) => t.type === "prometheus" &&
                                      /\bpagoda_num_requests_waiting\b/.test(t.metadata?.query))) {
      problem(where, "needs a prometheus trigger on pagoda_num_requests_waiting");
    }
    if (worker.spec.replicas !== undefined) {
      problem(where, `the worker ${worker.kind} sets replicas, which fights the autoscaler`);
    }
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error("usage: node validate.mjs RENDERED.yaml...");
    process.exit(2);
  }
  const found = files.flatMap((f) => validate(readObjects(f), f));
  for (const p of found) console.error(p);
  if (found.length > 0) {
    console.error(`${found.length} problem(s)`);
    process.exit(1);
  }
  console.log(`ok: ${files.join(", ")}`);
}
