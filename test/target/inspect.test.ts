import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { detectDotnet, inspectProcess } from '../../src/target/inspect.js';
import { parseEnviron } from '../../src/target/procfs.js';
import { startNodeBurn } from '../fixtures/node-burn/node-burn.js';
import { coreclrMaps, FakeProc } from '../support/fake-proc.js';

test('detectDotnet finds libcoreclr.so, its version, and the perf map and W^X settings', () => {
  const env = parseEnviron([
    'COMPlus_PerfMapEnabled=3',
    'DOTNET_EnableWriteXorExecute=0',
    'DOTNET_PerfMapJitDumpPath=/perf',
  ]);
  assert.deepEqual(detectDotnet(coreclrMaps, env), {
    coreclrPath: '/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.11/libcoreclr.so',
    version: '8.0.11',
    perfMapEnabled: '3',
    writeXorExecute: false,
    perfMapDir: '/perf',
  });
  const defaults = detectDotnet(coreclrMaps, new Map());
  assert.equal(defaults?.writeXorExecute, true, 'W^X is on unless disabled');
  assert.equal(defaults?.perfMapEnabled, undefined);
  assert.equal(detectDotnet('7f00-7f01 r-xp 0 08:01 1 /usr/lib/libc.so.6\n', new Map()), undefined);
});

test('inspectProcess reads a .NET process in its own namespace, its files through /proc/PID/root', async (t) => {
  const proc = await FakeProc.create();
  t.after(() => proc.dispose());
  await proc.add({
    pid: 4242,
    nspid: 1,
    comm: 'dotnet',
    cmdline: ['dotnet', '/app/Shop.dll'],
    env: { DOTNET_PerfMapEnabled: '1' },
    maps: coreclrMaps,
    uid: 1000,
    files: { '/tmp/perf-1.map': '7f0000200000 10 Shop.Program::Main()[OptimizedTier1]\n' },
  });
  const info = await inspectProcess(4242, { procRoot: proc.root });
  assert.equal(info.pid, 4242);
  assert.equal(info.nspid, 1);
  assert.equal(info.runtime, 'dotnet');
  assert.equal(info.uid, 1000);
  assert.equal(info.dotnet?.version, '8.0.11');
  assert.equal(info.perfMap.path, '/tmp/perf-1.map');
  assert.equal(info.perfMap.hostPath, `${proc.root}/4242/root/tmp/perf-1.map`);
  assert.equal(info.perfMap.present, true);
  assert.equal(info.jitDump.present, false);
});

test('inspectProcess looks for the perf map where DOTNET_PerfMapJitDumpPath says', async (t) => {
  const proc = await FakeProc.create();
  t.after(() => proc.dispose());
  await proc.add({
    pid: 7,
    comm: 'Shop',
    cmdline: ['/app/Shop'],
    env: { DOTNET_PerfMapJitDumpPath: '/diag' },
    maps: coreclrMaps,
    files: { '/diag/perf-7.map': '' },
  });
  const info = await inspectProcess(7, { procRoot: proc.root });
  assert.equal(info.perfMap.path, '/diag/perf-7.map');
  assert.equal(info.perfMap.present, true);
});

test('inspectProcess of a missing PID fails with NO_TARGET and a remedy', async () => {
  await assert.rejects(inspectProcess(2 ** 22 + 1), (error) => {
    assert.ok(isProfcpuError(error, 'NO_TARGET'));
    assert.match(error.remedy ?? '', /profcpu ps/);
    return true;
  });
});

test('inspectProcess of a real Node process with --perf-basic-prof sees its perf map', async (t) => {
  const node = await startNodeBurn(30);
  t.after(() => node.kill());
  const info = await inspectProcess(node.pid);
  assert.equal(info.runtime, 'node');
  assert.equal(info.nspid, node.pid);
  assert.equal(info.perfMap.present, true);
  assert.ok((info.perfMap.size ?? 0) > 0);
  assert.ok(info.cmdline.includes('--perf-basic-prof'));
});
