/**
 * The Rate Limit Quota Service on a real gRPC port (the lean server, and grpc-js in the
 * `integration-grpc-js` run): a client built from Envoy's OWN published rlqs.proto streams
 * reports and decodes the assignments; the stream outlives GRPC_REQUEST_TIMEOUT; a client that
 * never reads its answers makes the server stop writing, holding at most one action per bucket.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reflectionDescriptors } from '../../src/transport/grpc/reflection.js';
import { METHOD_PATHS, RLQS_SERVICE_NAME } from '../../src/transport/rpc.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';
import {
  createEnvoyRlqsClient,
  createEnvoyRlsClient,
  loadEnvoyRlqs,
  rlsRequest,
  type EnvoyRlqsClient,
} from '../helpers/envoy-rls-client.js';
import { connectHttp2, grpcFrame, pingHttp2, startRawCall } from '../helpers/grpc-wire.js';
import { waitFor } from '../helpers/processes.js';

const RULES = `
domain: rlqs
descriptors:
  - key: name
    descriptors:
      - key: api_key
        rate_limit: { unit: minute, requests_per_unit: 600 }
`;

const reportsType = loadEnvoyRlqs().StreamRateLimitQuotas!;

/** A report of `count` buckets {name: n, api_key: k<i>} (Envoy's proto, as Envoy sends it). */
function report(first: number, count: number, allowed = 1): object {
  return {
    domain: 'rlqs',
    bucket_quota_usages: Array.from({ length: count }, (_, i) => ({
      bucket_id: { bucket: { name: 'n', api_key: `k${first + i}` } },
      time_elapsed: { seconds: 1, nanos: 0 },
      num_requests_allowed: allowed,
      num_requests_denied: 0,
    })),
  };
}

/**
 * For one describe block: an app on RULES with `env` and a quota client on its gRPC port, started
 * before the block's tests and stopped after them.
 */
function useRlqsApp(env: Record<string, string>): { running: RunningApp; client: EnvoyRlqsClient } {
  const setup = {} as { running: RunningApp; client: EnvoyRlqsClient };
  beforeAll(async () => {
    setup.running = await startApp([await ruleDir({ 'rlqs.yaml': RULES })], env);
    setup.client = createEnvoyRlqsClient(`127.0.0.1:${setup.running.port}`);
  });
  afterAll(async () => {
    setup.client?.close();
    await setup.running?.stop();
  });
  return setup;
}

describe('RLQS on the gRPC port', () => {
  const rlqs = useRlqsApp({ GRPC_REQUEST_TIMEOUT: '1s', RLQS_MAX_BUCKETS_PER_STREAM: '20000' });

  it('is listed by server reflection', () => {
    expect(reflectionDescriptors().services).toContain(RLQS_SERVICE_NAME);
  });

  it("answers a report with an assignment Envoy's proto decodes, and outlives GRPC_REQUEST_TIMEOUT", async () => {
    const { call, answers } = rlqs.client.openStream<any>();
    call.write(report(0, 1));
    await waitFor('the first assignment', () => answers.length === 1, { timeoutMs: 5_000 });
    const action = answers[0].bucket_action[0];
    expect(action.bucket_id.bucket).toEqual({ name: 'n', api_key: 'k0' });
    expect(action.bucket_action).toBe('quota_assignment_action');
    const assignment = action.quota_assignment_action;
    expect(assignment.assignment_time_to_live).toEqual({ seconds: 10, nanos: 0 });
    expect(assignment.rate_limit_strategy.token_bucket).toEqual({
      max_tokens: 600,
      tokens_per_fill: { value: 600 },
      fill_interval: { seconds: 60, nanos: 0 },
    });

    // An unfinished unary call is refused by the GRPC_REQUEST_TIMEOUT sweep; the RLQS stream,
    // open longer, is not: it still answers a report with a new bucket.
    const session = await connectHttp2(`http://127.0.0.1:${rlqs.running.port}`, 5_000);
    try {
      const stuck = startRawCall(session, METHOD_PATHS.shouldRateLimit, 10_000);
      await stuck.write(Buffer.from([0, 0, 0, 0, 10]));
      const refused = await stuck.result;
      // Lean: DEADLINE_EXCEEDED; grpc-js: the guard resets the stream.
      expect(
        refused.grpcStatus === '4' || /reset/.test(refused.failure ?? ''),
        JSON.stringify(refused),
      ).toBe(true);
    } finally {
      session.destroy();
    }
    call.write(report(1, 1));
    await waitFor('the second bucket assigned on the same stream', () => answers.length === 2, {
      timeoutMs: 5_000,
    });
    expect(rlqs.running.app.quota.streamCount).toBe(1);
    call.end();
    await waitFor('the stream closed', () => rlqs.running.app.quota.streamCount === 0, {
      timeoutMs: 5_000,
    });
  });

  it('a client that never reads: the server stops writing and holds one action per bucket', async () => {
    const session = await connectHttp2(`http://127.0.0.1:${rlqs.running.port}`, 5_000);
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': METHOD_PATHS.streamRateLimitQuotas,
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      stream.on('error', () => {});
      // Never read: the answers fill the flow-control window, then the server's buffer.
      stream.pause();
      const serialize = reportsType.requestSerialize as (value: object) => Buffer;
      // 20 reports of 500 new buckets each: 10000 assignments, far more than a 64 KiB window.
      for (let i = 0; i < 20; i++) stream.write(grpcFrame(serialize(report(i * 500, 500))));
      const quota = rlqs.running.app.quota;
      const reports = (): number => rlqs.running.app.metrics.rlqs.reports;
      // Either the server stopped reading the client's reports (the lean server pauses a call
      // whose answers are not read; HTTP/2 flow control then holds the client back) or it reads
      // on and holds the answers back (grpc-js). A PING is answered after every frame before it.
      await waitFor(
        'the server to stop writing to the client that does not read',
        async () => {
          await pingHttp2(session, 5_000);
          return quota.pendingCount > 0 || (reports() > 0 && reports() < 20);
        },
        { timeoutMs: 10_000 },
      );
      await pingHttp2(session, 5_000);
      // What waits is bounded by the stream's buckets, whatever the client sends.
      expect(quota.pendingCount).toBeLessThanOrEqual(quota.bucketCount);
      const metrics = await (
        await fetch(`http://127.0.0.1:${rlqs.running.httpPort}/metrics`)
      ).text();
      const held = Number(/^sluice_request_buffer_bytes (\d+)/m.exec(metrics)?.[1]);
      expect(held).toBeLessThan(4 * 1024 * 1024);
      stream.close();
    } finally {
      session.destroy();
    }
    await waitFor('the stream closed', () => rlqs.running.app.quota.streamCount === 0, {
      timeoutMs: 5_000,
    });
    expect(rlqs.running.app.quota.bucketCount).toBe(0);
    expect(rlqs.running.app.quota.pendingCount).toBe(0);
  });
});

