/**
 * The package's subpath exports as an application sees them (docs/node.md): from a folder whose
 * node_modules/sluice is this repo, `sluice/client`, `sluice/middleware` and `sluice/embedded`
 * import under plain Node, and a TypeScript consumer typechecks against their declarations
 * (package.json `exports` -> `types`), built by `npm run build`.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, REPO_ROOT } from '../helpers/processes.js';

const CONSUMER_JS = `
import { createRateLimitClient } from 'sluice/client';
import { rateLimit, withRateLimit, fastifyRateLimit, remoteAddress, header, genericKey, route } from 'sluice/middleware';
import { createEmbeddedLimiter } from 'sluice/embedded';
console.log(JSON.stringify([createRateLimitClient, rateLimit, withRateLimit, fastifyRateLimit,
  remoteAddress, header, genericKey, route, createEmbeddedLimiter].map((f) => typeof f)));
`;

const CONSUMER_TS = `
import { createRateLimitClient, type RateLimitDecision } from 'sluice/client';
import { rateLimit, remoteAddress, type HttpRateLimitOptions } from 'sluice/middleware';
import { createEmbeddedLimiter, type EmbeddedLimiter } from 'sluice/embedded';
const client = createRateLimitClient({ address: '127.0.0.1:8081', failureMode: 'closed' });
const options: HttpRateLimitOptions = { limiter: client, domain: 'edge', descriptors: [[remoteAddress()]] };
export const middleware = rateLimit(options);
export async function check(): Promise<boolean> {
  const decision: RateLimitDecision = await client.shouldRateLimit({ domain: 'edge', descriptors: [] });
  const embedded: EmbeddedLimiter = await createEmbeddedLimiter({ rules: '/etc/rules' });
  await embedded.close();
  return decision.allowed;
}
// @ts-expect-error failureMode is 'open' or 'closed'
createRateLimitClient({ address: 'x:1', failureMode: 'sometimes' });
`;

describe('the package subpath exports', () => {
  let dir: string;
  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(path.join(tmpdir(), 'sluice-consumer-'));
    mkdirSync(path.join(dir, 'node_modules'));
    symlinkSync(REPO_ROOT, path.join(dir, 'node_modules', 'sluice'), 'dir');
    writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
    writeFileSync(path.join(dir, 'consumer.mjs'), CONSUMER_JS);
    writeFileSync(path.join(dir, 'consumer.ts'), CONSUMER_TS);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('import under plain Node', () => {
    const run = spawnSync(process.execPath, ['consumer.mjs'], { cwd: dir, encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual(Array(9).fill('function'));
  });

  it('typecheck from their declarations', () => {
    const program = ts.createProgram([path.join(dir, 'consumer.ts')], {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: ['node'],
      typeRoots: [path.join(REPO_ROOT, 'node_modules', '@types')],
    });
    const problems = ts
      .getPreEmitDiagnostics(program)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(problems).toEqual([]);
  });
});
