#!/usr/bin/env node
/**
 * CLI entry: `sluice serve | check | query`. Parses flags and environment, builds the app,
 * listens, and shuts down gracefully on SIGTERM/SIGINT.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { createApp } from './app.js';
import { exitCodeFor, formatResponse, parseDescriptor, sendQuery } from './cli/query.js';
import { checkConfig } from './config/load.js';
import { ConfigError, formatConfigProblem, SluiceError } from './errors.js';
import { MAX_UINT32 } from './model.js';
import { createLogger, type Logger, type LogLevel } from './logging/logger.js';
import { scrubSecrets, secretsFromEnv } from './logging/redact.js';
import { loadCheckSettings, loadSettings } from './settings.js';
import { onShutdownSignals, REPEATED_SIGNAL, type SignalKind } from './shutdown-signals.js';
import { nodeSupported, SLUICE_VERSION, SUPPORTED_NODE } from './version.js';
import {
  isWorker,
  onShutdown,
  reportReady,
  runPrimary,
  workerMetricsRender,
  workerNumber,
} from './workers.js';

const SERVE_HELP = `Usage: sluice serve [--config PATH]... [--grpc-host HOST] [--grpc-port PORT]
                    [--host HOST] [--port PORT] [--debug-host HOST] [--debug-port PORT]
                    [--log-level LEVEL] [--log-format json|text] [--backend-type TYPE]
                    [--shadow-mode]

Serve Envoy's RateLimitService (gRPC, with health and reflection) until SIGTERM or SIGINT.
Rules come from --config (files or directories, repeatable), else
$RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY, else the bundled demo rules in
envoy/ratelimit/. Every setting is also an environment variable (flags win); see README.

  --config PATH        rule file or directory (repeatable)
  --grpc-host HOST     gRPC listen address (GRPC_HOST, default 0.0.0.0)
  --grpc-port PORT     gRPC listen port (GRPC_PORT, default 8081; 0 picks a free port)
  --host HOST          HTTP listen address: /healthcheck, /json, /metrics (HOST, default 0.0.0.0)
  --port PORT          HTTP listen port (PORT, default 8080; 0 picks a free port)
  --debug-host HOST    debug listen address (DEBUG_HOST, default 127.0.0.1)
  --debug-port PORT    debug listen port (DEBUG_PORT, default 6070; 0 picks a free port)
  --log-level LEVEL    trace, debug, info, warn, error or fatal (LOG_LEVEL, default warn)
  --log-format FORMAT  json or text (LOG_FORMAT, default json)
  --backend-type TYPE  counter store (BACKEND_TYPE, default memory)
  --shadow-mode        answer OK overall, whatever the rules say (SHADOW_MODE)
  -h, --help           show this help
`;

const CHECK_HELP = `Usage: sluice check PATH...

Validate rule files or directories (every *.yaml and *.yml) as serve would load them. Prints
every problem with its file and YAML path and exits 1 if there is any, or if the paths define
no domain at all (served, they would limit nothing); exits 0 and prints the domains otherwise,
and, when limits name no algorithm (rules written for envoyproxy/ratelimit), one note on what
counts differently there. Reads MERGE_DOMAIN_CONFIG and DEFAULT_ALGORITHM.

  -h, --help  show this help
`;

const QUERY_HELP = `Usage: sluice query [--addr HOST:PORT] --domain DOMAIN --descriptor k=v[,k2=v2]...
                    [--descriptor ...] [--hits N | --check] [--timeout-ms MS]
                    [--tls] [--cacert FILE] [--cert FILE --key FILE] [--server-name NAME]

Send one ShouldRateLimit to a running sluice (or any RLS server) and print the answer.
Exit status: 0 when the overall code is OK, 2 when it is OVER_LIMIT, 1 on any error.

  --addr HOST:PORT    server address (default localhost:8081)
  --domain DOMAIN     rate limit domain (required)
  --descriptor k=v,.. one descriptor, entries in order (repeatable; at least one); a backslash
                      escapes , = or \\ inside keys and values
  --hits N            hits to count per descriptor (request hits_addend, N >= 1; default 1)
  --check             count nothing: send hits_addend 0 on every descriptor and show the
                      counters as they are
  --timeout-ms MS     deadline (default 5000)
  --tls               connect with TLS (GRPC_SERVER_USE_TLS on the server); implied by the
                      four options below. The server certificate is verified against the
                      system's CAs unless --cacert is given
  --cacert FILE       PEM CA certificate(s) that verify the server's certificate
  --cert FILE         PEM client certificate, for a server that requires one (mTLS,
                      GRPC_CLIENT_TLS_CACERT); needs --key
  --key FILE          PEM private key of --cert (unencrypted)
  --server-name NAME  name the server's certificate must carry, also sent as SNI and
                      :authority (default: the host of --addr)
  -h, --help          show this help
`;

const VERSION_HELP = `Usage: sluice version

Print the version of sluice (also: sluice --version).

  -h, --help  show this help
`;

const USAGE = `Usage: sluice <command> [options]

Commands:
  serve     serve Envoy's RateLimitService
  check     validate rule files
  query     send one ShouldRateLimit and print the answer
  version   print the version (also: sluice --version)
  help      show this help, or a command's (sluice help query; sluice query --help)

Run 'sluice <command> --help' for a command's options.
`;

/** Help text of each command. */
const HELP: Readonly<Record<string, string>> = {
  serve: SERVE_HELP,
  check: CHECK_HELP,
  query: QUERY_HELP,
  version: VERSION_HELP,
};

