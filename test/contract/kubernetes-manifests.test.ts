/**
 * deploy/kubernetes/ against the real Kubernetes API types, offline: test/tools/k8s-validate (Go,
 * its own go.mod) decodes every manifest and every kustomization's build output strictly into its
 * k8s.io/api type (an unknown or misspelt field is an error) and builds the kustomizations with
 * sigs.k8s.io/kustomize as `kubectl apply -k` does. This suite then checks what the guide
 * (docs/kubernetes.md) promises of the built objects: probes on /healthcheck, resources, non-root,
 * a read-only root filesystem, selectors that select, settings sluice accepts, rules that load.
 * Needs Go (skipped with the reason locally, failing under CI).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkConfig } from '../../src/config/load.js';
import { loadSettings } from '../../src/settings.js';
import { inCi, REPO_ROOT } from '../helpers/processes.js';

const TOOL_DIR = path.join(REPO_ROOT, 'test', 'tools', 'k8s-validate');
const TOOL_BIN = path.join(REPO_ROOT, '.cache', 'k8s-validate', 'k8s-validate');
const MANIFESTS = path.join(REPO_ROOT, 'deploy', 'kubernetes');

/** Go is required; without it the suite is skipped locally and fails under CI. */
const goMissing = spawnSync('go', ['version'], { encoding: 'utf8', timeout: 10_000 }).status !== 0;
const reason = 'Go not found (needed to build test/tools/k8s-validate); install Go 1.24 or later';
if (goMissing && !inCi()) console.warn(`[kubernetes manifests] SKIPPED: ${reason}`);

/** A Kubernetes object as JSON (only the fields these checks read are typed). */
interface K8sObject {
  kind: string;
  metadata: { name: string };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
}

interface Probe {
  httpGet?: { path: string; port: string | number };
  tcpSocket?: { port: string | number };
}

interface Container {
  name: string;
  env?: { name: string; value?: string }[];
  ports?: { name: string; containerPort: number }[];
  readinessProbe?: Probe;
  startupProbe?: Probe;
  livenessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    readOnlyRootFilesystem?: boolean;
    allowPrivilegeEscalation?: boolean;
    capabilities?: { drop?: string[] };
  };
  volumeMounts?: { name: string; mountPath: string; subPath?: string; readOnly?: boolean }[];
}

interface PodSpec {
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
  containers: Container[];
  volumes?: { name: string; configMap?: { name: string } }[];
}

interface Deployment extends K8sObject {
  spec: {
    replicas: number;
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
}

/** The tool's output: kinds per file, and each kustomization's built objects. */
interface Validated {
  files: Record<string, string[]>;
  builds: Record<string, K8sObject[]>;
}

function find<T extends K8sObject>(objects: K8sObject[], kind: string, name: string): T {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (found === undefined) throw new Error(`no ${kind} ${name} in the build`);
  return found as T;
}

const selects = (selector: Record<string, string>, labels: Record<string, string>): boolean =>
  Object.entries(selector).every(([key, value]) => labels[key] === value);

describe.skipIf(goMissing && !inCi())('deploy/kubernetes/ (Kubernetes manifests)', () => {
  let validated: Validated;
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  beforeAll(() => {
    if (goMissing) throw new Error(`${reason} (required under CI)`);
    const build = spawnSync('go', ['build', '-o', TOOL_BIN, '.'], {
      cwd: TOOL_DIR,
      encoding: 'utf8',
      timeout: 600_000,
    });
    if (build.status !== 0) {
      throw new Error(`go build of ${TOOL_DIR} failed:\n${build.stdout}\n${build.stderr}`);
    }
    const run = spawnSync(TOOL_BIN, ['.'], { cwd: MANIFESTS, encoding: 'utf8', timeout: 60_000 });
    if (run.status !== 0) {
      throw new Error(`k8s-validate found problems:\n${run.stderr}`);
    }
    validated = JSON.parse(run.stdout) as Validated;
  }, 660_000);

  it('every file decodes strictly into the Kubernetes API types', () => {
    expect(validated.files).toEqual({
      'base/configmap-rules.yaml': ['ConfigMap'],
      'base/deployment.yaml': ['Deployment'],
      'base/pdb.yaml': ['PodDisruptionBudget'],
      'base/service.yaml': ['Service'],
      'redis/deployment-redis.yaml': ['Deployment'],
      'redis/hpa.yaml': ['HorizontalPodAutoscaler'],
      'redis/redis.yaml': ['Deployment', 'Service'],
    });
    expect(Object.keys(validated.builds).sort()).toEqual(['base', 'redis']);
  });

  it('the validator rejects a misspelt field (it is strict)', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sluice-k8s-'));
    dirs.push(dir);
    writeFileSync(
      path.join(dir, 'svc.yaml'),
      'apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  selectr: {a: b}\n',
    );
    const run = spawnSync(TOOL_BIN, [dir], { encoding: 'utf8', timeout: 60_000 });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/svc\.yaml: document 1: Service: .*unknown field "selectr"/);
  });

