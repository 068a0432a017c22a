// Registers ./ts-worker-hooks.mjs (see there): vitest.config.ts passes this file in `execArgv`.
import { register } from 'node:module';

register('./ts-worker-hooks.mjs', import.meta.url);
