// BuiltinScriptOutput against the way it replaces: the same samples as text through PerfScriptTee into StackFolder.write
// must give the same file bytes, the same folds, the same header lines and counts, including for samples the
// per-line way hands back to the text way (a line break in a name, headers the namer or the fold read otherwise), a
// frame line past the 16 KiB cut (cut once, its dropped bytes never made nor counted) and a resolver whose names
// depend on the pid it is given.
import assert from 'node:assert/strict';
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { ScriptFrame } from '../../src/engine/script-text.js';
import { BuiltinScriptOutput } from '../../src/engine/script-output.js';
import { cutMarker, lineCutDefaults } from '../../src/stacks/long-lines.js';
import { PerfScriptTee } from '../../src/postprocess/tee.js';
import { StackFolder, type FoldOptions, type FrameResolver } from '../../src/stacks/fold.js';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'profcpu-native-output-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const header = ['# ========', '# hostname : vm', '# cmdline : perf record -g ', '# ========', '#', ''].join('\n');
const libc = '(/usr/lib/x86_64-linux-gnu/libc.so.6)';
/** A frame line past the 16 KiB cut: the per-line way cuts it once and counts only what it keeps. */
const longLine = `\t           979bb ${'x'.repeat(20_000)}+0x1 ${libc}`;
const longLineDropped = longLine.length - (lineCutDefaults.maxLineBytes + cutMarker.length + lineCutDefaults.tailBytes);
const jit = (ip: string) => `\t    ${ip} [unknown] (/tmp/perf-200.map)`;
const samples: [string, string[]][] = [
  ['node  9846 [000]   534.168759:    5025125 cpu-clock: ', [`\t          167145 __strcmp_evex+0x25 ${libc}`]],
  [
    'dotnet   201 [001]    12.000001:   10101010 cpu-clock: ',
    [jit('7f0000001000'), `\t           979bb main+0x1 ${libc}`],
  ],
  // The namer takes a pid from `7/7 `; the fold reads the header its own way.
  ['evil 7/7   202 [001]    12.000002:   10101010 cpu-clock: ', [jit('7f0000001000'), jit('7f0000002000')]],
  // After it, the namer must have forgotten pid 7.
  ['dotnet   201 [001]    12.000003:   10101010 cpu-clock: ', [jit('7f0000001000'), jit('7f0000002000')]],
  ['dotnet   201 [001]    12.000004:   10101010 cpu-clock: ', [`\t           979bb a\nname+0x1 ${libc}`]],
  ['dotnet   201 [001]    12.000005:   10101010 cpu-clock: ', [longLine]],
  ['dotnet   201 [001]    12.000006:   10101010 cpu-clock: ', [`\t           979bb a\rb+0x1 ${libc}`]],
  [' spaced   203 [001]    12.000007:   10101010 cpu-clock: ', [jit('7f0000001000')]],
  ['#hash   204 [001]    12.000008:   10101010 cpu-clock: ', [jit('7f0000002000')]],
  ['dotnet   201 [001]    12.000009:   10101010 other-event: ', [jit('7f0000001000')]],
  ['dotnet   201 [001]    12.000010:   10101010 cpu-clock: ', [jit('7f0000001000'), `\t    ffffffff8100 x (k)`]],
  ['dotnet   201 [001]    12.000011:   10101010 cpu-clock: ', []],
];

const resolver: FrameResolver = {
  resolve({ pid, ip }) {
    if (ip === 0x7f0000001000n) return { name: `void [App] App.P::Work${pid ?? 'none'}()`, kind: 'jit' };
    if (ip === 0x7f0000002000n && pid === undefined) return { name: 'void [App] App.P::Other()', kind: 'jit' };
    return undefined;
  },
};

async function throughTee(options: Partial<FoldOptions>, name: string, given = samples) {
  const text = header + given.map(([h, frames]) => [h, ...frames, '', ''].join('\n')).join('');
  const folder = new StackFolder(options, undefined, resolver);
  const tee = new PerfScriptTee(await open(join(dir, name), 'w'), (chunk) => folder.write(chunk));
  tee.nameFrames(resolver);
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += 4096) await tee.sink(bytes.subarray(at, at + 4096));
  await tee.finish();
  return {
    file: await readFile(join(dir, name)),
    fold: folder.end(),
    headerLines: tee.headerLines(),
    bytes: tee.counts.bytes,
    linesCut: tee.linesCut,
  };
}

async function throughNative(options: Partial<FoldOptions>, name: string, given = samples) {
  const folder = new StackFolder(options, undefined, resolver);
  const output = new BuiltinScriptOutput(await open(join(dir, name), 'w'), folder, resolver);
  await output.header(header);
  // As the writer gives them: one object per distinct line, the same each time it recurs.
  const made = new Map<string, ScriptFrame>();
  const frames: ScriptFrame[] = [{ line: 'left over from a longer sample', memo: undefined }];
  for (const [h, lines] of given) {
    lines.forEach((line, i) => {
      if (!made.has(line)) made.set(line, { line, memo: undefined });
      frames[i] = made.get(line)!;
    });
    await output.sample(h, frames, lines.length);
  }
  await output.finish();
  return {
    file: await readFile(join(dir, name)),
    fold: folder.end(),
    headerLines: output.headerLines(),
    bytes: output.bytes,
    linesCut: output.linesCut,
  };
}

