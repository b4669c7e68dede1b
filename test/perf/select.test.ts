import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { choosePerf, findPerfCandidates, parseKernelVersion, selectPerf } from '../../src/perf/select.js';
import { kernelRelease } from '../../src/perf/version.js';

const opt = (v: string) => ({ path: `/opt/perf/${v}/perf`, version: v });
const distro = { path: 'perf', version: '6.12.38' };

test('parseKernelVersion reads major, minor and patch from uname -r and folder names', () => {
  assert.deepEqual(parseKernelVersion('6.18.44-fc-v669'), [6, 18, 44]);
  assert.deepEqual(parseKernelVersion('6.1.0-37-amd64'), [6, 1, 0]);
  assert.deepEqual(parseKernelVersion('6.6'), [6, 6, 0]);
  assert.deepEqual(parseKernelVersion('v5.15.0'), [5, 15, 0]);
  assert.equal(parseKernelVersion('unknown'), undefined);
  assert.equal(parseKernelVersion('6'), undefined);
});

test('selectPerf takes the build matching the running kernel and says so', () => {
  const s = selectPerf({ kernelRelease: '6.6.87-azure', candidates: [opt('6.12'), opt('6.6'), opt('6.1'), distro] });
  assert.equal(s.path, '/opt/perf/6.6/perf');
  assert.equal(s.version, '6.6');
  assert.match(s.reason, /^perf 6\.6 at \/opt\/perf\/6\.6\/perf matches the running kernel 6\.6\.87-azure/);
  assert.match(s.reason, /installed: 6\.12 \(\/opt\/perf\/6\.12\/perf\), 6\.6 .*, 6\.12\.38 \(perf\)/);
});

test('selectPerf takes the closest version when none matches, the newer one on a tie', () => {
  const closest = selectPerf({ kernelRelease: '6.10.3', candidates: [opt('6.1'), opt('6.12'), opt('6.6')] });
  assert.equal(closest.version, '6.12');
  assert.match(closest.reason, /is the closest to the running kernel 6\.10\.3/);
  // 6.9 is three minor releases from both 6.6 and 6.12.
  assert.equal(selectPerf({ kernelRelease: '6.9.0', candidates: [opt('6.6'), opt('6.12')] }).version, '6.12');
  // A newer kernel than any build: the newest build.
  assert.equal(selectPerf({ kernelRelease: '6.18.44-fc-v669', candidates: [opt('6.1'), opt('6.6')] }).version, '6.6');
  // An older major release is farther than any minor distance.
  assert.equal(selectPerf({ kernelRelease: '5.15.0', candidates: [opt('6.1'), opt('4.19')] }).version, '6.1');
});

test('selectPerf prefers the newer patch level within the kernel minor release', () => {
  const s = selectPerf({ kernelRelease: '6.12.40', candidates: [opt('6.12'), distro] });
  assert.equal(s.path, 'perf');
  assert.equal(s.version, '6.12.38');
});

test('selectPerf with one candidate takes it whatever its version', () => {
  const s = selectPerf({ kernelRelease: '6.18.1', candidates: [{ path: 'perf', version: '6.1.140' }] });
  assert.deepEqual(s, { path: 'perf', version: '6.1.140', reason: 'perf 6.1.140 at perf: the only perf installed' });
});

test('selectPerf falls back to the first candidate when versions cannot be compared', () => {
  const odd = selectPerf({ kernelRelease: 'custom', candidates: [opt('6.6'), distro] });
  assert.equal(odd.version, '6.6');
  assert.match(odd.reason, /kernel release "custom" is not a version, so the first of/);
  const unreadable = selectPerf({
    kernelRelease: '6.6.1',
    candidates: [
      { path: 'perf', version: 'perf version unusual' },
      { path: '/x/perf', version: 'dev' },
    ],
  });
  assert.equal(unreadable.path, 'perf');
  assert.match(unreadable.reason, /no candidate has a readable version/);
});

test('selectPerf without candidates fails with NO_PERF and a remedy', () => {
  assert.throws(
    () => selectPerf({ kernelRelease: '6.1.0', candidates: [] }),
    (error: unknown) => isProfcpuError(error, 'NO_PERF') && /linux-perf/.test(error.remedy ?? ''),
  );
});

test('findPerfCandidates lists /opt/perf builds newest first, then the distribution perf with its version', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'profcpu-select-'));
  try {
    const root = join(dir, 'opt-perf');
    const fakePerf = async (path: string, version: string) => {
      await mkdir(join(path, '..'), { recursive: true });
      await writeFile(path, `#!/bin/sh\necho "perf version ${version}"\n`);
      await chmod(path, 0o755);
    };
    await fakePerf(join(root, '6.1', 'perf'), '6.1');
    await fakePerf(join(root, '6.12', 'perf'), '6.12');
    await fakePerf(join(root, '6.6', 'perf'), '6.6');
    await mkdir(join(root, 'not-a-version'));
    await mkdir(join(root, '6.9')); // no perf inside: not listed
    await writeFile(join(root, '5.10'), ''); // a file, not a folder
    const distribution = join(dir, 'bin', 'perf');
    await fakePerf(distribution, '6.12.38');

    const found = await findPerfCandidates({ root, distributionPerf: distribution });
    assert.deepEqual(found, [
      { path: join(root, '6.12', 'perf'), version: '6.12' },
      { path: join(root, '6.6', 'perf'), version: '6.6' },
      { path: join(root, '6.1', 'perf'), version: '6.1' },
      { path: distribution, version: '6.12.38' },
    ]);
    assert.equal(selectPerf({ kernelRelease: '6.6.50', candidates: found }).path, join(root, '6.6', 'perf'));

    const none = await findPerfCandidates({ root: join(dir, 'missing'), distributionPerf: join(dir, 'no-perf') });
    assert.deepEqual(none, []);

    // choosePerf compares with the kernel this test runs on: a build named after it wins.
    const running = parseKernelVersion(kernelRelease())!;
    await fakePerf(join(root, `${running[0]}.${running[1]}`, 'perf'), `${running[0]}.${running[1]}`);
    const chosen = await choosePerf({ root, distributionPerf: distribution });
    assert.equal(chosen.path, join(root, `${running[0]}.${running[1]}`, 'perf'));
    assert.equal(chosen.candidates, found.length + 1);
    assert.match(chosen.reason, /matches the running kernel/);
    const nothing = await choosePerf({ root: join(dir, 'missing'), distributionPerf: join(dir, 'no-perf') });
    assert.deepEqual([nothing.path, nothing.candidates], [join(dir, 'no-perf'), 0]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
