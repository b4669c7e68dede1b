// PERF_SAMPLE_REGS_USER and PERF_SAMPLE_STACK_USER (perf record --call-graph dwarf) decoded as perf decodes them: a
// real recording of a busy program, every sample's user registers (mask, each value) and user stack size as
// `perf script -D` prints them ("... user regs: mask 0x.. ABI 64-bit", a line per register, "... ustack: size N").
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import { readPerfDataFile } from '../../../src/engine/perf-data/reader.js';
import { buildCfiStack, recordDwarf } from '../../fixtures/cfi-stack/build.js';
import { canRecord, needCommand } from '../../support/requirements.js';
import { tempDir } from '../../support/temp.js';

/** perf's user registers and stack size of each sample, by the sample's offset in the file. */
async function perfUserFields(perfData: string): Promise<Map<number, string>> {
  const { stdout } = await execa('perf', ['script', '-D', '-i', perfData], { maxBuffer: 1 << 30 });
  const samples = new Map<number, string>();
  let current: string[] | undefined;
  for (const line of stdout.split('\n')) {
    const sample = /^\d+ (0x[0-9a-f]+) \[0x[0-9a-f]+\]: PERF_RECORD_SAMPLE/.exec(line);
    if (sample) {
      current = [];
      samples.set(Number(sample[1]), '');
      continue;
    }
    if (!current) continue;
    const regs = /^\.\.\. user regs: mask (0x[0-9a-f]+) ABI (\S+)/.exec(line);
    const reg = /^\.\.\.\. \S+ +0x([0-9a-f]+)$/.exec(line);
    const stack = /^\.\.\. ustack: size (\d+),/.exec(line);
    if (regs) current.push(`mask ${regs[1]} abi ${regs[2]}`);
    else if (reg) current.push(BigInt(`0x${reg[1]}`).toString(16));
    else if (stack) current.push(`stack ${stack[1]}`);
    else if (line === '') {
      samples.set([...samples.keys()].at(-1)!, current.join(' '));
      current = undefined;
    }
  }
  return samples;
}

test('a dwarf recording: every sample user registers and stack size as perf script -D prints them', async (t) => {
  if (!canRecord(t) || !needCommand(t, 'gcc', 'gcc')) return;
  const dir = await tempDir(t, 'user-stack');
  const { program } = buildCfiStack(dir);
  const output = join(dir, 'perf.data');
  recordDwarf(program, output, { stackBytes: 4096, frequency: 499, seconds: 1 });

  const ours = new Map<number, string>();
  let withStack = 0;
  await readPerfDataFile(output, {
    event(event) {
      if (event.kind !== 'sample') return;
      const fields: string[] = [];
      const regs = event.userRegs;
      if (regs && regs.abi !== 0) {
        fields.push(`mask 0x${regs.mask.toString(16)} abi ${regs.abi === 2 ? '64-bit' : '32-bit'}`);
        for (const value of regs.values) fields.push(value.toString(16));
      }
      if (event.userStack) fields.push(`stack ${event.userStack.length}`);
      if ((event.userStack?.length ?? 0) > 0) withStack++;
      ours.set(event.offset, fields.join(' '));
    },
  });
  const perfs = await perfUserFields(output);
  // 1 s at 499 Hz: ~500 samples on an idle machine, a few hundred on a loaded one.
  assert.ok(ours.size > 100, `${ours.size} samples`);
  assert.ok(withStack > ours.size * 0.9, `${withStack} of ${ours.size} samples with a stack`);
  const differing = [...perfs].filter(([offset, fields]) => ours.get(offset) !== fields);
  assert.deepEqual(
    differing.slice(0, 3).map(([offset, fields]) => ({ offset, perf: fields, ours: ours.get(offset) })),
    [],
    `${differing.length} of ${perfs.size} samples differ`,
  );
  assert.equal(ours.size, perfs.size);
});
