/**
 * Tracing's export path against receivers on loopback, without Jaeger: OTLP/HTTP sent as
 * protobuf (as the reference sends it), the `request string` attribute cut at its bound, the
 * export queue bounded against a collector that accepts and never answers (drops counted in
 * `sluice_tracing_spans_dropped_total`), export failures logged once and not per export, and the
 * endpoint named in the `tracing on` line (issue 31 item 3, issue 32 item 6).
 */
import http from 'node:http';
import net from 'node:net';
import protobuf from 'protobufjs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/logging/logger.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import type { RateLimitRequest } from '../../src/model.js';
import {
  MAX_ATTRIBUTE_LENGTH,
  MAX_HELD_SPANS,
  createTracing,
  type Tracing,
  type TracingSettings,
} from '../../src/tracing/tracing.js';
import { capturingLogger } from '../helpers/app.js';

const SETTINGS: TracingSettings = {
  protocol: 'http',
  serviceName: 'sluice-under-test',
  serviceNamespace: '',
  serviceInstanceId: 'instance-1',
  samplingRate: 1,
};

/** The OTLP trace request, only the fields these tests read (field numbers as in OTLP). */
const OTLP = protobuf.Root.fromJSON({
  nested: {
    ExportTraceServiceRequest: {
      fields: { resourceSpans: { rule: 'repeated', type: 'ResourceSpans', id: 1 } },
    },
    ResourceSpans: { fields: { scopeSpans: { rule: 'repeated', type: 'ScopeSpans', id: 2 } } },
    ScopeSpans: { fields: { spans: { rule: 'repeated', type: 'Span', id: 2 } } },
    Span: {
      fields: {
        name: { type: 'string', id: 5 },
        attributes: { rule: 'repeated', type: 'KeyValue', id: 9 },
      },
    },
    KeyValue: { fields: { key: { type: 'string', id: 1 }, value: { type: 'AnyValue', id: 2 } } },
    AnyValue: {
      fields: { stringValue: { type: 'string', id: 1 }, intValue: { type: 'int64', id: 3 } },
    },
  },
}).lookupType('ExportTraceServiceRequest');

interface ExportedSpan {
  name: string;
  attributes: { key: string; value: { stringValue?: string } }[];
}

/** The spans of one export request, decoded as its content type says. */
function spansOf(body: Buffer, contentType: string | undefined): ExportedSpan[] {
  const decoded = (
    contentType === 'application/json'
      ? JSON.parse(body.toString('utf8'))
      : OTLP.toObject(OTLP.decode(body), { defaults: true })
  ) as { resourceSpans: { scopeSpans: { spans: ExportedSpan[] }[] }[] };
  return decoded.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
}

const attribute = (span: ExportedSpan, key: string): string | undefined =>
  span.attributes.find((a) => a.key === key)?.value.stringValue;

interface Receiver {
  readonly url: string;
  readonly requests: { path: string; contentType: string | undefined; body: Buffer }[];
  /** The status it answers with from now on. */
  status: number;
  close(): Promise<void>;
}

/** An OTLP/HTTP receiver on a free loopback port that records every request. */
async function startReceiver(): Promise<Receiver> {
  const requests: Receiver['requests'] = [];
  const receiver = {
    url: '',
    requests,
    status: 200,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const contentType = req.headers['content-type'];
      requests.push({ path: req.url ?? '', contentType, body: Buffer.concat(chunks) });
      res.writeHead(receiver.status, { 'content-type': contentType ?? 'application/x-protobuf' });
      res.end(contentType === 'application/json' ? '{}' : '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  receiver.url = `http://127.0.0.1:${port}`;
  return receiver;
}

const request = (domain: string, values: string[]): RateLimitRequest => ({
  domain,
  descriptors: values.map((value) => ({
    entries: [{ key: 'api_key', value }],
    limit: undefined,
    hitsAddend: undefined,
  })),
  hitsAddend: 0,
});

const cleanups: (() => Promise<unknown>)[] = [];
const savedEnv = { ...process.env };
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  for (const key of Object.keys(process.env)) {
    if (key.startsWith('OTEL_') && savedEnv[key] === undefined) delete process.env[key];
  }
});

/** Tracing exporting to `endpoint` (the OTEL_EXPORTER_OTLP_ENDPOINT the exporter reads). */
async function tracingTo(
  endpoint: string,
  extra: Partial<Parameters<typeof createTracing>[0]> = {},
): Promise<Tracing> {
  process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = endpoint;
  const tracing = await createTracing({
    settings: SETTINGS,
    logger: createLogger({ level: 'fatal', format: 'json' }),
    ...extra,
  });
  cleanups.push(() => tracing.shutdown(1_000));
  return tracing;
}

const call = (tracing: Tracing, req: RateLimitRequest) =>
  tracing.traceCall(req, undefined, () => Promise.resolve(1));

