/**
 * The operator console in a real headless Chromium (Debian's, driven by playwright-core) against
 * a running sluice under gRPC traffic: live numbers move, a rule is found in the tree, "try it"
 * answers for a limited and an unlimited descriptor, a counter shows up limited in hot keys, and
 * reset is refused when off and works when on, and the quota panel draws an RLQS stream from a
 * client on Envoy's own proto (a hostile bucket id shown as text). Screenshots: docs/console-*.png
 * (`SLUICE_UPDATE_SCREENSHOTS=1` refreshes them).
 */
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  launchChromium,
  requireChromium,
  screenshotDir,
  type Chromium,
} from '../helpers/chromium.js';
import { startConsoleApp, type ConsoleApp } from '../helpers/console.js';
import { createEnvoyRlqsClient, type EnvoyRlqsClient } from '../helpers/envoy-rls-client.js';
import { waitFor } from '../helpers/processes.js';

const chromium = requireChromium('console browser tests');
const shots = screenshotDir();

/** Background calls: at most `max` calls or until stopped, one every few ms. */
function traffic(sluice: ConsoleApp, max = 3000): { stop(): Promise<void> } {
  let stopped = false;
  const done = (async () => {
    for (let i = 0; i < max && !stopped; i++) {
      // Mostly fresh addresses (OK); every 10th the same one, over its 20/hour after a while.
      const address = i % 10 === 0 ? '10.9.9.9' : `10.0.${i >> 8}.${i & 255}`;
      await sluice.call(
        'shop',
        { path: '/login', remote_address: address },
        { api_key: 'partner-1' },
      );
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await done;
    },
  };
}

async function textOf(page: Page, selector: string): Promise<string> {
  return (await page.locator(selector).textContent()) ?? '';
}

const number = (text: string): number => Number(text.replaceAll(',', ''));

describe.skipIf(chromium.skip)('console in Chromium (reset off)', () => {
  let sluice: ConsoleApp;
  let browser: Chromium;
  let load: { stop(): Promise<void> };
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    sluice = await startConsoleApp({}, undefined, 250);
    load = traffic(sluice);
    browser = await launchChromium();
    page = await browser.context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      // A refused reset is a 403 the page shows; Chromium also logs it as a failed load.
      if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) {
        pageErrors.push(message.text());
      }
    });
    await page.goto(`${sluice.debugUrl}/?refresh=300`);
  });
  afterAll(async () => {
    await load?.stop();
    await browser?.close();
    await sluice?.stop();
  });

  it('shows live numbers that change under traffic', async () => {
    await page.locator('#calls-ok').filter({ hasText: /\d/ }).waitFor();
    const first = number(await textOf(page, '#calls-ok'));
    await waitFor(
      'the OK count to move on the page',
      async () => number(await textOf(page, '#calls-ok')) > first,
      { timeoutMs: 15_000 },
    );
    expect(await textOf(page, '#store')).toContain('memory');
    expect(await textOf(page, '#config')).toContain('version 1: 1 domains, 4 rules');
    expect(await textOf(page, '#last-load')).toContain('loaded');
    await waitFor('a non-zero rate', async () => Number(await textOf(page, '#rate-ok')) > 0, {
      timeoutMs: 15_000,
    });
    await waitFor(
      'a drawn chart line',
      async () => (await page.locator('#chart-ok polyline').count()) === 1,
      { timeoutMs: 15_000 },
    );
    await page.screenshot({ path: path.join(shots, 'console-now.png') });
  });

  it('is usable from the keyboard: skip link first, labelled fields', async () => {
    await page.locator('body').focus();
    await page.keyboard.press('Tab');
    expect(await page.locator(':focus').textContent()).toBe('Skip to the panels');
    await page.keyboard.press('Enter');
    // Following the link is a navigation the keypress only starts: wait for it (bounded).
    await page.waitForURL(/#main$/, { timeout: 5_000 });
    // Every field has a label (getByLabel finds each).
    for (const label of ['Search keys, values and rule names', 'Hits', 'Counter key']) {
      expect(await page.getByLabel(label, { exact: false }).count()).toBe(1);
    }
  });

  it('finds a rule in the tree by searching', async () => {
    const tree = page.locator('#rule-tree');
    await tree.getByText('domain shop').waitFor();
    await page.getByLabel('Search keys, values and rule names').fill('login');
    const login = tree.locator('li:visible', { hasText: 'remote_address' });
    await expect.poll(() => login.count()).toBeGreaterThan(0);
    expect(await login.first().textContent()).toContain('20 / hour');
    expect(await tree.locator('li:visible', { hasText: /^user/ }).count()).toBe(0);
    expect(await textOf(page, '#rule-count')).toMatch(/[1-9]\d* matching descriptors/);
    await page.locator('#rules').screenshot({ path: path.join(shots, 'console-rules.png') });
    await page.getByLabel('Search keys, values and rule names').fill('');
  });

  it('shows a counter becoming limited in hot keys', async () => {
    for (let i = 0; i < 3; i++) expect(await sluice.call('shop', { user: 'dave' })).toBe('OK');
    expect(await sluice.call('shop', { user: 'dave' })).toBe('OVER_LIMIT');
    const row = page.locator('#hot-limited tr', { hasText: 'user=dave' });
    await row.waitFor({ timeout: 15_000 });
    expect(await row.textContent()).toContain('shop.user');
    expect(await row.locator('td').nth(4).textContent()).toBe('0');
    await page.locator('#hot').screenshot({ path: path.join(shots, 'console-hot-keys.png') });
  });

  it('tries a limited and an unlimited descriptor without charging', async () => {
    await page.getByLabel('Domain', { exact: true }).fill('shop');
    await page.getByLabel(/^Descriptors/).fill('user=dave\nhealth=probe');
    await page.getByLabel('Hits').fill('1');
    // Submitted from the keyboard.
    await page.getByLabel('Hits').press('Enter');
    await page.locator('#try-overall').waitFor();
    expect(await textOf(page, '#try-overall')).toBe('OVER_LIMIT');
    const rows = page.locator('#try-result tbody tr');
    expect(await rows.nth(0).textContent()).toContain('shop.user');
    expect(await textOf(page, '[data-testid="try-code-0"]')).toBe('OVER_LIMIT');
    expect(await textOf(page, '[data-testid="try-code-1"]')).toBe('OK');
    expect(await rows.nth(1).textContent()).toContain('unlimited');
    expect(await rows.nth(0).textContent()).toContain('user=dave → user (default)');
    await page.locator('#try').screenshot({ path: path.join(shots, 'console-try.png') });

    await page.getByLabel(/^Descriptors/).fill('user=erin');
    await page.getByRole('button', { name: 'Try' }).click();
    await expect.poll(() => textOf(page, '#try-overall')).toBe('OK');
    // Trying charged nothing: the store holds no counter for erin.
    const hot = (await (await fetch(`${sluice.debugUrl}/api/hot?n=200`)).json()) as {
      busiest: { key: string }[];
    };
    expect(hot.busiest.some((row) => row.key.includes('erin'))).toBe(false);
    expect(await sluice.call('shop', { user: 'erin' })).toBe('OK');
  });

  it('offers no reset when it is not enabled: every Reset button disabled, and shown so', async () => {
    expect(await textOf(page, '#reset-note')).toContain('DEBUG_CONSOLE_RESET_ENABLED=true');
    const rowButton = page
      .locator('#hot-limited tr', { hasText: 'user=dave' })
      .getByRole('button', { name: /Reset counter/ });
    const formButton = page.locator('#reset-form').getByRole('button', { name: 'Reset' });
    for (const button of [rowButton, formButton]) {
      expect(await button.isDisabled()).toBe(true);
      expect(await button.getAttribute('title')).toContain('DEBUG_CONSOLE_RESET_ENABLED=true');
    }
    // Shown disabled: not the accent colour of a button that acts.
    const look = (selector: string): Promise<string> =>
      page.evaluate<string>(
        `getComputedStyle(document.querySelector(${JSON.stringify(selector)})).backgroundColor`,
      );
    expect(await look('#reset-submit')).not.toBe(await look('#try-form button'));
    // The page redraws the hot table on every poll: a click that lands while the row is being
    // replaced finds no button to press, so it is tried again on the redrawn row.
    await waitFor(
      'a click on the disabled Reset button of the row',
      async () => {
        await rowButton.click({ force: true, timeout: 1_000 });
        return true;
      },
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    expect(await textOf(page, '#reset-result')).toBe('');
    expect(await sluice.call('shop', { user: 'dave' })).toBe('OVER_LIMIT');
  });

  it('says how many hits "try it" checked, as the Hits field asks', async () => {
    expect(await textOf(page, '#try')).not.toMatch(/with 0 hits/);
    await page.getByLabel('Domain', { exact: true }).fill('shop');
    await page.getByLabel(/^Descriptors/).fill('user=frank');
    await page.getByLabel('Hits').fill('2');
    await page.getByRole('button', { name: 'Try' }).click();
    await expect.poll(() => textOf(page, '#try-result p')).toMatch(/^Answer for 2 hits: OK/);
    expect(await textOf(page, '#try-result p')).toContain('nothing was charged');
  });

  it('labels each chart in text as large as the captions', async () => {
    await expect.poll(() => textOf(page, '#chart-ok-label')).toMatch(/^now .* top of the scale/);
    for (const chart of ['chart-ok', 'chart-over', 'chart-keys']) {
      // No SVG text: the chart's box is stretched to the panel, which shrank it to a few pixels.
      expect(await page.locator(`#${chart} text`).count()).toBe(0);
      const size = await page.evaluate<number>(
        `parseFloat(getComputedStyle(document.getElementById('${chart}-label')).fontSize)`,
      );
      expect(size).toBeGreaterThanOrEqual(11);
    }
  });

  it('wraps keys and rule names between their parts, never inside a word', async () => {
    await page.setViewportSize({ width: 420, height: 900 });
    try {
      await page.locator('#hot-busiest td.key').first().waitFor();
      // Browser code (the test's TypeScript has no DOM types): for each key cell, where each
      // line after the first starts, and the character before it.
      const breaks = await page.evaluate<{ bad: string[]; wrapped: number }>(`(() => {
        const separator = /[._,=:/|\\- ]/;
        const bad = [];
        let wrapped = 0;
        for (const cell of document.querySelectorAll('#hot td.key')) {
          const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
          let top;
          let before = '';
          let lines = 1;
          for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
            const text = node.textContent;
            for (let i = 0; i < text.length; i++) {
              const range = document.createRange();
              range.setStart(node, i);
              range.setEnd(node, i + 1);
              const rect = range.getClientRects()[0];
              if (rect === undefined) continue;
              if (top !== undefined && rect.top > top + 2) {
                lines++;
                if (!separator.test(before)) bad.push(cell.textContent + ': after "' + before + '"');
              }
              top = rect.top;
              before = text[i];
            }
          }
          if (lines > 1) wrapped++;
        }
        return { bad, wrapped };
      })()`);
      expect(breaks.wrapped).toBeGreaterThan(0);
      expect(breaks.bad).toEqual([]);
    } finally {
      await page.setViewportSize({ width: 1366, height: 900 });
    }
  });

  it('raised no script error and no Content-Security-Policy violation', () => {
    expect(pageErrors).toEqual([]);
  });
});

