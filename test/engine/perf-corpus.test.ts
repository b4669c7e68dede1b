// The built-in engine against recordings made by other perf versions, with no perf at all: each fixture of
// test/fixtures/perf-corpus/ (README.md there says how they were made) holds a folder as `profcpu collect` lays it out
// (perf.data, the kept binary, the kallsyms lines the samples need, the vdso) and the outputs of the perf that recorded
// it: its own `perf script` text (through `postprocess --engine perf --perf <that perf>`) and profcpu's fold of it.
// The built-in engine must write the same frames (every line but the `#` header) and the same folded stacks.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { copyFile, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { extract } from 'tar';
import { layout } from '../../src/output/layout.js';
import { postprocess } from '../../src/postprocess/postprocess.js';
import { ownHome } from '../support/home.js';
import { tempDir } from '../support/temp.js';

const corpus = fileURLToPath(new URL('../fixtures/perf-corpus', import.meta.url));

/**
 * The built-in engine's perf script text against perf's: every line but the `#` header alike (after `strip`), in the
 * same number; gives the built-in engine's lines.
 */
function assertSameFrames(ours: string, theirs: string, name: string, strip = (line: string) => line): string[] {
  const frames = (text: string) =>
    text
      .split('\n')
      .filter((line) => !line.startsWith('#'))
      .map(strip);
  const [mine, perfs] = [frames(ours), frames(theirs)];
  const differing = perfs.findIndex((line, i) => mine[i] !== line);
  assert.ok(
    differing < 0 && mine.length === perfs.length,
    `${name}: line ${differing} differs:\n  perf    ${perfs[differing]}\n  native  ${mine[differing]}`,
  );
  return mine;
}

// perf 6.1.187 (Debian 12) prints file frames at their offset in the file, tids in 5 columns, C++ names demangled;
// perf 6.12.117 (Debian's linux-source-6.12, built as images/sidecar/build-perf.sh builds it, with no demangler)
// frames at their address in memory, tids in 7 columns, C++ names as they are (what --no-demangle asks for).
const cases = [
  { name: 'native-perf6.1', perfVersion: '6.1.187', args: [], shows: ['profcpu_corpus_spin', 'vfs_read_[k]'] },
  { name: 'native-perf6.12', perfVersion: '6.12.117', args: [], shows: ['profcpu_corpus_spin', 'vfs_read_[k]'] },
  {
    name: 'node-perf6.1',
    perfVersion: '6.1.187',
    args: [],
    shows: ['JS:* /work/scratch/ne/burn.js:1:1_[j]', 'node::Start;', 'Builtins_InterpreterEntryTrampoline'],
  },
  {
    name: 'node-perf6.12',
    perfVersion: '6.12.117',
    args: ['--no-demangle'],
    shows: ['JS:* /work/scratch/ne/burn.js:1:1_[j]', '_ZN4node5StartEiPPc;', 'Builtins_InterpreterEntryTrampoline'],
  },
  // The .NET fixture as collect records it (perf map, jitdump, ReadyToRun images, runtime stubs, kept libraries):
  // frames perf leaves unnamed are named by profcpu's resolver in both engines.
  {
    name: 'dotnet-perf6.1',
    perfVersion: '6.1.187',
    args: [],
    shows: ['ProfcpuFixture.Workloads::Run_[j]', 'System.Threading.Thread::StartCallback_[j]'],
  },
  // perf 6.12 names libcoreclr.so's PLT entries (its .plt has sh_entsize 0), which perf 6.1 leaves [unknown].
  {
    name: 'dotnet-perf6.12',
    perfVersion: '6.12.117',
    args: ['--no-demangle'],
    shows: ['ProfcpuFixture.Workloads::Run_[j]', '__tls_get_addr@plt'],
  },
];

