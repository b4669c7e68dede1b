// The built-in engine's names from this machine's files, for a perf.data that may come from anybody: a path it names
// is opened only when it is a regular file (opening a device acts: a FIFO stands in, whose waiting writer wakes when
// it is opened), and this machine's files name frames only when perf.data was recorded here (its hostname).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { OutputFolder } from '../../src/files/output-folder.js';
import type { PerfDataHeader } from '../../src/engine/perf-data/reader.js';
import type { Mapping } from '../../src/engine/script-text.js';
import { builtinEngineSymbols } from '../../src/engine/frame-symbols.js';
import { buildNativeLib } from '../fixtures/native-lib/build.js';
import { watchedFifo } from '../support/fifo.js';
import { ownHome } from '../support/home.js';
import { need, needCommand, needRoot } from '../support/requirements.js';

function header(host: string): PerfDataHeader {
  return { mode: 'file', attrs: [], features: { hostname: host, perfVersion: '6.1.0', buildIds: [] } };
}

function mapping(path: string, buildId?: string): Mapping {
  return {
    start: 0x7f0000000000n,
    end: 0x7f0000010000n,
    pgoff: 0n,
    dso: path,
    path,
    buildId,
    identity: false,
  };
}

async function lookup(
  dir: string,
  host: string,
  path: string,
  offset: bigint,
  buildId?: string,
): Promise<string | undefined> {
  const folder = await OutputFolder.open(dir);
  try {
    const symbols = await builtinEngineSymbols(folder, header(host), undefined, () => {});
    return (await symbols.file(mapping(path, buildId), offset))?.name;
  } finally {
    await folder.close();
  }
}

test(
  'a recorded path naming a FIFO (a device stand-in) is not opened, and the lookup ends',
  { timeout: 30_000 },
  async () => {
    const { dir, fifo, opened, remove } = await watchedFifo();
    try {
      assert.equal(await lookup(dir, hostname(), fifo, 0x10n), undefined);
      assert.equal(await opened(), false, 'the FIFO was opened');
    } finally {
      remove();
    }
  },
);

