/**
 * Hostile clients on the gRPC port (issue 22), against a sluice child process so its memory and
 * CPU can be read from /proc, on both servers (GRPC_SERVER from the project): unfinished 1 MiB
 * messages on many streams, header-only streams by the ten thousand, more connections than
 * allowed, reflection requests from a client that never reads its answers, and a trickle of
 * 1-byte DATA frames on nearly complete messages. Each test asserts a bound on what the server
 * holds (RSS, or the bytes it accounts) and that it keeps answering health and calls; none
 * asserts on how long anything took. A `grpc-timeout` past what Node's timers hold is checked
 * in-process at the end.
 */
import { readFileSync } from 'node:fs';
import type http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rlsRequest, createEnvoyRlsClient } from '../helpers/envoy-rls-client.js';
import { ruleDir, startApp } from '../helpers/app.js';
import {
  grpcFrame,
  connectHttp2,
  parseGrpcFrames,
  pingHttp2,
  startRawCall,
} from '../helpers/grpc-wire.js';
import { rawH2Connect, type RawH2Connection } from '../helpers/h2-flood.js';
import {
  ensureBuilt,
  freePort,
  grpcHealthStatus,
  startSluice,
  useProcessGroup,
  waitFor,
  type SluiceProcess,
} from '../helpers/processes.js';

const KIND = process.env.GRPC_SERVER === 'grpc-js' ? 'grpc-js' : 'lean';
const RLS_PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const REFLECTION_PATH = '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo';
const MiB = 1_048_576;

const RULES = {
  'rules.yaml': `domain: hostile
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 1000000 }
`,
};

/** Resident memory of a process, bytes (VmRSS). */
function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  if (kb === undefined) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(kb) * 1024;
}

/** CPU time a process has used (user + system), seconds. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at ") ".
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** One sample of `/metrics` on the HTTP port: the value of `series` (0 when absent). */
async function metric(httpPort: number, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return 0;
}

/** The child answers gRPC health and a ShouldRateLimit call (each bounded). */
async function stillServes(grpcPort: number): Promise<void> {
  expect(await grpcHealthStatus(`127.0.0.1:${grpcPort}`, 10_000)).toBe('SERVING');
  const client = createEnvoyRlsClient(`127.0.0.1:${grpcPort}`);
  try {
    const answer = await client.shouldRateLimit(rlsRequest('hostile', [{ k: 'v' }]), 10_000);
    expect(answer.overall_code).toBe('OK');
  } finally {
    client.close();
  }
}

/** Start the child with `env` and a known HTTP port; wait until it serves. */
async function startChild(
  group: ReturnType<typeof useProcessGroup>,
  env: Record<string, string>,
): Promise<{ sluice: SluiceProcess; httpPort: number; pid: number }> {
  ensureBuilt();
  const httpPort = await freePort();
  const sluice = await startSluice(group, {
    configDir: await ruleDir(RULES),
    grpcPort: await freePort(),
    env: { GRPC_SERVER: KIND, PORT: String(httpPort), ...env },
  });
  await stillServes(sluice.grpcPort);
  return { sluice, httpPort, pid: sluice.proc.child.pid! };
}

