/**
 * Envoy's own verdict on envoy/envoy.yaml (`envoy --mode validate`): the shipped file and its
 * lowerCamelCase spelling load, and every broken copy the contract tier's schema check rejects is
 * rejected by Envoy too, with a message naming the broken field or type, so the static check and the
 * real binary agree.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BROKEN_BOOTSTRAPS,
  camelCaseKeys,
  envoyBinary,
  envoyOutputMentions,
  loadShippedEnvoyConfig,
  requireEnvoy,
  type EnvoyConfig,
} from '../helpers/envoy.js';

const envoy = requireEnvoy('envoy --mode validate');

describe.skipIf(envoy.skip)(
  envoy.skip ? `envoy --mode validate (SKIPPED: ${envoy.reason})` : 'envoy --mode validate',
  () => {
    let binary: string;
    let dir: string;

    beforeAll(() => {
      binary = envoyBinary(envoy);
      dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-envoy-validate-'));
    });
    afterAll(() => {
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    function validate(name: string, config: EnvoyConfig): { ok: boolean; output: string } {
      const file = path.join(dir, `${name.replace(/[^a-z0-9]+/gi, '-')}.yaml`);
      writeFileSync(file, stringify(config));
      const result = spawnSync(
        binary,
        ['--mode', 'validate', '-c', file, '--log-level', 'error', '--disable-hot-restart'],
        { encoding: 'utf8', timeout: 30_000 },
      );
      return { ok: result.status === 0, output: `${result.stdout}${result.stderr}` };
    }

    it('accepts the shipped envoy/envoy.yaml', () => {
      const result = validate('shipped', loadShippedEnvoyConfig());
      expect(result.ok, result.output).toBe(true);
    });

    it('accepts the same file spelled with lowerCamelCase field names', () => {
      const result = validate('camel-case', camelCaseKeys(loadShippedEnvoyConfig()) as EnvoyConfig);
      expect(result.ok, result.output).toBe(true);
    });

    it.each(BROKEN_BOOTSTRAPS.flatMap((b) => (b.envoyRejects ? [[b.name, b] as const] : [])))(
      'rejects the broken copy: %s',
      (name, broken) => {
        const config = loadShippedEnvoyConfig();
        broken.mutate(config);
        const result = validate(name, config);
        expect(result.ok, result.output).toBe(false);
        // Refused for the right reason: Envoy's message names the broken field or type.
        for (const fragment of broken.envoySays) {
          expect(
            envoyOutputMentions(result.output, fragment),
            `expected Envoy's output to mention ${JSON.stringify(fragment)}:\n${result.output}`,
          ).toBe(true);
        }
      },
    );
  },
);
