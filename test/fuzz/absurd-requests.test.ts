/**
 * Structurally valid but absurd RateLimitRequests over raw HTTP/2, against both gRPC servers:
 * tens of thousands of descriptors or of entries, megabyte values, empty keys, `limit` overrides
 * with unit numbers no one knows, and hits_addend up to 2^64 - 1. Each server runs twice: with the
 * default request bounds (the request is refused, naming the setting to change, or served) and
 * with every bound raised to its maximum (the request is served: one status per descriptor, in a
 * response Envoy's protos decode). Afterwards the config and a counter charged before are intact.
 */
import fc from 'fast-check';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/clock.js';
import type { ConfigSnapshot } from '../../src/config/types.js';
import { GrpcStatus } from '../../src/transport/status.js';
import { loadEnvoyRls, rlsRequest, type EnvoyResponse } from '../helpers/envoy-rls-client.js';
import { parseGrpcFrames } from '../helpers/grpc-wire.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';
import { fcParams, timeoutFor } from './budget.js';
import {
  Connection,
  FUZZ_RULES,
  bigHits,
  encodeRequest,
  frameMessage,
  limitArb,
  problemWith,
  rawCall,
  type WireDescriptor,
  type WireRequest,
} from './wire.js';

const method = (
  loadEnvoyRls()['envoy.service.ratelimit.v3.RateLimitService'] as grpc.ServiceDefinition
).ShouldRateLimit!;

/** What makes a request absurd; one dimension at a time keeps each under ~2 MB. */
type Shape =
  | { readonly kind: 'descriptors'; readonly count: number }
  | { readonly kind: 'entries'; readonly count: number }
  | { readonly kind: 'value'; readonly bytes: number }
  | { readonly kind: 'empty-keys'; readonly count: number };

const shapeArb: fc.Arbitrary<Shape> = fc.oneof(
  fc.record({
    kind: fc.constant('descriptors' as const),
    count: fc.integer({ min: 10_000, max: 30_000 }),
  }),
  fc.record({
    kind: fc.constant('entries' as const),
    count: fc.integer({ min: 10_000, max: 30_000 }),
  }),
  // Around MAX_ENTRY_LENGTH's maximum (1 MiB), on both sides.
  fc.record({
    kind: fc.constant('value' as const),
    bytes: fc.integer({ min: 1_048_576 - 16, max: 1_048_576 + 16 }),
  }),
  fc.record({ kind: fc.constant('empty-keys' as const), count: fc.integer({ min: 1, max: 64 }) }),
);

const extrasArb = fc.record({
  limit: fc.option(limitArb, { nil: undefined }),
  hits: fc.option(bigHits, { nil: undefined }),
  requestHits: fc.constantFrom(0, 1, 0xffffffff),
});

type Extras = typeof extrasArb extends fc.Arbitrary<infer T> ? T : never;

function build(shape: Shape, extras: Extras): WireRequest {
  const decorate = (d: WireDescriptor): WireDescriptor => ({
    ...d,
    ...(extras.limit === undefined ? {} : { limit: extras.limit }),
    ...(extras.hits === undefined ? {} : { hitsAddend: extras.hits }),
  });
  let descriptors: WireDescriptor[];
  switch (shape.kind) {
    case 'descriptors':
      descriptors = Array.from({ length: shape.count }, (_, i) =>
        decorate({ entries: [{ key: 'k', value: String(i) }] }),
      );
      break;
    case 'entries':
      descriptors = [
        decorate({
          entries: Array.from({ length: shape.count }, (_, i) => ({
            key: i % 2 === 0 ? 'nested' : 'k',
            value: String(i),
          })),
        }),
      ];
      break;
    case 'value':
      descriptors = [decorate({ entries: [{ key: 'k', value: 'v'.repeat(shape.bytes) }] })];
      break;
    case 'empty-keys':
      descriptors = Array.from({ length: shape.count }, (_, i) =>
        decorate({ entries: [{ key: '', value: String(i) }] }),
      );
      break;
  }
  return { domain: 'fuzz', descriptors, hitsAddend: extras.requestHits };
}

const RAISED = {
  MAX_DESCRIPTORS_PER_REQUEST: '100000',
  MAX_ENTRIES_PER_DESCRIPTOR: '100000',
  MAX_ENTRY_LENGTH: '1048576',
  GRPC_MAX_RECEIVE_MESSAGE_LENGTH: String(64 * 1_048_576),
};

describe.each([
  ['lean', 'default'],
  ['grpc-js', 'default'],
  ['lean', 'raised'],
  ['grpc-js', 'raised'],
] as const)('absurd requests (GRPC_SERVER=%s, %s request bounds)', (kind, bounds) => {
  let running: RunningApp;
  let conn: Connection;
  let loaded: ConfigSnapshot;
  const clock = createManualClock();
  const probe = () => running.client.shouldRateLimit(rlsRequest('sentinel', [{ probe: 'p' }]));

  beforeAll(async () => {
    const dir = await ruleDir(FUZZ_RULES);
    running = await startApp(
      [dir],
      { GRPC_SERVER: kind, ...(bounds === 'raised' ? RAISED : {}) },
      { clock: clock.now },
    );
    conn = new Connection(`http://127.0.0.1:${running.port}`);
    loaded = running.app.snapshot();
    await probe();
  });
  afterAll(async () => {
    conn?.close();
    await running?.stop();
  });

  it(
    'each gets a status: served with one status per descriptor, or refused naming the bound',
    async () => {
      await fc.assert(
        fc.asyncProperty(shapeArb, extrasArb, async (shape, extras) => {
          const request = build(shape, extras);
          const { body } = frameMessage(encodeRequest(request), { kind: 'plain' });
          const outcome = await rawCall(await conn.session(), [body], {}, 20_000);
          const expected = new Set<number>([GrpcStatus.OK]);
          if (bounds === 'default') {
            expected.add(GrpcStatus.INVALID_ARGUMENT).add(GrpcStatus.RESOURCE_EXHAUSTED);
          } else if (shape.kind === 'value' && shape.bytes > 1_048_576) {
            expected.clear();
            expected.add(GrpcStatus.INVALID_ARGUMENT);
          }
          const problem = problemWith(outcome, expected);
          if (problem !== undefined) throw new Error(`${shape.kind}: ${problem}`);
          if (outcome.grpcStatus === GrpcStatus.INVALID_ARGUMENT) {
            expect(outcome.grpcMessage).toMatch(
              /MAX_DESCRIPTORS_PER_REQUEST|MAX_ENTRIES_PER_DESCRIPTOR|MAX_ENTRY_LENGTH/,
            );
          }
          if (outcome.grpcStatus === GrpcStatus.RESOURCE_EXHAUSTED) {
            expect(outcome.grpcMessage).toMatch(/GRPC_MAX_RECEIVE_MESSAGE_LENGTH|larger than max/);
          }
          if (outcome.grpcStatus === GrpcStatus.OK) {
            const frames = parseGrpcFrames(outcome.body);
            expect(frames).toHaveLength(1);
            const response = method.responseDeserialize(frames[0]!) as EnvoyResponse;
            expect(['OK', 'OVER_LIMIT']).toContain(response.overall_code);
            expect(response.statuses).toHaveLength(request.descriptors.length);
          }
        }),
        fcParams(4),
      );
    },
    timeoutFor(40_000),
  );

  it('afterwards the config is the one loaded and the counter charged before is exact', async () => {
    expect(running.app.snapshot()).toBe(loaded);
    const after = await probe();
    expect(after.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 8 });
  });
});
