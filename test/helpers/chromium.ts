/**
 * A real headless Chromium for the console's browser tests: Debian's `chromium` driven by
 * playwright-core (no browser download). Missing locally: the suite is skipped with the reason;
 * missing under CI: it runs and fails, so the gap is seen (.ci/run installs it).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { fileAt, requireBinaries, type Requirement } from './require-binaries.js';

/** Where Debian installs Chromium; `SLUICE_CHROMIUM` overrides it. */
const CHROMIUM_PATH = process.env['SLUICE_CHROMIUM'] ?? '/usr/bin/chromium';

/** Chromium at {@link CHROMIUM_PATH}, by {@link requireBinaries}. */
export function requireChromium(suite: string): Requirement {
  return requireBinaries(suite, [
    {
      name: 'chromium',
      missing: () => fileAt(CHROMIUM_PATH),
      install: 'Debian: apt-get install chromium',
    },
  ]);
}

/** A headless Chromium with a fresh profile, removed on close. */
export interface Chromium {
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/** Launch Chromium headless with a throwaway profile and no network beyond what pages ask. */
export async function launchChromium(): Promise<Chromium> {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    viewport: { width: 1366, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    context,
    async close() {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Where screenshots go: docs/ when `SLUICE_UPDATE_SCREENSHOTS=1` (to refresh the ones the docs
 * show), else a temp folder, so a test run leaves the work tree as it was.
 */
export function screenshotDir(): string {
  if (process.env['SLUICE_UPDATE_SCREENSHOTS'] === '1') {
    return path.resolve(import.meta.dirname, '../../docs');
  }
  return fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-screenshots-'));
}
