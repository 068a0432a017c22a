/**
 * The gRPC port's connection limits, set by environment, on the running server (both
 * GRPC_SERVER values): an idle connection and an old one are sent GOAWAY. Waits are for the
 * GOAWAY frame itself, bounded; nothing asserts on how long it took.
 */
import http2 from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';

const RULES = {
  'rules.yaml': `domain: conn
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 10 }
`,
};

const running: RunningApp[] = [];
const sessions: http2.ClientHttp2Session[] = [];

afterEach(async () => {
  for (const session of sessions.splice(0)) session.destroy();
  await Promise.all(running.splice(0).map((app) => app.stop()));
});

/** Open a plaintext HTTP/2 connection to the gRPC port; resolves once it is connected. */
async function connect(port: number): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  sessions.push(session);
  session.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  return session;
}

/** Resolves to true when the server sends GOAWAY within `boundMs`, false otherwise. */
function goaway(session: http2.ClientHttp2Session, boundMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), boundMs);
    session.once('goaway', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

describe('gRPC connection limits', () => {
  it('sends GOAWAY to a connection idle for GRPC_MAX_CONNECTION_IDLE', async () => {
    const app = await startApp([await ruleDir(RULES)], { GRPC_MAX_CONNECTION_IDLE: '200ms' });
    running.push(app);
    const session = await connect(app.port);
    expect(await goaway(session, 10_000)).toBe(true);
  });

  it('sends GOAWAY to a connection older than GRPC_MAX_CONNECTION_AGE', async () => {
    const app = await startApp([await ruleDir(RULES)], {
      GRPC_MAX_CONNECTION_AGE: '300ms',
      GRPC_MAX_CONNECTION_AGE_GRACE: '1s',
    });
    running.push(app);
    const session = await connect(app.port);
    expect(await goaway(session, 10_000)).toBe(true);
  });

  it('keeps a connection open with the defaults (no idle limit, a 24 h age)', async () => {
    const app = await startApp([await ruleDir(RULES)]);
    running.push(app);
    const session = await connect(app.port);
    // The same bound as above would have seen a GOAWAY from either limit by now.
    expect(await goaway(session, 1_500)).toBe(false);
    expect(session.closed).toBe(false);
  });
});
