// CPU over a sliding window from /proc/PID/stat, and the CPU quota of a process's cgroup: the window's arithmetic on
// given samples, the parsers, and a real process whose cgroup (v2 cpu.max, or v1 CFS quota, as this machine has)
// limits it to half a core; its ticks agree with what ps reports.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { execa } from 'execa';
import { cgroupMounts } from '../../src/perf/record-scope.js';
import {
  CpuWindow,
  cpuQuotaCores,
  cpuTicks,
  cpuV1Mount,
  parseCfsQuota,
  parseCgroupV1Cpu,
  parseCpuMax,
} from '../../src/watch/cpu.js';
import { need, needRoot } from '../support/requirements.js';

test('the window averages over the samples covering it, and starts again when the counter goes back', () => {
  const w = new CpuWindow(3000);
  w.add(0, 100);
  w.add(1000, 150);
  w.add(2000, 200);
  assert.equal(w.share(), undefined, 'two seconds seen of a three-second window');
  w.add(3000, 250);
  assert.equal(w.share(), 0.5, '150 ticks in 3 s: half a core');
  w.add(4000, 450);
  assert.equal(w.share(), (450 - 150) / 100 / 3, 'the oldest sample left the window');
  w.add(5000, 10);
  assert.equal(w.share(), undefined, 'a counter that went back is another process');
  w.clear();
  assert.equal(w.share(), undefined);
});

test('a day-long window polled every second keeps a few hundred samples, and still averages over the day', () => {
  const w = new CpuWindow(86_400_000);
  for (let second = 0; second <= 2 * 86_400; second++) w.add(second * 1000, second * 50);
  assert.ok(w.size <= 260, `${w.size} samples`);
  assert.ok(Math.abs(w.share()! - 0.5) < 1e-9, `half a core: ${w.share()}`);
});

test('quota parsers: cgroup v2 cpu.max, v1 CFS quota, /proc/PID/cgroup and mountinfo', () => {
  assert.equal(parseCpuMax('150000 100000\n'), 1.5);
  assert.equal(parseCpuMax('max 100000\n'), undefined);
  assert.equal(parseCpuMax('garbage'), undefined);
  assert.equal(parseCfsQuota('50000\n', '100000\n'), 0.5);
  assert.equal(parseCfsQuota('-1\n', '100000\n'), undefined);
  assert.equal(parseCgroupV1Cpu('4:memory:/a\n1:cpu,cpuacct:/kube/pod1\n0::/\n'), '/kube/pod1');
  assert.equal(parseCgroupV1Cpu('0::/system.slice\n'), undefined);
  const mountinfo =
    '30 25 0:26 / /sys/fs/cgroup/cpu\\040x rw,relatime shared:9 - cgroup cgroup rw,cpu\n' +
    '31 25 0:27 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n';
  assert.equal(cpuV1Mount(mountinfo), '/sys/fs/cgroup/cpu x');
});

test('a process limited to half a core by its cgroup: quota 0.5 cores, and its ticks read from /proc', async (t) => {
  if (!needRoot(t)) return;
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
  const v1 = cpuV1Mount(mountinfo);
  const v2 = cgroupMounts(mountinfo).v2;
  const burner = spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' });
  t.after(() => burner.kill('SIGKILL'));
  const pid = burner.pid!;
  let dir: string | undefined;
  try {
    if (v1) {
      dir = join(v1, `profcpu-watch-test-${process.pid}`);
      await mkdir(dir);
      await writeFile(join(dir, 'cpu.cfs_period_us'), '100000');
      await writeFile(join(dir, 'cpu.cfs_quota_us'), '50000');
    } else if (v2) {
      dir = join(v2, `profcpu-watch-test-${process.pid}`);
      await mkdir(dir);
      await writeFile(join(dir, 'cpu.max'), '50000 100000');
    }
    if (dir) await writeFile(join(dir, 'cgroup.procs'), String(pid));
  } catch {
    dir = undefined;
  }
  t.after(async () => {
    burner.kill('SIGKILL');
    for (
      let i = 0;
      dir &&
      i < 20 &&
      (await rmdir(dir).then(
        () => false,
        () => true,
      ));
      i++
    )
      await sleep(100);
  });
  if (!need(t, dir !== undefined, 'a cgroup (v1 cpu controller or v2 with cpu.max) that root can create')) return;
  assert.deepEqual(await cpuQuotaCores(pid), { cores: 0.5, source: join(dir!, v1 ? 'cpu.cfs_quota_us' : 'cpu.max') });
  // Our own cgroup (the test runner's) has no quota here: the machine's CPUs.
  const own = await cpuQuotaCores(process.pid);
  assert.ok(own.cores === availableParallelism() || own.cores > 0, JSON.stringify(own));

  const w = new CpuWindow(2000);
  for (let i = 0; i < 4; i++) {
    const ticks = await cpuTicks(pid);
    assert.ok(ticks, 'the burner is there');
    w.add(Date.now(), ticks.ticks);
    await sleep(1000);
  }
  const share = w.share();
  assert.ok(share !== undefined && share > 0 && share <= 0.6, `at most half a core (and a little rounding): ${share}`);
  // ps counts the same ticks (utime + stime) since the start.
  const ps = await execa('ps', ['-o', 'cputimes=', '-p', String(pid)]);
  const ticks = await cpuTicks(pid);
  assert.ok(Math.abs(Number(ps.stdout.trim()) - ticks!.ticks / 100) <= 1, `${ps.stdout} s vs ${ticks!.ticks} ticks`);
  burner.kill('SIGKILL');
  await new Promise((resolve) => burner.once('exit', resolve));
  assert.equal(await cpuTicks(pid), undefined, 'gone');
});