describe.skipIf(chromium.skip)('console in Chromium (reset on)', () => {
  let sluice: ConsoleApp;
  let browser: Chromium;

  beforeAll(async () => {
    sluice = await startConsoleApp({ DEBUG_CONSOLE_RESET_ENABLED: 'true' }, undefined, 250);
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await sluice?.stop();
  });

  it('resets a limited counter from hot keys', async () => {
    for (let i = 0; i < 3; i++) await sluice.call('shop', { user: 'dave' });
    expect(await sluice.call('shop', { user: 'dave' })).toBe('OVER_LIMIT');
    const page = await browser.context.newPage();
    await page.goto(`${sluice.debugUrl}/?refresh=300`);
    const row = page.locator('#hot-limited tr', { hasText: 'user=dave' });
    await row.waitFor({ timeout: 15_000 });
    expect(await textOf(page, '#reset-note')).toContain('Reset is on');
    expect(await row.getByRole('button', { name: /Reset counter/ }).isDisabled()).toBe(false);
    await row.getByRole('button', { name: /Reset counter/ }).click();
    await expect.poll(() => textOf(page, '#reset-result')).toMatch(/^Reset .*dave/);
    await row.waitFor({ state: 'detached', timeout: 15_000 });
    await page.locator('#reset').screenshot({ path: path.join(shots, 'console-reset.png') });
    expect(await sluice.call('shop', { user: 'dave' })).toBe('OK');
    const line = sluice.logLines.find((l) => l['msg'] === 'console: counters reset');
    expect(line?.['remote']).toMatch(/^127\.0\.0\.1:\d+$/);
  });
});

