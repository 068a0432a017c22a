/**
 * The gRPC port's connection limits: the reference's GRPC_MAX_CONNECTION_AGE(_GRACE) and sluice's
 * keepalive and idle settings, in the reference's duration format.
 */
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/settings.js';
import { connectionOptions } from '../../src/transport/grpc/server.js';

describe('gRPC connection settings', () => {
  it("defaults to the reference's connection age and grace, a 2 h keepalive and no idle limit", () => {
    expect(loadSettings({}).grpcConnections).toEqual({
      maxConnectionAgeMs: 24 * 3_600_000,
      maxConnectionAgeGraceMs: 3_600_000,
      keepaliveTimeMs: 2 * 3_600_000,
      keepaliveTimeoutMs: 20_000,
      maxConnectionIdleMs: 0,
    });
  });

  it('reads Go durations, 0 meaning never', () => {
    expect(
      loadSettings({
        GRPC_MAX_CONNECTION_AGE: '1h30m',
        GRPC_MAX_CONNECTION_AGE_GRACE: '0',
        GRPC_KEEPALIVE_TIME: '45s',
        GRPC_KEEPALIVE_TIMEOUT: '500ms',
        GRPC_MAX_CONNECTION_IDLE: '5m',
      }).grpcConnections,
    ).toEqual({
      maxConnectionAgeMs: 5_400_000,
      maxConnectionAgeGraceMs: 0,
      keepaliveTimeMs: 45_000,
      keepaliveTimeoutMs: 500,
      maxConnectionIdleMs: 300_000,
    });
  });

  it('refuses what is not a duration or is beyond what a timer can wait, naming each', () => {
    expect(() =>
      loadSettings({
        GRPC_MAX_CONNECTION_AGE: '10',
        GRPC_KEEPALIVE_TIME: '-1s',
        GRPC_MAX_CONNECTION_IDLE: '600h',
      }),
    ).toThrow(
      /GRPC_MAX_CONNECTION_AGE="10": expected a duration[\s\S]*GRPC_KEEPALIVE_TIME="-1s"[\s\S]*GRPC_MAX_CONNECTION_IDLE="600h"/,
    );
    // The largest timer delay is accepted.
    expect(
      loadSettings({ GRPC_MAX_CONNECTION_IDLE: '596h' }).grpcConnections.maxConnectionIdleMs,
    ).toBe(596 * 3_600_000);
  });

  it('gives grpc-js every limit that is not 0 under its channel option name', () => {
    expect(
      connectionOptions({
        maxConnectionAgeMs: 1_000,
        maxConnectionAgeGraceMs: 0,
        keepaliveTimeMs: 2_000,
        keepaliveTimeoutMs: 3_000,
        maxConnectionIdleMs: 4_000,
      }),
    ).toEqual({
      'grpc.max_connection_age_ms': 1_000,
      'grpc.keepalive_time_ms': 2_000,
      'grpc.keepalive_timeout_ms': 3_000,
      'grpc.max_connection_idle_ms': 4_000,
    });
    expect(connectionOptions(undefined)).toEqual({});
  });
});
