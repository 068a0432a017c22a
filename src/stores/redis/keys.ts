/**
 * Redis names of counter keys (docs/semantics.md §6): `CACHE_KEY_PREFIX`, a Redis Cluster hash tag,
 * the layout version (`v2|`), then the counter key as src/limiter/keys.ts builds it. The tag is a hash of the key's descriptor
 * part (domain and entries, without algorithm and window), so every counter of one descriptor (one
 * per limit of its rule) lives in one slot and one script call can check them all. The full counter
 * key follows the tag and the layout version, so Redis names stay injective whatever the hash.
 */
import { REDIS_LAYOUT_VERSION } from './apply-script.js';

/** Number of hash slots of a Redis Cluster. */
const CLUSTER_SLOTS = 16384;

/**
 * The hash tag of a counter key (8 hex digits, FNV-1a 32 of the part after `ALG|WINDOW|`). Never
 * contains `{` or `}`, so it is the tag Redis uses when the prefix has no braces.
 */
export function hashTagOf(counterKey: string): string {
  // After the second bar; 0 (the whole key) when there are fewer than two.
  const start = counterKey.indexOf('|', counterKey.indexOf('|') + 1) + 1;
  let hash = 0x811c9dc5;
  for (let i = start; i < counterKey.length; i++) {
    hash ^= counterKey.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0).toString(16).padStart(8, '0');
}

/**
 * What follows the hash tag in every key of the current data layout (apply-script.ts,
 * `REDIS_LAYOUT_VERSION`): `v2|`. Keys of layout 1 had none and went straight on with the counter
 * key, which starts with an algorithm tag (`sw|`, `fw|`...), never with `v`: the two layouts' key
 * sets are disjoint, so replicas of both sharing one Redis never touch each other's keys.
 */
export const LAYOUT_KEY_MARK = `v${REDIS_LAYOUT_VERSION}|`;

/** The Redis key of a counter: `prefix{tag}v2|counterKey`. */
export function redisKeyOf(
  prefix: string,
  counterKey: string,
  tag = hashTagOf(counterKey),
): string {
  return prefix + '{' + tag + '}' + LAYOUT_KEY_MARK + counterKey;
}

const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

/**
 * The cluster slot of a key that carries the tag `tag` (CRC16-XMODEM of the tag modulo 16384, as
 * Redis computes it). Tags are ASCII hex, so characters are bytes.
 */
export function slotOfTag(tag: string): number {
  let crc = 0;
  for (let i = 0; i < tag.length; i++) {
    crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ tag.charCodeAt(i)) & 0xff]!;
  }
  return crc % CLUSTER_SLOTS;
}
