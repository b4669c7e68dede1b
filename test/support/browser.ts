// Pages opened where people open them: Debian's Chromium, headless, driven by playwright-core, from file:// URLs with
// the network off. Every page's console errors, uncaught exceptions, dialogs and requests for anything but its own
// file are collected, so that a test can say the page loaded cleanly and ran nothing it was not meant to.
import type { TestContext } from 'node:test';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { needCommand } from './requirements.js';

const executablePath = '/usr/bin/chromium';

/** Chromium, started once per test file (undefined when it is missing: the test was failed or skipped). */
export async function startBrowser(t: TestContext): Promise<Browser | undefined> {
  if (!needCommand(t, 'chromium', 'chromium')) return undefined;
  return launchChromium();
}

/** Debian's Chromium, headless, as the tests and `npm run bench pages` start it. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath,
    headless: true,
    // As root, without a sandbox; without background networking Chromium makes no request of its own.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

export interface OpenedPage {
  page: Page;
  /** Console errors and uncaught exceptions, as text. */
  errors: string[];
  /** Dialogs the page opened (alert, confirm, prompt), by message. */
  dialogs: string[];
  /** Requests for anything but the page's own file, refused. */
  requests: string[];
  /** Milliseconds from navigation to the load event. */
  loadMs: number;
  close(): Promise<void>;
}

/**
 * Opens `path` offline. `answer` replies to prompt() dialogs (the SVG's search asks for its term with one); other
 * dialogs are dismissed, and all are recorded. With `siblings`, files in the page's folder may load too.
 */
export async function openPage(
  browser: Browser,
  path: string,
  answer?: () => string | undefined,
  options: { siblings?: boolean } = {},
): Promise<OpenedPage> {
  const context = await browser.newContext({ offline: true, viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  const url = pathToFileURL(path).href;
  const errors: string[] = [];
  const dialogs: string[] = [];
  const requests: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(String(error)));
  page.on('dialog', (dialog) => {
    dialogs.push(`${dialog.type()}: ${dialog.message()}`);
    const reply = dialog.type() === 'prompt' ? answer?.() : undefined;
    void (reply === undefined ? dialog.dismiss() : dialog.accept(reply));
  });
  await context.route('**/*', (route) => {
    const requested = route.request().url();
    // A page of ours is one file; a page of another tool's (speedscope) may load the files beside it.
    const sibling = options.siblings === true && requested.startsWith(url.slice(0, url.lastIndexOf('/') + 1));
    if (requested === url || sibling) return route.continue();
    requests.push(requested);
    return route.abort();
  });
  const start = performance.now();
  await page.goto(url, { waitUntil: 'load' });
  const loadMs = performance.now() - start;
  return { page, errors, dialogs, requests, loadMs, close: () => context.close() };
}