/** A bucket id a client chose to be markup: the page must show it as text. */
const HOSTILE = '<img src=x onerror="document.title=`pwned`">';

describe.skipIf(chromium.skip)('console in Chromium (Quota RLQS panel)', () => {
  let sluice: ConsoleApp;
  let browser: Chromium;
  let client: EnvoyRlqsClient;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    sluice = await startConsoleApp({}, undefined, 250);
    client = createEnvoyRlqsClient(`127.0.0.1:${sluice.grpcPort}`);
    browser = await launchChromium();
    page = await browser.context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await page.goto(`${sluice.debugUrl}/?refresh=300`);
  });
  afterAll(async () => {
    client?.close();
    await browser?.close();
    await sluice?.stop();
  });

  it('says what to configure while no Envoy has a stream open', async () => {
    await expect
      .poll(() => textOf(page, '#rlqs-note'))
      .toContain('No Envoy has a quota stream open');
    expect(await textOf(page, '#rlqs-note')).toContain('envoy.filters.http.rate_limit_quota');
    expect(await textOf(page, '#rlqs-note')).toContain('docs/rlqs.md');
    expect(await page.locator('#rlqs-buckets table').count()).toBe(0);
  });

  it('draws each bucket with its rule, and per stream its usage, share and assignment', async () => {
    /** One bucket's usage over the last minute, as Envoy reports it. */
    const usage = (bucket: Record<string, string>, allowed: number, denied: number): object => ({
      bucket_id: { bucket },
      time_elapsed: { seconds: 60 },
      num_requests_allowed: allowed,
      num_requests_denied: denied,
    });
    const first = client.openStream();
    const second = client.openStream();
    try {
      first.call.write({
        domain: 'shop',
        bucket_quota_usages: [usage({ user: 'ann' }, 2, 1), usage({ health: 'probe' }, 7, 0)],
      });
      await waitFor('the assignments', () => first.answers.length > 0, { timeoutMs: 5_000 });
      const ann = page.locator('#rlqs-buckets .quota-bucket', { hasText: 'user=ann' });
      await ann.waitFor({ timeout: 15_000 });
      expect(await textOf(page, '#rlqs-note')).toMatch(/^1 stream open, 2 buckets/);
      expect(await ann.locator('h3').textContent()).toBe(
        'shop: user=annrule shop.user: 3 / 60 s, window',
      );
      // Stream, allowed, denied, demand, share, sent, strategy sent, TTL.
      expect(await ann.locator('tbody tr').first().locator('td').allTextContents()).toEqual([
        '#1',
        '2',
        '1',
        '3',
        '3',
        '3',
        'token bucket 3 / 60 s, max 3',
        '4 min',
      ]);
      const unlimited = page.locator('#rlqs-buckets .quota-bucket', { hasText: 'health=probe' });
      expect(await unlimited.locator('h3').textContent()).toContain('unlimited: allowed');
      const free = await unlimited.locator('tbody td').allTextContents();
      expect(free.slice(1, 7)).toEqual(['7', '0', '0', '–', '–', 'allow-all']);

      // A second Envoy on the same bucket: two rows whose shares add up to the limit.
      second.call.write({ domain: 'shop', bucket_quota_usages: [usage({ user: 'ann' }, 1, 0)] });
      await expect.poll(() => ann.locator('tbody tr').count(), { timeout: 15_000 }).toBe(2);
      const shares = await ann.locator('tbody tr td:nth-child(5)').allTextContents();
      expect(shares.reduce((sum, share) => sum + Number(share), 0)).toBe(3);
      expect(await ann.locator('tbody tr').nth(1).locator('td').nth(1).textContent()).toBe('1');
      await page.locator('#rlqs').screenshot({ path: path.join(shots, 'console-rlqs.png') });

      // A bucket id made of markup is text: no element was made of it, its handler never ran.
      first.call.write({ domain: 'shop', bucket_quota_usages: [usage({ user: HOSTILE }, 1, 0)] });
      const hostile = page.locator('#rlqs-buckets .quota-bucket', { hasText: 'user=<img' });
      await expect.poll(() => hostile.count(), { timeout: 15_000 }).toBe(1);
      expect(await page.locator('#rlqs img').count()).toBe(0);
      expect(await hostile.locator('h3').textContent()).toContain(`user=${HOSTILE}`);
      expect(await page.title()).toBe('sluice console');
    } finally {
      first.call.end();
      second.call.end();
    }
    await waitFor('the streams closed', () => sluice.app.quota.streamCount === 0, {
      timeoutMs: 5_000,
    });
    await expect
      .poll(() => textOf(page, '#rlqs-note'), { timeout: 15_000 })
      .toContain('No Envoy has a quota stream open');
    expect(await page.locator('#rlqs-buckets .quota-bucket').count()).toBe(0);
  });

  it('greys the panel, saying so, where the process has no RLQS endpoint', async () => {
    // Every sluice serves RLQS; a console without the endpoint (404) is what an embedding that
    // passes no quota service shows, played here by answering the page's reads of it with 404.
    const other = await browser.context.newPage();
    try {
      await other.route('**/api/rlqs*', (route) => route.fulfill({ status: 404, body: '' }));
      await other.goto(`${sluice.debugUrl}/?refresh=300`);
      await expect
        .poll(() => textOf(other, '#rlqs-note'))
        .toBe('This sluice does not serve the Rate Limit Quota Service.');
      expect(await other.locator('#rlqs').getAttribute('class')).toBe('off');
      expect(await textOf(other, '#status')).not.toContain('Cannot reach');
    } finally {
      await other.close();
    }
  });

  it('raised no script error', () => {
    expect(pageErrors).toEqual([]);
  });
});
