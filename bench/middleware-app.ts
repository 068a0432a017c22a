/**
 * One Express 5 app of the middleware benchmark (bench/middleware.ts), in its own process so its
 * CPU time is its own: `GET /` answers a small JSON body behind one of
 *
 * - `none`: no rate limiting (the baseline);
 * - `express-rate-limit`: express-rate-limit with its memory store, IETF draft-8 headers;
 * - `sluice-embedded`: sluice/middleware over sluice/embedded (memory store) and the rules in
 *   RULES_DIR;
 * - `sluice-remote`: sluice/middleware over sluice/client to the sluice at SLUICE_ADDRESS.
 *
 * Every request is admitted (the limits are far above the load), so the rows compare the cost of
 * the admitted path, which is the path almost every request takes.
 *
 * Usage: `node middleware-app.js VARIANT [RULES_DIR] [SLUICE_ADDRESS]`; prints `listening PORT`
 * once bound on 127.0.0.1; exits on SIGTERM, and by itself after {@link MAX_LIFETIME_MS}.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import express, { type RequestHandler } from 'express';
import { rateLimit as expressRateLimit } from 'express-rate-limit';
import type * as ClientModule from '../src/node/client.js';
import type * as EmbeddedModule from '../src/node/embedded.js';
import type * as MiddlewareModule from '../src/node/middleware/index.js';
import { REPO_ROOT } from './dist.js';
import { BENCH_LIMIT_PER_MINUTE } from './middleware-limits.js';

/** A forgotten app never outlives a benchmark run by much. */
const MAX_LIFETIME_MS = 10 * 60_000;

async function load<T>(file: string): Promise<T> {
  return (await import(pathToFileURL(path.join(REPO_ROOT, 'dist', file)).href)) as T;
}

const [variant = 'none', rulesDir = '', address = ''] = process.argv.slice(2);

async function limiterFor(name: string): Promise<RequestHandler | undefined> {
  if (name === 'none') return undefined;
  if (name === 'express-rate-limit') {
    return expressRateLimit({
      windowMs: 60_000,
      limit: BENCH_LIMIT_PER_MINUTE,
      standardHeaders: 'draft-8',
      legacyHeaders: false,
    });
  }
  const middleware = await load<typeof MiddlewareModule>('node/middleware/index.js');
  let limiter: MiddlewareModule.RateLimitBackend;
  if (name === 'sluice-embedded') {
    const embedded = await load<typeof EmbeddedModule>('node/embedded.js');
    limiter = await embedded.createEmbeddedLimiter({ rules: rulesDir, watch: false });
  } else if (name === 'sluice-remote') {
    const client = await load<typeof ClientModule>('node/client.js');
    limiter = client.createRateLimitClient({ address, timeoutMs: 1_000 });
  } else {
    throw new Error(`unknown variant ${name}`);
  }
  return middleware.rateLimit<express.Request>({
    limiter,
    domain: 'bench',
    descriptors: [[middleware.remoteAddress()]],
  }) as RequestHandler;
}

const app = express();
const limiter = await limiterFor(variant);
if (limiter !== undefined) app.use(limiter);
app.get('/', (_req, res) => void res.json({ ok: true }));
const server = http.createServer(app);
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.once('SIGTERM', () => process.exit(0));
setTimeout(() => process.exit(2), MAX_LIFETIME_MS).unref();
