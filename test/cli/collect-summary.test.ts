import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultOutputDir } from '../../src/collect/options.js';
import type { CollectResult } from '../../src/collect/session.js';
import {
  chainLines,
  formatSummary,
  librariesRemedy,
  topFrames,
  type PostprocessFacts,
} from '../../src/cli/collect-summary.js';
import type { TargetInfo } from '../../src/target/inspect.js';
import { assertNoTerminalControl } from './terminal-control.js';

test('the default output folder is profilings/HH-MM-SS_YYYY-MM-DD under the working directory', () => {
  assert.equal(defaultOutputDir('/srv', new Date(2026, 0, 5, 7, 8, 9)), '/srv/profilings/07-08-09_2026-01-05');
});

test('topFrames ranks leaf frames by self samples, ties by name', () => {
  const stacks = new Map([
    ['app;Main;Work_[j]', 5],
    ['app;Main;Other_[j]', 2],
    ['app;Idle;Work_[j]', 1],
    ['app;Main;Alpha_[j]', 2],
  ]);
  assert.deepEqual(topFrames(stacks, 3), [
    { frame: 'Work_[j]', self: 6 },
    { frame: 'Alpha_[j]', self: 2 },
    { frame: 'Other_[j]', self: 2 },
  ]);
});

const target = {
  pid: 4242,
  nspid: 1,
  cmdline: ['dotnet', 'Shop.dll'],
} as TargetInfo;

function result(postprocess?: PostprocessFacts, of: TargetInfo = target): CollectResult<PostprocessFacts> {
  return {
    dir: '/srv/profilings/x',
    target: of,
    reason: 'it is the only .NET process visible',
    event: 'cpu-clock',
    scope: { scope: { kind: 'process' }, reason: 'perf 7.3 records the process', spins: false },
    unwind: { kind: 'fp', reason: '--unwind fp' },
    checks: [],
    record: { command: ['perf'], end: 'stopped', samples: 300, stderrTail: '' },
    recordedSeconds: 3.04,
    snapshots: {} as CollectResult<PostprocessFacts>['snapshots'],
    steps: {},
    phaseMs: { target: 5, preflight: 120, recording: 3040, postprocess: 800 },
    cpuMs: { profcpu: 40, perf: 150 },
    ...(postprocess && { postprocess }),
  };
}

test('formatSummary: samples, naming share, top frames, where the files are, phases and CPU', () => {
  const lines = formatSummary(
    result({
      fold: {
        samples: 300,
        keptSamples: 300,
        stacks: new Map([
          ['dotnet;Main_[j];Hot_[j]', 240],
          ['dotnet;Main_[j];[unknown]', 60],
        ]),
        quality: { samples: 300, fullyNamed: 240 },
      },
    }),
    '/srv',
  );
  assert.deepEqual(lines, [
    'target      4242 (ns pid 1) dotnet Shop.dll',
    'recorded    3.0 s at cpu-clock, 300 samples (stopped early)',
    'stacks      300 of 300 samples kept, 2 distinct stacks',
    'named       80.0% of samples have every frame named',
    'top frames (self)',
    '   80.0%  Hot  [managed]',
    '   20.0%  [unknown]',
    'flame graph profilings/x/flamegraph.svg',
    'tarball     profilings/x/prof.tar.gz',
    'phases      target 0.01 s, preflight 0.12 s, recording 3.04 s, postprocess 0.80 s',
    'cpu         profcpu 0.04 s, perf 0.15 s while recording',
  ]);
});

test('formatSummary without postprocess says how to finish the folder', () => {
  const lines = formatSummary(result(), '/elsewhere');
  assert.ok(
    lines.includes(
      'raw data    /srv/profilings/x/perf.data (not post-processed: run `profcpu postprocess --dir /srv/profilings/x`)',
    ),
  );
});