describe(`hostile clients on the gRPC port, bounded (GRPC_SERVER=${KIND})`, () => {
  const group = useProcessGroup();
  let grpcPort: number;
  let httpPort: number;
  let pid: number;

  beforeAll(async () => {
    const child = await startChild(group, {
      GRPC_MAX_CONNECTIONS: '100',
      GRPC_MAX_CONCURRENT_STREAMS: '500',
      GRPC_MAX_CONNECTION_BUFFER_BYTES: String(8 * MiB),
      MAX_REQUEST_BUFFER_BYTES: String(32 * MiB),
      GRPC_REQUEST_TIMEOUT: '2s',
    });
    ({ httpPort, pid } = child);
    grpcPort = child.sluice.grpcPort;
  }, 120_000);

  it('unfinished 1 MiB messages on 400 streams hold at most the byte budgets, given back at close', async () => {
    const base = rssBytes(pid);
    const sessions: http2.ClientHttp2Session[] = [];
    // One shared body: the client holds views of it, not 400 copies.
    const body = Buffer.alloc(MiB);
    body.writeUInt32BE(MiB - 5, 1);
    const almost = body.subarray(0, MiB - 1);
    const writes: Promise<void>[] = [];
    for (let c = 0; c < 5; c++) {
      const session = await connectHttp2(`http://127.0.0.1:${grpcPort}`, 10_000);
      sessions.push(session);
      for (let s = 0; s < 80; s++) {
        const call = startRawCall(session, RLS_PATH, 60_000);
        // Refused streams end early; their unsent bytes are dropped with them.
        writes.push(Promise.race([call.write(almost), call.result.then(() => undefined)]));
      }
    }
    await Promise.all(writes);
    for (const session of sessions) await pingHttp2(session, 20_000);
    const held = await metric(httpPort, 'sluice_request_buffer_bytes');
    const grown = rssBytes(pid) - base;
    await stillServes(grpcPort);
    for (const session of sessions) session.destroy();
    // 400 MiB were sent; the budgets allow 32 MiB in total (8 MiB per connection).
    expect(held).toBeLessThanOrEqual(32 * MiB);
    expect(grown).toBeLessThan(160 * MiB);
    // Which budget runs out first depends on how the connections' frames interleave.
    const refused =
      (await metric(httpPort, 'sluice_transport_refusals_total{reason="connection_buffer"}')) +
      (await metric(httpPort, 'sluice_transport_refusals_total{reason="total_buffer"}'));
    expect(refused).toBeGreaterThan(0);
    await waitFor(
      'the unfinished requests of the closed connections given back',
      async () => (await metric(httpPort, 'sluice_request_buffer_bytes')) === 0,
      { timeoutMs: 10_000 },
    );
  }, 120_000);

  it('one connection holds at most GRPC_MAX_CONNECTION_BUFFER_BYTES of unfinished messages', async () => {
    const before = await metric(
      httpPort,
      'sluice_transport_refusals_total{reason="connection_buffer"}',
    );
    const session = await connectHttp2(`http://127.0.0.1:${grpcPort}`, 10_000);
    try {
      const body = Buffer.alloc(MiB);
      body.writeUInt32BE(MiB - 5, 1);
      const almost = body.subarray(0, MiB - 1);
      const calls = Array.from({ length: 20 }, () => startRawCall(session, RLS_PATH, 60_000));
      await Promise.all(
        calls.map((call) => Promise.race([call.write(almost), call.result.then(() => undefined)])),
      );
      await pingHttp2(session, 20_000);
      // 20 MiB sent on one connection; it may hold 8 MiB, the process 32 MiB.
      expect(await metric(httpPort, 'sluice_request_buffer_bytes')).toBeLessThanOrEqual(8 * MiB);
      expect(
        await metric(httpPort, 'sluice_transport_refusals_total{reason="connection_buffer"}'),
      ).toBeGreaterThan(before);
    } finally {
      session.destroy();
    }
    await waitFor(
      'what the closed connection held given back',
      async () => (await metric(httpPort, 'sluice_request_buffer_bytes')) === 0,
      { timeoutMs: 10_000 },
    );
  }, 60_000);

  it('80,000 header-only streams on 8 connections are held to GRPC_MAX_CONCURRENT_STREAMS', async () => {
    const base = rssBytes(pid);
    const connections: RawH2Connection[] = [];
    try {
      for (let c = 0; c < 8; c++) {
        const connection = await rawH2Connect('127.0.0.1', grpcPort);
        connections.push(connection);
        // Past the limit the streams are refused, and Node closes a connection that keeps
        // opening refused streams.
        await connection.openHeaderOnlyStreams(RLS_PATH, 10_000);
      }
      for (const connection of connections) await connection.ping();
      await stillServes(grpcPort);
      const grown = rssBytes(pid) - base;
      // At most 8 x 500 streams of a few KiB each; unbounded, 80,000 streams held ~350 MB.
      expect(grown).toBeLessThan(100 * MiB);
      expect(await metric(httpPort, 'sluice_request_buffer_bytes')).toBeLessThanOrEqual(32 * MiB);
    } finally {
      for (const connection of connections) connection.destroy();
    }
  }, 120_000);

  it('header-only streams are cut by GRPC_REQUEST_TIMEOUT and what they held given back', async () => {
    const connection = await rawH2Connect('127.0.0.1', grpcPort);
    try {
      await connection.openHeaderOnlyStreams(RLS_PATH, 400);
      await connection.ping();
      await waitFor(
        'the header-only requests cut by GRPC_REQUEST_TIMEOUT and given back',
        async () =>
          (await metric(httpPort, 'sluice_transport_refusals_total{reason="request_timeout"}')) >=
            400 && (await metric(httpPort, 'sluice_request_buffer_bytes')) === 0,
        { timeoutMs: 20_000 },
      );
      // The connection itself stays open: only its requests were cut.
      expect(connection.closed()).toBe(false);
    } finally {
      connection.destroy();
    }
  }, 60_000);

  it('connections past GRPC_MAX_CONNECTIONS are closed at accept, and counted', async () => {
    const connections: RawH2Connection[] = [];
    try {
      for (let c = 0; c < 150; c++) connections.push(await rawH2Connect('127.0.0.1', grpcPort));
      await waitFor(
        'at least 50 of 150 connections closed by the server',
        () => connections.filter((c) => c.closed()).length >= 50,
        { timeoutMs: 10_000 },
      );
      expect(connections.filter((c) => c.closed()).length).toBeLessThanOrEqual(60);
      expect(
        await metric(httpPort, 'sluice_transport_refusals_total{reason="connections"}'),
      ).toBeGreaterThanOrEqual(50);
    } finally {
      for (const connection of connections) connection.destroy();
    }
    await waitFor(
      'a new connection admitted once the others closed',
      async () => {
        await stillServes(grpcPort);
        return true;
      },
      { timeoutMs: 10_000 },
    );
  }, 60_000);

  it.skipIf(KIND === 'grpc-js')(
    'reflection requests from a client that never reads its answers hold one answer, not thousands (lean server only: grpc-js answers reflection itself)',
    async () => {
      const base = rssBytes(pid);
      const session = await connectHttp2(`http://127.0.0.1:${grpcPort}`, 10_000);
      try {
        const stream = session.request({
          ':method': 'POST',
          ':path': REFLECTION_PATH,
          'content-type': 'application/grpc',
          te: 'trailers',
        });
        stream.on('error', () => {});
        // Never read: no WINDOW_UPDATE goes back, so the server's answers cannot be sent.
        stream.pause();
        // ServerReflectionRequest { file_containing_symbol (4): the RLS service }.
        const symbol = Buffer.from('envoy.service.ratelimit.v3.RateLimitService');
        const request = grpcFrame(Buffer.concat([Buffer.from([0x22, symbol.length]), symbol]));
        const many = Buffer.concat(Array.from({ length: 20_000 }, () => request));
        stream.write(many);
        let peak = 0;
        // Sampled while the server would be answering: unbounded, the 20,000 answers (~6 KB
        // each) took about 116 MiB; answered only as the client reads, about 0.1 MiB.
        for (let i = 0; i < 30; i++) {
          await new Promise((r) => setTimeout(r, 100));
          peak = Math.max(peak, rssBytes(pid) - base);
        }
        expect(peak).toBeLessThan(60 * MiB);
        await stillServes(grpcPort);
      } finally {
        session.destroy();
      }
    },
    60_000,
  );
});

