import assert from 'node:assert/strict';
import { test } from 'node:test';
import { diffShape, renderDiffHtml, renderDiffSvg } from '../../src/render/diff.js';
import { diffStacks } from '../../src/stacks/diff.js';

const before = new Map([
  ['app;main;grow', 10],
  ['app;main;shrink', 30],
  ['app;main;gone', 10],
  ['app;main;same', 50],
]);
const after = new Map([
  ['app;main;grow', 40],
  ['app;main;shrink', 10],
  ['app;main;same', 50],
]);
const diff = () => diffStacks(before, after, { keepNumbers: true });

/** Each frame's `<g>` in the SVG: its tooltip and fill, by the frame's label. */
function frames(svg: string): Map<string, { title: string; fill: string }> {
  const found = new Map<string, { title: string; fill: string }>();
  for (const match of svg.matchAll(
    /<title>([^<]*)<\/title><rect [^>]*fill="([^"]+)"[^>]*\/><text [^>]*>([^<]*)<\/text>/g,
  ))
    found.set(match[3]!, { title: match[1]!, fill: match[2]! });
  return found;
}

test('the shape of AFTER, and stacks only in BEFORE at their BEFORE weight', () => {
  const shape = diffShape(diff());
  assert.equal(shape.get('app;main;grow'), 40);
  // gone: 10 of BEFORE's 100, scaled to AFTER's 100.
  assert.equal(shape.get('app;main;gone'), 10);
});

test('SVG: grown frames red, shrunk and gone ones blue, unchanged pale; tooltips give before, after, points', () => {
  const svg = renderDiffSvg(diff());
  const found = frames(svg);
  const rgb = (fill: string) => fill.match(/\d+/g)!.map(Number);
  const [gr, gg = 0, gb = 0] = rgb(found.get('grow')!.fill);
  assert.ok(gr === 255 && gg < 100 && gb < 100, found.get('grow')!.fill);
  const [sr = 0, , sb] = rgb(found.get('shrink')!.fill);
  assert.ok(sb === 255 && sr < 210, found.get('shrink')!.fill);
  assert.equal(rgb(found.get('gone')!.fill)[2], 255);
  assert.equal(found.get('same')!.fill, 'rgb(250,250,250)');
  assert.equal(found.get('grow')!.title, 'grow (before 10 samples (10.00%), after 40 (40.00%), +30.00 pts)');
  assert.equal(found.get('gone')!.title, 'gone (before 10 samples (10.00%), after 0 (0.00%), −10.00 pts)');
  assert.match(svg, /Differential Flame Graph/);
  assert.match(svg, /red grew, blue shrank/);
});

test('HTML: each node carries its before and after weights for the viewer, which colours by them', () => {
  const html = renderDiffHtml(diff(), { viewer: { script: '/*viewer*/', css: '' } });
  const data = JSON.parse(/<script id="profcpu-data" type="application\/json">(.*?)<\/script>/s.exec(html)![1]!);
  assert.deepEqual(data.options.diff, { beforeTotal: 100, afterTotal: 100, scale: 1, maxAbs: 30 });
  const main = data.tree.c[0].c[0];
  const byName = Object.fromEntries(main.c.map((n: { n: string; b: number; a: number }) => [n.n, [n.b, n.a]]));
  assert.deepEqual(byName, { gone: [10, 0], grow: [10, 40], same: [50, 50], shrink: [30, 10] });
});

test('hostile names stay text in both pages', () => {
  const hostile = diffStacks(
    new Map([['app;<script>alert(1)</script>;\u202eevil', 1]]),
    new Map([['app;<script>alert(1)</script>;]]></x>', 2]]),
  );
  const svg = renderDiffSvg(hostile);
  assert.ok(!svg.includes('<script>alert'));
  assert.ok(!svg.includes(']]></x>'));
  const html = renderDiffHtml(hostile, { viewer: { script: '', css: '' } });
  assert.ok(!html.includes('<script>alert'));
});