for (const { name, perfVersion, args, shows } of cases) {
  test(`a recording by perf ${perfVersion} (${name}): the native engine writes its perf script frames and folds`, async (t) => {
    const work = await tempDir(t, 'corpus');
    await extract({ file: join(corpus, `${name}.tar.gz`), cwd: work });
    const dir = join(work, name, 'recording');
    // No perf anywhere: the engine reads the folder alone.
    await postprocess(dir, {
      tarball: false,
      perfPath: join(work, 'no-perf-here'),
      perfScriptArgs: args,
    });

    const script = await readFile(join(dir, layout.perfScript), 'utf8');
    assert.match(script, new RegExp(`^# perf version : ${perfVersion.replaceAll('.', '\\.')}$`, 'm'));
    const lines = assertSameFrames(script, await readFile(join(work, name, 'perf_script.out'), 'utf8'), name);
    const folded = await readFile(join(dir, layout.foldedStacks), 'utf8');
    assert.equal(folded, await readFile(join(work, name, 'folded_stacks.out'), 'utf8'));
    for (const frame of shows) assert.ok(folded.includes(frame), `${frame} in the folded stacks`);
    t.diagnostic(`${lines.length} lines of perf script text, ${folded.split('\n').length - 1} folded stacks`);
  });
}

// Recordings made by hand (test/fixtures/perf-corpus/README.md, scripts/perf-corpus/make-hand.ts): `perf record`
// with the options people reach for, by perf 6.1, 6.12 and 7.3, each with that perf's outputs. A case folder is what
// the user has (perf.data, the program's perf map copied beside it) plus what names its frames anywhere: the program
// kept as collect keeps binaries, and the kernel symbols the outputs name.
const handMade = readdirSync(corpus)
  .filter((name) => /^hand-perf[\d.]+\.tar\.gz$/.test(name))
  .sort();

for (const archive of handMade) {
  test(`recordings made by hand with ${archive.slice(5, -7)}: the native engine folds each as that perf does`, async (t) => {
    const work = await tempDir(t, 'hand-corpus');
    await extract({ file: join(corpus, archive), cwd: work });
    const top = join(work, archive.slice(0, -7));
    const program = JSON.parse(await readFile(join(top, 'program.json'), 'utf8')) as { path: string; buildId: string };
    const cases = readdirSync(join(top, 'cases')).sort();
    assert.ok(cases.length >= 10, `${cases.length} cases`);
    // perf record left a copy of the program in this machine's build-id cache: a HOME of its own hides it, so the
    // frames are named from what the folder holds, as on any other machine.
    await ownHome(t);
    for (const name of cases) {
      const dir = join(top, 'cases', name);
      const { perfScriptArgs } = JSON.parse(await readFile(join(dir, 'case.json'), 'utf8')) as {
        perfScriptArgs: string[];
      };
      await mkdir(join(dir, 'target', 'binaries'), { recursive: true });
      await copyFile(join(top, 'program'), join(dir, 'target', 'binaries', program.buildId));
      const bytes = (await stat(join(top, 'program'))).size;
      await writeFile(
        join(dir, 'target', 'binaries.json'),
        JSON.stringify({ binaries: [{ path: program.path, buildId: program.buildId, bytes, storedBytes: bytes }] }),
      );
      await copyFile(join(top, 'kallsyms'), join(dir, 'target', 'kallsyms'));
      const expected = {
        script: join(work, `${name}.perf_script.out`),
        folded: join(work, `${name}.folded_stacks.out`),
      };
      await rename(join(dir, 'perf_script.out'), expected.script);
      await rename(join(dir, 'folded_stacks.out'), expected.folded);
      // No perf anywhere: the engine reads the folder alone.
      await postprocess(dir, { tarball: false, perfPath: join(work, 'no-perf-here'), perfScriptArgs });
      const ours = assertSameFrames(
        await readFile(join(dir, layout.perfScript), 'utf8'),
        await readFile(expected.script, 'utf8'),
        name,
        // perf writes a tracepoint's fields after its name, which the built-in engine does not (README.md).
        (line) => line.replace(/^(\S.* sched:sched_switch: ).*$/, '$1'),
      );
      const folded = await readFile(join(dir, layout.foldedStacks), 'utf8');
      assert.equal(folded, await readFile(expected.folded, 'utf8'), `${name}: the folded stacks`);
      const jit = ours.some((line) => / corpus_jit_loop(\+0x|$)/.test(line));
      assert.ok(jit, `${name}: the JIT frame named from the perf map beside perf.data`);
      t.diagnostic(`${name}: ${ours.length} lines of perf script text, ${folded.split('\n').length - 1} folded stacks`);
    }
  });
}
