// Makes the hand-made recordings of test/fixtures/perf-corpus/ (its README.md says what each case is): recordings made
// with `perf record` and the options people reach for, as a user would make them without profcpu collect, each with
// the perf script text and folded stacks of the perf that recorded it, for test/engine/perf-corpus.test.ts.
//
//   npx tsx scripts/perf-corpus/make-hand.ts --perf perf=6.1 --perf /usr/local/bin/perf-7.3=7.3 [--out DIR]
//
// Needs root, gcc's g++ and each perf named. For each perf it builds test/fixtures/perf-corpus/hand/corpus.cpp
// (static, frame pointers) at /tmp/profcpu-corpus/corpus, records every case with it, writes that perf's outputs
// (profcpu postprocess --engine perf --perf <that perf>: its perf script text, folded by profcpu's fold) with the
// program still in place and its perf map in /tmp, then writes `hand-perf<label>.tar.gz`: each case's perf.data, the
// program's perf map as the user would copy it beside perf.data, the outputs and case.json (the command, the perf
// script arguments), and once for all cases `program` (the binary with only the parts perf reads to name frames: its
// code zeroed) and `kallsyms` (the kernel's symbols the outputs name, each with the one after it, so it ends alike):
// what the test needs to name the frames elsewhere, after a reboot, without perf.
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { postprocess } from '../../src/postprocess/postprocess.js';
import { fileByteSource, readElf } from '../../src/formats/elf/elf.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const programDir = '/tmp/profcpu-corpus';
const program = join(programDir, 'corpus');
/** Rounds of the program's loop: about 1.5 s of CPU on this project's machines. */
const rounds = '150';

interface Case {
  name: string;
  /** perf record's options (before `--`); `-o` is added unless `pipe`. */
  record: string[];
  /** The recording is written to stdout (`-o -`). */
  pipe?: boolean;
  /** Keep the second of the files --switch-output makes (perf is sent SIGUSR2 halfway). */
  slice?: boolean;
  /** perf script arguments both engines get (the program's samples of a system-wide recording). */
  pidFilter?: boolean;
  /** perf versions that cannot record it (a prefix of the label). */
  skip?: string[];
}

const cases: Case[] = [
  { name: 'fp', record: ['-g', '-F', '499'] },
  { name: 'period', record: ['-g', '-c', '200000'] },
  { name: 'no-callchain', record: ['-F', '499'] },
  { name: 'tracepoint', record: ['-g', '-F', '499', '-e', 'cpu-clock', '-e', 'sched:sched_switch'] },
  { name: 'two-software-events', record: ['-g', '-F', '499', '-e', 'cpu-clock', '-e', 'page-faults'] },
  { name: 'group-read', record: ['-g', '-F', '499', '-e', '{cpu-clock,page-faults}:S'] },
  { name: 'system-wide', record: ['-a', '-g', '-F', '499'], pidFilter: true },
  { name: 'per-thread', record: ['--per-thread', '-g', '-F', '499'] },
  { name: 'user-only', record: ['-g', '-F', '499', '-e', 'cpu-clock:u'] },
  {
    name: 'sample-fields',
    record: [
      '-g',
      '-F',
      '499',
      '-d',
      '-T',
      '--sample-cpu',
      '-P',
      '-W',
      '--phys-data',
      '--data-page-size',
      '--code-page-size',
    ],
  },
  { name: 'record-types', record: ['-g', '-F', '499', '--switch-events', '--namespaces', '--all-cgroups', '-s'] },
  { name: 'pipe', record: ['-g', '-F', '499'], pipe: true },
  { name: 'pipe-tracepoint', record: ['-g', '-e', 'sched:sched_switch'], pipe: true },
  { name: 'switch-output', record: ['-g', '-F', '499', '--switch-output'], slice: true },
  { name: 'compressed', record: ['-g', '-F', '499', '-z'] },
  { name: 'buildid-mmap', record: ['-g', '-F', '499', '-N', '--buildid-mmap'] },
  { name: 'clockid', record: ['-g', '-F', '499', '-k', '1'] },
];

function parseArgs(): { perfs: { path: string; label: string }[]; out: string } {
  const perfs: { path: string; label: string }[] = [];
  let out = join(root, 'test/fixtures/perf-corpus');
  const args = process.argv.slice(2);
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--perf') {
      const [path, label] = args[++i]!.split('=');
      perfs.push({ path: path!, label: label! });
    } else if (args[i] === '--out') out = resolve(args[++i]!);
    else throw new Error(`unknown argument ${args[i]}`);
  }
  if (perfs.length === 0) throw new Error('name at least one --perf PATH=LABEL');
  return { perfs, out };
}

function perfMaps(): Set<string> {
  return new Set(readdirSync('/tmp').filter((name) => /^perf-\d+\.map$/.test(name)));
}

