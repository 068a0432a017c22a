/**
 * Claims in README and docs/ that once contradicted the code or each other (issue 21): each is
 * checked against its source of truth, so a change on one side fails here until the other follows.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (file: string): string =>
  readFileSync(new URL(`../../../${file}`, import.meta.url), 'utf8');
const readme = read('README.md');
const operations = read('docs/operations.md');
const benchmarks = read('BENCHMARKS.md');

/** Markdown with line breaks and repeated spaces folded, so a wrapped sentence reads as one. */
const flat = (text: string): string => text.replace(/\s+/g, ' ');

/** The `sluice lean` cell of a row of BENCHMARKS.md's h2load table. */
function leanCell(row: string): string {
  const line = benchmarks.split('\n').find((l) => l.startsWith(`| ${row} `));
  if (line === undefined) throw new Error(`BENCHMARKS.md has no h2load row "${row}"`);
  return line.split('|')[2]!.trim();
}

describe('docs agree with the code and with each other', () => {
  it("operations.md's calls-per-core figures are BENCHMARKS.md's h2load figures", () => {
    for (const shape of ['4x32', '16x64']) {
      const calls = leanCell(`${shape} calls/s`).replace('/s', ''); // "15.2k"
      const [, cpu, core] = /^([\d.]+) \((\d+)%\)$/.exec(
        leanCell(`${shape} server CPU/call, µs (core use)`),
      )!;
      const bullet = flat(operations).match(new RegExp(`\\*\\*${shape}[^;]*`))?.[0] ?? '';
      expect(bullet, shape).toContain(`${calls} calls/s`);
      expect(bullet, shape).toContain(`${cpu} µs`);
      if (shape === '4x32') expect(bullet).toContain(`${core}% of a core`);
    }
  });

  it('operations.md does not claim TLS on the HTTP port (operations-tls.md: it stays plaintext)', () => {
    expect(read('docs/operations-tls.md')).toMatch(/The HTTP port .* stay plaintext/);
    expect(flat(operations)).not.toMatch(/TLS and mTLS on the gRPC and HTTP ports/);
    expect(flat(operations)).toMatch(
      /TLS and mTLS on the gRPC port \(the HTTP and debug ports stay plaintext\)/,
    );
  });

  it("README's list of reference settings that are not read names none of its own table", () => {
    const list = /Reference settings not in the table \(([^)]*)\) are not read/.exec(flat(readme));
    expect(list).not.toBeNull();
    // The variable that turns each named feature on in the reference.
    const variables: Record<string, string> = {
      statsd: 'USE_STATSD',
      'server TLS': 'GRPC_SERVER_USE_TLS',
      memcached: 'MEMCACHE_HOST_PORT',
      'xDS config': 'CONFIG_GRPC_XDS_SERVER_URL',
      tracing: 'TRACING_ENABLED',
    };
    const table = readme.slice(
      readme.indexOf('## Settings'),
      readme.indexOf('## Rule configuration'),
    );
    for (const item of list![1]!.split(',').map((s) => s.trim())) {
      expect(variables[item], `a variable for "${item}"`).toBeDefined();
      expect(table, item).not.toContain(`\`${variables[item]}\``);
    }
  });

  it('no page says sluice never serves without rules (an empty rule set serves, at WARN)', () => {
    for (const file of ['README.md', 'docs/operations.md', 'docs/operations-http.md']) {
      expect(flat(read(file)), file).not.toMatch(/never serves without (rules|a config)/);
    }
    expect(flat(operations)).toMatch(/no rule file at all .* logged at WARN/);
  });

  it('x-ratelimit-reset is not promised a floor of the full window (59 is seen)', () => {
    for (const file of ['README.md', 'docs/demo.md']) {
      expect(flat(read(file)), file).not.toMatch(/between `?60`? and `?63`?/);
    }
    expect(flat(readme)).toMatch(/at most 63, and at least 60 minus the seconds since the first/);
  });

  it("README's Kubernetes steps build and push the image the kustomization names before applying", () => {
    // No registry serves a sluice image (issue 32, item 7): `kubectl apply -k` first would leave
    // every pod in ImagePullBackOff.
    const kustomization = read('deploy/kubernetes/base/kustomization.yaml');
    expect(kustomization).toMatch(/- name: sluice\n\s+newName: sluice\n/);
    const section = readme.slice(readme.indexOf('## Kubernetes'), readme.indexOf('## Development'));
    const build = section.indexOf('docker build -t registry.example/sluice');
    const push = section.indexOf('docker push registry.example/sluice');
    const setImage = section.indexOf('kustomize edit set image sluice=registry.example/sluice');
    const apply = section.indexOf('kubectl apply -k');
    expect(build, 'docker build').toBeGreaterThan(-1);
    expect([build < push, push < setImage, setImage < apply]).toEqual([true, true, true]);
  });

  it('docs/envoy-gateway.md says Envoy Gateway must be restarted after its ConfigMap changes', () => {
    const guide = flat(read('docs/envoy-gateway.md'));
    expect(guide).toMatch(
      /reads this configuration only when it starts: after changing the ConfigMap, restart/,
    );
    expect(guide).toContain(
      'kubectl rollout restart deployment/envoy-gateway -n envoy-gateway-system',
    );
    expect(guide).toMatch(/With Helm, put the same configuration under `config.envoyGateway`/);
  });
});
