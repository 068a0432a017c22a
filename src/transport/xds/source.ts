/**
 * Rules from an xDS management server (`CONFIG_TYPE=GRPC_XDS_SOTW`), as the reference's
 * xds_grpc_sotw_provider.go gets them: one ADS stream (state of the world) over @grpc/grpc-js,
 * subscribed to every `RateLimitConfig` resource (wildcard). Each response is the whole rule set:
 * it is validated like files are (`buildSnapshot`), then ACKed (its version and nonce) and swapped
 * in, or NACKed with every problem in `error_detail` while the previous rules keep serving.
 *
 * When the stream cannot be opened or breaks, the client reconnects: every
 * `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL` while the server cannot be reached, and after a
 * stream that had worked, with the reference's backoff: from `XDS_CLIENT_BACKOFF_INITIAL_INTERVAL`,
 * times `XDS_CLIENT_BACKOFF_RANDOM_FACTOR` per break in a row, up to
 * `XDS_CLIENT_BACKOFF_MAX_INTERVAL`, at random below that when `XDS_CLIENT_BACKOFF_JITTER`. A new stream sends the last accepted version, so the server
 * resends only what changed. Connection trouble is logged once per change of state, never once
 * per attempt.
 */
import { rootCertificates } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ConfigError, cutText, SluiceError, type ConfigProblem } from '../../errors.js';
import type { Logger } from '../../logging/logger.js';
import { buildSnapshotFrom } from '../../config/offthread.js';
import type { RuleSource } from '../../config/source.js';
import type { ConfigSnapshot } from '../../config/types.js';
import type { ConfigOptions } from '../../config/validate.js';
import { SLUICE_VERSION } from '../../version.js';
import { LOADER_OPTIONS } from '../grpc/proto.js';
import { readTlsFileSet } from '../tls.js';
import type { XdsOptions } from './options.js';
import {
  MAX_ECHOED_LENGTH,
  RATE_LIMIT_CONFIG_TYPE_URL,
  RESOURCES_JOB,
  type AnyResource,
} from './resources.js';

/** The ADS file, under proto/. */
export const ADS_PROTO = 'envoy/service/discovery/v3/ads.proto';

const ADS_METHOD = 'StreamAggregatedResources';

/** `google.rpc.Code.INVALID_ARGUMENT`: the code of a NACK's error_detail. */
const INVALID_ARGUMENT = 3;

/** A DiscoveryRequest as proto-loader encodes it (keepCase). */
interface DiscoveryRequest {
  version_info: string;
  node: {
    id: string;
    metadata: { fields: Record<string, { stringValue: string }> };
    user_agent_name: string;
    user_agent_version: string;
  };
  type_url: string;
  response_nonce: string;
  error_detail?: { code: number; message: string };
}

/** A DiscoveryResponse as proto-loader decodes it (keepCase, unset fields absent). */
interface DiscoveryResponse {
  version_info?: string;
  resources?: AnyResource[];
  type_url?: string;
  nonce?: string;
}

/** One response to apply, with the stream it came on and how to answer on that stream. */
interface Update {
  readonly response: DiscoveryResponse;
  readonly stream: grpc.ClientDuplexStream<DiscoveryRequest, DiscoveryResponse>;
  readonly send: (nonce: string, errorDetail?: DiscoveryRequest['error_detail']) => void;
}

/** Longest version or nonce a log line echoes, in characters (a server may send megabytes). */
const MAX_LOGGED_LENGTH = 128;

/** The bytes of a response's resources: what decides whether the build goes to a worker. */
function sizeOf(resources: readonly AnyResource[]): number {
  return resources.reduce((sum, resource) => sum + (resource.value?.length ?? 0), 0);
}