test('formatSummary adds the share not counting libcoreclr.so when it differs', () => {
  const lines = formatSummary(
    result({
      fold: {
        samples: 10,
        keptSamples: 10,
        stacks: new Map([['dotnet;Main_[j]', 10]]),
        quality: { samples: 10, fullyNamed: 2, fullyNamedExceptCoreclr: 9 },
      },
    }),
    '/srv',
  );
  assert.ok(lines.includes('named       20.0% of samples have every frame named (90.0% not counting libcoreclr.so)'));
});

test('formatSummary heads with the app and framework share, and names the libraries that lack debug files', () => {
  const lines = formatSummary(
    result({
      fold: {
        samples: 10,
        keptSamples: 10,
        stacks: new Map([['dotnet;[libc.so.6];Main_[j]', 10]]),
        quality: {
          samples: 10,
          fullyNamed: 0,
          fullyNamedExceptCoreclr: 0,
          fullyNamedExceptLibraries: 9,
          unnamedLibraries: { 'libcoreclr.so': 3, 'libc.so.6': 10 },
        },
      },
    }),
    '/srv',
  );
  const at = lines.findIndex((line) => line.startsWith('named'));
  assert.deepEqual(lines.slice(at, at + 2), [
    'named       90.0% of samples have every app and framework frame named (every frame: 0.0%)',
    `libraries   no debug files for libc.so.6 (unnamed frames in 100.0% of samples), libcoreclr.so (30.0%): \`profcpu symbols --pid ${target.pid}\` fetches them`,
  ]);
});

test('the libraries line says what fetches their debug files, from what collect’s symbols step did', () => {
  const unnamed = ['libc.so.6', 'libcoreclr.so'];
  const libc = '/usr/lib/x86_64-linux-gnu/libc.so.6';
  const step = (status: string, rest: Record<string, unknown> = {}) => ({
    mode: 'sampled',
    maxLibraries: 32,
    servers: ['debuginfod:http://127.0.0.1:8002', 'ssqp:https://msdl.microsoft.com/download/symbols'],
    libraries: [{ path: libc, status }],
    ...rest,
  });
  const command = '`profcpu symbols --pid 7` fetches them';
  assert.equal(librariesRemedy(undefined, unnamed, 7), command);
  assert.equal(librariesRemedy({ mode: 'none' }, unnamed, 7), `${command} (collect ran with --symbols none)`);
  assert.equal(librariesRemedy(step('over-limit'), unnamed, 7), `${command} (collect looked for 32 libraries at most)`);
  const asked = { attempts: [{ outcome: 'not-found' }] };
  assert.equal(
    librariesRemedy(step('not-found', { libraries: [{ path: libc, status: 'not-found', ...asked }] }), unnamed, 7),
    'collect asked debuginfod:http://127.0.0.1:8002, ssqp:https://msdl.microsoft.com/download/symbols in vain: ' +
      '`profcpu symbols --pid 7 --symbol-server URL` fetches them from a server that has them (the debuginfod of ' +
      'the target’s distribution)',
  );
  assert.equal(
    librariesRemedy(step('offline', { servers: [] }), unnamed, 7),
    `collect asked no symbol server (--offline): ${command}`,
  );
  // A system library with Microsoft's server alone: nobody was asked for it, and the line says so.
  const skipped = { attempts: [{ outcome: 'skipped' }] };
  assert.equal(
    librariesRemedy(
      step('not-found', {
        servers: ['ssqp:https://msdl.microsoft.com/download/symbols'],
        libraries: [{ path: libc, status: 'not-found', ...skipped }],
      }),
      unnamed,
      7,
    ),
    'collect had no symbol server for them (Microsoft’s holds only .NET’s own libraries): `profcpu symbols --pid 7 ' +
      '--symbol-server debuginfod:URL` fetches them from the target distribution’s debuginfod (or set ' +
      'DEBUGINFOD_URLS for collect)',
  );
  // A library collect did not look at (not sampled by then, or another one): the command.
  assert.equal(librariesRemedy(step('not-found'), ['libssl.so.3'], 7), command);
});

