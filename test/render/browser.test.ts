// The pages people open, opened where they open them: flamegraph.html, flamegraph.svg, the diff's pages and `profcpu
// watch`'s index.html in Debian's Chromium (headless, playwright-core), each from a file with the network off. Each
// loads with no console error and no request; a click zooms into a frame and Reset Zoom comes back; a search
// highlights the matches and shows their share; hovering shows the frame's name and figures; the diff pages colour a
// grown frame red and a shrunk one blue; hostile frame names show as text and run nothing; a 40 000-stack graph opens
// (its time is printed, not asserted: `npm run bench pages` measures it).
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test, type TestContext } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { renderDiffHtml, renderDiffSvg } from '../../src/render/diff.js';
import { renderHtml } from '../../src/render/html.js';
import { renderPprof } from '../../src/render/pprof.js';
import { renderSpeedscope } from '../../src/render/speedscope.js';
import { renderSvg } from '../../src/render/svg.js';
import { diffStacks } from '../../src/stacks/diff.js';
import { parseFoldedText, type FoldedStacks } from '../../src/stacks/folded.js';
import { indexHtml, type RunEntry } from '../../src/watch/run-index.js';
import { openPage, startBrowser, type OpenedPage } from '../support/browser.js';
import { tempDir } from '../support/temp.js';
import { syntheticStacks } from '../../scripts/bench/support/synthetic-stacks.js';
import { readFixture } from './golden.js';

/** Started by the first test that needs it, which says what is missing when it is. */
let browser: Browser | undefined;
after(async () => {
  await browser?.close();
});

const stacks = () => parseFoldedText(readFixture('dotnet.folded')).stacks;
/**
 * The fixture's frame `Profcpu.Demo.Hot::Spin(System.Int32)`: 157 of 382 samples under Main, 55 more under a thread's
 * start, so a search for it matches 212.
 */
const spin = 'Profcpu.Demo.Hot::Spin(System.Int32)';
const matchedShare = (100 * 212) / 382;

async function page(t: TestContext, name: string, content: string, answer?: () => string) {
  if (!browser) {
    browser = await startBrowser(t);
    if (!browser) return undefined;
  }
  const dir = await tempDir(t, 'browser');
  const path = join(dir, name);
  await writeFile(path, content);
  const opened = await openPage(browser, path, answer);
  t.after(() => opened.close());
  return opened;
}

function assertClean(opened: OpenedPage, what: string): void {
  assert.deepEqual(opened.errors, [], `${what}: console errors`);
  assert.deepEqual(opened.requests, [], `${what}: requests`);
  assert.deepEqual(opened.dialogs, [], `${what}: dialogs`);
}

/** The width of the HTML graph's frame named `name` (its rect), after transitions settle. */
async function htmlFrameWidth(page: Page, name: string): Promise<number> {
  await page.waitForTimeout(700);
  return page.$eval(`g.frame[name="${name}"] rect`, (rect) => Number(rect.getAttribute('width')));
}

test('flamegraph.html: loads offline, zooms on click and back, searches, shows a frame’s figures', async (t) => {
  const opened = await page(t, 'flamegraph.html', renderHtml(stacks(), { title: 'browser test' }));
  if (!opened) return;
  const { page: p } = opened;
  await p.waitForSelector('g.frame');
  const full = await htmlFrameWidth(p, 'all');
  const before = await htmlFrameWidth(p, spin);
  assert.ok(before > 0 && before < full * 0.6, `${before} of ${full}`);
  await p.click(`g.frame[name="${spin}"]`);
  const zoomed = await htmlFrameWidth(p, spin);
  assert.ok(Math.abs(zoomed - full) < 2, `zoomed to ${zoomed} of ${full}`);
  await p.click('#reset-zoom');
  assert.ok(Math.abs((await htmlFrameWidth(p, spin)) - before) < 1);

  await p.fill('#term', 'Hot::Spin');
  await p.waitForTimeout(400);
  assert.equal(await p.textContent('#matched'), `Matched: ${matchedShare.toFixed(2)}%`);
  const fill = await p.$eval(`g.frame[name="${spin}"] rect`, (rect) => rect.getAttribute('fill'));
  assert.equal(fill, 'rgb(230,0,230)');
  await p.click('#clear-search');

  await p.hover(`g.frame[name="${spin}"]`);
  assert.equal(await p.textContent('#details'), `${spin} (157 samples, ${((100 * 157) / 382).toFixed(2)}%)`);
  assertClean(opened, 'flamegraph.html');
});