describe('RLQS: a hostile stream flooding reports on shared buckets', () => {
  const rlqs = useRlqsApp({});

  it('ShouldRateLimit on another connection is still answered within its deadline', async () => {
    // 50 streams on the same 1000 buckets: every report of one of them touches 50000 records.
    const streams = Array.from({ length: 50 }, () => rlqs.client.openStream());
    for (const { call } of streams) call.write(report(0, 1_000));
    const counters = rlqs.running.app.metrics.rlqs;
    await waitFor('50 streams on 1000 shared buckets', () => counters.buckets === 50_000, {
      timeoutMs: 30_000,
    });
    // Its own connection (grpc-js would otherwise share the RLQS client's).
    const rls = createEnvoyRlsClient(`127.0.0.1:${rlqs.running.port}`, undefined, {
      'grpc.use_local_subchannel_pool': 1,
    });
    try {
      const hostile = streams[0]!.call;
      const target = counters.reports + 200;
      for (let i = 0; i < 200; i++) hostile.write(report(0, 1_000, i % 2 === 0 ? 1 : 1_000));
      let answered = 0;
      for (let i = 0; i < 500 && counters.reports < target; i++) {
        // Rejects with DEADLINE_EXCEEDED if a report's work holds the event loop for a second.
        const answer = await rls.shouldRateLimit(rlsRequest('rlqs', [{ name: 'n' }]), 1_000);
        expect(answer.overall_code).toBe('OK');
        answered++;
      }
      expect(answered).toBeGreaterThan(0);
      await waitFor('the flood handled', () => counters.reports >= target, { timeoutMs: 30_000 });
      expect(rlqs.running.app.quota.streamCount).toBe(50);
    } finally {
      rls.close();
      for (const { call } of streams) call.end();
    }
    await waitFor('the streams closed', () => rlqs.running.app.quota.streamCount === 0, {
      timeoutMs: 10_000,
    });
  });
});

describe('RLQS bounds on the gRPC port', () => {
  const rlqs = useRlqsApp({
    RLQS_MAX_STREAMS: '1',
    RLQS_MAX_BUCKETS_PER_STREAM: '5',
    GRPC_MAX_RECEIVE_MESSAGE_LENGTH: '65536',
  });

  /** Open a stream, write `messages`, and resolve with the status it ends with. */
  function statusOf(...messages: object[]): Promise<grpc.StatusObject> {
    const { call } = rlqs.client.openStream();
    const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    for (const message of messages) call.write(message);
    return ended;
  }

  it('ends a stream past RLQS_MAX_BUCKETS_PER_STREAM with RESOURCE_EXHAUSTED', async () => {
    const status = await statusOf(report(0, 6));
    expect(status.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(status.details).toContain('RLQS_MAX_BUCKETS_PER_STREAM');
    expect(rlqs.running.app.quota.bucketCount).toBe(0);
  });

  it('ends a report larger than GRPC_MAX_RECEIVE_MESSAGE_LENGTH with RESOURCE_EXHAUSTED', async () => {
    // One bucket with a 100 KB value: refused by its size before it is decoded.
    const huge = {
      domain: 'rlqs',
      bucket_quota_usages: [
        {
          bucket_id: { bucket: { name: 'x'.repeat(100_000) } },
          time_elapsed: { seconds: 1 },
          num_requests_allowed: 1,
        },
      ],
    };
    const status = await statusOf(huge);
    expect(status.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(rlqs.running.app.quota.bucketCount).toBe(0);
  });

  it('refuses a second stream past RLQS_MAX_STREAMS; the first keeps working', async () => {
    const { call: first, answers } = rlqs.client.openStream();
    first.write(report(0, 1));
    await waitFor('the first stream assigned', () => answers.length === 1, { timeoutMs: 5_000 });
    const status = await statusOf(report(1, 1));
    expect(status.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(status.details).toBe(
      'RLQS stream refused: 1 streams are open (RLQS_MAX_STREAMS); retry later',
    );
    first.write(report(2, 1));
    await waitFor('the first stream still answered', () => answers.length === 2, {
      timeoutMs: 5_000,
    });
    first.end();
    await waitFor('closed', () => rlqs.running.app.quota.streamCount === 0, { timeoutMs: 5_000 });
    expect(rlqs.running.app.metrics.rlqs.streamsRefused).toBe(2);
  });
});