describe('OTLP/HTTP export', () => {
  it('sends protobuf (application/x-protobuf) to /v1/traces, as the reference', async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const tracing = await tracingTo(receiver.url);
    await call(tracing, request('traced', ['k']));
    await tracing.shutdown(5_000);
    expect(receiver.requests.length).toBeGreaterThan(0);
    const [first] = receiver.requests;
    expect(first!.path).toBe('/v1/traces');
    expect(first!.contentType).toBe('application/x-protobuf');
    const spans = receiver.requests.flatMap((r) => spansOf(r.body, r.contentType));
    const execution = spans.find((s) => s.name === 'ShouldRateLimit Execution');
    expect(execution).toBeDefined();
    expect(attribute(execution!, 'request string')).toBe(
      'domain:"traced" descriptors:{entries:{key:"api_key" value:"k"}}',
    );
    expect(attribute(execution!, 'domain')).toBe('traced');
  });

  it('cuts the request string (and every attribute) at MAX_ATTRIBUTE_LENGTH', async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const tracing = await tracingTo(receiver.url);
    // 16 values of 4096 characters (what MAX_ENTRY_LENGTH allows) and a long domain.
    const values = Array.from({ length: 16 }, (_, i) => String(i).repeat(4096).slice(0, 4096));
    await call(tracing, request('d'.repeat(10_000), values));
    await tracing.shutdown(5_000);
    const spans = receiver.requests.flatMap((r) => spansOf(r.body, r.contentType));
    const execution = spans.find((s) => s.name === 'ShouldRateLimit Execution')!;
    const text = attribute(execution, 'request string') ?? '';
    expect(text.length, `request string of ${text.length} characters`).toBe(MAX_ATTRIBUTE_LENGTH);
    expect(text.startsWith('domain:"ddd')).toBe(true);
    expect(attribute(execution, 'domain')?.length).toBe(MAX_ATTRIBUTE_LENGTH);
    const bytes = receiver.requests.reduce((n, r) => n + r.body.length, 0);
    expect(bytes, `${bytes} bytes exported`).toBeLessThan(4 * MAX_ATTRIBUTE_LENGTH + 2_000);
  });
});

describe('a collector that accepts and never answers', () => {
  it('holds at most MAX_HELD_SPANS spans and counts the rest as dropped', async () => {
    const sockets: net.Socket[] = [];
    const server = net.createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    // No export may end (by its timeout) while the calls below run.
    process.env['OTEL_EXPORTER_OTLP_TIMEOUT'] = '600000';
    const metrics = createMetrics({ nearLimitRatio: 0.8, processMetrics: false });
    const tracing = await tracingTo(
      `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
      {
        metrics: metrics.tracing,
      },
    );
    const calls = 3_000; // two spans each
    for (let i = 0; i < calls; i++) await call(tracing, request('traced', [`k${i}`]));
    // The first batch went out (and hangs): the collector has a connection.
    await vi.waitFor(() => expect(sockets.length).toBeGreaterThan(0), { timeout: 10_000 });
    const text = await metrics.render();
    const dropped = /sluice_tracing_spans_dropped_total\{reason="queue_full"\} (\d+)/.exec(text);
    expect(
      dropped?.[1],
      text
        .split('\n')
        .filter((l) => l.includes('tracing'))
        .join('\n'),
    ).toBe(String(2 * calls - MAX_HELD_SPANS));
    // The process holds nothing more: shutting down is bounded and drops what is held.
    await tracing.shutdown(100);
  });
});

describe('export failures and the start line', () => {
  it('names the endpoint, warns once while exports fail, and says when they work again', async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    receiver.status = 500;
    const { logger, lines } = capturingLogger();
    let now = 1_000_000;
    const metrics = createMetrics({ nearLimitRatio: 0.8, processMetrics: false });
    const tracing = await tracingTo(receiver.url, {
      logger,
      metrics: metrics.tracing,
      now: () => now,
    });
    const on = lines.find((l) => l['msg'] === 'tracing on');
    expect(on?.['endpoint']).toBe(`${receiver.url}/v1/traces`);

    const warnings = () => lines.filter((l) => l['level'] === 40);
    for (let round = 0; round < 5; round++) {
      await call(tracing, request('traced', ['k']));
      await tracing.flush();
    }
    expect(receiver.requests.length).toBe(5);
    expect(warnings(), JSON.stringify(lines)).toHaveLength(1);
    expect(String(warnings()[0]!['msg'])).toContain(`${receiver.url}/v1/traces`);
    expect(await metrics.render()).toContain(
      'sluice_tracing_spans_dropped_total{reason="export_failed"} 10',
    );

    receiver.status = 200;
    await call(tracing, request('traced', ['k']));
    await tracing.flush();
    expect(
      lines.filter((l) => String(l['msg']).startsWith('tracing export works again')),
    ).toHaveLength(1);

    // Failing again within a minute of the warning: no second warning (a flapping collector
    // cannot flood the log) ...
    receiver.status = 500;
    now += 30_000;
    await call(tracing, request('traced', ['k']));
    await tracing.flush();
    expect(warnings()).toHaveLength(1);
    // ... and after it, one more.
    receiver.status = 200;
    await call(tracing, request('traced', ['k']));
    await tracing.flush();
    receiver.status = 500;
    now += 60_000;
    await call(tracing, request('traced', ['k']));
    await tracing.flush();
    expect(warnings()).toHaveLength(2);
    // A failure that began too soon after a warning is warned about once it lasts past the
    // minute: silence never hides a failure that goes on.
    receiver.status = 200;
    await call(tracing, request('traced', ['k']));
    await tracing.flush();
    receiver.status = 500;
    now += 10_000;
    await call(tracing, request('traced', ['k']));
    await tracing.flush();
    expect(warnings()).toHaveLength(2);
    now += 50_000;
    await call(tracing, request('traced', ['k']));
    await tracing.flush();
    expect(warnings()).toHaveLength(3);
  });
});
