// The native engine against recordings made by other perf versions, with no perf at all: each fixture of
// test/fixtures/perf-corpus/ (README.md there says how they were made) holds a folder as `profcpu collect` lays it out
// (perf.data, the kept binary, the kallsyms lines the samples need, the vdso) and the outputs of the perf that recorded
// it: its own `perf script` text (through `postprocess --engine perf --perf <that perf>`) and profcpu's fold of it.
// The native engine must write the same frames (every line but the `#` header) and the same folded stacks.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { extract } from 'tar';
import { layout } from '../../src/bundle/layout.js';
import { postprocess } from '../../src/postprocess/postprocess.js';

const corpus = fileURLToPath(new URL('../fixtures/perf-corpus/', import.meta.url));

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
    const work = await mkdtemp(join(tmpdir(), 'profcpu-corpus-'));
    t.after(() => rm(work, { recursive: true, force: true }));
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
    const frames = (text: string) => text.split('\n').filter((line) => !line.startsWith('#'));
    const ours = frames(script);
    const theirs = frames(await readFile(join(work, name, 'perf_script.out'), 'utf8'));
    const differing = theirs.findIndex((line, i) => ours[i] !== line);
    assert.ok(
      differing < 0 && ours.length === theirs.length,
      `line ${differing} differs:\n  perf    ${theirs[differing]}\n  native  ${ours[differing]}`,
    );
    const folded = await readFile(join(dir, layout.foldedStacks), 'utf8');
    assert.equal(folded, await readFile(join(work, name, 'folded_stacks.out'), 'utf8'));
    for (const frame of shows) assert.ok(folded.includes(frame), `${frame} in the folded stacks`);
    t.diagnostic(`${theirs.length} lines of perf script text, ${folded.split('\n').length - 1} folded stacks`);
  });
}
