import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { defaultHtmlOptions, loadViewerAssets, renderHtml } from '../../src/render/html.js';
import type { ViewerNode } from '../../src/render/viewer-tree.js';
import { parseFoldedText, type FoldedStacks } from '../../src/stacks/folded.js';
import { need } from '../support/requirements.js';
import { readFixture } from './golden.js';

// A stand-in bundle, so these tests check the page itself; the real one is checked below when it is built.
const viewer = { script: 'window.viewerLoaded = true;', css: '.d3-flame-graph rect{stroke:#eee}' };
const dotnet = () => parseFoldedText(readFixture('dotnet.folded')).stacks;

function dataOf(html: string): { options: Record<string, unknown>; tree: ViewerNode } {
  const match = /<script id="profcpu-data" type="application\/json">([\s\S]*?)<\/script>/.exec(html);
  assert.ok(match, 'the data element is there');
  return JSON.parse(match[1]!);
}

function find(node: ViewerNode, name: string): ViewerNode | undefined {
  if (node.n === name) return node;
  for (const child of node.c ?? []) {
    const found = find(child, name);
    if (found) return found;
  }
  return undefined;
}

test('the tree round-trips out of the page: names without annotations, weights, style codes', () => {
  const data = dataOf(renderHtml(dotnet(), { viewer }));
  assert.equal(data.tree.n, 'all');
  assert.equal(data.tree.v, 382);
  assert.equal(find(data.tree, 'dotnet')!.v, 361);
  assert.equal(find(data.tree, 'Program.<Main>$(System.String[])')!.l, 'm');
  assert.equal(find(data.tree, 'ksys_read')!.l, 'k');
  assert.equal(find(data.tree, 'System.Math::Sqrt(System.Double)')!.l, 'i');
  assert.equal(find(data.tree, '[unknown]')!.l, 'u');
  assert.equal(find(data.tree, 'memmove')!.l, undefined);
  assert.deepEqual(data.options, {
    width: 0,
    frameHeight: 18,
    minFrameSize: 0.5,
    colors: 'dotnet',
    seed: 0,
    inverted: false,
    countName: 'samples',
  });
});

test('hostile names and titles cannot leave their element', () => {
  const names = [
    '</script><script>alert(1)</script>',
    '<!--<script>',
    ']]>',
    'a\u2028b\u2029c',
    '"&\'<>',
    '</SCRIPT >',
  ];
  const stacks: FoldedStacks = new Map(names.map((n, i) => [`main;${n}`, i + 1]));
  const html = renderHtml(stacks, { viewer, title: '</title><script>x()</script>', subtitle: '<b>&' });
  const data = /<script id="profcpu-data" type="application\/json">([\s\S]*?)<\/script>/.exec(html)![1]!;
  assert.doesNotMatch(data, /<\/?script|<!--|[<>\u2028\u2029]/i);
  const round = dataOf(html);
  for (const name of names)
    assert.ok(find(round.tree, name.replace(/[\u2028\u2029]/g, '')) ?? find(round.tree, name), name);
  assert.equal(html.match(/<script/gi)!.length, 2, 'only the data and the viewer');
  assert.match(html, /<title>&lt;\/title&gt;&lt;script&gt;x\(\)&lt;\/script&gt;<\/title>/);
  assert.match(html, /<p class="subtitle">&lt;b&gt;&amp;<\/p>/);
});

test('light frames are merged in the page, and minFraction 0 keeps them all', () => {
  const stacks: FoldedStacks = new Map([
    ['m;heavy', 1_000_000],
    ['m;a', 1],
    ['m;b', 1],
    ['m;c', 1],
  ]);
  const merged = dataOf(renderHtml(stacks, { viewer, minFraction: 2e-6 }));
  assert.deepEqual(
    find(merged.tree, 'm')!.c!.map((c) => [c.n, c.v, c.l]),
    [
      ['[3 frames]', 3, 'g'],
      ['heavy', 1_000_000, undefined],
    ],
  );
  const all = dataOf(renderHtml(stacks, { viewer, minFraction: 0 }));
  assert.equal(find(all.tree, 'm')!.c!.length, 4);
});

test('deterministic; reverse and inverted reach the page', () => {
  assert.equal(renderHtml(dotnet(), { viewer }), renderHtml(new Map([...dotnet()].reverse()), { viewer }));
  const html = renderHtml(dotnet(), { viewer, reverse: true, inverted: true });
  assert.match(html, /<h1>Icicle Graph<\/h1>/);
  const data = dataOf(html);
  assert.equal(data.options['inverted'], true);
  assert.ok(
    data.tree.c!.some((c) => c.n === 'schedule'),
    'leaves at the root',
  );
});

test('a missing viewer bundle is an IO error that says to build', () => {
  assert.throws(
    () => loadViewerAssets(new URL('file:///nonexistent-profcpu-assets/')),
    (error) => isProfcpuError(error, 'IO') && /npm run build/.test(error.remedy ?? ''),
  );
  assert.ok(Object.isFrozen(defaultHtmlOptions));
});

test('invalid options are USAGE errors', () => {
  for (const bad of [{ colors: 'rainbow' }, { frameHeight: 0 }, { minFraction: -1 }])
    assert.throws(
      () => renderHtml(dotnet(), { viewer, ...(bad as object) }),
      (e) => isProfcpuError(e, 'USAGE'),
    );
});

test('the built page is offline: the bundle inlined, no network reference', (t) => {
  const built = existsSync(new URL('../../assets/viewer.js', import.meta.url));
  if (!need(t, built, 'the viewer bundle (`npm run build` writes assets/viewer.js)')) return;
  const html = renderHtml(dotnet());
  assert.ok(html.includes(loadViewerAssets().script));
  assert.doesNotMatch(html, /<script[^>]+src=|<link[^>]+href=|@import|url\(\s*['"]?(https?:)?\/\//i);
  // The only URLs left are XML namespace names inside d3, which browsers never fetch.
  const urls = new Set(html.match(/https?:\/\/[^"'\s)]*/g) ?? []);
  for (const url of urls) assert.match(url, /^http:\/\/www\.w3\.org\//, url);
  assert.equal(html.match(/<\/script/gi)!.length, 2, 'nothing in the bundle closes its element early');
});
