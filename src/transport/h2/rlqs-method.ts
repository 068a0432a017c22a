/**
 * The lean server's RateLimitQuotaService/StreamRateLimitQuotas (docs/rlqs.md): a bidirectional
 * stream that lives as long as Envoy keeps it. Each report message goes to the quota service;
 * its answers are written when the client reads (HTTP/2 flow control), else they wait in the
 * service, the latest per bucket. The method is exempt from `GRPC_REQUEST_TIMEOUT` (its request
 * never ends by design); when the server closes, every stream is ended OK so Envoy reconnects.
 */
import type { Logger } from '../../logging/logger.js';
import type { QuotaService } from '../../rlqs/quota-service.js';
import type { QuotaStream } from '../../rlqs/quota-stream.js';
import { GrpcStatus } from '../status.js';
import { REFUSAL_STATUS, decodeUsageReports, encodeQuotaResponse } from '../rlqs-wire.js';
import { fail, finishOk, respondOk } from './answers.js';
import { Kind, type Call, type Method } from './call.js';
import { frame } from './framing.js';

/** The method and what the server does with its streams at close. */
export interface RlqsMethod {
  /** The method table's entry. */
  readonly method: Method;
  /** End every open stream with OK (the server is closing). */
  endAll(): void;
}

/** The StreamRateLimitQuotas method over `quota`. */
export function createRlqsMethod(quota: QuotaService, logger: Logger): RlqsMethod {
  const open = new Map<Call, QuotaStream>();

  function start(call: Call): QuotaStream | undefined {
    const stream = call.stream;
    respondOk(stream);
    const quotaStream = quota.open({
      writable: () => !call.done && !stream.destroyed && !stream.writableNeedDrain,
      send: (actions) => {
        stream.write(frame(encodeQuotaResponse(actions)));
      },
      end: (reason, message) => {
        logger.debug({ reason }, message);
        fail(call, REFUSAL_STATUS[reason], message);
      },
    });
    if (quotaStream === undefined) return undefined;
    open.set(call, quotaStream);
    const onDrain = (): void => quotaStream.flush();
    stream.on('drain', onDrain);
    // The stream's close (either side, reset, connection gone) returns its shares.
    call.unwatch = () => {
      stream.removeListener('drain', onDrain);
      open.delete(call);
      quotaStream.close();
    };
    return quotaStream;
  }

  function handle(call: Call, message: Buffer): void {
    let reports;
    try {
      reports = decodeUsageReports(message);
    } catch (err) {
      fail(call, GrpcStatus.INVALID_ARGUMENT, (err as Error).message);
      return;
    }
    const quotaStream = open.get(call) ?? start(call);
    quotaStream?.report(reports);
  }

  return {
    method: { kind: Kind.Bidi, handle, untimed: true },
    endAll() {
      for (const call of [...open.keys()]) finishOk(call);
    },
  };
}