test('flamegraph.svg: loads offline, zooms on click and back, searches by prompt, tooltips', async (t) => {
  const opened = await page(t, 'flamegraph.svg', renderSvg(stacks()), () => 'Hot::Spin');
  if (!opened) return;
  const { page: p } = opened;
  // The Spin frame under Main, marked for the selectors below.
  await p.$$eval(
    '#frames > g',
    (found, title) =>
      found.find((g) => g.querySelector('title')?.textContent === title)?.setAttribute('data-test', 'spin'),
    `${spin} (157 samples, 41.10%)`,
  );
  const frame = '#frames > g[data-test="spin"]';
  const width = () => p.$eval(`${frame} rect`, (rect) => Number(rect.getAttribute('width')));
  const before = await width();
  assert.ok(before > 100 && before < 1000, String(before));
  await p.click(frame);
  assert.equal(await width(), 1180);
  await p.click('#unzoom');
  assert.equal(await width(), before);

  await p.click('#search');
  assert.equal(await p.textContent('#matched'), `Matched: ${matchedShare.toFixed(1)}%`);
  assert.equal(await p.$eval(`${frame} rect`, (rect) => rect.getAttribute('fill')), 'rgb(230,0,230)');
  assert.deepEqual(opened.dialogs, ['prompt: Search for a frame (regular expression, e.g. ^System\\.Text)']);
  opened.dialogs.length = 0;

  assert.equal(await p.$eval(`${frame} title`, (title) => title.textContent), `${spin} (157 samples, 41.10%)`);
  await p.hover(frame);
  assert.equal(await p.textContent('#details'), `Function: ${spin} (157 samples, 41.10%)`);
  assertClean(opened, 'flamegraph.svg');
});

const diff = () =>
  diffStacks(
    new Map([
      ['app;main;grew', 10],
      ['app;main;shrank', 40],
      ['app;main;same', 50],
    ]),
    new Map([
      ['app;main;grew', 40],
      ['app;main;shrank', 10],
      ['app;main;same', 50],
    ]),
  );

const red = (fill: string | null) => /^rgb\(255,\s*\d+,\s*\d+\)$/.test(fill ?? '') && !fill!.endsWith(',255)');
const blue = (fill: string | null) => /^rgb\(\d+,\s*\d+,\s*255\)$/.test(fill ?? '') && !fill!.startsWith('rgb(255');

test('diff.html and diff.svg: a grown frame red, a shrunk one blue, tooltips with before and after', async (t) => {
  const html = await page(t, 'diff.html', renderDiffHtml(diff()));
  if (!html) return;
  await html.page.waitForSelector('g.frame');
  await html.page.waitForTimeout(700);
  const htmlFill = (name: string) => html.page.$eval(`g.frame[name="${name}"] rect`, (r) => r.getAttribute('fill'));
  assert.ok(red(await htmlFill('grew')), String(await htmlFill('grew')));
  assert.ok(blue(await htmlFill('shrank')), String(await htmlFill('shrank')));
  await html.page.hover('g.frame[name="grew"]');
  assert.equal(
    await html.page.textContent('#details'),
    'grew (before 10 samples (10.00%), after 40 (40.00%), +30.00 pts)',
  );
  assertClean(html, 'diff.html');

  const svg = await page(t, 'diff.svg', renderDiffSvg(diff()));
  if (!svg) return;
  const svgFill = (name: string) =>
    svg.page.$eval(`#frames > g:has(title:text-matches("^${name} \\\\("))  rect`, (r) => r.getAttribute('fill'));
  assert.ok(red(await svgFill('grew')), String(await svgFill('grew')));
  assert.ok(blue(await svgFill('shrank')), String(await svgFill('shrank')));
  assertClean(svg, 'diff.svg');
});

test('hostile frame names show as text and run nothing, in every page', async (t) => {
  const names = [
    '<img src=x onerror="alert(1)">',
    '<script>alert(2)</script>',
    '"><svg onload=alert(3)>',
    '\u202egnp.exe',
    ']]><script>alert(4)</script>',
  ];
  const hostile: FoldedStacks = new Map(names.map((name, i) => [`app;${name};leaf${i}`, i + 1]));
  const diffed = diffStacks(hostile, new Map([...hostile].map(([s, n]) => [s, n * 2])));
  for (const [name, content] of [
    ['flamegraph.html', renderHtml(hostile)],
    ['flamegraph.svg', renderSvg(hostile)],
    ['diff.html', renderDiffHtml(diffed)],
    ['diff.svg', renderDiffSvg(diffed)],
  ] as const) {
    const opened = await page(t, name, content);
    if (!opened) return;
    await opened.page.waitForTimeout(name.endsWith('.html') ? 700 : 100);
    assertClean(opened, name);
    assert.equal(await opened.page.$$eval('img, iframe', (found) => found.length), 0, name);
    const text = String(await opened.page.evaluate('document.documentElement.textContent'));
    // Every name, the bidi override and the CDATA end included, reaches the page as the text it is.
    for (const hostileName of names)
      assert.ok(text.includes(hostileName), `${name}: ${JSON.stringify(hostileName)} as text`);
  }
});

