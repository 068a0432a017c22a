import { describe, expect, it } from 'vitest';
import { otlpEndpoint } from '../../../src/tracing/tracing.js';

describe('the endpoint the `tracing on` line names', () => {
  it('follows the OTLP exporter rules for http', () => {
    expect(otlpEndpoint('http', {})).toBe('http://localhost:4318/v1/traces');
    expect(otlpEndpoint('http', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBe(
      'http://c:4318/v1/traces',
    );
    expect(otlpEndpoint('http', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/otlp/' })).toBe(
      'http://c:4318/otlp/v1/traces',
    );
    // The traces variable is used as given, and wins.
    expect(
      otlpEndpoint('http', {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: ' http://t:9/traces ',
      }),
    ).toBe('http://t:9/traces');
    expect(otlpEndpoint('http', { OTEL_EXPORTER_OTLP_ENDPOINT: '  ' })).toBe(
      'http://localhost:4318/v1/traces',
    );
  });

  it('and for grpc, which adds no path', () => {
    expect(otlpEndpoint('grpc', {})).toBe('http://localhost:4317');
    expect(otlpEndpoint('grpc', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317' })).toBe(
      'http://c:4317',
    );
    expect(
      otlpEndpoint('grpc', {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:4317',
      }),
    ).toBe('http://t:4317');
  });
});
