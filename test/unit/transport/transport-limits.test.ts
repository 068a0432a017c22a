/**
 * The transport limits' settings (docs/operations.md, "Limits and what each protects against"),
 * the shared byte budget, the sweep interval, and the bounded logging of client-caused lines.
 */
import { describe, expect, it } from 'vitest';
import { createLogLimiter, truncateForLog } from '../../../src/logging/limited.js';
import { loadSettings } from '../../../src/settings.js';
import { requestFromJson } from '../../../src/transport/http/json.js';
import {
  DEFAULT_GRPC_LIMITS,
  createRequestBudget,
  sweepIntervalMs,
} from '../../../src/transport/limits.js';

const MiB = 1_048_576;

describe('transport limit settings', () => {
  it('defaults to generous bounds', () => {
    const settings = loadSettings({});
    expect(settings.grpcLimits).toEqual({
      maxConnections: 10_000,
      maxConcurrentStreams: 4096,
      maxConnectionBufferBytes: 64 * MiB,
      requestTimeoutMs: 30_000,
    });
    expect(settings.grpcLimits).toEqual(DEFAULT_GRPC_LIMITS);
    expect(settings.maxRequestBufferBytes).toBe(256 * MiB);
    expect(settings.httpRequestTimeoutMs).toBe(30_000);
  });

  it('grows the byte budgets with a larger GRPC_MAX_RECEIVE_MESSAGE_LENGTH when they are not set', () => {
    const settings = loadSettings({ GRPC_MAX_RECEIVE_MESSAGE_LENGTH: String(64 * MiB) });
    expect(settings.grpcLimits.maxConnectionBufferBytes).toBe(128 * MiB);
    expect(settings.maxRequestBufferBytes).toBe(256 * MiB);
    const half = loadSettings({ GRPC_MAX_RECEIVE_MESSAGE_LENGTH: String(48 * MiB) });
    expect(half.maxRequestBufferBytes).toBe(256 * MiB);
    expect(half.grpcLimits.maxConnectionBufferBytes).toBe(96 * MiB);
  });

  it('reads every setting, durations in the Go format, 0 turning the gRPC time bound off', () => {
    const settings = loadSettings({
      GRPC_MAX_CONNECTIONS: '50',
      GRPC_MAX_CONCURRENT_STREAMS: '100',
      GRPC_MAX_CONNECTION_BUFFER_BYTES: String(8 * MiB),
      MAX_REQUEST_BUFFER_BYTES: String(2 ** 40),
      GRPC_REQUEST_TIMEOUT: '0',
      HTTP_REQUEST_TIMEOUT: '1m',
    });
    expect(settings.grpcLimits).toEqual({
      maxConnections: 50,
      maxConcurrentStreams: 100,
      maxConnectionBufferBytes: 8 * MiB,
      requestTimeoutMs: 0,
    });
    expect(settings.maxRequestBufferBytes).toBe(2 ** 40);
    expect(settings.httpRequestTimeoutMs).toBe(60_000);
  });

  it('refuses bad values, naming each setting', () => {
    let message = '';
    try {
      loadSettings({
        GRPC_MAX_CONNECTIONS: '0',
        GRPC_MAX_CONCURRENT_STREAMS: 'many',
        GRPC_MAX_CONNECTION_BUFFER_BYTES: String(MiB),
        MAX_REQUEST_BUFFER_BYTES: String(2 ** 41),
        GRPC_REQUEST_TIMEOUT: '30',
        HTTP_REQUEST_TIMEOUT: '500ms',
      });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain('GRPC_MAX_CONNECTIONS="0": expected an integer from 1 to 1000000');
    expect(message).toContain('GRPC_MAX_CONCURRENT_STREAMS="many"');
    expect(message).toContain(
      `GRPC_MAX_CONNECTION_BUFFER_BYTES=${MiB}: must be at least GRPC_MAX_RECEIVE_MESSAGE_LENGTH + 64 KiB`,
    );
    expect(message).toContain(`MAX_REQUEST_BUFFER_BYTES="${2 ** 41}": expected an integer`);
    expect(message).toContain('GRPC_REQUEST_TIMEOUT="30": expected a duration');
    expect(message).toContain('HTTP_REQUEST_TIMEOUT="500ms": expected at least 1s');
  });
});

describe('the request byte budget', () => {
  it('takes up to its bound and refuses what would pass it, holding nothing then', () => {
    const budget = createRequestBudget(100);
    expect(budget.take(60)).toBe(true);
    expect(budget.take(41)).toBe(false);
    expect(budget.heldBytes).toBe(60);
    expect(budget.take(40)).toBe(true);
    expect(budget.heldBytes).toBe(100);
    budget.release(100);
    expect(budget.heldBytes).toBe(0);
    expect(budget.limitBytes).toBe(100);
  });

  it('sweeps every quarter of the time bound, between 10 ms and 1 s', () => {
    expect(sweepIntervalMs(30_000)).toBe(1_000);
    expect(sweepIntervalMs(2_000)).toBe(500);
    expect(sweepIntervalMs(20)).toBe(10);
  });
});

describe('bounded logging', () => {
  it('allows a few lines per cause and interval, then says how many it dropped', () => {
    let now = 0;
    const limit = createLogLimiter({ lines: 2, intervalMs: 1_000, now: () => now });
    expect([limit('a'), limit('a'), limit('a'), limit('a')]).toEqual([0, 0, undefined, undefined]);
    // Causes are counted apart.
    expect(limit('b')).toBe(0);
    now = 999;
    expect(limit('a')).toBeUndefined();
    now = 1_000;
    expect(limit('a')).toBe(3);
    expect(limit('a')).toBe(0);
    expect(limit('a')).toBeUndefined();
  });

  it('defaults to 5 lines a minute', () => {
    let now = 0;
    const limit = createLogLimiter({ now: () => now });
    const written = Array.from({ length: 10 }, () => limit('x')).filter((d) => d !== undefined);
    expect(written).toHaveLength(5);
    now = 59_999;
    expect(limit('x')).toBeUndefined();
    now = 60_000;
    expect(limit('x')).toBe(6);
  });

  it('cuts client text to 64 characters and says how long it was', () => {
    expect(truncateForLog('short')).toBe('short');
    expect(truncateForLog('y'.repeat(64))).toBe('y'.repeat(64));
    expect(truncateForLog('y'.repeat(65))).toBe(`${'y'.repeat(64)}... (65 chars)`);
    expect(truncateForLog('z'.repeat(300), 10)).toBe(`${'z'.repeat(10)}... (300 chars)`);
  });

  it("quotes a /json body's unknown field names and units short", () => {
    const name = 'n'.repeat(100_000);
    expect(() => requestFromJson(`{"${name}":1}`)).toThrow(
      `request: unknown field "${'n'.repeat(64)}... (100000 chars)"`,
    );
    const unit = 'U'.repeat(1_000);
    const body = JSON.stringify({
      domain: 'd',
      descriptors: [{ entries: [], limit: { requestsPerUnit: 1, unit } }],
    });
    expect(() => requestFromJson(body)).toThrow(/unknown unit "U{64}\.\.\. \(1000 chars\)"$/);
  });
});
