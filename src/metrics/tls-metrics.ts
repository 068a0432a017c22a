/** What the gRPC port's TLS reports (docs/operations-tls.md): reloads and the serving certificate. */
import { Gauge, type Registry } from 'prom-client';
import { labelledCounter } from './plain-metrics.js';

/** What the gRPC port's TLS reports (docs/operations-tls.md). None of the methods may throw. */
export interface TlsMetricsSink {
  /** A changed set of TLS files was `applied`, or `refused` (counted once per broken content). */
  reload(result: 'applied' | 'refused'): void;
  /** The certificate serving new connections now: its serial and end of validity (epoch ms). */
  serving(serialNumber: string, notAfterMs: number): void;
}

/** Register the TLS metrics on `registry` and give the sink that feeds them. */
export function createTlsMetrics(registry: Registry): TlsMetricsSink {
  const tlsReloads = { applied: 0, refused: 0 };
  let tlsServing: { serialNumber: string; notAfterMs: number } | undefined;
  labelledCounter(
    registry,
    'sluice_tls_reloads_total',
    'Changed TLS files of the gRPC port: applied, or refused (the previous certificate kept serving)',
    'result',
    () => Object.entries(tlsReloads),
  );
  new Gauge({
    name: 'sluice_tls_certificate_expiry_timestamp_seconds',
    help: 'End of validity (Unix seconds) of the gRPC port certificate serving new connections, by serial; absent without TLS',
    labelNames: ['serial'],
    registers: [registry],
    collect() {
      this.reset();
      if (tlsServing !== undefined) {
        this.set({ serial: tlsServing.serialNumber }, Math.floor(tlsServing.notAfterMs / 1000));
      }
    },
  });
  return {
    reload(result) {
      tlsReloads[result]++;
    },
    serving(serialNumber, notAfterMs) {
      tlsServing = { serialNumber, notAfterMs };
    },
  };
}