/** Options of {@link createXdsSource}. */
export interface XdsSourceOptions extends ConfigOptions {
  /** The client's settings. */
  readonly xds: XdsOptions;
  /** The `xds` module logger. */
  readonly logger: Logger;
  /** Random numbers in [0, 1) for the backoff's jitter (default Math.random). */
  readonly random?: () => number;
  /** `BuildOptions.onProgress` of every update's build (see config/offthread.ts). */
  readonly onBuildProgress?: ((recordsBuilt: number) => void) | undefined;
}

/** The TLS files' bytes. */
interface TlsFiles {
  readonly ca: Buffer | undefined;
  readonly cert: Buffer | undefined;
  readonly key: Buffer | undefined;
}

/** The ADS method, the channel's options and the node every request names, from the settings. */
function adsSetup(xds: XdsOptions) {
  const pkg = protoLoader.loadSync(ADS_PROTO, LOADER_OPTIONS);
  const service = pkg['envoy.service.discovery.v3.AggregatedDiscoveryService'] as
    grpc.ServiceDefinition | undefined;
  const method = service?.[ADS_METHOD];
  if (method === undefined) throw new SluiceError('INTERNAL', `${ADS_PROTO} has no ${ADS_METHOD}`);
  const channelOptions: grpc.ChannelOptions = {
    'grpc.primary_user_agent': `sluice/${SLUICE_VERSION}`,
  };
  if (xds.maxMessageBytes !== undefined) {
    channelOptions['grpc.max_receive_message_length'] = xds.maxMessageBytes;
  }
  if (xds.tls?.serverSan !== undefined) {
    channelOptions['grpc.ssl_target_name_override'] = xds.tls.serverSan;
    channelOptions['grpc.default_authority'] = xds.tls.serverSan;
  }
  const node: DiscoveryRequest['node'] = {
    id: xds.nodeId,
    metadata: {
      fields: Object.fromEntries(
        Object.entries(xds.nodeMetadata).map(([k, v]) => [k, { stringValue: v }]),
      ),
    },
    user_agent_name: 'sluice',
    user_agent_version: SLUICE_VERSION,
  };
  return { method, channelOptions, node };
}

/**
 * Create the source; reads the TLS files first (an unreadable one stops the start with a
 * SluiceError INVALID_SETTINGS naming every such file). Nothing connects until `start`.
 */