describe(`a trickle of 1-byte DATA frames (GRPC_SERVER=${KIND})`, () => {
  const group = useProcessGroup();
  let grpcPort: number;
  let pid: number;

  beforeAll(async () => {
    const child = await startChild(group, {});
    pid = child.pid;
    grpcPort = child.sluice.grpcPort;
  }, 120_000);

  it('completing four nearly whole 1 MiB messages byte by byte costs time linear in their size', async () => {
    const session = await connectHttp2(`http://127.0.0.1:${grpcPort}`, 10_000);
    const FRAMES = 3_000;
    try {
      const body = Buffer.alloc(5 + 1_000_000);
      body.writeUInt32BE(1_000_000, 1);
      const calls = Array.from({ length: 4 }, () => startRawCall(session, RLS_PATH, 120_000));
      await Promise.all(calls.map((call) => call.write(body.subarray(0, body.length - FRAMES))));
      await pingHttp2(session, 20_000);
      const before = cpuSeconds(pid);
      const one = Buffer.alloc(1);
      await Promise.all(
        calls.map(async (call) => {
          // Each awaited 1-byte write goes out as its own DATA frame.
          for (let i = 0; i < FRAMES - 1; i++) await call.write(one);
        }),
      );
      await pingHttp2(session, 20_000);
      const used = cpuSeconds(pid) - before;
      await stillServes(grpcPort);
      for (const call of calls) call.end(one);
      const results = await Promise.all(calls.map((call) => call.result));
      // A message of zero bytes is not a RateLimitRequest (field 0): the call is answered.
      for (const result of results) expect(result.grpcStatus).toBe('3');
      // 12,000 frames: about 0.06 s; copying the whole message per frame took about 3 s.
      expect(used).toBeLessThan(1);
    } finally {
      session.destroy();
    }
  }, 120_000);
});

