import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rlsRequest } from '../helpers/envoy-rls-client.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';

describe('bad requests get INVALID_ARGUMENT and never crash the server', () => {
  let running: RunningApp;

  beforeAll(async () => {
    const dir = await ruleDir({
      'b.yaml':
        'domain: bad\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 100}\n',
    });
    running = await startApp([dir], {
      MAX_DESCRIPTORS_PER_REQUEST: '4',
      MAX_ENTRIES_PER_DESCRIPTOR: '3',
      MAX_ENTRY_LENGTH: '64',
      GRPC_MAX_RECEIVE_MESSAGE_LENGTH: '65536',
    });
  });
  afterAll(async () => {
    await running.stop();
  });

  const invalid = (pattern: RegExp) =>
    expect.objectContaining({
      code: grpc.status.INVALID_ARGUMENT,
      details: expect.stringMatching(pattern),
    });

  it('refuses too many descriptors, too many entries and too long values, naming the setting', async () => {
    const many = Array.from({ length: 5 }, (_, i) => ({ k: String(i) }));
    await expect(running.client.shouldRateLimit(rlsRequest('bad', many))).rejects.toEqual(
      invalid(/5 descriptors; at most 4 .*MAX_DESCRIPTORS_PER_REQUEST/),
    );
    await expect(
      running.client.shouldRateLimit(rlsRequest('bad', [{ a: '1', b: '2', c: '3', d: '4' }])),
    ).rejects.toEqual(invalid(/4 entries; at most 3 .*MAX_ENTRIES_PER_DESCRIPTOR/));
    await expect(
      running.client.shouldRateLimit(rlsRequest('bad', [{ k: 'x'.repeat(65) }])),
    ).rejects.toEqual(invalid(/longer than 64 characters \(MAX_ENTRY_LENGTH\)/));
  });

  it('refuses bytes that are not a RateLimitRequest', async () => {
    // Field 2 (a descriptor) announces 5 bytes but only 1 follows.
    const truncated = Buffer.from([0x0a, 0x01, 0x64, 0x12, 0x05, 0x01]);
    // The reference's text (grpc-go's prefix, protobuf-go's reason).
    const text =
      /^grpc: error unmarshalling request: proto: cannot parse invalid wire-format data$/;
    await expect(running.client.sendRaw(truncated)).rejects.toEqual(invalid(text));
    // An unknown field 99 with wire type 7, which does not exist.
    await expect(running.client.sendRaw(Buffer.from([0x9f, 0x06, 0x01]))).rejects.toEqual(
      invalid(text),
    );
  });

  it('refuses messages above GRPC_MAX_RECEIVE_MESSAGE_LENGTH without reading them', async () => {
    const huge = Buffer.alloc(70_000, 0x41);
    await expect(running.client.sendRaw(huge)).rejects.toMatchObject({
      code: grpc.status.RESOURCE_EXHAUSTED,
    });
  });

  it('ignores unknown fields and treats absent fields as proto3 zero values', async () => {
    // domain "bad", one descriptor {k: v}, plus unknown field 99 (varint 1).
    const known = Buffer.from([
      0x0a,
      0x03,
      ...Buffer.from('bad'),
      0x12,
      0x08,
      0x0a,
      0x06,
      0x0a,
      0x01,
      0x6b,
      0x12,
      0x01,
      0x76,
    ]);
    const unknown = Buffer.from([0x98, 0x06, 0x01]);
    const response = await running.client.sendRaw(Buffer.concat([known, unknown]));
    expect(response.overall_code).toBe('OK');
    expect(response.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 99 });
  });

  it('keeps serving after all of the above', async () => {
    const response = await running.client.shouldRateLimit(rlsRequest('bad', [{ k: 'after' }]));
    expect(response.overall_code).toBe('OK');
  });
});
