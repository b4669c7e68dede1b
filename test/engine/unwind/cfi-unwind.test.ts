// The CFI unwinder against perf's own DWARF unwinding (libunwind): a program and its library built without frame
// pointers, recorded with `perf record --call-graph dwarf,8192`, each sample unwound with the CFI profcpu's .eh_frame
// reader gives (itself checked against readelf in test/formats/elf/eh-frame.test.ts) of every file mapped and the vdso; the
// frames, as file offsets, must be those `perf script -F ip` prints for every sample perf unwound to the end of its
// stack (_start, or clone3 for the second thread). The others are counted.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import type { MmapEvent, SampleEvent } from '../../../src/engine/perf-data/records.js';
import { readPerfDataFile } from '../../../src/engine/perf-data/reader.js';
import { unwindUserStack, type UnwindStop } from '../../../src/engine/unwind/cfi-unwind.js';
import { readCallFrameInfoByOffset, type UnwindRow } from '../../../src/formats/elf/eh-frame.js';
import { bytesSource } from '../../../src/formats/elf/elf.js';
import { buildCfiStack, recordDwarf } from '../../fixtures/cfi-stack/build.js';
import { canRecord, needCommand } from '../../support/requirements.js';
import { tempDir } from '../../support/temp.js';
import { ownVdso } from '../../../src/kernel/vdso.js';
import { readFile } from 'node:fs/promises';

/** A file's CFI, looked up by its file offsets (as a mapping's pgoff counts them). */
async function cfiOf(name: string, bytes: Buffer): Promise<{ rowAt(offset: bigint): UnwindRow | undefined }> {
  const { rowAtOffset } = await readCallFrameInfoByOffset(bytesSource(bytes), name);
  return { rowAt: rowAtOffset };
}

/** perf script's samples: the tid, then each frame's address and symbol, kernel frames left out. */
async function perfFrames(perfData: string): Promise<{ tid: number; frames: string[]; last: string }[]> {
  const { stdout } = await execa('perf', ['script', '-F', 'tid,ip,sym', '--no-inline', '-i', perfData], {
    maxBuffer: 1 << 30,
  });
  return stdout
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const [head, ...lines] = block.split('\n').filter((line) => line.trim() !== '');
      const frames = lines.map((line) => /^\s+([0-9a-f]+) (.*)$/.exec(line)!).filter((m) => !m[1]!.startsWith('ffff'));
      return { tid: Number(head!.trim()), frames: frames.map((m) => m[1]!), last: frames.at(-1)?.[2] ?? '' };
    });
}

test('dwarf recordings unwound with .eh_frame CFI: the frames perf script prints, on every complete sample', async (t) => {
  if (!canRecord(t) || !needCommand(t, 'gcc', 'gcc')) return;
  const dir = await tempDir(t, 'cfi-unwind');
  const { program, library } = buildCfiStack(dir);
  const output = join(dir, 'perf.data');
  recordDwarf(program, output, { stackBytes: 8192, frequency: 999, seconds: 2 });

  const mmaps: MmapEvent[] = [];
  const samples: SampleEvent[] = [];
  await readPerfDataFile(output, {
    event(event) {
      if (event.kind === 'mmap') mmaps.push(event);
      else if (event.kind === 'sample') samples.push(event);
    },
  });
  // Every file the samples may be in: the program, its library, libc, and ld.so (a thread's start and exit, lazy
  // binding: a sample there now and then).
  const executable = mmaps.filter((m) => m.prot === undefined || (m.prot & 4) !== 0);
  const files = [
    ...new Set(
      executable
        .map((m) => m.filename)
        .filter((f) => f.startsWith('/') && !f.startsWith('//') && !f.startsWith('/memfd:')),
    ),
  ];
  assert.ok(files.includes(program) && files.includes(library));
  const cfi = new Map(
    await Promise.all(files.map(async (file) => [file, await cfiOf(file, await readFile(file))] as const)),
  );
  // clock_gettime's time is in the vdso: its CFI is this process's vdso's, the kernel's one image (src/kernel/vdso.ts).
  const vdso = await ownVdso();
  if (vdso) cfi.set('[vdso]', await cfiOf('[vdso]', vdso));

  const mappingOf = (pid: number, address: bigint) =>
    executable.findLast((m) => m.pid === pid && address >= m.start && address < m.start + m.length);

  const perfs = await perfFrames(output);
  assert.equal(perfs.length, samples.length);
  const stops = new Map<UnwindStop, number>();
  let [complete, agreeing, incomplete, incompleteAgreeing, inVdso] = [0, 0, 0, 0, 0];
  const differing: string[] = [];
  samples.forEach((sample, i) => {
    const perf = perfs[i]!;
    assert.equal(perf.tid, sample.tid);
    const rowAt = (pc: bigint): UnwindRow | undefined => {
      const mapping = mappingOf(sample.pid, pc);
      const file = mapping && cfi.get(mapping.filename);
      return file?.rowAt(pc - mapping!.start + mapping!.pgoff);
    };
    const { frames, stop } = unwindUserStack(sample.userRegs!, sample.userStack!, { rowAt });
    if (frames.some((pc) => mappingOf(sample.pid, pc)?.filename === '[vdso]')) inVdso++;
    stops.set(stop, (stops.get(stop) ?? 0) + 1);
    // perf prints a user frame as its offset in the mapping (map_ip), an unmapped one as it is.
    const ours = frames.map((pc) => {
      const mapping = mappingOf(sample.pid, pc);
      return (mapping ? pc - mapping.start + mapping.pgoff : pc).toString(16);
    });
    const same = ours.join(' ') === perf.frames.join(' ');
    if (/^(_start|clone3)$/.test(perf.last)) {
      complete++;
      if (same) agreeing++;
      else if (differing.length < 3)
        differing.push(`#${i} (${stop})\n ours ${ours.join(' ')}\n perf ${perf.frames.join(' ')}`);
    } else {
      incomplete++;
      if (same) incompleteAgreeing++;
    }
  });
  t.diagnostic(
    `${samples.length} samples: ${agreeing} of ${complete} complete ones agree; ${incompleteAgreeing} of ` +
      `${incomplete} incomplete ones; ${inVdso} through the vdso; stops ${JSON.stringify(Object.fromEntries(stops))}`,
  );
  assert.deepEqual(differing, [], `${complete - agreeing} of ${complete} complete samples differ`);
  assert.ok(complete > samples.length * 0.9, `${complete} of ${samples.length} samples complete`);
});