export async function createXdsSource(options: XdsSourceOptions): Promise<RuleSource> {
  const { xds, logger } = options;
  const credentials =
    xds.tls === undefined ? grpc.credentials.createInsecure() : await tlsCredentials(xds);
  const { method, channelOptions, node } = adsSetup(xds);
  const random = options.random ?? Math.random;

  let client: grpc.Client | undefined;
  let call: grpc.ClientDuplexStream<DiscoveryRequest, DiscoveryResponse> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  /** The last version ACKed (sent on every request, and on a new stream's first). */
  let acceptedVersion = '';
  /** Streams that broke in a row after having worked; 0 after a response. */
  let breaks = 0;
  /** Whether the last failure was already logged at warn (log once per state change). */
  let failing = false;

  /** The response waiting for the build in progress (only the newest is kept). */
  let waiting: Update | undefined;
  let building = false;
  /** Stops a build in progress when the source closes (its worker thread ends). */
  const abort = new AbortController();
  let deliver: ((update: Update) => Promise<void>) | undefined;

  /**
   * Take updates one at a time, in order; one that arrives during a build waits, and a newer one
   * replaces it (each response is the whole state, so the older is never applied nor answered).
   */
  const enqueue = (update: Update): void => {
    if (building) {
      waiting = update;
      return;
    }
    building = true;
    void deliver?.(update).finally(() => {
      building = false;
      const next = waiting;
      waiting = undefined;
      if (next !== undefined && !closed) enqueue(next);
    });
  };

  return {
    kind: 'xds',
    start(listener) {
      return new Promise<void>((resolveFirst) => {
        deliver = async ({ response, stream, send }) => {
          const nonce = response.nonce ?? '';
          const version = response.version_info ?? '';
          // Both come from the server and may be of any length: cut for the log.
          const logged = {
            version: cutText(version, MAX_LOGGED_LENGTH),
            nonce: cutText(nonce, MAX_LOGGED_LENGTH),
          };
          const verdict = await judgeResponse(response, options, abort.signal);
          if (closed) return;
          // A stream that broke during the build is not answered; its successor resends.
          const current = call === stream;
          if (verdict instanceof ConfigError) {
            listener.onError(verdict);
            logger.warn(logged, 'xDS update refused (NACK)');
            if (current) send(nonce, { code: INVALID_ARGUMENT, message: verdict.message });
          } else {
            listener.onSnapshot(verdict);
            acceptedVersion = version;
            logger.debug(logged, 'xDS update applied (ACK)');
            if (current) send(nonce);
          }
          resolveFirst();
        };
        const connect = (): void => {
          timer = undefined;
          if (closed) return;
          client ??= new grpc.Client(xds.serverUrl, credentials, channelOptions);
          const metadata = new grpc.Metadata();
          for (const [key, value] of Object.entries(xds.headers)) metadata.set(key, value);
          const stream = client.makeBidiStreamRequest<DiscoveryRequest, DiscoveryResponse>(
            method.path,
            method.requestSerialize as (value: DiscoveryRequest) => Buffer,
            method.responseDeserialize as (bytes: Buffer) => DiscoveryResponse,
            metadata,
          );
          call = stream;
          let answered = false;
          const send = (nonce: string, errorDetail?: DiscoveryRequest['error_detail']): void => {
            stream.write({
              version_info: acceptedVersion,
              node,
              type_url: RATE_LIMIT_CONFIG_TYPE_URL,
              response_nonce: nonce,
              ...(errorDetail === undefined ? {} : { error_detail: errorDetail }),
            });
          };
          stream.on('data', (response: DiscoveryResponse) => {
            if (closed) return;
            if (!answered) {
              answered = true;
              breaks = 0;
              if (failing) logger.info({ server: xds.serverUrl }, 'xDS stream restored');
              failing = false;
            }
            enqueue({ response, stream, send });
          });
          const onFailure = (details: string): void => {
            if (closed || call !== stream) return;
            call = undefined;
            const delayMs = answered
              ? backoffDelayMs(breaks++, xds, random)
              : xds.connectRetryIntervalMs;
            const fields = { server: xds.serverUrl, error: details, delayMs };
            if (failing) {
              logger.debug(fields, 'xDS stream failed again; retrying');
            } else {
              failing = true;
              logger.warn(
                fields,
                answered
                  ? 'xDS stream to the management server broke; reconnecting (the current rules keep serving)'
                  : 'cannot reach the xDS management server; retrying',
              );
            }
            timer = setTimeout(connect, delayMs);
          };
          stream.on('error', (error: grpc.ServiceError) => {
            onFailure(error.details || error.message);
          });
          // A server that ends the stream cleanly is treated as a break too.
          stream.on('status', (status: grpc.StatusObject) => {
            if (status.code === grpc.status.OK) onFailure('stream closed by the server');
          });
          send('');
        };
        logger.info({ server: xds.serverUrl, nodeId: xds.nodeId }, 'starting xDS client');
        connect();
      });
    },
    close() {
      closed = true;
      abort.abort();
      if (timer !== undefined) clearTimeout(timer);
      call?.cancel();
      call = undefined;
      client?.close();
    },
  };
}

/**
 * The wait after `attempt` (0-based) breaks in a row, as the reference's backoff (jpillora/backoff)
 * picks it: initial x factor^attempt (factor 0 means 2), with jitter at random between the initial
 * wait and that, always kept between the initial and the maximum wait.
 */
