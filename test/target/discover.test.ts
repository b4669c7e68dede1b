import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { chooseTarget, isWorthProfiling, listProcesses, processNames } from '../../src/target/discover.js';
import { coreclrMaps, FakeProc } from '../support/fake-proc.js';

async function machine(extra: { dotnet2?: boolean } = {}) {
  const proc = await FakeProc.create();
  await proc.add({ pid: 1, comm: 'tini', cmdline: ['/tini', '--', 'dotnet', 'Shop.dll'] });
  await proc.add({ pid: 2, comm: 'kthreadd', cmdline: [] });
  await proc.add({ pid: 10, comm: 'dotnet', cmdline: ['dotnet', '/app/Shop.dll'], maps: coreclrMaps });
  await proc.add({ pid: 20, comm: 'node', cmdline: ['node', 'profcpu'] });
  if (extra.dotnet2) await proc.add({ pid: 30, comm: 'Billing', cmdline: ['/app/Billing'], maps: coreclrMaps });
  await proc.setSelf(20);
  return proc;
}

test('listProcesses leaves kernel threads out; isWorthProfiling keeps .NET and perf-map processes', async (t) => {
  const proc = await machine();
  t.after(() => proc.dispose());
  const all = await listProcesses({ procRoot: proc.root });
  assert.deepEqual(
    all.map((p) => p.pid),
    [1, 10, 20],
  );
  assert.deepEqual(
    all.filter(isWorthProfiling).map((p) => p.pid),
    [10],
  );
});

test('the default target is the only .NET process, with the reason', async (t) => {
  const proc = await machine();
  t.after(() => proc.dispose());
  const chosen = await chooseTarget({}, { procRoot: proc.root });
  assert.equal(chosen.target.pid, 10);
  assert.equal(chosen.reason, 'it is the only .NET process visible');
});

test('two .NET processes make the default ambiguous, listing both', async (t) => {
  const proc = await machine({ dotnet2: true });
  t.after(() => proc.dispose());
  await assert.rejects(chooseTarget({}, { procRoot: proc.root }), (error) => {
    assert.ok(isProfcpuError(error, 'TARGET_AMBIGUOUS'));
    assert.match(error.message, /2 \.NET processes are visible: 10 \(dotnet \/app\/Shop\.dll\); 30 \(\/app\/Billing\)/);
    assert.match(error.remedy ?? '', /--pid/);
    return true;
  });
});

test('without .NET, PID 1 is chosen and the reason says so', async (t) => {
  const proc = await machine();
  t.after(() => proc.dispose());
  await proc.remove(10);
  const chosen = await chooseTarget({}, { procRoot: proc.root });
  assert.equal(chosen.target.pid, 1);
  assert.match(chosen.reason, /no \.NET process is visible, so PID 1 was chosen/);
});

test('--name matches a comm, an executable or a .NET dll name, never profcpu itself', async (t) => {
  const proc = await machine({ dotnet2: true });
  t.after(() => proc.dispose());
  const procfs = { procRoot: proc.root };
  assert.equal((await chooseTarget({ name: 'Shop' }, procfs)).target.pid, 10);
  assert.equal((await chooseTarget({ name: 'Billing' }, procfs)).target.pid, 30);
  assert.equal((await chooseTarget({ name: 'tini' }, procfs)).target.pid, 1);
  await assert.rejects(chooseTarget({ name: 'node' }, procfs), (e) => isProfcpuError(e, 'NO_TARGET'));
  await assert.rejects(chooseTarget({ name: 'dotnetx' }, procfs), (e) => isProfcpuError(e, 'NO_TARGET'));
});

test('processNames lists comm, executable base name and dll name', async (t) => {
  const proc = await machine();
  t.after(() => proc.dispose());
  const [dotnet] = (await listProcesses({ procRoot: proc.root })).filter((p) => p.pid === 10);
  assert.deepEqual(processNames(dotnet!), ['dotnet', 'Shop']);
});
