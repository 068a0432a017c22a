/**
 * Fuzzing the gRPC port over raw HTTP/2, against both servers (GRPC_SERVER=lean and grpc-js):
 * random bytes, valid RateLimitRequests and mutations of them, put on the stream with correct and
 * wrong length prefixes, compressed flags with and without `grpc-encoding`, truncated frames,
 * absent and repeated messages, and in random DATA frame pieces. Every call must end with a gRPC
 * status from the expected set (never a hung stream or a reset without one); afterwards the
 * server still serves, its config is the one it loaded and a counter charged before the fuzzing
 * holds exactly what it held.
 */
import zlib from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/clock.js';
import type { ConfigSnapshot } from '../../src/config/types.js';
import { GrpcStatus } from '../../src/transport/status.js';
import { rlsRequest } from '../helpers/envoy-rls-client.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';
import { fcParams, timeoutFor } from './budget.js';
import {
  Connection,
  FUZZ_RULES,
  chunk,
  encodeRequest,
  frameMessage,
  framingArb,
  messageArb,
  problemWith,
  rawCall,
  type Framing,
} from './wire.js';

const S = GrpcStatus;

/**
 * The statuses a call may end with, by how it was framed. A well-framed message is a request
 * (OK) or not one (INVALID_ARGUMENT); a framing error is INTERNAL (or UNIMPLEMENTED for the
 * wrong number of messages and an unsupported encoding), a length over the limit
 * RESOURCE_EXHAUSTED. Either may win when both are wrong (e.g. a short prefix whose first
 * message is also malformed).
 */
function allowed(framing: Framing, kind: 'lean' | 'grpc-js'): ReadonlySet<number> {
  const message = [S.OK, S.INVALID_ARGUMENT];
  const framingError = [S.INTERNAL, S.UNIMPLEMENTED];
  switch (framing.kind) {
    case 'plain':
      return new Set(message);
    case 'compressed':
      return new Set(framing.corrupt ? [...message, S.INTERNAL] : message);
    case 'huge-length':
      return new Set([S.RESOURCE_EXHAUSTED]);
    case 'wrong-length':
      return new Set([...message, ...framingError, S.RESOURCE_EXHAUSTED]);
    case 'flag-without-encoding':
      // grpc-js passes a flagged message through unchanged when the encoding is `identity`
      // (named or, without grpc-encoding, implied); the lean server refuses it.
      return new Set(
        kind === 'grpc-js' && (framing.header === 'identity' || framing.header === undefined)
          ? [...message, ...framingError]
          : framingError,
      );
    case 'bad-flag':
      // grpc-js reads any flag other than 1 as "not compressed" and decodes the message; the
      // lean server refuses flags other than 0 and 1 (docs/grpc-server.md).
      return new Set(kind === 'grpc-js' ? message : framingError);
    case 'truncated':
    case 'empty':
    case 'twice':
      return new Set(framingError);
  }
}

describe.each(['lean', 'grpc-js'] as const)('fuzzing the gRPC port (GRPC_SERVER=%s)', (kind) => {
  let running: RunningApp;
  let conn: Connection;
  let loaded: ConfigSnapshot;
  const clock = createManualClock();
  /** Outcomes by framing kind and status, printed at the end for the record. */
  const seen = new Map<string, number>();

  const probe = () => running.client.shouldRateLimit(rlsRequest('sentinel', [{ probe: 'p' }]));

  beforeAll(async () => {
    const dir = await ruleDir(FUZZ_RULES);
    running = await startApp([dir], { GRPC_SERVER: kind }, { clock: clock.now });
    conn = new Connection(`http://127.0.0.1:${running.port}`);
    loaded = running.app.snapshot();
    // Three hits on the sentinel counter before any fuzzing: 7 of 10 left.
    for (let i = 0; i < 3; i++) await probe();
  });
  afterAll(async () => {
    conn?.close();
    await running?.stop();
  });

  it(
    'every random, valid or mutated message in any framing ends with an expected gRPC status',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          messageArb,
          framingArb,
          fc.array(fc.nat(), { maxLength: 4 }),
          async (message, framing, cuts) => {
            const { body, headers } = frameMessage(message.bytes, framing);
            const session = await conn.session();
            const outcome = await rawCall(session, chunk(body, cuts), headers, 5_000);
            const key = `${JSON.stringify(framing)}/${message.kind} -> ${outcome.grpcStatus}`;
            seen.set(key, (seen.get(key) ?? 0) + 1);
            const problem = problemWith(outcome, allowed(framing, kind));
            if (problem !== undefined) throw new Error(problem);
          },
        ),
        fcParams(300),
      );
    },
    timeoutFor(20_000),
  );

  it('oversized messages, sent or announced, and a compression bomb get RESOURCE_EXHAUSTED', async () => {
    const session = await conn.session();
    const max = 1_048_576;
    const big = Buffer.alloc(max + 1, 0x41);
    const sent = await rawCall(session, [frameMessage(big, { kind: 'plain' }).body], {}, 10_000);
    expect(problemWith(sent, new Set([S.RESOURCE_EXHAUSTED]))).toBeUndefined();
    // 64 MiB of zeros gzip to about 64 KiB: the decompressed size is what counts.
    const bomb = frameMessage(Buffer.alloc(64 * max), {
      kind: 'compressed',
      encoding: 'gzip',
      corrupt: false,
    });
    const inflated = await rawCall(session, [bomb.body], bomb.headers, 10_000);
    expect(problemWith(inflated, new Set([S.RESOURCE_EXHAUSTED]))).toBeUndefined();
    const announced = await rawCall(
      session,
      [Buffer.from([0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3])],
      {},
      5_000,
    );
    expect(problemWith(announced, new Set([S.RESOURCE_EXHAUSTED]))).toBeUndefined();
    // A valid request compressed with a supported encoding is served.
    const request = encodeRequest({
      domain: 'fuzz',
      descriptors: [{ entries: [{ key: 'k', value: 'gz' }] }],
      hitsAddend: 0,
    });
    const gz = await rawCall(
      session,
      [Buffer.concat([Buffer.from([1, 0, 0, 0, 0]), zlib.gzipSync(request)])].map((b) => {
        b.writeUInt32BE(b.length - 5, 1);
        return b;
      }),
      { 'grpc-encoding': 'gzip' },
      5_000,
    );
    expect(problemWith(gz, new Set([S.OK]))).toBeUndefined();
  }, 30_000);

  it('afterwards the server serves, with the config it loaded and its counters exact', async () => {
    console.info(
      `fuzz outcomes (GRPC_SERVER=${kind}):\n` +
        [...seen]
          .sort()
          .map(([k, n]) => `  ${k}: ${n}`)
          .join('\n'),
    );
    expect(running.app.snapshot()).toBe(loaded);
    expect([...running.app.snapshot().domains.keys()].sort()).toEqual(['fuzz', 'sentinel']);
    const after = await probe();
    expect(after.overall_code).toBe('OK');
    // 3 hits before, this one: 6 of 10 left, whatever the fuzzing sent.
    expect(after.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 6 });
    expect(running.app.health.serving()).toBe(true);
  });
});
