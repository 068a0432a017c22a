/**
 * The RLQS endpoint (`/api/rlqs`): the Rate Limit Quota Service's buckets with their limit and,
 * per Envoy stream, its demand, the share computed for it and the share last sent
 * (docs/rlqs.md). JSON only; the page does not draw it yet.
 */
import type { QuotaService } from '../rlqs/quota-service.js';
import { cut, sendJson, type ConsoleEndpoint } from './http.js';

/** Default and largest `n` of `/api/rlqs?n=` (buckets, busiest first). */
const RLQS_DEFAULT = 50;
const RLQS_MAX = 200;
/** Most streams listed per bucket. */
const STREAMS_MAX = 50;
/** Most entries shown per bucket id. */
const ENTRIES_MAX = 16;

/** The `/api/rlqs` endpoint over `quota`. */
export function rlqsPanel(quota: QuotaService): ConsoleEndpoint {
  return {
    path: '/api/rlqs',
    help: 'console: RLQS buckets, their limit and each stream demand and share (JSON)',
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
          limit: bucket.limit,
          demand: Math.round(demand),
          streams: bucket.shares.slice(0, STREAMS_MAX).map((s) => ({
            demand: Math.round(s.demand),
            share: s.share,
            sent: s.sent,
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