test('this machine’s files name frames of a recording made here only', { timeout: 60_000 }, async (t) => {
  if (!needCommand(t, 'gcc', 'gcc')) return;
  const dir = mkdtempSync(join(tmpdir(), 'profcpu-native-symbols-'));
  try {
    const lib = buildNativeLib(join(dir, 'lib'));
    const path = join(dir, 'libhotlib.so');
    copyFileSync(lib.full, path);
    const address = BigInt(
      `0x${/^([0-9a-f]+) t profcpu_hot_inner$/m.exec(execFileSync('nm', [path], { encoding: 'utf8' }))![1]}`,
    );
    assert.equal(await lookup(dir, hostname(), path, address), 'profcpu_hot_inner');
    assert.equal(await lookup(dir, `not-${hostname()}`, path, address), undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a kept binary of a recording made elsewhere: this machine’s debug files count by build-id only', async (t) => {
  if (!needCommand(t, 'gcc', 'gcc')) return;
  const dir = mkdtempSync(join(tmpdir(), 'profcpu-native-symbols-'));
  try {
    const lib = buildNativeLib(join(dir, 'lib'));
    const address = BigInt(
      `0x${/^([0-9a-f]+) t profcpu_hot_inner$/m.exec(execFileSync('nm', [lib.full], { encoding: 'utf8' }))![1]}`,
    );
    // The folder keeps the stripped library; perf.data names it at a path where this machine has a debug file of the
    // same name with no build-id (any file the sender names, say).
    mkdirSync(join(dir, 'target/binaries'), { recursive: true });
    copyFileSync(lib.stripped, join(dir, 'target/binaries', lib.buildId));
    const kept = { binaries: [{ path: '/app/libhotlib.so', buildId: lib.buildId, bytes: 1, storedBytes: 1 }] };
    writeFileSync(join(dir, 'target/binaries.json'), JSON.stringify(kept));
    const path = join(dir, 'host', 'libhotlib.so');
    mkdirSync(join(dir, 'host'));
    execFileSync('objcopy', [
      '--remove-section',
      '.note.gnu.build-id',
      lib.debug,
      join(dir, 'host/libhotlib.so.debug'),
    ]);
    // Recorded here, perf takes it by its link (so does this); recorded elsewhere, it is not read.
    assert.equal(await lookup(dir, hostname(), path, address, lib.buildId), 'profcpu_hot_inner');
    assert.notEqual(await lookup(dir, `not-${hostname()}`, path, address, lib.buildId), 'profcpu_hot_inner');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test(
  'the files perf.data lists load ahead under the same rules: a FIFO listed is not opened, 200 000 entries are no burden',
  { timeout: 30_000 },
  async () => {
    const { dir, fifo, opened, remove } = await watchedFifo();
    const folder = await OutputFolder.open(dir);
    try {
      const entry = (filename: string) => ({ buildId: 'ab'.repeat(20), filename, pid: -1, cpumode: 2 });
      const buildIds = [fifo, ...Array.from({ length: 200_000 }, (_, i) => `${dir}/missing-${i}.so`)].map(entry);
      const listed: PerfDataHeader = { ...header(hostname()), features: { ...header(hostname()).features, buildIds } };
      const symbols = await builtinEngineSymbols(folder, listed, undefined, () => {});
      assert.equal(await symbols.file(mapping(`${dir}/missing-3.so`, 'ab'.repeat(20)), 0x10n), undefined);
      assert.equal(await symbols.file(mapping(fifo, 'ab'.repeat(20)), 0x10n), undefined);
      assert.equal(await opened(), false, 'the FIFO was opened');
    } finally {
      await folder.close();
      remove();
    }
  },
);

/**
 * Kernel names for `buildId`'s recording, with HOME at `home` (whose .debug is perf's build-id cache), the kernel's
 * mapping record naming `reference` when given.
 */
async function kernelNames(
  home: string,
  buildId: string,
  addresses: bigint[],
  reference?: { name: string; address: bigint },
) {
  const saved = process.env['HOME'];
  process.env['HOME'] = home;
  const folder = await OutputFolder.open(join(home, 'out'));
  try {
    const warnings: string[] = [];
    const entry = { buildId, filename: '[kernel.kallsyms]', pid: -1, cpumode: 1 };
    const recorded: PerfDataHeader = {
      ...header(hostname()),
      features: { ...header(hostname()).features, buildIds: [entry] },
    };
    const symbols = await builtinEngineSymbols(folder, recorded, undefined, (w) => warnings.push(w));
    if (reference) symbols.kernelReference!(reference);
    const names = addresses.map((address) => symbols.kernel(address)?.name);
    return { names, source: symbols.sources.kernel, warnings };
  } finally {
    await folder.close();
    process.env['HOME'] = saved;
  }
}

/**
 * A new HOME (removed after the test) with an `out` folder, whose build-id cache holds `lines` as the kallsyms of the
 * kernel with build-id `buildId`: not the running kernel's, so perf reads that copy rather than /proc/kallsyms.
 */
function cacheHome(t: TestContext, buildId: string, lines: string[]) {
  const home = mkdtempSync(join(tmpdir(), 'profcpu-native-symbols-'));
  t.after(() => rmSync(home, { recursive: true, force: true }));
  mkdirSync(join(home, 'out'));
  const entry = join(home, '.debug', '[kernel.kallsyms]', buildId);
  mkdirSync(entry, { recursive: true });
  writeFileSync(join(entry, 'kallsyms'), `${lines.join('\n')}\n`);
  return { home, kallsyms: join(entry, 'kallsyms') };
}

test('a recording of another kernel: its names from the kallsyms perf record kept in the build-id cache', async (t) => {
  const buildId = 'cd'.repeat(20);
  const { home, kallsyms } = cacheHome(t, buildId, [
    'ffffffff81000000 T _stext',
    'ffffffff81001000 T profcpu_cached_function',
    'ffffffff81002000 t profcpu_cached_static',
    'ffffffff81003000 T _etext',
  ]);
  {
    const found = await kernelNames(home, buildId, [0xffffffff81001010n, 0xffffffff81002fffn]);
    assert.deepEqual(found.names, ['profcpu_cached_function', 'profcpu_cached_static']);
    assert.equal(found.source, kallsyms);
    assert.deepEqual(found.warnings, []);
  }
  // The older layout of perf's cache: the entry is the file itself.
  const older = 'ab'.repeat(20);
  writeFileSync(join(home, '.debug', '[kernel.kallsyms]', older), 'ffffffff81001000 T profcpu_older_layout\n');
  const old = await kernelNames(home, older, [0xffffffff81001010n]);
  assert.deepEqual(old.names, ['profcpu_older_layout']);
  assert.equal(old.source, join(home, '.debug', '[kernel.kallsyms]', older));
  // Another build-id: no copy, no names, and the warning says where perf would have looked.
  const other = await kernelNames(home, 'ef'.repeat(20), [0xffffffff81001010n]);
  assert.deepEqual(other.names, [undefined]);
  assert.equal(other.source, undefined);
  assert.match(other.warnings.join('\n'), /no kallsyms snapshot.*build-id cache has no kallsyms of it/);
});

test('a recorded kernel build-id is only ever a build-id: one that climbs out of the cache reads nothing', async () => {
  const home = mkdtempSync(join(tmpdir(), 'profcpu-native-symbols-'));
  try {
    mkdirSync(join(home, 'out'));
    // `../secret` would make ~/.debug/[kernel.kallsyms]/../secret/kallsyms, that is ~/.debug/secret/kallsyms.
    mkdirSync(join(home, '.debug', 'secret'), { recursive: true });
    writeFileSync(join(home, '.debug', 'secret', 'kallsyms'), 'ffffffff81001000 T profcpu_secret_function\n');
    mkdirSync(join(home, '.debug', '[kernel.kallsyms]'), { recursive: true });
    const found = await kernelNames(home, '../secret', [0xffffffff81001010n]);
    assert.deepEqual(found.names, [undefined]);
    assert.equal(found.source, undefined);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test('kernel symbols of another boot move to where perf.data’s kernel mapping says `_text` was; without it, none', async (t) => {
  const buildId = 'cd'.repeat(20);
  // That boot placed the kernel 16 MiB higher than the recording's did.
  const lines = [
    'ffffffff82000000 T _text',
    'ffffffff82001000 T profcpu_cached_function',
    'ffffffff82002000 T _etext',
    'ffffffffc0001000 t profcpu_module_function\t[profmod]',
    'ffffffffc0002000 t profcpu_module_end\t[profmod]',
  ];
  const { home } = cacheHome(t, buildId, lines);
  const addresses = [0xffffffff81001010n, 0xffffffff82001010n, 0xffffffffc0001010n];
  const moved = await kernelNames(home, buildId, addresses, { name: '_text', address: 0xffffffff81000000n });
  // The text's own address of the function is past the recording's _etext then, the kernel's last symbol before
  // the modules, which ends a page past its page.
  assert.deepEqual(moved.names, ['profcpu_cached_function', undefined, 'profcpu_module_function']);
  assert.deepEqual(moved.warnings, []);

  // A reference symbol the text does not have (perf then loads no kernel symbol): no names, and a warning.
  const missing = await kernelNames(home, buildId, addresses, { name: '_nothere', address: 0xffffffff81000000n });
  assert.deepEqual(missing.names, [undefined, undefined, undefined]);
  assert.match(missing.warnings.join('\n'), /has no symbol "_nothere", by which perf\.data places the kernel/);

  // Collect's snapshot is of the recording's boot: it is read as it is, whatever the record says.
  mkdirSync(join(home, 'out', 'target'));
  writeFileSync(join(home, 'out', 'target', 'kallsyms'), `${lines.slice(1, 3).join('\n')}\n`);
  const kept = await kernelNames(home, buildId, addresses, { name: '_text', address: 0xffffffff81000000n });
  assert.deepEqual(kept.names, [undefined, 'profcpu_cached_function', undefined]);
  assert.equal(kept.source, 'target/kallsyms');
});

test('this machine’s /proc/kallsyms for a recording of another boot of its kernel: moved as perf moves it', async (t) => {
  if (!needRoot(t)) return;
  const text = readFileSync('/proc/kallsyms', 'utf8');
  const found = /^([0-9a-f]{16}) [tT] schedule$/m.exec(text);
  const textStart = /^([0-9a-f]{16}) [tT] _text$/m.exec(text);
  if (!need(t, !!found && !!textStart && BigInt(`0x${found[1]}`) !== 0n, '/proc/kallsyms with its addresses')) return;
  const schedule = BigInt(`0x${found![1]}`);
  const text0 = BigInt(`0x${textStart![1]}`);
  const folder = await OutputFolder.open(mkdtempSync(join(tmpdir(), 'profcpu-native-symbols-')));
  t.after(async () => {
    await folder.close();
    rmSync(folder.path, { recursive: true, force: true });
  });
  // No build-id recorded: this machine's kallsyms, as perf reads it. The recording's boot put the kernel 16 MiB lower.
  const symbols = await builtinEngineSymbols(folder, header(hostname()), undefined, () => {});
  symbols.kernelReference!({ name: '_text', address: text0 - 0x1000000n });
  assert.deepEqual(symbols.kernel(schedule - 0x1000000n + 4n), { name: 'schedule', offset: 4n });
  // Once the table is made, later records change nothing (perf loads kallsyms once).
  symbols.kernelReference!(undefined);
  assert.deepEqual(symbols.kernel(schedule - 0x1000000n + 4n), { name: 'schedule', offset: 4n });
  assert.equal(symbols.sources.kernel, '/proc/kallsyms');
});

test(
  'a FIFO in the build-id cache where the kallsyms copy would be is not opened, and the lookup ends',
  { timeout: 30_000 },
  async () => {
    const buildId = 'cd'.repeat(20);
    const { dir, opened, remove } = await watchedFifo(`.debug/[kernel.kallsyms]/${buildId}/kallsyms`);
    try {
      mkdirSync(join(dir, 'out'));
      const found = await kernelNames(dir, buildId, [0xffffffff81001010n]);
      assert.deepEqual(found.names, [undefined]);
      assert.equal(found.source, undefined);
      assert.equal(await opened(), false, 'the FIFO was opened');
    } finally {
      remove();
    }
  },
);

// perf looks for a file's symbols in its build-id cache's copy before the file itself, and takes the first candidate
// with a symbol table (dso.c's binary_type_symtab, symsrc__has_symtab): a file stripped since it was recorded is
// named from the unstripped copy perf record kept; a stripped copy in the cache is passed over for the file.
test('a stripped file is named from the unstripped copy in perf’s build-id cache, as perf names it', async (t) => {
  if (!needCommand(t, 'gcc', 'gcc') || !needCommand(t, 'strip', 'binutils')) return;
  const dir = mkdtempSync(join(tmpdir(), 'profcpu-native-symbols-'));
  const home = await ownHome(t);
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(
    join(dir, 'p.c'),
    'static int profcpu_static_burn(int x) { return x * 3; }\nint main(void) { return profcpu_static_burn(1); }\n',
  );
  const program = join(dir, 'p');
  execFileSync('gcc', ['-O0', '-o', program, join(dir, 'p.c')]);
  const buildId = /Build ID: ([0-9a-f]+)/.exec(execFileSync('readelf', ['-n', program], { encoding: 'utf8' }))![1]!;
  const address = BigInt(
    `0x${/^([0-9a-f]+) t profcpu_static_burn$/m.exec(execFileSync('nm', [program], { encoding: 'utf8' }))![1]!}`,
  );
  const cache = join(home, '.debug', '.build-id', buildId.slice(0, 2), buildId.slice(2));
  mkdirSync(cache, { recursive: true });
  copyFileSync(program, join(cache, 'elf'));
  execFileSync('strip', [program]);
  const out = join(dir, 'out');
  mkdirSync(out);
  // A gcc executable's text segment lies at the same offset in the file as in memory: the address is the offset.
  const offset = address;
  assert.equal(await lookup(out, hostname(), program, offset), 'profcpu_static_burn');
  // A stripped copy in the cache holds no symbol table: the file's own dynamic symbols name what they can instead.
  execFileSync('strip', [join(cache, 'elf')]);
  assert.equal(await lookup(out, hostname(), program, offset), undefined);
});
