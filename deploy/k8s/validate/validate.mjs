// Validates rendered Kubernetes manifests (`kubectl kustomize` output, one multi-document YAML
// file per argument): every object against the Kubernetes schema of its kind (the
// kubernetes-models package; a LeaderWorkerSet against leaderworkerset.schema.json), then the
// rules Pagoda's deployment depends on. Prints every problem and exits 1 if there is any.
// selftest.mjs checks that broken manifests are caught.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import Ajv from "ajv";
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
import { PodTemplateSpec } from "kubernetes-models/v1/PodTemplateSpec";

// LeaderWorkerSet (pipeline stage groups): no npm package has its schema, so
// leaderworkerset.schema.json (written from the LWS API reference) checks its own fields and
// kubernetes-models' PodTemplateSpec its pod templates.
const checkLws = new Ajv({ allErrors: true }).compile(
    JSON.parse(readFileSync(new URL("./leaderworkerset.schema.json", import.meta.url), "utf8")));
class LeaderWorkerSet {
  constructor(obj) {
    this.obj = obj;
  }
  validate() {
    if (!checkLws(this.obj)) {
      const said = (e) => `${e.instancePath || "/"} ${e.message}` +
          (e.params?.allowedValues ? ` ${e.params.allowedValues.join(", ")}` : "") +
          (e.params?.additionalProperty ? ` (${e.params.additionalProperty})` : "");
      throw new Error(checkLws.errors.map(said).join("; "));
    }
    const lwt = this.obj.spec.leaderWorkerTemplate;
    for (const name of ["leaderTemplate", "workerTemplate"]) {
      if (!lwt[name]) continue;
      try {
        new PodTemplateSpec(lwt[name]).validate();
      } catch (e) {
        throw new Error(`spec.leaderWorkerTemplate.${name}: ${e.message}`);
      }
    }
  }
}

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
  "leaderworkerset.x-k8s.io/v1/LeaderWorkerSet": LeaderWorkerSet,
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
  const workloads = [...find("Deployment"), ...find("StatefulSet"), ...find("LeaderWorkerSet")];
  const [routerSet] = workloads.filter(byComponent("router"));
  const workerSets = workloads.filter(byComponent("worker"));
  // Every pod template of the workers (a LeaderWorkerSet's leader and worker templates), with
  // the workload it belongs to: the rules below hold for each.
  const workers = workerSets.flatMap((w) => templates(w).map((template) => ({ ...w, template })));
  if (!routerSet || !templates(routerSet).length || workers.length === 0) {
    problem(path,
            "needs one router and at least one worker workload (app.kubernetes.io/component)");
    return;
  }
  const router = { ...routerSet, template: templates(routerSet)[0] };
  const podLabels = (w) => w.template.metadata?.labels ?? {};
  const container = (w) => w.template.spec.containers[0];
  const at = (w) => `${path}: ${w.metadata.name}`;

  // 3. Probes: grpc.health.v1 for startup, liveness and readiness; liveness and startup on the
  // "liveness" service, readiness on the overall ("") status.
  for (const w of [router, ...workers]) {
    const c = container(w);
    for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
      const p = c[probe];
      if (!p?.grpc) {
        problem(at(w), `${probe} must be a grpc probe`);
        continue;
      }
      const want = probe === "readinessProbe" ? "" : "liveness";
      if ((p.grpc.service ?? "") !== want) {
        problem(at(w), `${probe} must check service "${want}"`);
      }
    }
    for (const v of w.template.spec.volumes ?? []) {
      const claim = v.persistentVolumeClaim?.claimName;
      if (claim && !find("PersistentVolumeClaim", (p) => p.metadata.name === claim).length) {
        problem(at(w), `volume ${v.name} needs the missing claim ${claim}`);
      }
    }
    const sc = { ...w.template.spec.securityContext, ...c.securityContext };
    if (!sc.runAsNonRoot) problem(at(w), "must run as non-root");
  }
  // The router's sidecars (the h2-proxy component's HAProxy): restarted when dead or hung
  // (liveness), out of the Service while not up (readiness).
  for (const c of router.template.spec.containers.slice(1)) {
    for (const probe of ["livenessProbe", "readinessProbe"]) {
      if (!c[probe]) problem(at(router), `sidecar ${c.name} needs a ${probe}`);
    }
  }
  for (const worker of workers) {
    const startup = container(worker).startupProbe;
    if (startup?.periodSeconds * startup?.failureThreshold < 300) {
      problem(at(worker), "startup probe allows under 5 min to load");
    }
  }
  // Every ConfigMap a pod reads exists (a generated one has a hash suffix, which kustomize
  // writes only into the fields it knows: a custom resource's need its configurations).
  for (const w of [router, ...workers]) {
    for (const name of configMapsRead(w.template)) {
      if (!find("ConfigMap", (m) => m.metadata.name === name).length) {
        problem(at(w), `reads the missing ConfigMap ${name}`);
      }
    }
  }

  // 4. Worker resources follow from the config: cpu = threads; memory covers weights + KV. A
  // pipeline stage holds only its layers: STAGE_MEMORY_MB (the largest stage's weights) stands
  // for the model's.
  const [config] = find("ConfigMap", (o) => o.data?.WORKER_KV_CACHE_MB);
  if (!config) {
    problem(path, "no ConfigMap with WORKER_KV_CACHE_MB");
  } else {
    for (const worker of workers) {
      const threads = Number(config.data.WORKER_THREADS);
      const stage = isStageGroup(worker);
      const weights = Number(config.data[stage ? "STAGE_MEMORY_MB" : "MODEL_MEMORY_MB"]);
      if (stage && !(weights > 0)) {
        problem(at(worker), "pipeline stages need STAGE_MEMORY_MB (the largest stage's " +
                            "weights) in the ConfigMap");
      } else if (stage && weights * stageCount(worker) < Number(config.data.MODEL_MEMORY_MB)) {
        problem(at(worker), `STAGE_MEMORY_MB ${weights} x ${stageCount(worker)} stages < ` +
                            `MODEL_MEMORY_MB ${config.data.MODEL_MEMORY_MB}: the stages cannot ` +
                            "hold the model");
      }
      const need = weights + Number(config.data.WORKER_KV_CACHE_MB) + OVERHEAD_MIB;
      const res = container(worker).resources ?? {};
      for (const kind of ["requests", "limits"]) {
        const where = `${at(worker)} ${kind}`;
        if (cores(res[kind]?.cpu) !== threads) {
          problem(where, `cpu ${res[kind]?.cpu} != WORKER_THREADS ${threads}`);
        }
        if (!(mebibytes(res[kind]?.memory) >= need)) {
          problem(where, `memory ${res[kind]?.memory} < ${need} MiB ` +
                         `(${stage ? "stage" : "model"} + KV + overhead)`);
        }
      }
      const args = (container(worker).args ?? []).join(" ");
      for (const flag of ["--threads=$(WORKER_THREADS)", "--kv-cache-mb=$(WORKER_KV_CACHE_MB)"]) {
        if (!args.includes(flag)) problem(at(worker), `args lack ${flag}`);
      }
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
    for (const worker of workers) {
      const dial = (container(worker).args ?? []).find((a) => a.startsWith("--router="));
      if (dial !== `--router=${workerPort.metadata.name}:50052`) {
        problem(path, `worker dials ${dial}, not the Service ${workerPort.metadata.name}:50052`);
      }
    }
  }

  // 6. Only workers reach the router's worker port; a PodDisruptionBudget covers the workers.
  const policies = find("NetworkPolicy", (p) => matches(p.spec.podSelector.matchLabels,
                                                           podLabels(router)));
  const rule = policies.flatMap((p) => p.spec.ingress ?? [])
                   .find((r) => (r.ports ?? []).some((p) => p.port === 50052));
  const open = policies.flatMap((p) => p.spec.ingress ?? []).some(
      (r) => !r.from && (!r.ports || r.ports.some((p) => p.port === 50052)));
  const selectsWorkers = (f) => f.podSelector &&
      workers.some((w) => matches(f.podSelector.matchLabels, podLabels(w))) &&
      !matches(f.podSelector.matchLabels, podLabels(router));
  if (policies.length === 0 || !rule || open || !rule.from.every(selectsWorkers) ||
      !workers.every((w) => rule.from.some(
          (f) => matches(f.podSelector?.matchLabels, podLabels(w))))) {
    problem(path, "a NetworkPolicy must admit only worker pods to the router's port 50052");
  }
  // 6b. KV transfers (issue 28) and a pipeline stage's activations (issue 40): a worker serving
  // them advertises its pod IP, publishes the port, and a NetworkPolicy admits worker pods, and
  // only them, to it.
  for (const worker of workers) {
    const workerArgs = container(worker).args ?? [];
    const kvFlag = workerArgs.find((a) => a.startsWith("--kv-transfer-port="));
    const kvPort = Number(kvFlag?.split("=")[1] ?? 0);
    if (kvPort > 0) {
      const podIp = (container(worker).env ?? []).find(
          (e) => e.valueFrom?.fieldRef?.fieldPath === "status.podIP");
      if (!podIp || !workerArgs.includes(`--advertise-address=$(${podIp.name}):${kvPort}`)) {
        problem(at(worker), `--kv-transfer-port needs --advertise-address=$(POD_IP):${kvPort} from status.podIP`);
      }
      if (!(container(worker).ports ?? []).some((p) => p.containerPort === kvPort)) {
        problem(at(worker), `no container port ${kvPort} (KV transfer)`);
      }
      const workerPolicies = find("NetworkPolicy", (p) => matches(p.spec.podSelector.matchLabels,
                                                                     podLabels(worker)));
      const kvRules = workerPolicies.flatMap((p) => p.spec.ingress ?? [])
                          .filter((r) => !r.ports || r.ports.some((p) => p.port === kvPort));
      if (kvRules.length === 0 ||
          !kvRules.every((r) => r.from && r.from.every(
              (f) => f.podSelector && matches(f.podSelector.matchLabels, podLabels(worker)))) ||
          !kvRules.some((r) => r.from.some(
              (f) => matches(f.podSelector?.matchLabels, podLabels(worker))))) {
        problem(path, `a NetworkPolicy must admit only worker pods to the KV transfer port ${kvPort}`);
      }
    }
    if (!find("PodDisruptionBudget", (p) => matches(p.spec.selector.matchLabels,
                                                    podLabels(worker))).length) {
      problem(path, "no PodDisruptionBudget selects the workers");
    }
  }

  // 7. The worker token: router and workers read the same Secret key into PAGODA_WORKER_TOKEN.
  const tokenRef = (w) => (container(w).env ?? []).find((e) => e.name === TOKEN_ENV)
                              ?.valueFrom?.secretKeyRef;
  const refs = [router, ...workers].map(tokenRef);
  if (!refs.every((r) => r?.name?.startsWith(TOKEN_SECRET) && r.key === "token")) {
    problem(path, `router and worker need env ${TOKEN_ENV} from Secret ${TOKEN_SECRET}, key token`);
  } else if (refs.some((r) => r.name !== refs[0].name)) {
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
    problem(at(router), "router args lack --metrics-port");
  } else if (!metricsName) {
    problem(at(router), `no named container port ${metricsPort} (metrics)`);
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
  for (const worker of workers) {
    const spread = worker.template.spec.topologySpreadConstraints ?? [];
    if (!spread.some((t) => t.topologyKey === "kubernetes.io/hostname" &&
                            matches(t.labelSelector?.matchLabels, podLabels(worker)) &&
                            t.labelSelector?.matchLabels?.["app.kubernetes.io/name"])) {
      problem(at(worker),
              "needs topologySpreadConstraints over kubernetes.io/hostname selecting its own pods");
    }
  }
  for (const so of find("ScaledObject")) {
    const where = `${path}: ScaledObject/${so.metadata.name}`;
    const target = so.spec.scaleTargetRef;
    const scaled = workerSets.find((w) => w.metadata.name === target.name &&
                                          w.kind === (target.kind ?? "Deployment"));
    if (!scaled) {
      problem(where, `scales ${target.kind ?? "Deployment"}/${target.name}, not the workers`);
    }
    if (!(so.spec.triggers ?? []).some((t) => t.type === "prometheus" &&
                                      /\bpagoda_num_requests_waiting\b/.test(t.metadata?.query))) {
      problem(where, "needs a prometheus trigger on pagoda_num_requests_waiting");
    }
    if (scaled && scaled.spec.replicas !== undefined) {
      problem(where, `the worker ${scaled.kind} sets replicas, which fights the autoscaler`);
    }
  }

  // 10. Pipeline stages (issue 40): a LeaderWorkerSet, or workers whose pods are told --layers
  // or STAGE_LAYERS, is a stage group. Every pod of one group is started here as the kubelet
  // would start it (its env from the ConfigMaps and the downward API, $(VAR) expanded, its
  // shell entrypoint run with a stand-in for the worker): each must get --layers=A:B and
  // --kv-transfer-port=PORT, and their ranges must tile 0:NUM_LAYERS, no gap, no overlap.
  for (const w of workerSets.filter(isStageGroup)) {
    const where = `${path}: ${w.kind}/${w.metadata.name}`;
    if (!templates(w).length) continue;  // (the schema said what is missing)
    if (w.kind === "Deployment") {
      problem(where, "a Deployment's pods cannot hold different layers: stages need a " +
                     "LeaderWorkerSet or a StatefulSet");
      continue;
    }
    if (w.kind === "LeaderWorkerSet" &&
        w.spec.leaderWorkerTemplate?.restartPolicy !== "RecreateGroupOnPodRestart") {
      problem(where, "leaderWorkerTemplate.restartPolicy must be RecreateGroupOnPodRestart: a " +
                     "group's stages restart together");
    }
    const headless = (s) => s.metadata.name === w.spec.serviceName && s.spec.clusterIP === "None" &&
                            matches(s.spec.selector, w.spec.template?.metadata?.labels);
    if (w.kind === "StatefulSet" && w.spec.serviceName && !find("Service", headless).length) {
      problem(where, `serviceName ${w.spec.serviceName} needs a headless Service selecting its ` +
                     "pods");
    }
    const count = stageCount(w);
    if (!(Number.isInteger(count) && count >= 1 && count <= MAX_STAGES)) {
      problem(where, `${count} stages: want 1 to ${MAX_STAGES}`);
      continue;
    }
    const ranges = [];
    let numLayers;
    for (let i = 0; i < count; ++i) {
      const pod = stagePod(w, i);
      const run = start(pod, objects);
      const stage = `stage ${i} (pod ${pod.name})`;
      numLayers ??= run.env.NUM_LAYERS;
      if (run.error) {
        problem(where, `${stage}: ${run.error}`);
        continue;
      }
      const layers = run.argv.filter((a) => a.startsWith("--layers="));
      const kv = run.argv.filter((a) => a.startsWith("--kv-transfer-port="));
      if (layers.length !== 1) {
        problem(where, `${stage} gets ${layers.length ? "several" : "no"} --layers`);
      } else {
        const m = /^(\d+):(\d+)$/.exec(layers[0].slice("--layers=".length));
        if (!m || Number(m[1]) >= Number(m[2])) {
          problem(where, `${stage} gets ${layers[0]}: want A:B, 0 <= A < B`);
        } else {
          ranges.push({ begin: Number(m[1]), end: Number(m[2]) });
        }
      }
      if (kv.length !== 1 || !(Number(kv[0].split("=")[1]) > 0)) {
        problem(where, `${stage} needs one --kv-transfer-port=PORT (the stage before sends it ` +
                       "activations there)");
      }
    }
    const total = Number(numLayers);
    if (!(Number.isInteger(total) && total > 0)) {
      problem(where, "stages need NUM_LAYERS (the model's layers) in their env (the ConfigMap)");
    } else if (ranges.length === count) {
      const gaps = tilingProblems(ranges, total);
      if (gaps.length) {
        const list = ranges.map((r) => `${r.begin}:${r.end}`).join(", ");
        problem(where, `the stages' ranges (${list}) do not tile 0:${total}: ${gaps.join("; ")}`);
      }
    }
  }
}

// The pod templates of a workload: a Deployment's or StatefulSet's; a LeaderWorkerSet's
// leader template (if it has its own) and worker template.
function templates(w) {
  const lwt = w.spec?.leaderWorkerTemplate;
  const all = w.kind === "LeaderWorkerSet" ? [lwt?.leaderTemplate, lwt?.workerTemplate]
                                           : [w.spec?.template];
  return all.filter((t) => t?.spec?.containers?.length);
}

// The ConfigMaps a pod template reads (env, envFrom, volumes), except optional ones.
function configMapsRead(template) {
  const names = [];
  for (const c of [...(template.spec.initContainers ?? []), ...template.spec.containers]) {
    for (const e of c.env ?? []) {
      const ref = e.valueFrom?.configMapKeyRef;
      if (ref && !ref.optional) names.push(ref.name);
    }
    for (const f of c.envFrom ?? []) {
      if (f.configMapRef && !f.configMapRef.optional) names.push(f.configMapRef.name);
    }
  }
  for (const v of template.spec.volumes ?? []) {
    if (v.configMap && !v.configMap.optional) names.push(v.configMap.name);
  }
  return names;
}

const WORKER_BIN = "/usr/local/bin/pagoda-worker";
const MAX_STAGES = 64;

// Whether a worker workload is a pipeline stage group (its pods hold ranges of layers).
function isStageGroup(w) {
  if (w.kind === "LeaderWorkerSet") return true;
  return templates(w).some((t) => t.spec.containers.some(
      (c) => /--layers|STAGE_LAYERS/.test(JSON.stringify([c.command, c.args, c.env]))));
}

// The pods of one group: a LeaderWorkerSet's size, a StatefulSet's replicas.
function stageCount(w) {
  return w.kind === "LeaderWorkerSet" ? (w.spec.leaderWorkerTemplate?.size ?? 1)
                                      : (w.spec.replicas ?? 1);
}

// Stage i's pod (of the first group, for a LeaderWorkerSet): its name, labels and template as
// its controller makes them, and the env a LeaderWorkerSet adds to its containers.
function stagePod(w, i) {
  const name = w.metadata.name;
  if (w.kind === "LeaderWorkerSet") {
    const lwt = w.spec.leaderWorkerTemplate;
    const template = i === 0 && lwt.leaderTemplate ? lwt.leaderTemplate : lwt.workerTemplate;
    return {
      name: i === 0 ? `${name}-0` : `${name}-0-${i}`,
      template,
      labels: { ...template.metadata?.labels, "leaderworkerset.sigs.k8s.io/name": name,
                "leaderworkerset.sigs.k8s.io/group-index": "0",
                "leaderworkerset.sigs.k8s.io/worker-index": String(i) },
      env: { LWS_LEADER_ADDRESS: `${name}-0.${name}.default`,
             LWS_GROUP_SIZE: String(stageCount(w)), LWS_WORKER_INDEX: String(i) },
    };
  }
  return {
    name: `${name}-${i}`,
    template: w.spec.template,
    labels: { ...w.spec.template.metadata?.labels, "apps.kubernetes.io/pod-index": String(i),
              "statefulset.kubernetes.io/pod-name": `${name}-${i}` },
    env: {},
  };
}

// A container's environment as the kubelet builds it: envFrom, then env (which wins), each
// value's $(VAR) expanded from the variables before it. Secrets are stand-ins.
function containerEnv(c, pod, objects) {
  const env = { ...pod.env };
  const configMap = (name) => objects.find((o) => o.kind === "ConfigMap" &&
                                                  o.metadata.name === name);
  for (const f of c.envFrom ?? []) {
    const data = f.configMapRef ? configMap(f.configMapRef.name)?.data : undefined;
    for (const [k, v] of Object.entries(data ?? {})) env[`${f.prefix ?? ""}${k}`] = String(v);
  }
  const field = (path) => {
    const label = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
    if (label) return (label[1] === "labels" ? pod.labels : {})[label[2]] ?? "";
    return { "metadata.name": pod.name, "metadata.namespace": "default", "status.podIP": "10.0.0.2",
             "status.hostIP": "10.0.0.1", "spec.nodeName": "node-0" }[path];
  };
  for (const e of c.env ?? []) {
    let v;
    if (e.value !== undefined) v = expandVars(String(e.value), env);
    else if (e.valueFrom?.configMapKeyRef) {
      v = configMap(e.valueFrom.configMapKeyRef.name)?.data?.[e.valueFrom.configMapKeyRef.key];
    } else if (e.valueFrom?.secretKeyRef) v = "secret";
    else if (e.valueFrom?.fieldRef) v = field(e.valueFrom.fieldRef.fieldPath);
    if (v !== undefined) env[e.name] = String(v);
  }
  return env;
}

// The kubelet's $(VAR) expansion of command, args and env values: $(NAME) becomes the
// variable's value if it is defined (else stays), $$ becomes $, any other $ stays.
function expandVars(s, env) {
  let out = "";
  for (let i = 0; i < s.length; ++i) {
    if (s[i] !== "$" || i + 1 === s.length) {
      out += s[i];
    } else if (s[i + 1] === "$") {
      out += "$";
      ++i;
    } else if (s[i + 1] === "(") {
      const close = s.indexOf(")", i + 2);
      if (close < 0) {
        out += "$";
      } else {
        const name = s.slice(i + 2, close);
        out += Object.hasOwn(env, name) ? env[name] : `$(${name})`;
        i = close;
      }
    } else {
      out += s.slice(i, i + 2);
      ++i;
    }
  }
  return out;
}

// Starts a pod's first container as far as the worker's argv: the worker binary directly, or
// `sh -c SCRIPT /usr/local/bin/pagoda-worker ARGS...` whose script must exec "$0", run here
// with a stand-in for the worker that records its arguments. {argv, env} or {error}.
let standIn;
function start(pod, objects) {
  const c = pod.template.spec.containers[0];
  const env = containerEnv(c, pod, objects);
  const argv = [...(c.command ?? []), ...(c.args ?? [])].map((a) => expandVars(String(a), env));
  if (!c.command?.length) return { error: "no command: the image's entrypoint is the router", env };
  if (argv[0] === WORKER_BIN) return { argv: argv.slice(1), env };
  const flag = argv.findIndex((a, i) => i > 0 && /^-[a-z]*c[a-z]*$/.test(a));
  if (!/(^|\/)(sh|dash|bash)$/.test(argv[0]) || flag < 0 || argv[flag + 2] !== WORKER_BIN) {
    return { error: `runs ${argv.slice(0, 2).join(" ")}: want ${WORKER_BIN}, or ` +
                    `sh -c SCRIPT ${WORKER_BIN} ARGS...`, env };
  }
  // (Which also keeps this run from starting a worker installed here.)
  if (/pagoda-(worker|router)/.test(argv[flag + 1])) {
    return { error: 'its script names a Pagoda binary: it must exec "$0" (the worker named ' +
                    "after the script)", env };
  }
  if (!standIn) {
    // Beside this file (validate.sh's work directory), not in /tmp, which may be noexec.
    const dir = mkdtempSync(join(dirname(fileURLToPath(import.meta.url)), ".stand-in-"));
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
    standIn = join(dir, "pagoda-worker");  // also what PATH finds first
    writeFileSync(standIn, "#!/bin/sh\n" +
                           'for a in "$@"; do printf \'%s\\0\' "$a"; done > "$PAGODA_VALIDATE_ARGV"\n',
                  { mode: 0o755 });
  }
  const out = `${standIn}.${process.pid}.argv`;
  rmSync(out, { force: true });
  const shell = argv[0] === "/bin/bash" ? "/bin/bash" : "/bin/sh";
  const run = spawnSync(shell, [...argv.slice(1, flag + 2), standIn, ...argv.slice(flag + 3)], {
    env: { ...env, PATH: `${dirname(standIn)}:/usr/bin:/bin`, PAGODA_VALIDATE_ARGV: out },
    encoding: "utf8",
    timeout: 10000,
  });
  if (!existsSync(out)) {
    const said = `${run.stderr ?? ""}`.trim().split("\n").pop()?.replaceAll(standIn, WORKER_BIN);
    return { error: `its entrypoint did not start the worker (exit ${run.status ?? run.signal})` +
                    (said ? `: ${said}` : ': it must exec "$0"'), env };
  }
  const args = readFileSync(out, "utf8").split("\0").slice(0, -1);
  rmSync(out, { force: true });
  return { argv: args, env };
}

// What keeps ranges from tiling 0:total: the layers in no range, in two, or past the model.
function tilingProblems(ranges, total) {
  const found = [];
  let covered = 0;
  for (const r of [...ranges].sort((a, b) => a.begin - b.begin || a.end - b.end)) {
    if (r.begin > covered) found.push(`layers ${covered}:${r.begin} are in no stage`);
    if (r.begin < covered) {
      found.push(`layers ${r.begin}:${Math.min(covered, r.end)} are in two stages`);
    }
    covered = Math.max(covered, r.end);
  }
  if (covered < total) found.push(`layers ${covered}:${total} are in no stage`);
  if (covered > total) found.push(`layers ${total}:${covered} are past the model's ${total}`);
  return found;
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