test('watch’s index.html: loads offline, its links are the runs’ own files, names as text', async (t) => {
  const entry: RunEntry = {
    id: '10-02-11_2026-11-28',
    rule: '<b>cpu</b>',
    action: 'profile',
    target: { pid: 7, comm: '<script>alert(1)</script>', commandLine: 'App' },
    trigger: { type: 'cpu', reason: 'CPU above 80%', figures: { cpu: 93 } },
    startedAt: '2026-11-28T10:02:11Z',
    status: 'done',
    summary: '412 samples in 10.0 s',
    links: { 'flame graph': '10-02-11_2026-11-28/flamegraph.svg', evil: '../../etc/passwd' },
  };
  const opened = await page(t, 'index.html', indexHtml([entry]));
  if (!opened) return;
  assertClean(opened, 'index.html');
  const links = await opened.page.$$eval('a', (found) => found.map((a) => a.getAttribute('href')));
  assert.deepEqual(links, ['10-02-11_2026-11-28/flamegraph.svg']);
  assert.match((await opened.page.textContent('body')) ?? '', /7 <script>alert\(1\)<\/script>/);
});

/** speedscope's own page (npm's speedscope, a devDependency), offline, with `file` loaded through its Browse input. */
async function speedscopeWith(t: TestContext, file: string) {
  if (!browser) {
    browser = await startBrowser(t);
    if (!browser) return undefined;
  }
  const index = fileURLToPath(new URL('../../node_modules/speedscope/dist/release/index.html', import.meta.url));
  const opened = await openPage(browser, index, undefined, { siblings: true });
  t.after(() => opened.close());
  await opened.page.setInputFiles('input[type=file]', file);
  await opened.page.waitForTimeout(2000);
  return { opened, text: String(await opened.page.evaluate('document.body.innerText')) };
}

test('speedscope, a viewer we did not write, opens profile.pb.gz and speedscope.json', async (t) => {
  const dir = await tempDir(t, 'speedscope');
  const files = {
    'profile.pb.gz': renderPprof(stacks(), {
      sampleTypes: [
        { type: 'samples', unit: 'count', perWeight: 1 },
        { type: 'cpu', unit: 'nanoseconds', perWeight: 1e7 },
      ],
    }),
    'speedscope.json': renderSpeedscope(stacks()),
    'garbage.pb.gz': Buffer.from('not a profile at all'),
  };
  for (const [name, content] of Object.entries(files)) await writeFile(join(dir, name), content);
  // speedscope titles a pprof profile by its file name, a speedscope file by the name inside it.
  for (const [name, title] of [
    ['profile.pb.gz', 'profile.pb.gz'],
    ['speedscope.json', 'profcpu'],
  ] as const) {
    const loaded = await speedscopeWith(t, join(dir, name));
    if (!loaded) return;
    assert.ok(
      loaded.text.includes(title) && loaded.text.includes('Left Heavy'),
      `${name}: ${loaded.text.slice(0, 300)}`,
    );
    assert.ok(!loaded.text.includes('Drag and drop'), `${name} was not opened`);
    assertClean(loaded.opened, `speedscope with ${name}`);
  }
  // What a file it cannot read does: the landing page stays.
  const garbage = await speedscopeWith(t, join(dir, 'garbage.pb.gz'));
  assert.ok(garbage && !garbage.text.includes('Left Heavy'), garbage?.text.slice(0, 300));
});

test('a 40 000-stack graph opens, in both pages (time printed)', async (t) => {
  const big = syntheticStacks(40_000);
  for (const [name, content] of [
    ['big.html', renderHtml(big)],
    ['big.svg', renderSvg(big)],
  ] as const) {
    const opened = await page(t, name, content);
    if (!opened) return;
    const selector = name.endsWith('.html') ? 'g.frame' : '#frames > g';
    await opened.page.waitForSelector(selector, { timeout: 60_000 });
    const frames = await opened.page.$$eval(selector, (found) => found.length);
    t.diagnostic(
      `${name}: ${(content.length / 1e6).toFixed(1)} MB, loaded in ${opened.loadMs.toFixed(0)} ms, ${frames} frames drawn`,
    );
    assert.ok(frames > 1000, `${frames} frames`);
    assertClean(opened, name);
  }
});
