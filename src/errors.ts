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

/** Formats a problem as `file: path: message` (file and path omitted when empty). */
export function formatConfigProblem(problem: ConfigProblem): string {
  const where = [problem.file, problem.path].filter((part) => part !== '').join(': ');
  return where === '' ? problem.message : `${where}: ${problem.message}`;
}

/**
 * Most problems a {@link ConfigError} lists, and so a log line, an xDS NACK's `error_detail` and
 * the console: the rest are only counted, so 95,000 broken rules cost a few kilobytes to report,
 * not megabytes. `sluice check` lists every one.
 */
export const MAX_LISTED_PROBLEMS = 100;

/** Longest file name or path of a listed problem, in characters; longer ones are cut. */
const MAX_PROBLEM_NAME_LENGTH = 256;

/** Longest message of a listed problem, in characters; longer ones are cut. */
const MAX_PROBLEM_MESSAGE_LENGTH = 512;

/**
 * `text` when it has at most `max` characters, else its first `max` characters, `…` and its
 * length, so a hostile name (a 1 MB xDS resource name) is never echoed whole.
 */
export function cutText(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} characters)`;
}

/**
 * At most {@link MAX_LISTED_PROBLEMS} of `problems`, each cut (file and path to 256 characters,
 * the message to 512), then, when `total` is larger than what is listed, one more
 * entry that says how many were left out (`and 94900 more problems`).
 */
export function boundProblems(
  problems: readonly ConfigProblem[],
  total: number = problems.length,
  noun = 'problems',
): ConfigProblem[] {
  const listed = problems.slice(0, MAX_LISTED_PROBLEMS).map((problem) => ({
    file: cutText(problem.file, MAX_PROBLEM_NAME_LENGTH),
    path: cutText(problem.path, MAX_PROBLEM_NAME_LENGTH),
    message: cutText(problem.message, MAX_PROBLEM_MESSAGE_LENGTH),
  }));
  const more = Math.max(total, problems.length) - listed.length;
  if (more > 0) {
    listed.push({
      file: '',
      path: '',
      message: `and ${more} more ${noun} (only the first ${MAX_LISTED_PROBLEMS} are listed)`,
    });
  }
  return listed;
}

/**
 * A configuration file set failed validation. Lists the first problems (see
 * {@link boundProblems}) and counts them all.
 */
export class ConfigError extends SluiceError {
  /** The first problems, in file order, then an `and N more` entry when some were left out. */
  readonly problems: readonly ConfigProblem[];
  /** How many problems there were in all. */
  readonly problemCount: number;

  /**
   * @param problems every problem, or the first ones of `total`
   * @param total how many there were in all (default: `problems.length`)
   */
  constructor(problems: readonly ConfigProblem[], total: number = problems.length) {
    const listed = boundProblems(problems, total);
    super('INVALID_CONFIG', listed.map(formatConfigProblem).join('\n'));
    this.name = 'ConfigError';
    this.problems = listed;
    this.problemCount = Math.max(total, problems.length);
  }
}
