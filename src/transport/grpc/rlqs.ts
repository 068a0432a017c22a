/**
 * RateLimitQuotaService/StreamRateLimitQuotas on the @grpc/grpc-js server (docs/rlqs.md): the
 * same quota service and wire codec as the lean server's (../h2/rlqs-method.ts). Answers are
 * written while the call's buffer has room; otherwise they wait in the service, the latest per
 * bucket, until 'drain'.
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../../logging/logger.js';
import type { QuotaService } from '../../rlqs/quota-service.js';
import { METHOD_PATHS } from '../rpc.js';
import { REFUSAL_STATUS, decodeUsageReports, encodeQuotaResponse } from '../rlqs-wire.js';

/** What the server does with the open streams. */
export interface GrpcRlqs {
  /** End every open stream with OK (the server is closing), so Envoy reconnects. */
  endAll(): void;
}

type Duplex = grpc.ServerDuplexStream<Uint8Array, Uint8Array>;

/** Register the method on `server`. */
export function addRlqsService(server: grpc.Server, quota: QuotaService, logger: Logger): GrpcRlqs {
  const open = new Set<Duplex>();
  const definition: grpc.ServiceDefinition = {
    StreamRateLimitQuotas: {
      path: METHOD_PATHS.streamRateLimitQuotas,
      requestStream: true,
      responseStream: true,
      // Bytes in and out: decoding happens in the handler, so a malformed message fails the
      // call with a message instead of grpc-js's generic one.
      requestDeserialize: (bytes: Buffer) => bytes,
      requestSerialize: (value: Uint8Array) => Buffer.from(value),
      responseSerialize: (value: Uint8Array) => Buffer.from(value),
      responseDeserialize: (bytes: Buffer) => bytes,
    },
  };
  server.addService(definition, {
    StreamRateLimitQuotas(call: Duplex): void {
      let ended = false;
      const endWith = (code: number, details: string): void => {
        if (ended) return;
        ended = true;
        call.emit('error', { code, details });
      };
      const stream = quota.open({
        writable: () => !ended && !call.destroyed && !call.writableNeedDrain,
        send: (actions) => {
          call.write(encodeQuotaResponse(actions));
        },
        end: (reason, message) => {
          logger.debug({ reason }, message);
          endWith(REFUSAL_STATUS[reason], message);
        },
      });
      if (stream === undefined) return;
      open.add(call);
      const close = (): void => {
        if (!open.delete(call)) return;
        stream.close();
      };
      call.on('data', (bytes: Uint8Array) => {
        if (ended) return;
        let reports;
        try {
          reports = decodeUsageReports(bytes);
        } catch (err) {
          endWith(grpc.status.INVALID_ARGUMENT, (err as Error).message);
          close();
          return;
        }
        stream.report(reports);
      });
      call.on('drain', () => stream.flush());
      call.on('end', () => {
        close();
        if (!ended) {
          ended = true;
          call.end();
        }
      });
      call.on('cancelled', close);
      call.on('close', close);
      call.on('error', close);
    },
  });
  return {
    endAll() {
      // Each call's 'close' then returns its shares.
      for (const call of [...open]) call.end();
    },
  };
}
