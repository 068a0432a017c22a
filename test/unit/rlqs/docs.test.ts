/**
 * docs/rlqs.md shows the Envoy configuration the end-to-end test runs: its YAML block must equal
 * examples/rlqs/envoy.yaml byte for byte, and the rules it names must exist.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../helpers/processes.js';

const read = (file: string): string => readFileSync(path.join(REPO_ROOT, file), 'utf8');

describe('docs/rlqs.md', () => {
  it('shows examples/rlqs/envoy.yaml as it is (the file test/e2e/rlqs.test.ts runs)', () => {
    const doc = read('docs/rlqs.md');
    const block = /```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(block).toBe(read('examples/rlqs/envoy.yaml'));
  });

  it('the example rules are the domain the filter names', () => {
    expect(read('examples/rlqs/ratelimit/rlqs.yaml')).toMatch(/^domain: rlqs$/m);
    expect(read('examples/rlqs/envoy.yaml')).toMatch(/^ +domain: rlqs$/m);
  });
});
