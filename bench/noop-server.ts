/**
 * The baseline server of row 2: RateLimitService/ShouldRateLimit from sluice's own proto on a
 * plain grpc-js server (same message size limit), whose handler answers a fixed response chosen
 * by the number of descriptors in the request. Request decoding and response encoding are the
 * same as sluice's; the handler does nothing else.
 *
 * Usage: `node noop-server.js RESPONSES_JSON` where RESPONSES_JSON maps a descriptor count to a
 * wire response. Prints `listening PORT` once bound on 127.0.0.1; exits on SIGTERM or SIGINT,
 * and by itself after {@link MAX_LIFETIME_MS} in any case.
 */
import * as grpc from '@grpc/grpc-js';
import { loadSluice } from './dist.js';

/** A forgotten server never outlives a benchmark run by much. */
const MAX_LIFETIME_MS = 5 * 60_000;

const sluice = await loadSluice();
const responses = JSON.parse(process.argv[2] ?? '{}') as Record<string, unknown>;
const definition = sluice.proto.rlsServiceDefinition(sluice.proto.loadRlsPackage());

const server = new grpc.Server({ 'grpc.max_receive_message_length': 1_048_576 });
server.addService(definition, {
  ShouldRateLimit(
    call: grpc.ServerUnaryCall<{ descriptors?: unknown[] }, unknown>,
    callback: grpc.sendUnaryData<unknown>,
  ): void {
    const response = responses[call.request.descriptors?.length ?? 0];
    if (response === undefined) {
      callback({ code: grpc.status.INVALID_ARGUMENT, details: 'no fixed response for this size' });
      return;
    }
    callback(null, response);
  },
});

server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    process.stderr.write(`noop server: ${err.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`listening ${port}\n`);
});

const stop = (): void => {
  server.forceShutdown();
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
setTimeout(() => process.exit(2), MAX_LIFETIME_MS).unref();
