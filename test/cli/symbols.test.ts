// `profcpu symbols` end to end. The sidecar case: a program whose stripped library lives only in the target's
// private /tmp; perf records it from a sidecar (own mount namespace, the target's PID namespace), its frames are
// unnamed; `profcpu symbols --pid 1` run in the sidecar fetches the debug file from a loopback SSQP store, and
// perf script in the sidecar then names the library's static functions.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { ssqpDebugKey } from '../../src/debug-files/symbol-server.js';
import { buildNativeLibIfPossible, needNativeLib, type NativeLib } from '../fixtures/native-lib/build.js';
import { runCli } from '../support/cli.js';
import { serveDebugFile } from '../support/debuginfod.js';
import { runCliInSidecar, startInSidecar, startNamespacedTarget } from '../support/namespaces.js';
import { canRecord, needCommand } from '../support/requirements.js';
import { startStaticServer, type StaticServer } from '../support/static-server.js';

let work: string;
let lib: NativeLib | undefined;
let store: StaticServer;

before(async () => {
  // Not under /tmp: the namespaces of the sidecar test mount their own /tmp.
  work = mkdtempSync('/var/tmp/profcpu-symbols-cli-');
  lib = buildNativeLibIfPossible(join(work, 'lib'));
  if (lib) {
    const key = join(work, 'store', ssqpDebugKey(lib.buildId));
    mkdirSync(dirname(key), { recursive: true });
    copyFileSync(lib.debug, key);
  }
  store = await startStaticServer(join(work, 'store'));
});
after(async () => {
  await store.close();
  rmSync(work, { recursive: true, force: true });
});

test('in a sidecar: frames of a stripped library are unnamed, then named after `profcpu symbols --pid`', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l || !canRecord(t) || !needCommand(t, 'unshare', 'util-linux')) return;
  const home = join(work, 'sidecar-home');
  mkdirSync(home, { recursive: true });
  const env = { ...process.env, HOME: home, PROFCPU_SYMBOL_SERVERS: undefined, DEBUGINFOD_URLS: undefined };
  const target = await startNamespacedTarget('sh', [
    '-c',
    `mkdir /tmp/app && cp '${l.program}' '${l.stripped}' /tmp/app/ && exec /tmp/app/hotprog`,
  ]);
  t.after(() => target.kill());

  const data = join(work, 'perf.data');
  const record = await startInSidecar(
    target.hostPid,
    'perf',
    ['record', '-q', '-e', 'cpu-clock', '-F', '499', '-g', '-p', '1', '-o', data, '--', 'sleep', '1'],
    { env, cwd: work },
  );
  assert.equal(record.exitCode, 0, record.all);
  const script = async () => {
    const run = await startInSidecar(target.hostPid, 'perf', ['script', '--no-inline', '-i', data], {
      env,
      cwd: work,
      maxBuffer: 1 << 28,
    });
    assert.equal(run.exitCode, 0, String(run.stderr));
    return String(run.stdout);
  };
  const before = await script();
  assert.match(before, /\[unknown\] \(\/tmp\/app\/libhotlib\.so\)/);
  assert.doesNotMatch(before, /profcpu_hot_inner/);
  // The library exists only in the target's /tmp: the sidecar reaches it through /proc/1/root alone.
  assert.equal(existsSync('/tmp/app/libhotlib.so'), false);

  const cacheDir = join(work, 'sidecar-cache');
  const symbols = await runCliInSidecar(
    target.hostPid,
    ['symbols', '--pid', '1', '--symbol-server', store.url, '--cache-dir', cacheDir, '--json'],
    { env, cwd: work },
  );
  assert.equal(symbols.exitCode, 0, symbols.all);
  const report = JSON.parse(String(symbols.stdout)) as {
    libraries: { path: string; status: string; buildId?: string }[];
  };
  const hot = report.libraries.find((x) => x.path === '/tmp/app/libhotlib.so');
  assert.deepEqual([hot?.status, hot?.buildId], ['placed', l.buildId]);
  assert.ok(store.requests.includes(`/${ssqpDebugKey(l.buildId)}`));

  const after = await script();
  assert.match(after, /profcpu_hot_inner\+0x[0-9a-f]+ \(\/tmp\/app\/libhotlib\.so\)/);
  assert.doesNotMatch(after, /\[unknown\] \(\/tmp\/app\/libhotlib\.so\)/);
});

