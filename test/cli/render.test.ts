import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { renderOptionsFromArgs } from '../../src/cli/render.js';
import { isProfcpuError } from '../../src/error.js';
import { renderSvg } from '../../src/render/svg.js';
import { parseFoldedText } from '../../src/stacks/folded.js';
import { execa } from 'execa';
import { cliPath, runCli } from '../support/cli.js';
import { decodePprof, pprofToFolded, stringAt } from '../support/pprof.js';

const fixture = new URL('../render/fixtures/dotnet.folded', import.meta.url).pathname;
const folded = readFileSync(fixture, 'utf8');
const dir = mkdtempSync(join(tmpdir(), 'profcpu-render-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('FILE to stdout as SVG by default, the same bytes as the library gives', async () => {
  const result = await runCli(['render', fixture]);
  assert.equal(result.exitCode, 0, result.stderr as string);
  assert.equal(result.stdout, renderSvg(parseFoldedText(folded).stacks).trimEnd());
});

test('stdin (`-` or nothing) to --output, each format; one-dash spelling of the original tool', async () => {
  for (const [format, check] of [
    ['svg', /^<\?xml/],
    ['html', /^<!DOCTYPE html>/],
    ['speedscope', /^\{"\$schema"/],
  ] as const) {
    const output = join(dir, `out.${format}`);
    const result = await runCli(['render', '-', '-format', format, '-output', output, '--title', 'T'], {
      input: folded,
    });
    assert.equal(result.exitCode, 0, result.stderr as string);
    assert.match(readFileSync(output, 'utf8'), check);
    assert.match(result.stderr as string, new RegExp(`wrote .*out\\.${format}`));
  }
  const quiet = await runCli(['render', '--format', 'speedscope', '-q'], { input: folded });
  assert.equal(quiet.exitCode, 0);
  assert.equal(JSON.parse(quiet.stdout as string).name, 'profcpu');
  assert.equal(quiet.stderr, '');
});

test('--format pprof writes a gzipped profile a decoder we did not write reads back into the same stacks', async () => {
  const output = join(dir, 'out.pb.gz');
  const result = await runCli([
    'render',
    fixture,
    '--format',
    'pprof',
    '--sample-type',
    'cpu/nanoseconds',
    '-o',
    output,
  ]);
  assert.equal(result.exitCode, 0, result.stderr as string);
  const profile = decodePprof(readFileSync(output));
  assert.deepEqual(pprofToFolded(profile), parseFoldedText(folded).stacks);
  assert.deepEqual(
    [stringAt(profile, profile.sampleType[0]!.type), stringAt(profile, profile.sampleType[0]!.unit)],
    ['cpu', 'nanoseconds'],
  );
  // To standard output when it is not a terminal.
  const piped = await execa(process.execPath, [cliPath, 'render', fixture, '--format', 'pprof'], {
    encoding: 'buffer',
  });
  assert.deepEqual(pprofToFolded(decodePprof(piped.stdout)), parseFoldedText(folded).stacks);

  const badType = await runCli(['render', fixture, '--format', 'pprof', '--sample-type', 'cpu']);
  assert.equal(badType.exitCode, 2);
  assert.match(badType.stderr as string, /--sample-type must be TYPE\/UNIT/);
  const notPprof = await runCli(['render', fixture, '--sample-type', 'cpu/nanoseconds']);
  assert.equal(notPprof.exitCode, 2);
  assert.match(notPprof.stderr as string, /--sample-type is for --format pprof/);
});

test('flags reach the renderer', async () => {
  const result = await runCli([
    'render',
    fixture,
    '--width',
    '800',
    '--minwidth',
    '4',
    '--inverted',
    '--reverse',
    '--colors',
    'java',
    '--countname',
    'ms',
    '--subtitle',
    'sub',
    '--seed',
    '3',
  ]);
  assert.equal(result.exitCode, 0, result.stderr as string);
  const svg = result.stdout as string;
  assert.match(svg, /width="800"/);
  assert.match(svg, />Icicle Graph</);
  assert.match(svg, />sub</);
  assert.match(svg, / ms, /);
});

test('bad lines are counted in a warning; no stacks, a missing file and bad values fail with a remedy', async () => {
  const partial = await runCli(['render', '--format', 'speedscope'], { input: `${folded}not a stack\n` });
  assert.equal(partial.exitCode, 0);
  assert.match(partial.stderr as string, /warning: skipped 1 line\(s\) of standard input/);

  const empty = await runCli(['render'], { input: 'garbage\n' });
  assert.equal(empty.exitCode, 1);
  assert.match(empty.stderr as string, /no stack with a positive count in standard input\n {2}fix: /);

  const missing = await runCli(['render', join(dir, 'nope.folded')]);
  assert.equal(missing.exitCode, 1);
  assert.match(missing.stderr as string, /cannot read .*nope\.folded.*\n {2}fix: /);

  const badFormat = await runCli(['render', fixture, '--format', 'png']);
  assert.equal(badFormat.exitCode, 2);

  const badWidth = await runCli(['render', fixture, '--width', '-5']);
  assert.equal(badWidth.exitCode, 2);
  assert.match(badWidth.stderr as string, /--width must be a positive number/);
});

test('renderOptionsFromArgs maps every flag, minwidth in pixels or percent', () => {
  assert.deepEqual(
    renderOptionsFromArgs({
      format: 'svg',
      title: 't',
      subtitle: 's',
      width: 1000,
      height: 20,
      minwidth: '1%',
      colors: 'hot',
      seed: 2,
      reverse: true,
      inverted: true,
      countname: 'ms',
    }),
    {
      title: 't',
      name: 't',
      subtitle: 's',
      width: 1000,
      frameHeight: 20,
      minWidth: 9.8,
      minFrameSize: 9.8,
      colors: 'hot',
      seed: 2,
      reverse: true,
      inverted: true,
      countName: 'ms',
    },
  );
  assert.deepEqual(renderOptionsFromArgs({ format: 'html', minwidth: '0.5' }), { minWidth: 0.5, minFrameSize: 0.5 });
  for (const bad of [{ minwidth: 'x' }, { minwidth: '-1' }, { height: 0 }, { seed: 1.5 }])
    assert.throws(
      () => renderOptionsFromArgs({ format: 'svg', ...bad }),
      (e) => isProfcpuError(e, 'USAGE'),
    );
});