for (const [label, options] of [
  ['default fold', {}],
  ['compat fold', { compat: true }],
  ['fold with pids', { includePid: true, addrs: true }],
] as const) {
  test(`the same file and folds as the tee and the text fold (${label})`, async () => {
    const tee = await throughTee(options, `tee-${label}`);
    const native = await throughNative(options, `native-${label}`);
    assert.equal(native.file.toString('latin1'), tee.file.toString('latin1'));
    assert.deepEqual(native.fold, tee.fold);
    assert.deepEqual(native.headerLines, tee.headerLines);
    // The tee counts the text perf script would have written; the built-in engine never makes the cut-off part.
    assert.equal(native.bytes, tee.bytes - longLineDropped);
    assert.equal(native.linesCut, 1);
    assert.equal(native.linesCut, tee.linesCut);
    // The case is not empty: names from the resolver reached the file and the folds.
    assert.match(native.file.toString(), /App\.P::Worknone/);
    assert.ok(native.fold.keptSamples >= 5);
    // The resolver names the fold's frames, except in compat mode (stackcollapse-perf.pl's names).
    const named = [...native.fold.stacks.keys()].some((stack) => stack.includes('Work'));
    assert.equal(named, !('compat' in options));
  });
}

/**
 * Stacks that recur: the per-line way copies and folds a stack it has seen whole, so the same lines in another
 * process (named by pid), under another root, event or period, after a sample the text way took, or holding a cut
 * line, must still give what the text gives.
 */
const recurring: [string, string[]][] = [];
{
  const kernel = `\t    ffffffff8100 x (k)`;
  const main = `\t           979bb main+0x1 ${libc}`;
  const stacks = [
    [jit('7f0000001000'), main],
    [jit('7f0000001000'), main, kernel],
    [kernel],
    [longLine, main],
    [jit('7f0000002000'), jit('7f0000001000')],
    [],
  ];
  const heads = [
    (n: number) => `dotnet   201 [001]    12.${String(n).padStart(6, '0')}:   10101010 cpu-clock: `,
    (n: number) => `dotnet   201/205 [001]    12.${String(n).padStart(6, '0')}:   10101010 cpu-clock: `,
    (n: number) => `worker   207 [000]    12.${String(n).padStart(6, '0')}:   20202020 cpu-clock: `,
    (n: number) => `java   208 [000]    12.${String(n).padStart(6, '0')}:   30303030 cpu-clock: `,
    (n: number) => `dotnet   201 [001]    12.${String(n).padStart(6, '0')}:   10101010 other-event: `,
    (n: number) => `0   209 [000]    12.${String(n).padStart(6, '0')}:   10101010 cpu-clock: `,
  ];
  for (let n = 0; n < 120; n++) recurring.push([heads[(n * 7) % heads.length]!(n), stacks[(n * 5) % stacks.length]!]);
  recurring.splice(40, 0, [
    `dotnet   201 [001]    12.000040:   10101010 cpu-clock: `,
    [`\t           979bb a\nname+0x1 ${libc}`],
  ]);
}

for (const [label, options] of [
  ['default fold', {}],
  ['compat fold', { compat: true }],
  ['fold with tids, by period', { includeTid: true, weight: 'period' }],
  ['fold of the other event', { eventFilter: 'other-event', addrs: true }],
] as const) {
  test(`stacks that recur give the same file and folds as the tee and the text fold (${label})`, async () => {
    const tee = await throughTee(options, `tee-recurring-${label}`, recurring);
    const native = await throughNative(options, `native-recurring-${label}`, recurring);
    assert.equal(native.file.toString('latin1'), tee.file.toString('latin1'));
    assert.deepEqual(native.fold, tee.fold);
    assert.equal(native.linesCut, tee.linesCut);
    assert.ok(native.linesCut >= 10);
    assert.ok(native.fold.keptSamples >= 15);
  });
}

test('past the bound on the stacks kept whole, new stacks go line by line, to the same file and folds', async () => {
  // 100 stacks of 80 distinct 9 kB lines (~72 MB counted): the later ones pass the 64 MiB bound; each comes twice.
  const many: [string, string[]][] = [];
  for (let s = 0; s < 100; s++) {
    const lines = Array.from(
      { length: 80 },
      (_, i) => `\t    ${(s * 100 + i).toString(16)} f${s}_${i}_${'x'.repeat(9000)}+0x1 ${libc}`,
    );
    for (const n of [0, 1])
      many.push([`app   300 [000]    13.${String(s * 2 + n).padStart(6, '0')}:   10 cpu-clock: `, lines]);
  }
  const tee = await throughTee({}, 'tee-many', many);
  const native = await throughNative({}, 'native-many', many);
  assert.ok(native.file.equals(tee.file));
  assert.deepEqual(native.fold, tee.fold);
  assert.equal(native.bytes, tee.bytes);
  assert.equal(native.fold.keptSamples, 200);
});