describe(`streams refused when they open (GRPC_SERVER=${KIND})`, () => {
  it('header-only streams past the connection budget are refused at once, and calls go on', async () => {
    // The smallest budgets: 1 KiB messages, 65 KiB per connection (16 open requests).
    const running = await startApp([await ruleDir(RULES)], {
      GRPC_SERVER: KIND,
      GRPC_MAX_RECEIVE_MESSAGE_LENGTH: '1024',
      GRPC_MAX_CONNECTION_BUFFER_BYTES: String(65_536 + 1024),
    });
    const connection = await rawH2Connect('127.0.0.1', running.port);
    try {
      await connection.openHeaderOnlyStreams(RLS_PATH, 40);
      await connection.ping();
      const text = await (await fetch(`http://127.0.0.1:${running.httpPort}/metrics`)).text();
      const refused = /sluice_transport_refusals_total\{reason="connection_buffer"\} (\d+)/.exec(
        text,
      )?.[1];
      expect(Number(refused)).toBeGreaterThanOrEqual(40 - 16);
      const answer = await running.client.shouldRateLimit(rlsRequest('hostile', [{ k: 'v' }]));
      expect(answer.overall_code).toBe('OK');
    } finally {
      connection.destroy();
      await running.stop();
    }
  });
});

describe(`reflection answers to a slow reader (GRPC_SERVER=${KIND})`, () => {
  it('a client that reads only after sending 300 requests still gets 300 answers and OK', async () => {
    const running = await startApp([await ruleDir(RULES)], { GRPC_SERVER: KIND });
    const session = await connectHttp2(`http://127.0.0.1:${running.port}`, 10_000);
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': REFLECTION_PATH,
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      stream.on('error', () => {});
      let status: string | undefined;
      stream.on('trailers', (trailers) => {
        const value = trailers['grpc-status'];
        if (typeof value === 'string') status = value;
      });
      const symbol = Buffer.from('envoy.service.ratelimit.v3.RateLimitService');
      const request = grpcFrame(Buffer.concat([Buffer.from([0x22, symbol.length]), symbol]));
      stream.pause();
      stream.end(Buffer.concat(Array.from({ length: 300 }, () => request)));
      // The server has the requests (and, unread, its answers back up) before reading starts.
      await pingHttp2(session, 10_000);
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.resume();
      await new Promise<void>((resolve) => stream.on('close', resolve));
      expect(status).toBe('0');
      expect(parseGrpcFrames(Buffer.concat(chunks))).toHaveLength(300);
    } finally {
      session.destroy();
      await running.stop();
    }
  }, 60_000);
});

describe(`grpc-timeout longer than a Node timer holds (GRPC_SERVER=${KIND})`, () => {
  const warnings: Error[] = [];
  const onWarning = (warning: Error): void => void warnings.push(warning);
  beforeAll(() => process.on('warning', onWarning));
  afterAll(() => process.off('warning', onWarning));

  it.each(['597H', '600H', '99999999H', '2147484S'])(
    'a call with grpc-timeout %s whose body comes after its headers is answered, with no warning',
    async (timeout) => {
      const running = await startApp([await ruleDir(RULES)], { GRPC_SERVER: KIND });
      const session = await connectHttp2(`http://127.0.0.1:${running.port}`, 10_000);
      try {
        const stream = session.request({
          ':method': 'POST',
          ':path': RLS_PATH,
          'content-type': 'application/grpc',
          te: 'trailers',
          'grpc-timeout': timeout,
        });
        stream.on('error', () => {});
        let status: string | undefined;
        const read = (headers: http2.IncomingHttpHeaders): void => {
          const value = headers['grpc-status'];
          if (typeof value === 'string') status ??= value;
        };
        stream.on('response', read);
        stream.on('trailers', read);
        stream.resume();
        const closed = new Promise<void>((resolve) => stream.on('close', resolve));
        // The PING's answer comes after the server has read the headers and armed its deadline
        // timer. A timer that overflowed fires after 1 ms; Node fires timers of one duration in
        // the order they were set, so once this 1 ms timer of ours has fired, so has that one.
        // (Not a sleep: an ordering barrier in this process, where the server runs.)
        await pingHttp2(session, 10_000);
        await new Promise((r) => setTimeout(r, 1));
        // RateLimitRequest { domain (1): "hostile", descriptors (2): [{ entries: [k=v] }] }.
        const message = Buffer.concat([
          Buffer.from([0x0a, 7]),
          Buffer.from('hostile'),
          Buffer.from([0x12, 8, 0x0a, 6, 0x0a, 1, 0x6b, 0x12, 1, 0x76]),
        ]);
        stream.end(grpcFrame(message));
        await closed;
        expect(status).toBe('0');
        expect(warnings.filter((w) => w.name === 'TimeoutOverflowWarning')).toEqual([]);
      } finally {
        session.destroy();
        await running.stop();
      }
    },
  );
});