  describe.each(['base', 'redis'])('the %s build', (build) => {
    const objects = (): K8sObject[] => validated.builds[build]!;
    const deployment = (): Deployment => find<Deployment>(objects(), 'Deployment', 'sluice');
    const container = (): Container => deployment().spec.template.spec.containers[0]!;
    const env = (): Record<string, string> =>
      Object.fromEntries((container().env ?? []).map((e) => [e.name, e.value ?? '']));

    it('probes /healthcheck on the HTTP port for readiness and start-up; liveness does not', () => {
      const c = container();
      expect(c.ports).toEqual(
        expect.arrayContaining([
          { name: 'grpc', containerPort: 8081, protocol: 'TCP' },
          { name: 'http', containerPort: 8080, protocol: 'TCP' },
        ]),
      );
      expect(c.readinessProbe?.httpGet).toEqual({ path: '/healthcheck', port: 'http' });
      expect(c.startupProbe?.httpGet).toEqual({ path: '/healthcheck', port: 'http' });
      // /healthcheck fails while Redis is down: restarting replicas would not fix that.
      expect(c.livenessProbe?.httpGet).toBeUndefined();
      expect(c.livenessProbe?.tcpSocket).toEqual({ port: 'http' });
    });

    it('sets requests and limits, runs as non-root on a read-only root filesystem', () => {
      const c = container();
      expect(Object.keys(c.resources?.requests ?? {}).sort()).toEqual(['cpu', 'memory']);
      expect(Object.keys(c.resources?.limits ?? {}).sort()).toEqual(['cpu', 'memory']);
      const pod = deployment().spec.template.spec;
      expect(pod.securityContext?.runAsNonRoot).toBe(true);
      expect(pod.securityContext?.runAsUser).toBeGreaterThan(0);
      expect(c.securityContext).toMatchObject({
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
      });
    });

    it('selects its own pods: Deployment, Service and PodDisruptionBudget', () => {
      const labels = deployment().spec.template.metadata.labels;
      expect(selects(deployment().spec.selector.matchLabels, labels)).toBe(true);
      const service = find(objects(), 'Service', 'sluice');
      expect(selects(service.spec!['selector'] as Record<string, string>, labels)).toBe(true);
      const pdb = find(objects(), 'PodDisruptionBudget', 'sluice');
      const pdbSelector = (pdb.spec!['selector'] as { matchLabels: Record<string, string> })
        .matchLabels;
      expect(selects(pdbSelector, labels)).toBe(true);
      expect(pdb.spec!['maxUnavailable']).toBe(1);
    });

    it('mounts the rules ConfigMap whole (no subPath, so updates reach the pod) where the image reads them', () => {
      const pod = deployment().spec.template.spec;
      const rules = pod.volumes?.find((v) => v.configMap?.name === 'sluice-rules');
      expect(rules).toBeDefined();
      const mount = container().volumeMounts?.find((m) => m.name === rules!.name);
      expect(mount).toEqual({
        name: rules!.name,
        mountPath: '/srv/runtime_data/current/config',
        readOnly: true,
      });
      expect(env()['RUNTIME_ROOT']).toBe('/srv/runtime_data/current');
    });

    it('gives sluice settings it accepts, and time to drain before the kill', () => {
      const settings = loadSettings(env());
      const pod = deployment().spec.template.spec;
      expect(pod.terminationGracePeriodSeconds! * 1000).toBeGreaterThan(
        settings.shutdownDelayMs + settings.shutdownGraceMs,
      );
      // The heap cap stays under the container's memory limit.
      const heapMb = Number(/--max-old-space-size=(\d+)/.exec(env()['NODE_OPTIONS'] ?? '')?.[1]);
      const limit = /^(\d+)Mi$/.exec(container().resources!.limits!['memory']!);
      expect(heapMb).toBeLessThan(Number(limit![1]));
      // No statsd collector comes with the manifests: statsd (on by default) would only warn.
      expect(env()['USE_STATSD']).toBe('false');
      expect(settings.stats.sink).not.toBe('statsd');
      // Server processes: explicit, and no more than the cores the pod may use.
      const cpuLimit = Number(container().resources!.limits!['cpu']);
      expect(settings.workers).toBeLessThanOrEqual(cpuLimit);
      if (build === 'redis') {
        expect(settings.backendType).toBe('redis');
        expect(deployment().spec.replicas).toBeGreaterThanOrEqual(2);
        // Unset, WORKERS would be one per core of the node, whatever the CPU limit.
        expect(env()['WORKERS']).toBe(String(cpuLimit));
        // REDIS_URL names the Redis Service of the build.
        const [host, port] = settings.redis!.main.url.split(':');
        const redis = find(objects(), 'Service', host!);
        expect((redis.spec!['ports'] as { port: number }[]).map((p) => p.port)).toContain(
          Number(port),
        );
      } else {
        expect(settings.backendType).toBe('memory');
        expect(deployment().spec.replicas).toBe(1);
      }
    });

    it('autoscales only the Redis-backed replicas (memory-store replicas multiply the limits)', () => {
      const autoscalers = objects().filter((o) => o.kind === 'HorizontalPodAutoscaler');
      if (build === 'base') {
        expect(autoscalers).toEqual([]);
        return;
      }
      expect(autoscalers).toHaveLength(1);
      const spec = autoscalers[0]!.spec as {
        scaleTargetRef: { apiVersion: string; kind: string; name: string };
        minReplicas: number;
        maxReplicas: number;
        metrics: { type: string; resource?: { name: string } }[];
      };
      expect(spec.scaleTargetRef).toEqual({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        name: deployment().metadata.name,
      });
      // Never below the Deployment's replicas (spread over nodes, one left during a drain).
      expect(spec.minReplicas).toBe(deployment().spec.replicas);
      expect(spec.maxReplicas).toBeGreaterThan(spec.minReplicas);
      // CPU utilization is measured against the request, which must be set.
      expect(spec.metrics.map((m) => m.resource?.name)).toEqual(['cpu']);
      expect(container().resources?.requests?.['cpu']).toBeDefined();
    });

    it('ships rules that load (sluice check)', async () => {
      const configMap = find(objects(), 'ConfigMap', 'sluice-rules');
      const dir = mkdtempSync(path.join(tmpdir(), 'sluice-k8s-rules-'));
      dirs.push(dir);
      for (const [name, text] of Object.entries(configMap.data ?? {})) {
        writeFileSync(path.join(dir, name), text);
      }
      const result = await checkConfig([dir]);
      expect(result.problems).toEqual([]);
      expect(result.domains).toEqual(['edge']);
    });
  });
});
