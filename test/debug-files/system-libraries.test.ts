// `collect --symbols sampled` names a stripped system library end to end: a C program burning CPU inside libc runs as
// PID 1 of its own PID and mount namespace, with a tmpfs over /usr/lib/debug (so perf finds no libc debug file
// through it), and the built CLI records it from a sidecar (test/support/namespaces.ts) with its own empty
// /usr/lib/debug, HOME and caches. A real debuginfod on loopback serves the files of Debian's libc6-dbg that match
// this machine's libc. The control runs the same with --offline: libc's frames stay `[libc.so.6]` there, so the names
// in the other run come from the fetch.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { layout } from '../../src/output/layout.js';
import { readElfFile } from '../../src/formats/elf/elf.js';
import { cliPath } from '../support/cli.js';
import { serveDebianDebugPackage } from '../support/debuginfod.js';
import { startInSidecar, startNamespacedTarget, type NamespacedTarget } from '../support/namespaces.js';
import { canRecord, need, needCommand } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

const source = fileURLToPath(new URL('../fixtures/libc-burn/libc-burn.c', import.meta.url));

/** Shell text run first in the target's and the sidecar's mount namespaces: no debug file under /usr/lib/debug. */
const hideDebugFiles = 'mount -t tmpfs tmpfs /usr/lib/debug && exec "$0" "$@"';

/** This machine's libc as node maps it (gcc's programs load the same one), and where libc6-dbg puts its debug file. */
async function machineLibc() {
  const path = /\s(\/\S*\/libc\.so\.6)$/m.exec(await readFile('/proc/self/maps', 'utf8'))?.[1];
  if (!path) return undefined;
  const { buildId, hasSymtab } = await readElfFile(path);
  if (!buildId) return undefined;
  return {
    path,
    buildId,
    hasSymtab,
    debugFile: `/usr/lib/debug/.build-id/${buildId.slice(0, 2)}/${buildId.slice(2)}.debug`,
  };
}

interface LibcFrames {
  named: Map<string, number>;
  unnamed: number;
}

/** libc's frames in perf script text: by name, and those perf left `[unknown]`. */
function libcFrames(script: string): LibcFrames {
  const frames: LibcFrames = { named: new Map(), unnamed: 0 };
  for (const match of script.matchAll(/^\s+[0-9a-f]+ (.+?) \(\S*\/libc\.so\.6\)$/gm)) {
    const name = match[1]!.replace(/\+0x[0-9a-f]+$/, '');
    if (name === '[unknown]') frames.unnamed++;
    else frames.named.set(name, (frames.named.get(name) ?? 0) + 1);
  }
  return frames;
}

const total = (frames: LibcFrames) => [...frames.named.values()].reduce((a, b) => a + b, frames.unnamed);

/** libc functions only its debug file names (static, or ifunc variants): the sort, the copy, the thread's bottom. */
const internal = /^(msort_with_tmp|__mem(move|cpy)_\w+|__strlen_\w+|start_thread)/;

interface SymbolsStepReport {
  mode: string;
  servers: string[];
  libraries: { path: string; buildId?: string; status: string; source?: string }[];
}

async function collectFromSidecar(target: NamespacedTarget, work: string, name: string, extra: readonly string[]) {
  const home = join(work, `${name}-home`);
  const dir = join(work, `${name}-out`);
  const env = {
    ...process.env,
    HOME: home,
    XDG_CACHE_HOME: undefined,
    PROFCPU_SYMBOL_SERVERS: undefined,
    DEBUGINFOD_URLS: undefined,
  };
  const argv = ['collect', '--pid', '1', '--duration', '3', '--symbols', 'sampled', '--output', dir, ...extra];
  const started = performance.now();
  const run = await startInSidecar(
    target.hostPid,
    'sh',
    ['-c', `mkdir -p '${home}' && ${hideDebugFiles}`, process.execPath, cliPath, ...argv],
    { env, cwd: work, timeout: 90_000 },
  );
  const ms = Math.round(performance.now() - started);
  assert.equal(run.exitCode, 0, String(run.all));
  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as {
    collect: { steps: { symbols: SymbolsStepReport }; phaseMs: Record<string, number> };
  };
  return {
    ms,
    stdout: String(run.stdout),
    symbols: manifest.collect.steps.symbols,
    afterRecordingMs: manifest.collect.phaseMs['after-recording'] ?? 0,
    frames: libcFrames(await readFile(join(dir, layout.perfScript), 'utf8')),
    folded: await readFile(join(dir, layout.foldedStacks), 'utf8'),
  };
}