/** A mistake on the command line: printed as `sluice <command>: <message>` and a pointer to help. */
class UsageError extends Error {
  constructor(
    readonly command: string | undefined,
    message: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * `parseArgs` with `--help`/`-h` on every command and its errors turned into a UsageError that
 * names what the user typed (node's own text also explains `--` escapes, which is noise here).
 */
function parseCommand<T extends NonNullable<ParseArgsConfig['options']>>(
  command: string,
  args: string[],
  options: T,
  allowPositionals = false,
) {
  try {
    return parseArgs({
      args,
      allowPositionals,
      strict: true,
      options: { ...options, help: { type: 'boolean', short: 'h' } },
    });
  } catch (err) {
    if (err instanceof Error && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS')) {
      // The first sentence is the useful part: "Unknown option '--x'", "Option '--y <value>'
      // argument missing", "Unexpected argument 'z'".
      const first = err.message.split(/\. /)[0] ?? err.message;
      throw new UsageError(command, first.charAt(0).toLowerCase() + first.slice(1));
    }
    throw err;
  }
}

/** Run the CLI; resolves to the process exit code (serve resolves only after shutdown). */
async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve':
      return serve(rest);
    case 'check':
      return check(rest);
    case 'query':
      return query(rest);
    case 'version':
      return version(rest);
    case '--version':
    case '-v':
      process.stdout.write(`sluice ${SLUICE_VERSION}\n`);
      return 0;
    case 'help':
    case '--help':
    case '-h': {
      const topic = command === 'help' ? rest[0] : undefined;
      if (topic !== undefined && HELP[topic] === undefined) {
        throw new UsageError(undefined, `no help for ${JSON.stringify(topic)}: not a command`);
      }
      process.stdout.write(topic === undefined ? USAGE : HELP[topic]!);
      return 0;
    }
    case undefined:
      process.stderr.write(USAGE);
      return 1;
    default:
      throw new UsageError(
        undefined,
        command.startsWith('-')
          ? `unknown option ${JSON.stringify(command)}: options go after a command (e.g. sluice serve --grpc-port 8081)`
          : `unknown command ${JSON.stringify(command)}: expected serve, check, query, version or help`,
      );
  }
}

async function serve(args: string[]): Promise<number> {
  const { values } = parseCommand('serve', args, {
    config: { type: 'string', multiple: true },
    'grpc-host': { type: 'string' },
    'grpc-port': { type: 'string' },
    host: { type: 'string' },
    port: { type: 'string' },
    'debug-host': { type: 'string' },
    'debug-port': { type: 'string' },
    'log-level': { type: 'string' },
    'log-format': { type: 'string' },
    'backend-type': { type: 'string' },
    'shadow-mode': { type: 'boolean' },
  });
  if (values.help) {
    process.stdout.write(SERVE_HELP);
    return 0;
  }
  const settings = loadSettings(process.env, {
    config: values.config,
    grpcHost: values['grpc-host'],
    grpcPort: values['grpc-port'],
    httpHost: values.host,
    httpPort: values.port,
    debugHost: values['debug-host'],
    debugPort: values['debug-port'],
    logLevel: values['log-level'],
    logFormat: values['log-format'],
    backendType: values['backend-type'],
    shadowMode: values['shadow-mode'],
  });
  const logger = createLogger({
    level: settings.logLevel,
    format: settings.logFormat,
    secrets: secretsFromEnv(process.env),
  });
  // grpc-js prints its own copy of some failures to stderr (a busy port adds "No address added
  // out of total 1 resolved" before sluice's own message); keep those in sluice's log, at debug.
  const grpcLog = logger.child({ module: 'grpc-js' });
  const toDebug = (...args: unknown[]): void => grpcLog.debug(args.map(String).join(' '));
  grpc.setLogger({ error: toDebug, info: toDebug, debug: toDebug });
  // WORKERS > 1 (Redis store only): this process forks the workers and serves nothing itself.
  if (settings.workers > 1 && !isWorker()) {
    warnIfUnsupportedNode(logger);
    return runPrimary(settings.workers, logger, {
      maxSeriesPerRule: settings.metricsMaxSeriesPerRule,
      maxSeries: settings.metricsMaxSeries,
    });
  }
  const worker = isWorker();
  const log = worker ? workerLogger(logger, settings.logLevel) : logger;
  const app = await createApp({
    settings,
    logger: log,
    metricsRender: worker ? workerMetricsRender : undefined,
    workers: settings.workers,
    logStartup: workerNumber() === 1,
  });
  await app.start();
  if (worker) reportReady();
  else warnIfUnsupportedNode(log);

  return new Promise<number>((resolve) => {
    let stopping: NodeJS.Signals | 'primary' | undefined;
    const stop = (signal: NodeJS.Signals | 'primary', kind: SignalKind = 'first'): void => {
      // Ctrl-C reaches every process of the group, and the primary passes its own signal on:
      // whichever of the two a worker gets first, the other is the same request, no second signal.
      if (stopping !== undefined && signal === 'primary') return;
      if (kind === 'repeat' || (stopping === 'primary' && kind === 'first')) {
        log.info({ signal }, REPEATED_SIGNAL);
        return;
      }
      if (stopping !== undefined) {
        log.warn({ signal }, 'second signal: exiting now');
        resolve(1);
        return;
      }
      stopping = signal;
      log.info({ signal }, 'shutting down: finishing in-flight calls');
      app.close().then(
        () => resolve(0),
        (err: unknown) => {
          log.error({ err }, 'shutdown failed');
          resolve(1);
        },
      );
    };
    onShutdownSignals(stop);
    if (worker) onShutdown(() => stop('primary'));
  });
}

/**
 * npm's EBADENGINE warning scrolls by at install time; say it where the server starts, once, from
 * the process the user started (not from each worker).
 */
function warnIfUnsupportedNode(logger: Logger): void {
  if (nodeSupported(process.versions.node)) return;
  logger.warn(
    { node: process.version, supported: SUPPORTED_NODE },
    `Node.js ${process.version} is not supported (package.json engines: ${SUPPORTED_NODE}): ` +
      'sluice is tested on Node 22 and 24 only; run it on one of those',
  );
}

/**
 * A worker's logger: every line names its worker, and worker 1 alone speaks for the service at
 * info (its start-up, reloads and store state are every worker's too); the others write warnings
 * and errors, and everything at debug or trace.
 */
function workerLogger(logger: Logger, level: LogLevel): Logger {
  const n = workerNumber();
  return logger.child({ worker: n }, n > 1 && level === 'info' ? { level: 'warn' } : {});
}

function version(args: string[]): number {
  const { values } = parseCommand('version', args, {});
  process.stdout.write(values.help ? VERSION_HELP : `sluice ${SLUICE_VERSION}\n`);
  return 0;
}

async function check(args: string[]): Promise<number> {
  const { values, positionals } = parseCommand('check', args, {}, true);
  if (values.help) {
    process.stdout.write(CHECK_HELP);
    return 0;
  }
  if (positionals.length === 0) {
    throw new UsageError('check', 'give at least one file or directory');
  }
  const settings = loadCheckSettings(process.env);
  const result = await checkConfig(positionals, {
    mergeDomainConfigs: settings.mergeDomainConfigs,
    defaultAlgorithm: settings.defaultAlgorithm,
    maxRulesPerFile: settings.configMaxRulesPerFile,
    maxRules: settings.configMaxRules,
    algorithmRefusal: settings.algorithmRefusal,
  });
  for (const warning of result.warnings) {
    process.stderr.write(`warning: ${formatConfigProblem(warning)}\n`);
  }
  if (!result.ok) {
    for (const problem of result.problems)
      process.stderr.write(`${formatConfigProblem(problem)}\n`);
    process.stderr.write(`${result.problems.length} problem(s) found\n`);
    return 1;
  }
  if (result.domains.length === 0) {
    // Served, these paths would limit nothing: every call answered OK. Almost always a wrong path.
    process.stderr.write(
      `no rate limit rules in ${positionals.join(', ')}: ${result.files.length} rule file(s) ` +
        `found (every *.yaml and *.yml file of a directory is read; dot files are ignored), ` +
        `no domain defined; served as is, nothing would be rate limited\n`,
    );
    return 1;
  }
  process.stdout.write(
    `ok: ${result.files.length} file(s), domains: ${result.domains.join(', ')}\n`,
  );
  const note = countingNote(result.limitsWithDefaultAlgorithm, settings.defaultAlgorithm);
  if (note !== undefined) process.stdout.write(`${note}\n`);
  return 0;
}

/**
 * What counts differently from the reference, in one line, for rules written for it (limits that
 * name no algorithm): their algorithm, and that a rejected request charges nothing. `undefined`
 * when every limit names its algorithm (sluice rules: the author chose).
 */
function countingNote(limits: number, algorithm: string): string | undefined {
  if (limits === 0) return undefined;
  const counted =
    algorithm === 'fixed_window'
      ? `count with fixed windows, as the reference (DEFAULT_ALGORITHM=fixed_window)`
      : `count with a ${algorithm.replace('_', ' ')} (DEFAULT_ALGORITHM; the reference: fixed ` +
        `windows, which DEFAULT_ALGORITHM=fixed_window gives)`;
  return (
    `note: ${limits} limit(s) name no algorithm and ${counted}; a rejected request charges ` +
    `nothing (the reference charges it). docs/compatibility.md lists every difference`
  );
}

async function query(args: string[]): Promise<number> {
  const { values } = parseCommand('query', args, {
    addr: { type: 'string', default: 'localhost:8081' },
    domain: { type: 'string' },
    descriptor: { type: 'string', multiple: true },
    hits: { type: 'string' },
    check: { type: 'boolean', default: false },
    'timeout-ms': { type: 'string', default: '5000' },
    tls: { type: 'boolean', default: false },
    cacert: { type: 'string' },
    cert: { type: 'string' },
    key: { type: 'string' },
    'server-name': { type: 'string' },
  });
  if (values.help) {
    process.stdout.write(QUERY_HELP);
    return 0;
  }
  const problems: string[] = [];
  if (!values.domain) problems.push('--domain is required');
  if (!values.descriptor?.length) {
    problems.push('at least one --descriptor k=v[,k2=v2] is required');
  }
  const hits = values.hits === undefined ? undefined : Number(values.hits);
  if (hits !== undefined && (!/^\s*\d+\s*$/.test(values.hits!) || hits < 1 || hits > MAX_UINT32)) {
    problems.push(
      `--hits ${JSON.stringify(values.hits)}: expected an integer from 1 to ${MAX_UINT32}` +
        (hits === 0 ? ' (a request-level 0 counts as 1; use --check to count nothing)' : ''),
    );
  }
  if (hits !== undefined && values.check) problems.push('give --hits or --check, not both');
  const timeoutMs = Number(values['timeout-ms']);
  if (!/^\s*\d+\s*$/.test(values['timeout-ms']) || timeoutMs < 1) {
    problems.push(
      `--timeout-ms ${JSON.stringify(values['timeout-ms'])}: expected a positive integer`,
    );
  }
  if ((values.cert === undefined) !== (values.key === undefined)) {
    problems.push('give --cert and --key together (a client certificate and its private key)');
  }
  for (const flag of ['cacert', 'cert', 'key', 'server-name'] as const) {
    if (values[flag] === '') problems.push(`--${flag} needs a value`);
  }
  const useTls =
    values.tls ||
    values.cacert !== undefined ||
    values.cert !== undefined ||
    values.key !== undefined ||
    values['server-name'] !== undefined;
  if (problems.length > 0) throw new UsageError('query', problems.join('\n'));
  const options = {
    addr: values.addr,
    domain: values.domain!,
    descriptors: values.descriptor!.map(parseDescriptor),
    hits,
    check: values.check,
    timeoutMs,
    tls: useTls
      ? {
          caFile: values.cacert,
          certFile: values.cert,
          keyFile: values.key,
          serverName: values['server-name'],
        }
      : undefined,
  };
  const response = await sendQuery(options);
  process.stdout.write(`${formatResponse(response, options)}\n`);
  return exitCodeFor(response);
}

/** Print a failure the user can act on, without a stack trace for expected failures. */
function report(err: unknown): void {
  // Failure texts may quote a setting (REDIS_URL, ...): scrub secrets as the logger does.
  const secrets = secretsFromEnv(process.env);
  const stderr = {
    write: (text: string): boolean => process.stderr.write(scrubSecrets(text, secrets)),
  };
  reportTo(stderr, err);
}

function reportTo(stderr: { write(text: string): boolean }, err: unknown): void {
  if (err instanceof ConfigError) {
    stderr.write(`sluice: invalid rate limit config:\n${err.message}\n`);
  } else if (err instanceof SluiceError && err.code !== 'INTERNAL') {
    stderr.write(`sluice: ${err.message}\n`);
  } else if (err instanceof UsageError) {
    const where = err.command === undefined ? 'sluice' : `sluice ${err.command}`;
    stderr.write(`${where}: ${err.message}\nRun '${where} --help' for usage.\n`);
  } else if (err instanceof Error && 'details' in err) {
    stderr.write(`sluice: request failed: ${err.message}\n`);
  } else {
    stderr.write(`sluice: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    report(err);
    process.exit(1);
  },
);