test('formatSummary escapes a hostile command line and frame names, and cuts them', { timeout: 5_000 }, () => {
  const link = '\x1b]8;;https://evil.example/\x07Shop\x1b]8;;\x07';
  const hostile = {
    ...target,
    cmdline: ['dotnet', `${link}.dll\x1b[2J\x07`, '\ntarget      1 (ns pid 1) forged\u202e', 'x'.repeat(200)],
  } as TargetInfo;
  // Folding turns a name's `;` into `:` (a `;` separates frames), so the hyperlink reaches the summary as `8::`.
  const frameLink = link.replaceAll(';', ':');
  const frame = `Shop.${frameLink}::Run\x1b[2J\x9b31m\n   99.0%  Forged\u202e`;
  const lines = formatSummary(
    result(
      {
        fold: {
          samples: 10,
          keptSamples: 10,
          stacks: new Map([
            [`dotnet;Main_[j];${frame}_[j]`, 6],
            [`dotnet;Main_[j];${'Deep.'.repeat(40)}Leaf_[j]`, 4],
          ]),
          quality: { samples: 10, fullyNamed: 10 },
        },
      },
      hostile,
    ),
    '/srv',
  );
  for (const line of lines) {
    assertNoTerminalControl(line, 'a summary line');
    assert.ok(!line.includes('\n'), line);
  }
  const targetLine = lines.find((line) => line.startsWith('target '))!;
  const prefix = 'target      4242 (ns pid 1) ';
  assert.ok(
    targetLine.startsWith(
      `${prefix}dotnet \\x1b]8;;https://evil.example/\\x07Shop\\x1b]8;;\\x07.dll\\x1b[2J\\x07 \\ntarget      1 (`,
    ),
    targetLine,
  );
  assert.equal([...targetLine.slice(prefix.length)].length, 90, 'the command line is cut to 90 characters');
  assert.ok(targetLine.endsWith('…'), targetLine);
  assert.ok(
    lines.includes(
      '   60.0%  Shop.\\x1b]8::https://evil.example/\\x07Shop\\x1b]8::\\x07::Run\\x1b[2J\\x9b31m\\n   99.0%  Forged\\u202e  [managed]',
    ),
  );
  assert.ok(lines.includes(`   40.0%  ${'Deep.'.repeat(19)}Deep…  [managed]`));
  assert.ok(!lines.some((line) => /^ +99\.0%/.test(line)), 'no forged top-frame line');
});

test('the chains line: the share of broken call chains and where they end, from 0.1% of samples', () => {
  const quality = { samples: 1000, fullyNamed: 1000 };
  assert.deepEqual(chainLines({ ...quality, brokenChains: 0 }), []);
  assert.deepEqual(chainLines({ ...quality, brokenChains: 1, brokenChainsByFile: { 'libc.so.6': 1 } }), [
    'chains      0.1% of samples have a broken call chain, cut in libc.so.6 (0.1%): code built without frame ' +
      'pointers hides their callers (--unwind mixed unwinds them)',
  ]);
  assert.deepEqual(chainLines({ ...quality, brokenChains: 1, brokenChainsByFile: { '[jit]': 1 } }, true), [
    'chains      0.1% of samples have a broken call chain, cut in [jit] (0.1%): their stacks go deeper than the ' +
      'stack copy (raise --stack-size) or through code unwinding cannot step',
  ]);
  const byFile = { 'libc.so.6': 60, 'libe_sqlite3.so': 30, '[unknown]': 8, 'libcrypto.so.3': 2 };
  assert.deepEqual(chainLines({ ...quality, brokenChains: 100, brokenChainsByFile: byFile }), [
    'chains      10.0% of samples have a broken call chain, cut in libc.so.6 (6.0%), libe_sqlite3.so (3.0%), ' +
      '[unknown] (0.8%) and 1 more: code built without frame pointers hides their callers (--unwind mixed unwinds ' +
      'them)',
  ]);
});
