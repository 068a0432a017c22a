/**
 * How sluice replicas share RLQS usage (docs/rlqs.md, "Several sluice replicas"): every second
 * each replica publishes, per bucket its Envoys report, its total demand and its number of
 * streams, and reads every other live replica's. One Lua call per bucket does both, with the
 * time taken from Redis (`TIME`), so replica clocks do not matter; a replica that stops
 * publishing drops out after the TTL.
 */
import { createHash } from 'node:crypto';
import type { RedisClient } from '../stores/redis/redis-store.js';

/** One replica's aggregate for one bucket. */
export interface PeerDemand {
  /** The replica's id (random per process). */
  readonly replica: string;
  /** Its streams' demand summed, requests per window of the bucket's rule. */
  readonly demand: number;
  /** Its streams reporting the bucket. */
  readonly instances: number;
}

/** What this replica publishes for one bucket. */
export interface LocalDemand {
  /** The bucket's key (domain and sorted entries). */
  readonly key: string;
  /** This replica's demand. */
  readonly demand: number;
  /** This replica's streams reporting it. */
  readonly instances: number;
}

/** Publishes this replica's demands and reads the others'. */
export interface DemandExchange {
  /** This replica's id. */
  readonly replica: string;
  /**
   * Publish `local` and read, per bucket key, every OTHER replica that published it within
   * the TTL. Rejects when the shared store fails (the caller keeps its last view).
   */
  exchange(local: readonly LocalDemand[]): Promise<Map<string, PeerDemand[]>>;
  /** Stop (the client is the caller's to close). */
  close(): Promise<void>;
}

/**
 * KEYS[1]: the bucket's hash (field = replica id, value = `demand,instances,published_ms`).
 * ARGV[1] replica id, ARGV[2] demand, ARGV[3] instances, ARGV[4] TTL ms.
 * Writes this replica's field, drops fields older than the TTL (by Redis time), sets the key's
 * TTL, and returns the other live fields flattened: `{replica, demand, instances, ...}`.
 */
const EXCHANGE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[4])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ',' .. ARGV[3] .. ',' .. now)
redis.call('PEXPIRE', KEYS[1], ttl)
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local field = all[i]
  if field ~= ARGV[1] then
    local d, n, at = string.match(all[i + 1], '^([^,]*),([^,]*),([^,]*)$')
    if at == nil or now - tonumber(at) > ttl then
      redis.call('HDEL', KEYS[1], field)
    else
      out[#out + 1] = field
      out[#out + 1] = d
      out[#out + 1] = n
    end
  end
end
return out
`;

/** Options of {@link createRedisDemandExchange}. */
export interface RedisDemandExchangeOptions {
  /** A connected (or connecting) client; closed by the caller. */
  readonly client: RedisClient;
  /** `CACHE_KEY_PREFIX`. */
  readonly keyPrefix: string;
  /** This replica's id. */
  readonly replica: string;
  /** How long a replica's numbers count after it published them, ms. */
  readonly ttlMs: number;
  /** The longest one exchange may take, ms (`REDIS_TIMEOUT`). */
  readonly timeoutMs: number;
}

type ExchangeClient = RedisClient & {
  rlqsExchange(key: string, ...args: (string | number)[]): Promise<string[]>;
};

/** An exchange through Redis. */
export function createRedisDemandExchange(options: RedisDemandExchangeOptions): DemandExchange {
  const client = options.client as ExchangeClient;
  client.defineCommand('rlqsExchange', { numberOfKeys: 1, lua: EXCHANGE_SCRIPT });
  const { replica, ttlMs, timeoutMs, keyPrefix } = options;
  return {
    replica,
    async exchange(local) {
      const calls = local.map((entry) =>
        client.rlqsExchange(
          redisKey(keyPrefix, entry.key),
          replica,
          entry.demand.toFixed(3),
          entry.instances,
          ttlMs,
        ),
      );
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`RLQS exchange over ${timeoutMs} ms`)),
          timeoutMs,
        );
      });
      try {
        const replies = await Promise.race([Promise.all(calls), timeout]);
        const out = new Map<string, PeerDemand[]>();
        replies.forEach((reply, i) => out.set(local[i]!.key, parsePeers(reply)));
        return out;
      } finally {
        clearTimeout(timer);
        // Calls still running after a timeout settle later; their result is not wanted.
        for (const call of calls) call.catch(() => undefined);
      }
    },
    async close() {},
  };
}

/** The Redis key of a bucket: a digest, so any bucket id gives a short key. */
function redisKey(prefix: string, bucketKey: string): string {
  const digest = createHash('sha1').update(bucketKey).digest('hex');
  return `${prefix}rlqs|${digest}`;
}

/** The script's reply as peers; malformed numbers count as 0. */
function parsePeers(reply: readonly string[]): PeerDemand[] {
  const peers: PeerDemand[] = [];
  for (let i = 0; i + 2 < reply.length; i += 3) {
    const demand = Number(reply[i + 1]);
    const instances = Number(reply[i + 2]);
    peers.push({
      replica: reply[i]!,
      demand: Number.isFinite(demand) && demand > 0 ? demand : 0,
      instances: Number.isInteger(instances) && instances > 0 ? instances : 0,
    });
  }
  return peers;
}