export function backoffDelayMs(
  attempt: number,
  xds: Pick<XdsOptions, 'backoffInitialMs' | 'backoffMaxMs' | 'backoffFactor' | 'backoffJitter'>,
  random: () => number,
): number {
  const min = xds.backoffInitialMs;
  const max = xds.backoffMaxMs;
  if (min >= max) return max;
  const factor = xds.backoffFactor > 0 ? xds.backoffFactor : 2;
  let ms = min * factor ** attempt;
  if (xds.backoffJitter) ms = random() * (ms - min) + min;
  return Math.round(Math.min(max, Math.max(min, ms)));
}

/**
 * The snapshot of a response, or the ConfigError that refuses it (its type, or its resources'
 * problems, or a build that failed). Never throws.
 */
async function judgeResponse(
  response: DiscoveryResponse,
  options: XdsSourceOptions,
  signal: AbortSignal,
): Promise<ConfigSnapshot | ConfigError> {
  const problems = checkResponse(response);
  if (problems.length > 0) return new ConfigError(problems);
  const resources = response.resources ?? [];
  try {
    return await buildSnapshotFrom(RESOURCES_JOB, resources, sizeOf(resources), {
      mergeDomainConfigs: options.mergeDomainConfigs,
      defaultAlgorithm: options.defaultAlgorithm,
      maxRulesPerFile: options.maxRulesPerFile,
      maxRules: options.maxRules,
      algorithmRefusal: options.algorithmRefusal,
      signal,
      onProgress: options.onBuildProgress,
    });
  } catch (error) {
    if (error instanceof ConfigError) return error;
    const message = error instanceof Error ? error.message : String(error);
    return new ConfigError([{ file: 'response', path: '', message }]);
  }
}

/** Problems of a response as a whole (its type). */
function checkResponse(response: DiscoveryResponse): ConfigProblem[] {
  const typeUrl = response.type_url ?? '';
  if (typeUrl === '' || typeUrl === RATE_LIMIT_CONFIG_TYPE_URL) return [];
  return [
    {
      file: 'response',
      path: '',
      message: `unexpected type_url ${JSON.stringify(cutText(typeUrl, MAX_ECHOED_LENGTH))}; sluice subscribes to ${RATE_LIMIT_CONFIG_TYPE_URL} only`,
    },
  ];
}

/** Channel credentials from the TLS files; every unreadable file is named at once. */
async function tlsCredentials(xds: XdsOptions): Promise<grpc.ChannelCredentials> {
  const tls = xds.tls!;
  const {
    bytes: [ca, cert, key],
    problems,
  } = await readTlsFileSet([
    ['CONFIG_GRPC_XDS_SERVER_TLS_CACERT', tls.caFile],
    ['CONFIG_GRPC_XDS_CLIENT_TLS_CERT', tls.certFile],
    ['CONFIG_GRPC_XDS_CLIENT_TLS_KEY', tls.keyFile],
  ]);
  const files: TlsFiles = { ca, cert, key };
  if (
    files.ca !== undefined &&
    !files.ca.toString('utf8').includes('-----BEGIN CERTIFICATE-----')
  ) {
    problems.push(
      `CONFIG_GRPC_XDS_SERVER_TLS_CACERT=${JSON.stringify(tls.caFile)}: no PEM certificate in the file`,
    );
  }
  if (problems.length > 0) {
    throw new SluiceError(
      'INVALID_SETTINGS',
      `invalid settings:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
  }
  // As the reference: the system's roots plus the configured CA.
  const roots =
    files.ca === undefined
      ? undefined
      : Buffer.concat([Buffer.from(rootCertificates.join('\n') + '\n'), files.ca]);
  try {
    return grpc.credentials.createSsl(roots ?? null, files.key ?? null, files.cert ?? null);
  } catch (error) {
    throw new SluiceError(
      'INVALID_SETTINGS',
      `invalid settings:\n  - the xDS client certificate or key is not usable (CONFIG_GRPC_XDS_CLIENT_TLS_CERT / _KEY): ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}