/** Records one case into `dir`; gives the pid of the program (from the perf map it wrote). */
function record(perf: string, kase: Case, dir: string): number {
  const before = perfMaps();
  const command = [perf, 'record', ...kase.record];
  if (kase.pipe) {
    const run = spawnSync('sh', [
      '-c',
      `"$@" > ${join(dir, 'perf.data')}`,
      'sh',
      ...command,
      '-o',
      '-',
      '--',
      program,
      rounds,
    ]);
    if (run.status !== 0) throw new Error(`${command.join(' ')}: ${run.stderr}`);
  } else if (kase.slice) {
    const script = `"$@" & perf=$!; sleep 0.8; kill -USR2 $perf; wait $perf`;
    const args = [...command, '-o', join(dir, 'perf.data'), '--', program, rounds];
    const run = spawnSync('sh', ['-c', script, 'sh', ...args]);
    if (run.status !== 0) throw new Error(`${command.join(' ')}: ${run.stderr}`);
  } else {
    execFileSync(command[0]!, [...command.slice(1), '-o', join(dir, 'perf.data'), '--', program, rounds], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  }
  if (kase.slice) {
    const slices = readdirSync(dir)
      .filter((name) => name.startsWith('perf.data.'))
      .sort();
    if (slices.length < 2) throw new Error(`${kase.name}: ${slices.length} slices`);
    copyFileSync(join(dir, slices[1]!), join(dir, 'perf.data'));
    for (const name of slices) rmSync(join(dir, name));
  }
  const made = [...perfMaps()].filter((name) => !before.has(name));
  if (made.length !== 1) throw new Error(`${kase.name}: ${made.length} new perf maps`);
  const pid = Number(/\d+/.exec(made[0]!)![0]);
  writeFileSync(
    join(dir, 'case.json'),
    `${JSON.stringify(
      {
        command: [...command.map((a) => (a === perf ? 'perf' : a)), ...(kase.pipe ? ['-o', '-'] : [])].join(' '),
        perfScriptArgs: kase.pidFilter ? [`--pid=${pid}`] : [],
      },
      null,
      2,
    )}\n`,
  );
  return pid;
}

/** The kernel symbols `texts` name, each with the next one: the lines of /proc/kallsyms to keep. */
function trimmedKallsyms(texts: string[]): string {
  const named = new Set<string>();
  for (const text of texts)
    // `sym+0x<off> ([kernel.kallsyms])` on a frame's line or a one-line sample's, or the symbol alone at a kernel
    // address (a pipe's tracepoint frames).
    for (const m of text.matchAll(
      /(?:[\t ][0-9a-f]+ (\S+?)\+0x[0-9a-f]+ \(\[kernel\.kallsyms\]\)|^\s+ffff[0-9a-f]{12} (\S+))$/gm,
    ))
      named.add((m[1] ?? m[2])!);
  const lines = readFileSync('/proc/kallsyms', 'utf8')
    .split('\n')
    .filter((line) => / [tTwW] /.test(line));
  const keep = new Set<number>();
  lines.forEach((line, i) => {
    const name = line.split(' ')[2]!.split('\t')[0]!;
    if (named.has(name)) {
      keep.add(i);
      if (i + 1 < lines.length) keep.add(i + 1);
    }
  });
  return `${lines.filter((_, i) => keep.has(i)).join('\n')}\n`;
}

/** The program with only what perf reads to name frames (headers, symbols, notes): the rest zeroed. */
async function namingCopy(path: string): Promise<{ bytes: Buffer; buildId: string }> {
  const file = await open(path);
  try {
    const size = (await file.stat()).size;
    const info = await readElf(
      fileByteSource(file, size, (e) => e as Error),
      path,
    );
    const whole = readFileSync(path);
    const bytes = Buffer.alloc(size);
    for (const [start, end] of info.namingRanges) whole.copy(bytes, start, start, end);
    return { bytes, buildId: info.buildId! };
  } finally {
    await file.close();
  }
}

async function main(): Promise<void> {
  const { perfs, out } = parseArgs();
  mkdirSync(programDir, { recursive: true });
  execFileSync('g++', [
    '-O1',
    '-static',
    '-fno-omit-frame-pointer',
    '-fno-exceptions',
    '-fno-rtti',
    '-pthread',
    '-o',
    program,
    join(root, 'test/fixtures/perf-corpus/hand/corpus.cpp'),
  ]);
  for (const { path: perf, label } of perfs) {
    const name = `hand-perf${label}`;
    const work = mkdtempSync(join(tmpdir(), 'profcpu-hand-corpus-'));
    const top = join(work, name);
    const texts: string[] = [];
    for (const kase of cases) {
      if (kase.skip?.some((prefix) => label.startsWith(prefix))) continue;
      const dir = join(top, 'cases', kase.name);
      mkdirSync(dir, { recursive: true });
      const pid = record(perf, kase, dir);
      const map = `/tmp/perf-${pid}.map`;
      copyFileSync(map, join(dir, `perf-${pid}.map`));
      const { perfScriptArgs } = JSON.parse(readFileSync(join(dir, 'case.json'), 'utf8')) as {
        perfScriptArgs: string[];
      };
      // That perf's own outputs, made in a copy (the case folder keeps only what the user would have).
      const outputs = join(work, 'outputs', kase.name);
      mkdirSync(outputs, { recursive: true });
      copyFileSync(join(dir, 'perf.data'), join(outputs, 'perf.data'));
      await postprocess(outputs, { engine: 'perf', perfPath: perf, tarball: false, perfScriptArgs });
      copyFileSync(join(outputs, 'flamescope/perf_script.out'), join(dir, 'perf_script.out'));
      copyFileSync(join(outputs, 'folded_stacks.out'), join(dir, 'folded_stacks.out'));
      texts.push(readFileSync(join(dir, 'perf_script.out'), 'utf8'));
      rmSync(map);
      console.log(`${name}/${kase.name}: pid ${pid}`);
    }
    writeFileSync(join(top, 'kallsyms'), trimmedKallsyms(texts));
    const copy = await namingCopy(program);
    writeFileSync(join(top, 'program'), copy.bytes);
    writeFileSync(join(top, 'program.json'), `${JSON.stringify({ path: program, buildId: copy.buildId }, null, 2)}\n`);
    execFileSync('tar', [
      '-C',
      work,
      '--sort=name',
      '--owner=0',
      '--group=0',
      '--numeric-owner',
      '-czf',
      join(out, `${name}.tar.gz`),
      name,
    ]);
    rmSync(work, { recursive: true, force: true });
    console.log(`wrote ${join(out, `${name}.tar.gz`)}`);
  }
  rmSync(programDir, { recursive: true, force: true });
}

await main();
