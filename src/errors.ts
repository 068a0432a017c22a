/**
 * The one error type of sluice, with a closed set of codes. A rate limit decision is never an
 * error; these are failures only. Every code is documented in docs/errors.md (a unit test keeps
 * the two in step); the gRPC status each one answers is mapped in transport/status.ts, the HTTP
 * `/json` status in transport/http/server.ts.
 */

/** Every failure kind sluice raises, with what it means (docs/errors.md says more). */
export const ERROR_CODES = {
  INVALID_CONFIG: 'A rate limit configuration file set failed validation.',
  INVALID_SETTINGS: 'Environment variables or command-line flags are invalid.',
  INVALID_REQUEST: 'A ShouldRateLimit request is malformed or exceeds a size bound.',
  MALFORMED_MESSAGE: 'The bytes of a request message are not a well-formed protobuf message.',
  INVALID_UTF8: 'A string field of a request message is not valid UTF-8.',
  INVALID_JSON: 'An HTTP /json (or console) body cannot be read as a RateLimitRequest.',
  STORE_UNAVAILABLE: 'The counter store could not answer.',
  STORE_TIMEOUT: 'The counter store did not answer within REDIS_TIMEOUT.',
  NO_CONFIG:
    'No rate limit rules have arrived yet (an xDS source started with FORCE_START_WITHOUT_INITIAL_CONFIG).',
  INTERNAL: 'An unexpected failure inside sluice.',
} as const;

/** One of the closed set of error codes. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** The base of every error sluice throws on purpose. */
export class SluiceError extends Error {
  /** What kind of failure this is. */
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SluiceError';
    this.code = code;
  }

  /** Normalise anything thrown into a SluiceError (INTERNAL unless it already is one). */
  static from(value: unknown): SluiceError {
    if (value instanceof SluiceError) return value;
    const message = value instanceof Error ? value.message : String(value);
    return new SluiceError('INTERNAL', message, { cause: value });
  }

  /** Whether `value` is a SluiceError with one of `codes` (any code when none is given). */
  static is(value: unknown, ...codes: readonly ErrorCode[]): value is SluiceError {
    return value instanceof SluiceError && (codes.length === 0 || codes.includes(value.code));
  }
}

/** One problem in one configuration file. */
export interface ConfigProblem {
  /** The file the problem is in (as given to the loader). */
  readonly file: string;
  /** YAML path of the offending node, e.g. `descriptors[1].rate_limit.unit`; `''` for the file. */
  readonly path: string;
  /** What is wrong and, where possible, what to write instead. */
  readonly message: string;
}

/** Formats a problem as `file: path: message` (path omitted when empty). */
export function formatConfigProblem(problem: ConfigProblem): string {
  return problem.path === ''
    ? `${problem.file}: ${problem.message}`
    : `${problem.file}: ${problem.path}: ${problem.message}`;
}

/** A configuration file set failed validation; carries every problem found. */
export class ConfigError extends SluiceError {
  /** Every problem, in file order. */
  readonly problems: readonly ConfigProblem[];

  constructor(problems: readonly ConfigProblem[]) {
    super('INVALID_CONFIG', problems.map(formatConfigProblem).join('\n'));
    this.name = 'ConfigError';
    this.problems = problems;
  }
}
