import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  capability,
  hasCapability,
  listPids,
  ownPid,
  parseEnviron,
  parseNulList,
  parseStat,
  parseStatus,
  readStatus,
} from '../../src/target/procfs.js';

test('parseStatus reads the name, namespace PIDs, uids, capabilities and seccomp mode', () => {
  const status = parseStatus(
    'Name:\tdotnet\nUmask:\t0022\nState:\tS (sleeping)\nPPid:\t7\nUid:\t1000\t1001\t1000\t1000\nNSpid:\t4242\t1\nThreads:\t21\nCapEff:\t000001ffffffffff\nSeccomp:\t2\n',
  );
  assert.equal(status.name, 'dotnet');
  assert.deepEqual(status.nspids, [4242, 1]);
  assert.equal(status.ppid, 7);
  assert.deepEqual(status.uid, { real: 1000, effective: 1001 });
  assert.equal(status.seccomp, 2);
  assert.equal(status.threads, 21);
  assert.ok(hasCapability(status.capEff, capability.PERFMON));
  assert.ok(hasCapability(status.capEff, capability.SYS_PTRACE));
});

test('parseStatus gives neutral values for a truncated or odd status', () => {
  const status = parseStatus('Name:\tx\nCapEff:\tnothex\n');
  assert.deepEqual(status.nspids, []);
  assert.equal(status.capEff, 0n);
  assert.equal(hasCapability(status.capEff, capability.SYS_ADMIN), false);
});

test('parseStat counts fields after the last parenthesis, so a comm with spaces and parens is safe', () => {
  const rest = Array.from({ length: 40 }, (_, i) => String(i + 4));
  rest[14 - 4] = '150'; // utime
  rest[15 - 4] = '50'; // stime
  rest[22 - 4] = '987654'; // starttime
  const stat = parseStat(`123 (evil) name (x)) R ${rest.join(' ')}`);
  assert.deepEqual(stat, { state: 'R', startTicks: 987654, utimeTicks: 150, stimeTicks: 50 });
  assert.equal(parseStat('garbage'), undefined);
});

test('parseNulList and parseEnviron split /proc strings; later duplicates win', () => {
  assert.deepEqual(parseNulList('dotnet\0app.dll\0--x\0'), ['dotnet', 'app.dll', '--x']);
  assert.deepEqual(parseNulList(''), []);
  const env = parseEnviron(['A=1', 'B=x=y', 'A=2', 'junk']);
  assert.deepEqual(
    [...env],
    [
      ['A', '2'],
      ['B', 'x=y'],
    ],
  );
});

test('the readers work on the real /proc: our own status, our PID, the PID list', async () => {
  const self = await ownPid();
  assert.equal(self, process.pid);
  const status = await readStatus(process.pid);
  assert.equal(status?.nspids.at(-1), process.pid);
  assert.ok((await listPids()).includes(process.pid));
  assert.equal(await readStatus(2 ** 22 + 1), undefined, 'a PID above pid_max does not exist');
});
