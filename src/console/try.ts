/**
 * The "try it" panel (`POST /api/try`): the answer the service would give a request now, with
 * the rule, match path and counters of each descriptor, charging nothing. The answer is the
 * service's own dry run (`Explainer.explain`: the same validation, snapshot, limiter plan and
 * statuses, and the store's batch rule without the charge); this module only presents it.
 */
import type http from 'node:http';
import { SluiceError } from '../errors.js';
import { hitsFor, type Explanation } from '../limiter/limiter.js';
import { MAX_UINT32, type RateLimitRequest } from '../model.js';
import type { Explainer } from '../service/rate-limit-service.js';
import { requestFromJson } from '../transport/http/json.js';
import { refusePost } from './guards.js';
import { readBody, sendJson, type ConsoleEndpoint } from './http.js';
import { explainPath, ruleView } from './rules.js';

/** What the panel calls. */
export interface TrySources {
  /** The service's dry run. */
  readonly service: Explainer;
  /** Global `SHADOW_MODE`, shown with the answer (the service's answer already obeys it). */
  readonly shadowMode: boolean;
}

/** The console's view of a dry run of `request`. */
function tryView(request: RateLimitRequest, explained: Explanation, shadowMode: boolean) {
  const { snapshot, response, now, matches, counterKeys } = explained;
  const descriptors = request.descriptors.map((descriptor, i) => {
    const status = response.statuses[i]!;
    const keys = counterKeys[i]!;
    const counted = keys.length > 0;
    // The rule configured for it, even when another rule's `replaces` dropped it.
    const rule = snapshot.getLimit(request.domain, descriptor)?.rule;
    const hits = hitsFor(descriptor, request.hitsAddend);
    const fits = counted && !status.overLimit;
    return {
      entries: descriptor.entries,
      hits,
      path: explainPath(snapshot, request.domain, descriptor),
      rule: rule === undefined ? undefined : ruleView(rule),
      replaced: rule !== undefined && !rule.unlimited && matches[i] === undefined,
      code: status.code,
      currentLimit: status.currentLimit,
      // Room now: the same request checked with 0 hits.
      limitRemaining:
        rule?.unlimited === true ? MAX_UINT32 : counted ? now.statuses[i]!.limitRemaining : 0,
      // An admitted request reports its room after the charge; a rejected one charged nothing,
      // so its room after these hits is the room now less them.
      remainingAfter: !fits
        ? undefined
        : response.rejected === true
          ? Math.max(0, status.limitRemaining - hits)
          : status.limitRemaining,
      durationUntilResetMs: status.durationUntilResetMs,
      counterKeys: keys,
    };
  });
  return {
    domain: request.domain,
    knownDomain: snapshot.domains.has(request.domain),
    charged: false,
    overallCode: response.overallCode,
    // Whether the request would be admitted (and charged); SHADOW_MODE answers OK either way.
    admitted: response.rejected !== true,
    shadowMode,
    descriptors,
  };
}

/** The request a body names, or `undefined` after answering 400 saying what to fix. */
function requestOf(body: Buffer, res: http.ServerResponse): RateLimitRequest | undefined {
  let request: RateLimitRequest;
  try {
    request = requestFromJson(body);
  } catch (err) {
    if (!SluiceError.is(err, 'INVALID_JSON')) throw err;
    sendJson(res, 400, { error: err.message });
    return undefined;
  }
  if (request.domain === '' || request.descriptors.length === 0) {
    sendJson(res, 400, { error: 'give a domain and at least one descriptor' });
    return undefined;
  }
  return request;
}

/** The `/api/try` endpoint. */
export function tryPanel({ service, shadowMode }: TrySources): ConsoleEndpoint {
  return {
    path: '/api/try',
    help: 'console: POST a /json request body; the rule, path and answer per descriptor, nothing charged',
    route: async (req, res) => {
      const refused = refusePost(req);
      if (refused !== undefined) {
        sendJson(res, refused[0], { error: refused[1] });
        return;
      }
      const body = await readBody(req, res);
      if (body === undefined) return;
      const request = requestOf(body, res);
      if (request === undefined) return;
      try {
        sendJson(res, 200, tryView(request, await service.explain(request), shadowMode));
      } catch (err) {
        const error = SluiceError.from(err);
        const status =
          error.code === 'INVALID_REQUEST' ? 400 : error.code === 'STORE_UNAVAILABLE' ? 503 : 500;
        sendJson(res, status, { error: error.message, code: error.code });
      }
    },
  };
}