test('--file against a real debuginfod server; --offline with an empty cache fails with the reason', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l || !needCommand(t, 'debuginfod', 'debuginfod')) return;
  const server = await serveDebugFile(l.debug, l.buildId, work);
  t.after(() => server.close());
  const env = { PROFCPU_SYMBOL_SERVERS: undefined, DEBUGINFOD_URLS: undefined };
  const dirs = ['--cache-dir', join(work, 'file-cache'), '--buildid-dir', join(work, 'file-perf')];

  const offline = await runCli(['symbols', '--file', l.stripped, '--offline', ...dirs], { env });
  assert.equal(offline.exitCode, 1, offline.all);
  assert.match(String(offline.stdout), new RegExp(`^offline +${l.buildId} ${l.stripped}$`));

  const run = await runCli(['symbols', '--file', l.stripped, '--symbol-server', `debuginfod:${server.url}`, ...dirs], {
    env,
  });
  assert.equal(run.exitCode, 0, run.all);
  const entry = join(work, 'file-perf', l.stripped, l.buildId, 'debug');
  assert.equal(String(run.stdout), `placed      ${l.buildId} ${l.stripped}  from ${server.url} -> ${entry}`);
  assert.ok(existsSync(entry));

  // Once placed, nothing is asked again: the debug file perf's cache holds is reported, and the run succeeds.
  const again = await runCli(['symbols', '--file', l.stripped, '--offline', ...dirs], { env });
  assert.equal(again.exitCode, 0, again.all);
  assert.equal(String(again.stdout), `present     ${l.buildId} ${l.stripped}  already in ${entry}`);
});

test('usage: exactly one of --pid and --file; malformed server URLs are warnings', async () => {
  const neither = await runCli(['symbols']);
  assert.equal(neither.exitCode, 2);
  assert.match(String(neither.stderr), /name either --pid or --file/);
  const both = await runCli(['symbols', '--pid', '1', '--file', '/bin/true']);
  assert.equal(both.exitCode, 2);
  const bad = await runCli([
    'symbols',
    '--file',
    '/bin/true',
    '--symbol-server',
    'nota:url',
    '--cache-dir',
    join(work, 'usage-cache'),
    '--buildid-dir',
    join(work, 'usage-perf'),
  ]);
  assert.match(String(bad.stderr), /ignoring symbol server "nota:url" from --symbol-server: unsupported scheme nota:/);
  assert.match(String(bad.stderr), /no usable symbol server/);
});

test(
  '--file naming a FIFO, a directory or /dev/zero: each unreadable with its reason, promptly',
  { timeout: 30_000 },
  async (t) => {
    if (!needCommand(t, 'mkfifo', 'coreutils')) return;
    const fifo = join(work, 'a-fifo');
    execFileSync('mkfifo', [fifo]);
    const dir = join(work, 'a-dir');
    mkdirSync(dir);
    const dirs = ['--cache-dir', join(work, 'odd-cache'), '--buildid-dir', join(work, 'odd-perf')];
    const started = performance.now();
    // The FIFO named relative to the working folder: reported, reason included, by its resolved path.
    const args = ['symbols', '--offline', '--file', 'a-fifo', '--file', dir, '--file', '/dev/zero', ...dirs];
    const run = await runCli(args, { cwd: work, timeout: 20_000 });
    const ms = Math.round(performance.now() - started);
    t.diagnostic(`symbols --file FIFO DIR /dev/zero took ${ms} ms`);
    assert.equal(run.timedOut, false, 'the CLI hung');
    assert.equal(run.exitCode, 1, run.all);
    assert.deepEqual(String(run.stdout).split('\n'), [
      `unreadable  ${'-'.padEnd(40)} ${fifo}  ${fifo}: a FIFO, not an ELF file`,
      `unreadable  ${'-'.padEnd(40)} ${dir}  ${dir}: a directory, not an ELF file`,
      `unreadable  ${'-'.padEnd(40)} /dev/zero  /dev/zero: a character device, not an ELF file`,
    ]);
    assert.doesNotMatch(String(run.stderr), /EISDIR|at .*\.js:\d+/);
  },
);

test('--download-timeout: in --help, and a positive number of seconds', async () => {
  const help = await runCli(['symbols', '--help']);
  assert.equal(help.exitCode, 0);
  assert.match(String(help.stdout), /--download-timeout +Seconds one download from one server[\s\S]*?\[default: 600\]/);
  const zero = await runCli(['symbols', '--file', '/bin/true', '--download-timeout', '0']);
  assert.equal(zero.exitCode, 2);
  assert.match(String(zero.stderr), /--download-timeout must be a positive number of seconds/);
});