test(
  'collect --symbols sampled names libc frames with its debug file from a local debuginfod (libc6-dbg)',
  { timeout: 240_000 },
  async (t) => {
    if (!canRecord(t) || !needCommand(t, 'unshare', 'util-linux')) return;
    if (!needCommand(t, 'gcc', 'gcc') || !needCommand(t, 'debuginfod', 'debuginfod')) return;
    if (!needCommand(t, 'dpkg-query', 'dpkg')) return;
    const libc = await machineLibc();
    if (!need(t, libc !== undefined, 'a libc.so.6 with a build-id mapped by node') || !libc) return;
    if (!need(t, !libc.hasSymtab, `a stripped libc (${libc.path} has a symbol table: nothing to fetch)`)) return;
    if (!need(t, existsSync(libc.debugFile), `libc6-dbg matching this machine's libc (${libc.debugFile})`)) return;

    // Not under /tmp: the namespaces mount their own.
    const work = await tempDir(t, 'system-libraries', '/var/tmp');
    const program = join(work, 'libc-burn');
    execFileSync('gcc', ['-O2', '-g', '-fno-omit-frame-pointer', '-pthread', '-o', program, source]);

    const started = performance.now();
    const server = await serveDebianDebugPackage('libc6-dbg', work, libc.buildId);
    t.after(() => server.close());
    const files = readdirSync(join(work, 'libc6-dbg-files')).length;
    t.diagnostic(`debuginfod serves ${files} libc6-dbg files, ready in ${Math.round(performance.now() - started)} ms`);

    const target = await startNamespacedTarget('sh', ['-c', hideDebugFiles, program], {
      cwd: work,
      // Ready once the burning thread runs beside the main one.
      ready: async ({ hostPid }) => readdirSync(`/proc/${hostPid}/task`).length >= 2,
    });
    t.after(() => target.kill());
    // The debug file is on this machine, not in the target's mount namespace.
    assert.ok(existsSync(libc.debugFile));
    assert.equal(existsSync(`/proc/${target.hostPid}/root${libc.debugFile}`), false);

    const control = await collectFromSidecar(target, work, 'control', ['--offline']);
    const fetched = await collectFromSidecar(target, work, 'fetched', ['--symbol-server', `debuginfod:${server.url}`]);
    const named = (frames: LibcFrames) => total(frames) - frames.unnamed;
    t.diagnostic(
      `libc frames named: without the server ${named(control.frames)} of ${total(control.frames)}, with it ` +
        `${named(fetched.frames)} of ${total(fetched.frames)}; after-recording phase (binaries, symbols) ` +
        `${control.afterRecordingMs} ms offline, ${fetched.afterRecordingMs} ms with the fetch; collect ` +
        `${control.ms} ms and ${fetched.ms} ms`,
    );
    t.diagnostic(`named with the fetch: ${[...fetched.frames.named].map(([n, c]) => `${n} ${c}`).join(', ')}`);

    // The control: libc was sampled and looked for, there was no server, and its internal frames have no names.
    const libcOf = (report: SymbolsStepReport) => report.libraries.find((l) => l.path === libc.path);
    assert.equal(control.symbols.mode, 'sampled');
    assert.deepEqual(control.symbols.servers, []);
    assert.equal(libcOf(control.symbols)?.status, 'offline');
    assert.ok(control.frames.unnamed > 0, 'libc frames are [unknown] without the debug file');
    assert.ok(![...control.frames.named.keys()].some((n) => internal.test(n)), [...control.frames.named].join());
    assert.match(control.folded, /\[libc\.so\.6\]/);
    assert.doesNotMatch(control.folded, /start_thread|msort_with_tmp/);
    assert.match(control.stdout, /^libraries +no debug files for libc\.so\.6 .*collect asked no symbol server/m);

    // With the server: libc's debug file fetched by build-id and placed; the program has its own symbol table.
    assert.deepEqual(control.symbols.libraries.find((l) => l.path === program)?.status, 'has-symbols');
    const placed = libcOf(fetched.symbols);
    assert.deepEqual([placed?.status, placed?.buildId, placed?.source], ['placed', libc.buildId, server.url]);
    assert.equal(fetched.symbols.libraries.find((l) => l.path === program)?.status, 'has-symbols');
    assert.equal(fetched.frames.unnamed, 0, 'every libc frame is named');
    assert.ok(fetched.frames.named.has('start_thread'), 'the thread’s bottom frame is named');
    assert.ok(
      [...fetched.frames.named.keys()].some((n) => internal.test(n) && n !== 'start_thread'),
      'the libc function the program spends its time in is named',
    );
    assert.match(fetched.folded, /^libc-burn;(\S*;)?start_thread;/m);
    assert.doesNotMatch(fetched.folded, /\[libc\.so\.6\]/);
    assert.doesNotMatch(fetched.stdout, /^libraries /m);
  },
);
