/**
 * The rate limit configuration: the reference's YAML files -> validated, immutable
 * ConfigSnapshot; rule matching (`getLimit`); loading from disk, `sluice check`, hot reload.
 */
export type { Algorithm, ConfigSnapshot, DomainInfo, LimitMatch } from './types.js';
export type { ConfigFileInput, ConfigOptions } from './validate.js';
export { buildSnapshot } from './snapshot.js';
export {
  checkConfig,
  collectConfigFiles,
  isIgnoredName,
  isRuleFileName,
  loadSnapshot,
  type CheckResult,
} from './load.js';
export { watchConfig, type ConfigWatcher, type WatchOptions } from './watch.js';
export { descriptorKey } from './match.js';
export { compileGlob, matchGlob, type Glob } from './glob.js';
