#!/usr/bin/env node
/**
 * CLI entry: `sluice serve | check | query`. Parses flags and environment, builds the app,
 * listens, and shuts down gracefully on SIGTERM/SIGINT.
 */
import { parseArgs } from 'node:util';
import { createApp } from './app.js';
import { formatResponse, parseDescriptor, sendQuery } from './cli/query.js';
import { checkConfig } from './config/load.js';
import { ConfigError, formatConfigProblem, SluiceError } from './errors.js';
import { createLogger } from './logging/logger.js';
import { secretsFromEnv } from './logging/redact.js';
import { loadCheckSettings, loadSettings } from './settings.js';

const USAGE = `Usage:
  sluice serve [--config PATH]... [--grpc-host HOST] [--grpc-port PORT]
               [--log-level LEVEL] [--log-format json|text] [--shadow-mode]
      Serve Envoy's RateLimitService. Rules come from --config (files or directories,
      repeatable), else $RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY, else the
      bundled demo rules in envoy/ratelimit/. Every setting is also an environment variable
      (see README).
  sluice check PATH...
      Validate rule files or directories; prints every problem and exits 1 if there is any.
  sluice query [--addr HOST:PORT] --domain DOMAIN --descriptor k=v[,k2=v2]...
               [--descriptor ...] [--hits N] [--timeout-ms MS]
      Send one ShouldRateLimit and print the answer (default --addr localhost:8081).
`;

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
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE);
      return command === undefined ? 1 : 0;
    default:
      process.stderr.write(`unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
      return 1;
  }
}

async function serve(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      config: { type: 'string', multiple: true },
      'grpc-host': { type: 'string' },
      'grpc-port': { type: 'string' },
      'log-level': { type: 'string' },
      'log-format': { type: 'string' },
      'backend-type': { type: 'string' },
      'shadow-mode': { type: 'boolean' },
    },
  });
  const settings = loadSettings(process.env, {
    config: values.config,
    grpcHost: values['grpc-host'],
    grpcPort: values['grpc-port'],
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
  const app = await createApp({ settings, logger });
  await app.start();

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals): void => {
      if (stopping) {
        logger.warn({ signal }, 'second signal: exiting now');
        resolve(1);
        return;
      }
      stopping = true;
      logger.info({ signal }, 'shutting down: finishing in-flight calls');
      app.close().then(
        () => resolve(0),
        (err: unknown) => {
          logger.error({ err }, 'shutdown failed');
          resolve(1);
        },
      );
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}

async function check(args: string[]): Promise<number> {
  const { positionals } = parseArgs({ args, allowPositionals: true, options: {} });
  if (positionals.length === 0) {
    process.stderr.write('sluice check: give at least one file or directory\n');
    return 1;
  }
  const settings = loadCheckSettings(process.env);
  const result = await checkConfig(positionals, {
    mergeDomainConfigs: settings.mergeDomainConfigs,
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
  process.stdout.write(
    `ok: ${result.files.length} file(s), domains: ${result.domains.join(', ') || '(none)'}\n`,
  );
  return 0;
}

async function query(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      addr: { type: 'string', default: 'localhost:8081' },
      domain: { type: 'string' },
      descriptor: { type: 'string', multiple: true },
      hits: { type: 'string' },
      'timeout-ms': { type: 'string', default: '5000' },
    },
  });
  const problems: string[] = [];
  if (!values.domain) problems.push('--domain is required');
  if (!values.descriptor?.length)
    problems.push('at least one --descriptor k=v[,k2=v2] is required');
  const hits = values.hits === undefined ? undefined : Number(values.hits);
  if (hits !== undefined && (!Number.isInteger(hits) || hits < 0)) {
    problems.push('--hits must be a non-negative integer');
  }
  if (problems.length > 0) {
    throw new SluiceError('INVALID_SETTINGS', problems.join('\n'));
  }
  const descriptors = values.descriptor!.map(parseDescriptor);
  const options = {
    addr: values.addr,
    domain: values.domain!,
    descriptors,
    hits,
    timeoutMs: Number(values['timeout-ms']) || 5000,
  };
  const response = await sendQuery(options);
  process.stdout.write(`${formatResponse(response, options)}\n`);
  return 0;
}

/** Print a failure the user can act on, without a stack trace for expected failures. */
function report(err: unknown): void {
  if (err instanceof ConfigError) {
    process.stderr.write(`sluice: invalid rate limit config:\n${err.message}\n`);
  } else if (err instanceof SluiceError && err.code !== 'INTERNAL') {
    process.stderr.write(`sluice: ${err.message}\n`);
  } else if (
    err instanceof Error &&
    'code' in err &&
    typeof err.code === 'string' &&
    err.code.startsWith('ERR_PARSE_ARGS')
  ) {
    process.stderr.write(`sluice: ${err.message}\n\n${USAGE}`);
  } else if (err instanceof Error && 'details' in err) {
    process.stderr.write(`sluice: request failed: ${err.message}\n`);
  } else {
    process.stderr.write(
      `sluice: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    report(err);
    process.exit(1);
  },
);
