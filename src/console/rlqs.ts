/**
 * The RLQS endpoint (`/api/rlqs`): the Rate Limit Quota Service's buckets with their rule and
 * limit and, per Envoy stream, its last report (allowed, denied), its demand, the share computed
 * for it, the share and strategy last sent and their time to live (docs/rlqs.md). The page's
 * "Quota (RLQS)" panel draws it.
 */
import type { BucketRule } from '../rlqs/bucket-rule.js';
import type { QuotaService } from '../rlqs/quota-service.js';
import { cut, sendJson, type ConsoleEndpoint } from './http.js';

/** Default and largest `n` of `/api/rlqs?n=` (buckets, busiest first). */
const RLQS_DEFAULT = 50;
const RLQS_MAX = 200;
/** Most streams listed per bucket. */
const STREAMS_MAX = 50;
/** Most entries shown per bucket id. */
const ENTRIES_MAX = 16;

/** The rule as the page shows it: the limited rule's key, window and algorithm, or why not. */
function ruleView(rule: BucketRule): Record<string, unknown> {
  if (rule.kind === 'allow') return { allow: rule.reason };
  return {
    key: cut(rule.ruleKey),
    windowMs: rule.windowMs,
    algorithm: rule.tokenBucket ? 'token_bucket' : 'window',
    burst: rule.tokenBucket ? rule.burst : undefined,
  };
}

/** The `/api/rlqs` endpoint over `quota`. */
export function rlqsPanel(quota: QuotaService): ConsoleEndpoint {
  return {
    path: '/api/rlqs',
    help: 'console: RLQS buckets, their rule and each stream usage, share and assignment (JSON)',
    route: (req, res) => {
      const asked = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('n'));
      const n = Number.isInteger(asked) && asked > 0 ? Math.min(asked, RLQS_MAX) : RLQS_DEFAULT;
      const rows = [...quota.describe()]
        .map((bucket) => ({
          bucket,
          demand: bucket.shares.reduce((sum, s) => sum + s.demand, 0),
        }))
        .sort((a, b) => b.demand - a.demand)
        .slice(0, n)
        .map(({ bucket, demand }) => ({
          domain: cut(bucket.domain),
          bucketId: bucket.bucketId
            .slice(0, ENTRIES_MAX)
            .map(({ key, value }) => ({ key: cut(key), value: cut(value) })),
          moreEntries:
            bucket.bucketId.length > ENTRIES_MAX ? bucket.bucketId.length - ENTRIES_MAX : undefined,
          limit: bucket.limit,
          rule: ruleView(bucket.rule),
          demand: Math.round(demand),
          streams: bucket.shares.slice(0, STREAMS_MAX).map((s) => ({
            allowed: s.allowed,
            denied: s.denied,
            elapsedMs: s.elapsedMs,
            demand: Math.round(s.demand),
            share: s.share,
            sent: s.sent,
            // The strategy last sent, as Envoy got it (absent before the first assignment).
            strategy: s.strategy,
            ttlMs: s.ttlMs,
          })),
          moreStreams:
            bucket.shares.length > STREAMS_MAX ? bucket.shares.length - STREAMS_MAX : undefined,
        }));
      sendJson(res, 200, {
        streams: quota.streamCount,
        buckets: quota.bucketCount,
        list: rows,
      });
    },
  };
}
