// Records a real profile for the postprocess tests: a small Node program with distinctive function names, run under
// `perf record -F 199 -g -e cpu-clock` with --perf-basic-prof so its JIT frames are named from /tmp/perf-<pid>.map.
import { execa } from 'execa';
import { once } from 'node:events';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** JIT code named in the perf map, and interpreted frames too, so names show however little CPU the program got. */
const nodeFlags = ['--perf-basic-prof', '--interpreted-frames-native-stack'];

/** Function names a flame graph of the program must show. */
export const burnFunctions = ['profcpuFibonacciBurner', 'profcpuSquareRootSpinner'] as const;

const program = `
function profcpuFibonacciBurner(n) { return n < 2 ? n : profcpuFibonacciBurner(n - 1) + profcpuFibonacciBurner(n - 2); }
function profcpuSquareRootSpinner() { let s = 0; for (let i = 0; i < 2e6; i++) s += Math.sqrt(i); return s; }
process.stdout.write(process.pid + '\\n');
const cpuMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const budget = cpuMs() + Number(process.argv[2]);
while (cpuMs() < budget) { profcpuFibonacciBurner(22); profcpuSquareRootSpinner(); }
`;

export interface Recording {
  /** The Node process's pid (host and namespace are the same here). */
  pid: number;
  /** /proc/<pid>/maps, read while the program ran (as collect snapshots it). */
  maps: string;
  /** The perf record command run. */
  command: string[];
}

/**
 * Records the program burning `ms` milliseconds of CPU (not wall time: the machine may be busy) into `dir/perf.data`;
 * its perf map stays at /tmp/perf-<pid>.map.
 */
export async function recordNode(dir: string, ms = 1500): Promise<Recording> {
  const scratch = await mkdtemp(join(tmpdir(), 'profcpu-burn-'));
  try {
    const script = join(scratch, 'burn.js');
    await writeFile(script, program);
    await mkdir(dir, { recursive: true });
    const args = ['record', '-F', '199', '-g', '-e', 'cpu-clock', '-o', join(dir, 'perf.data'), '--'];
    const command = ['perf', ...args, process.execPath, ...nodeFlags, script, String(ms)];
    const perf = execa(command[0]!, command.slice(1), { stdin: 'ignore' });
    // The program prints its pid first thing, then burns for `ms`: its maps can be read meanwhile.
    const [first] = (await once(perf.stdout, 'data')) as [Buffer];
    const pid = Number(String(first).trim().split('\n')[0]);
    const maps = await readFile(`/proc/${pid}/maps`, 'utf8');
    await perf;
    return { pid, maps, command };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Keeps what collect would (perf map moved out of /tmp, maps snapshot, target.json); /tmp is left clean. */
export async function keepPerfMap(dir: string, { pid, maps }: Pick<Recording, 'pid' | 'maps'>): Promise<void> {
  await mkdir(join(dir, 'target'), { recursive: true });
  await writeFile(join(dir, 'target', 'maps'), maps);
  await rename(`/tmp/perf-${pid}.map`, join(dir, 'target', `perf-${pid}.map`));
  await writeFile(join(dir, 'target', 'target.json'), JSON.stringify({ pid, nspid: pid, comm: 'node' }));
}

/**
 * Records `command` into `perfData` as the engine tests do: `perf record <flags> -F 499 -g -e cpu-clock -o perfData --
 * command...` (flags such as `-B -N` or `--buildid-mmap` go first).
 */
export async function recordCommand(perfData: string, command: readonly string[], flags: readonly string[] = []) {
  await execa('perf', ['record', ...flags, '-F', '499', '-g', '-e', 'cpu-clock', '-o', perfData, '--', ...command]);
}

/** Records a perf.data holding no sample: a short command at one sample per 100 s of CPU. */
export async function recordNothing(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  await execa('perf', [
    'record',
    '-e',
    'cpu-clock',
    '-c',
    '100000000000',
    '-g',
    '-o',
    join(dir, 'perf.data'),
    '--',
    'true',
  ]);
}

/** A program run as PID 1 of its own PID namespace, with a private /tmp: it prints its pids and its perf map. */
const namespacedProgram = `
const fs = require('node:fs');
function profcpuFibonacciBurner(n) { return n < 2 ? n : profcpuFibonacciBurner(n - 1) + profcpuFibonacciBurner(n - 2); }
const status = fs.readFileSync('/proc/self/status', 'utf8');
const pids = /^NSpid:\\s+(.*)$/m.exec(status)[1].trim().split(/\\s+/).map(Number);
const cpuMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const budget = cpuMs() + Number(process.argv[1]);
while (cpuMs() < budget) profcpuFibonacciBurner(22);
const map = fs.readFileSync('/tmp/perf-' + process.pid + '.map', 'utf8');
process.stdout.write(JSON.stringify({ pid: pids[0], nspid: pids[pids.length - 1], map }));
`;

/**
 * Records the sidecar case without an engine (FACTS.md §6): the program runs as PID 1 of its own PID namespace with a
 * private tmpfs /tmp, so its perf map is /tmp/perf-1.map in a /tmp perf never sees, and perf.data records its host
 * PID. Gives both PIDs and the map's text, as collect would have copied it before the target exited.
 */
export async function recordNamespaced(dir: string, ms = 800): Promise<{ pid: number; nspid: number; map: string }> {
  await mkdir(dir, { recursive: true });
  const inner = `mount -t tmpfs tmpfs /tmp && exec "$1" ${nodeFlags.join(' ')} -e "$0" "$2"`;
  const { stdout } = await execa(
    'perf',
    [
      'record',
      '-F',
      '199',
      '-g',
      '-e',
      'cpu-clock',
      '-o',
      join(dir, 'perf.data'),
      '--',
      'unshare',
      '--pid',
      '--fork',
      '--mount',
      'sh',
      '-c',
      inner,
      namespacedProgram,
      process.execPath,
      String(ms),
    ],
    { stdin: 'ignore' },
  );
  return JSON.parse(stdout) as { pid: number; nspid: number; map: string };
}
