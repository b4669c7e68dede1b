import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { defaultSvgOptions, renderSvg } from '../../src/render/svg.js';
import { parseFoldedText, type FoldedStacks } from '../../src/stacks/folded.js';
import { needCommand } from '../support/requirements.js';
import { assertGolden, readFixture } from './golden.js';

const dotnet = () => parseFoldedText(readFixture('dotnet.folded')).stacks;

interface DrawnFrame {
  x: number;
  w: number;
  d: number;
  title: string;
  label: string;
  fill: string;
}

/** The frames of an SVG written by renderSvg, decoded (the test relies on xmllint elsewhere for validity). */
function framesOf(svg: string): DrawnFrame[] {
  const pattern =
    /<g fg:x="([^"]+)" fg:w="([^"]+)" fg:d="(\d+)"><title>([^<]*)<\/title><rect [^>]*fill="([^"]+)"[^>]*\/><text [^>]*>([^<]*)<\/text><\/g>/g;
  return [...svg.matchAll(pattern)].map((m) => ({
    x: Number(m[1]),
    w: Number(m[2]),
    d: Number(m[3]),
    title: decode(m[4]!),
    fill: m[5]!,
    label: decode(m[6]!),
  }));
}

function decode(text: string): string {
  return text.replace(
    /&(lt|gt|amp|quot|#39);/g,
    (_, e: string) => ({ lt: '<', gt: '>', amp: '&', quot: '"', '#39': "'" })[e]!,
  );
}

function xmllint(svg: string, ...args: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'profcpu-svg-'));
  try {
    writeFileSync(join(dir, 'g.svg'), svg);
    return execFileSync('xmllint', [...args, join(dir, 'g.svg')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('golden: .NET profile with default options', () => {
  assertGolden('dotnet.svg', renderSvg(dotnet()));
});

test('golden: minwidth 4 px merges the three narrow siblings and drops what lies under them', () => {
  const svg = renderSvg(dotnet(), { minWidth: 4 });
  assertGolden('dotnet-minwidth4.svg', svg);
  const merged = framesOf(svg).filter((f) => f.title.startsWith('[3 frames, each narrower than 4 px]'));
  assert.equal(merged.length, 1);
  assert.equal(merged[0]!.w, 3);
  assert.equal(framesOf(svg).filter((f) => /tiny|deeper/.test(f.title)).length, 0);
  assert.ok(
    framesOf(renderSvg(dotnet())).some((f) => f.title.startsWith('deeper ')),
    'drawn at the default',
  );
});

test('golden: reversed and inverted, with title, subtitle and another palette', () => {
  assertGolden(
    'dotnet-reverse-inverted.svg',
    renderSvg(dotnet(), { reverse: true, inverted: true, subtitle: 'reverse & inverted', colors: 'java', width: 900 }),
  );
});

test('frames: widths add up, names lose their annotation, styles get their hues', () => {
  const frames = framesOf(renderSvg(dotnet()));
  const root = frames[0]!;
  assert.equal(root.d, 0);
  assert.match(root.title, /^all \(382 samples, 100\.00%\)$/);
  const spin = frames.filter((f) => f.title.startsWith('Profcpu.Demo.Hot::Spin(System.Int32) ('));
  assert.deepEqual(spin.map((f) => f.w).sort(), [157, 55]);
  assert.ok(!frames.some((f) => f.title.includes('_[')), 'annotations are not shown');
  const fill = (name: string) => frames.find((f) => f.title.startsWith(`${name} (`))!.fill;
  const [r1, g1] = channels(fill('Profcpu.Demo.Hot::Spin(System.Int32)'));
  assert.ok(g1 > r1, 'managed frames are green');
  const [r2, g2] = channels(fill('memmove'));
  assert.ok(r2 > g2, 'native frames are red');
  const [r3, g3, b3] = channels(fill('do_idle'));
  assert.ok(r3 > g3 && g3 > b3 && b3 === 0, 'kernel frames are orange');
  const [r4, g4, b4] = channels(fill('[unknown]'));
  assert.ok(r4 === g4 && g4 === b4, 'unknown frames are grey');
  assert.notEqual(fill('[unknown]'), fill('System.Math::Sqrt(System.Double)'));
});

function channels(rgb: string): [number, number, number] {
  const [r, g, b] = rgb.match(/\d+/g)!.map(Number);
  return [r!, g!, b!];
}

test('deterministic: same input, same bytes; the seed changes colours only', () => {
  const a = renderSvg(dotnet());
  const shuffled: FoldedStacks = new Map([...dotnet()].reverse());
  assert.equal(renderSvg(shuffled), a);
  const seeded = renderSvg(dotnet(), { seed: 7 });
  assert.notEqual(seeded, a);
  assert.equal(seeded.replace(/fill="rgb\([^"]*\)"/g, ''), a.replace(/fill="rgb\([^"]*\)"/g, ''));
});

test('inverted graphs put the root at the top; reverse puts leaves at the root', () => {
  const normal = framesOf(renderSvg(dotnet()));
  const icicle = renderSvg(dotnet(), { inverted: true });
  assert.match(icicle, />Icicle Graph</);
  const y = (svg: string, depth: number) =>
    Number(new RegExp(`fg:d="${depth}"><title>[^<]*</title><rect x="[^"]+" y="([^"]+)"`).exec(svg)![1]);
  assert.ok(y(icicle, 0) < y(icicle, 1));
  const flame = renderSvg(dotnet());
  assert.ok(y(flame, 0) > y(flame, 1));
  const reversed = framesOf(renderSvg(dotnet(), { reverse: true }));
  const outermost = reversed.filter((f) => f.d === 1).map((f) => f.title.replace(/ \(.*/, ''));
  assert.ok(outermost.includes('Profcpu.Demo.Hot::Spin(System.Int32)'));
  assert.ok(outermost.includes('schedule'));
  assert.ok(!normal.filter((f) => f.d === 1).some((f) => f.title.startsWith('schedule')));
});

test('the script: zoom, reset, search with Ctrl-F and a matched percentage, in a CDATA section', () => {
  const svg = renderSvg(dotnet());
  const script = /<script type="text\/ecmascript"><!\[CDATA\[([\s\S]*?)\]\]><\/script>/.exec(svg)?.[1];
  assert.ok(script);
  for (const piece of ['function zoom', 'function resetZoom', 'function search', "'Matched: '", 'e.ctrlKey', 'keydown'])
    assert.ok(script.includes(piece), piece);
  assert.ok(svg.includes('id="unzoom"') && svg.includes('id="search"') && svg.includes('id="matched"'));
  assert.doesNotMatch(svg, /(href|src)="https?:/);
});

const hostile: [string, number][] = [
  ['main;<script>alert(1)</script>', 5],
  ['main;]]><script>alert(2)</script><![CDATA[', 4],
  ['main;"quoted" \'single\' & <amp>', 3],
  ['main;ctrl\u0000\u0001\u0008\u000b\u001b[31mred\u007f\u0085\ufffe', 3],
  ['main;</script><script>alert(3)</script>', 2],
  ['main;日本語 Ünïcödé 🔥 emoji', 2],
  ['main;lone \ud800 surrogate', 1],
  [`main;${'A'.repeat(100_000)}`, 50],
  [`main;${'🔥'.repeat(500)}`, 30],
  ['main;]]>', 1],
  ['main;--><!--', 1],
];

test('hostile names give valid XML with exactly one script, and read back as the sanitized names', (t) => {
  if (!needCommand(t, 'xmllint', 'libxml2-utils')) return;
  const stacks: FoldedStacks = new Map(hostile);
  for (const options of [{}, { inverted: true, reverse: true }, { title: '<t>]]>&\u0001', subtitle: '</script>' }]) {
    const svg = renderSvg(stacks, options);
    xmllint(svg, '--noout');
    assert.equal(xmllint(svg, '--xpath', 'count(//*[local-name()="script"])').trim(), '1');
    const titles = framesOf(svg).map((f) => f.title);
    assert.ok(titles.some((s) => s.startsWith('<script>alert(1)</script> (')));
    assert.ok(
      titles.some((s) => s.startsWith('ctrl[31mred (')),
      'control characters stripped',
    );
    assert.ok(
      titles.some((s) => s.startsWith('lone  surrogate (')),
      'lone surrogate dropped',
    );
    assert.ok(titles.some((s) => s.startsWith('日本語 Ünïcödé 🔥 emoji (')));
    const long = titles.find((s) => s.startsWith('AAAA'))!;
    assert.ok(long.length < 2100, 'very long names are cut in tooltips');
    const labels = framesOf(svg).map((f) => f.label);
    assert.ok(
      labels.some((s) => /^A+\.\.$/.test(s)),
      'labels are cut to fit',
    );
    assert.ok(
      labels.some((s) => /^(🔥)+\.\.$/u.test(s)),
      'cut on a code-point boundary',
    );
  }
});

test('empty input gives a valid SVG that says so', (t) => {
  const svg = renderSvg(new Map([['a;b', 0]]));
  assert.match(svg, /No samples/);
  assert.doesNotMatch(svg, /<script/);
  if (!needCommand(t, 'xmllint', 'libxml2-utils')) return;
  xmllint(svg, '--noout');
});

test('defaults are frozen and documented values', () => {
  assert.ok(Object.isFrozen(defaultSvgOptions));
  assert.equal(defaultSvgOptions.width, 1200);
  assert.equal(defaultSvgOptions.frameHeight, 16);
  assert.equal(defaultSvgOptions.minWidth, 0.1);
  assert.equal(defaultSvgOptions.colors, 'dotnet');
});

test('options no graph can be drawn with are USAGE errors', () => {
  const stacks = dotnet();
  for (const bad of [{ width: 20 }, { frameHeight: 1 }, { minWidth: -1 }, { fontSize: 0 }, { colors: 'rainbow' }])
    assert.throws(
      () => renderSvg(stacks, bad as never),
      (e) => isProfcpuError(e, 'USAGE'),
    );
});
