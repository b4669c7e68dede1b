// eh-frame.ts against an oracle we did not write: every row `readelf --debug-dump=frames-interp` prints (its LOC, CFA
// and register cells) must be what rowAt gives at that LOC and at LOC+1 inside the row, for programs and libraries
// built here with gcc (optimized without frame pointers, -O0 with them, PIC, a PLT, .debug_frame, a personality and
// LSDA, hand-written rare instructions) and for system files (libc, libstdc++, node: a fixed sample of their FDEs).
// Then crafted hostile sections under a deadline, and the PLT's CFA expression evaluated at each entry offset.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { fileByteSource, readSectionContents } from '../../../src/formats/elf/elf.js';
import {
  callFrameLimits,
  indexCallFrames,
  readCallFrameInfo,
  type CallFrameInfo,
  type CallFrameSections,
} from '../../../src/formats/elf/eh-frame.js';
import { evaluateDwarfExpression } from '../../../src/formats/elf/dwarf-expression.js';
import { need, needCommand } from '../../support/requirements.js';
import { tempDir } from '../../support/temp.js';
import {
  cfaCell,
  columnRegister,
  readelfFrames,
  registerCell,
  type ReadelfEntry,
  type ReadelfRow,
} from './readelf-frames.js';

const fixtures = fileURLToPath(new URL('../../fixtures/cfi/', import.meta.url));

async function load(file: string, pick?: (s: CallFrameSections) => CallFrameSections): Promise<CallFrameInfo> {
  const handle = await open(file);
  try {
    const source = fileByteSource(handle, (await handle.stat()).size, (cause) => cause as Error);
    if (!pick) return await readCallFrameInfo(source, file);
    const found = await readSectionContents(source, ['.eh_frame', '.eh_frame_hdr', '.debug_frame'], file, 1 << 26);
    return indexCallFrames(
      pick({
        ehFrame: found.get('.eh_frame'),
        ehFrameHdr: found.get('.eh_frame_hdr'),
        debugFrame: found.get('.debug_frame'),
      }),
    );
  } finally {
    await handle.close();
  }
}

/**
 * Compares every row readelf prints for (a sample of about `sample`) FDEs with rowAt; gives the FDEs and the
 * addresses checked. An FDE readelf prints no table for (only nops) has its CIE's row.
 */
function compareWithReadelf(info: CallFrameInfo, entries: ReadelfEntry[], sample = Infinity) {
  const cies = new Map(entries.filter((e) => e.kind === 'CIE').map((e) => [e.offset, e]));
  const fdes = entries.filter((e) => e.kind === 'FDE' && e.pcEnd! > e.pcBegin!);
  const step = Math.max(1, Math.ceil(fdes.length / sample));
  let checked = 0;
  let addresses = 0;
  // Besides the sample, every FDE with an expression (the PLT's, the signal trampoline's).
  const withExpression = (e: ReadelfEntry) =>
    e.rows.some((r) => r.cfa === 'exp' || [...r.cells.values()].includes('exp'));
  for (let i = 0; i < fdes.length; i++) {
    const fde = fdes[i]!;
    if (i % step !== 0 && !withExpression(fde)) continue;
    const cieRows = cies.get(fde.cie!)?.rows ?? [];
    const rows: ReadelfRow[] =
      fde.rows.length > 0 ? fde.rows : cieRows.slice(-1).map((r) => ({ ...r, loc: fde.pcBegin! }));
    assert.ok(rows.length > 0, `FDE at ${fde.offset.toString(16)}: no rows from readelf`);
    for (let r = 0; r < rows.length; r++) {
      const row = rows[r]!;
      const next = Math.min(rows[r + 1]?.loc ?? fde.pcEnd!, fde.pcEnd!);
      for (const pc of [row.loc, row.loc + 1]) {
        if (pc >= next) continue;
        const where = `FDE at 0x${fde.offset.toString(16)}, pc 0x${pc.toString(16)}`;
        const got = info.rowAt(pc);
        assert.ok(got, `${where}: no row`);
        assert.ok(got.start <= pc && pc < got.end, `${where}: row ${got.start}..${got.end}`);
        assert.equal(cfaCell(got), row.cfa, `${where}: CFA`);
        const named = new Set<number>();
        for (const [column, cell] of row.cells) {
          const register = columnRegister(column, got.returnAddressRegister);
          named.add(register);
          assert.equal(registerCell(got, register), cell || 'u', `${where}: ${column}`);
        }
        for (const register of got.registers.keys())
          if (registerCell(got, register) !== 'u')
            assert.ok(named.has(register), `${where}: register ${register} has a rule readelf does not show`);
        addresses++;
      }
    }
    checked++;
  }
  return { checked, addresses };
}

interface Build {
  name: string;
  args: string[];
  section?: '.eh_frame' | '.debug_frame';
}

const frames = join(fixtures, 'frames.c');
const builds: Build[] = [
  { name: 'O2-omit-frame-pointer', args: ['-O2', '-fomit-frame-pointer', '-fasynchronous-unwind-tables', frames] },
  { name: 'O0-frame-pointer', args: ['-O0', '-fno-omit-frame-pointer', frames] },
  { name: 'personality-lsda', args: ['-O2', '-fexceptions', frames] },
  { name: 'lib.so', args: ['-O2', '-fPIC', '-shared', '-fomit-frame-pointer', frames] },
  { name: 'lazy-plt', args: ['-O1', '-fcf-protection=none', '-Wl,-z,lazy', frames] },
  { name: 'ops.so', args: ['-shared', '-nostdlib', join(fixtures, 'ops.s')] },
  {
    name: 'debug-frame',
    args: ['-O2', '-g', '-fno-asynchronous-unwind-tables', '-fno-unwind-tables', '-fomit-frame-pointer', frames],
    section: '.debug_frame',
  },
];

function needTools(t: TestContext): boolean {
  return needCommand(t, 'gcc', 'gcc') && needCommand(t, 'readelf', 'binutils');
}

test('rows match readelf for programs and libraries built with gcc', async (t) => {
  if (!needTools(t)) return;
  const dir = await tempDir(t, 'eh-frame');
  for (const build of builds) {
    const out = join(dir, build.name);
    execFileSync('gcc', ['-o', out, ...build.args], { stdio: ['ignore', 'ignore', 'pipe'] });
    const section = build.section ?? '.eh_frame';
    const info = await load(out, (s) => (section === '.debug_frame' ? { debugFrame: s.debugFrame } : s));
    const entries = readelfFrames(out, section);
    const { checked, addresses } = compareWithReadelf(info, entries);
    assert.ok(checked >= 2 && addresses >= checked, `${build.name}: ${checked} FDEs, ${addresses} addresses`);
    assert.deepEqual(info.skipped.toJSON(), {}, build.name);
    t.diagnostic(`${build.name}: ${checked} FDEs, ${addresses} addresses, indexed by ${info.indexedBy}`);
  }
});

const systemFiles = ['/lib/x86_64-linux-gnu/libc.so.6', '/lib/x86_64-linux-gnu/libstdc++.so.6', '/usr/bin/node'];

test('rows match readelf for a sample of the FDEs of system files', async (t) => {
  if (!needCommand(t, 'readelf', 'binutils')) return;
  const present = systemFiles.filter((f) => existsSync(f) && statSync(f).isFile());
  if (!need(t, present.length > 0, 'libc.so.6 (an x86-64 Debian system)')) return;
  for (const file of present) {
    const info = await load(file);
    const { checked, addresses } = compareWithReadelf(info, readelfFrames(file, '.eh_frame'), 400);
    assert.ok(checked >= 100, `${file}: ${checked} FDEs`);
    assert.deepEqual(info.skipped.toJSON(), {}, file);
    // The same rows from a scan of .eh_frame as from .eh_frame_hdr's table.
    const scanned = await load(file, (s) => ({ ehFrame: s.ehFrame }));
    assert.equal(scanned.indexedBy, 'scan');
    assert.equal(scanned.entries, info.entries, file);
    t.diagnostic(`${file}: ${info.entries} FDEs (${info.indexedBy}), ${checked} compared at ${addresses} addresses`);
  }
});

test("the PLT's CFA expression gives rsp + 8, or rsp + 16 once the entry has pushed its index", async (t) => {
  if (!needTools(t)) return;
  const dir = await tempDir(t, 'eh-frame-plt');
  const out = join(dir, 'plt');
  execFileSync('gcc', ['-o', out, '-O1', '-fcf-protection=none', '-Wl,-z,lazy', frames]);
  const handle = await open(out);
  const source = fileByteSource(handle, (await handle.stat()).size, (cause) => cause as Error);
  const plt = (await readSectionContents(source, ['.plt'], out, 1 << 20)).get('.plt');
  const info = await readCallFrameInfo(source, out);
  await handle.close();
  assert.ok(plt && plt.bytes.length >= 48, 'a .plt of a header and two entries at least');
  const rsp = 0x7ffc_1234_5670n;
  let evaluated = 0;
  // Each 16-byte entry after the header: jmp *GOT(%rip) (6 bytes), push $index (5), jmp to the header.
  for (let entry = plt.address + 16; entry < plt.address + plt.bytes.length; entry += 16)
    for (let offset = 0; offset < 16; offset++) {
      const rip = entry + offset;
      const row = info.rowAt(rip);
      assert.ok(row && row.cfa.type === 'expression', `an expression at 0x${rip.toString(16)}`);
      const registers = new Map([
        [7, rsp],
        [16, BigInt(rip)],
      ]);
      const cfa = evaluateDwarfExpression(row.cfa.expression, { register: (n) => registers.get(n) });
      assert.equal(cfa, rsp + (offset >= 11 ? 16n : 8n), `rip at entry offset ${offset}`);
      evaluated++;
    }
  assert.ok(evaluated >= 32);
});

test('DWARF expressions: memory, branches, and a refusal for what cannot run', () => {
  const regs = { register: (n: number) => (n === 6 ? 0x1000n : undefined) };
  const memory = {
    ...regs,
    readMemory: (address: bigint, size: number) =>
      address === 0x1010n ? 0x1122334455667788n >> BigInt(64 - size * 8) : undefined,
  };
  // breg6 16; deref
  assert.equal(evaluateDwarfExpression(Uint8Array.of(0x76, 0x10, 0x06), memory), 0x1122334455667788n);
  // breg6 16; deref_size 4
  assert.equal(evaluateDwarfExpression(Uint8Array.of(0x76, 0x10, 0x94, 4), memory), 0x11223344n);
  // No memory given: undefined.
  assert.equal(evaluateDwarfExpression(Uint8Array.of(0x76, 0x10, 0x06), regs), undefined);
  // The CFA pushed first, plus_uconst 8.
  assert.equal(evaluateDwarfExpression(Uint8Array.of(0x23, 8), regs, 100n), 108n);
  // lit1 lit2 lt (signed), const1s -1 lit0 gt, and: 1 & 0
  assert.equal(evaluateDwarfExpression(Uint8Array.of(0x31, 0x32, 0x2d, 0x09, 0xff, 0x30, 0x2b, 0x1a), regs), 0n);
  // lit0 minus wraps to 2^64 - 1; lit3 shl by 3
  assert.equal(evaluateDwarfExpression(Uint8Array.of(0x30, 0x31, 0x1c), regs), (1n << 64n) - 1n);
  // lit1 bra -3: a loop for ever, stopped by the step cap.
  assert.equal(evaluateDwarfExpression(Uint8Array.of(0x31, 0x28, 0xfd, 0xff), regs), undefined);
  // An unknown register, a location operation (DW_OP_reg0), a truncated operand, an empty stack, a full one.
  assert.equal(evaluateDwarfExpression(Uint8Array.of(0x77, 0x08), regs), undefined);
  assert.equal(evaluateDwarfExpression(Uint8Array.of(0x50), regs), undefined);
  assert.equal(evaluateDwarfExpression(Uint8Array.of(0x0c, 1, 2), regs), undefined);
  assert.equal(evaluateDwarfExpression(Uint8Array.of(0x22), regs), undefined);
  assert.equal(evaluateDwarfExpression(new Uint8Array(100).fill(0x31), regs), undefined);
  // A divide by zero.
  assert.equal(evaluateDwarfExpression(Uint8Array.of(0x31, 0x30, 0x1b), regs), undefined);
});

// Crafted sections: a CIE "zR" (pcrel sdata4 FDE pointers, CFA rsp+8, ra at CFA-8) and FDEs after it.
const sectionAddress = 0x10000;
const uleb = (n: number) => {
  const out: number[] = [];
  do {
    out.push((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
    n = Math.floor(n / 128);
  } while (n > 0);
  return out;
};
const cieBody = [0, 0, 0, 0, 1, ...Buffer.from('zR\0'), 1, 0x78, 16, 1, 0x1b, 0x0c, 7, 8, 0x90, 1];
const withLength = (body: number[]) => [...u32(body.length), ...body];
function u32(n: number): number[] {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return [...b];
}

/** A section of the CIE and one FDE per program, FDE i covering [0x1000 * (i + 1), + 0x100). */
function crafted(programs: number[][]): { bytes: number[]; fdeAt: number[] } {
  let bytes = withLength(cieBody);
  const fdeAt: number[] = [];
  programs.forEach((program, i) => {
    const at = bytes.length;
    fdeAt.push(at);
    const pcField = sectionAddress + at + 8;
    const head = [...u32(at + 4), ...u32(0x1000 * (i + 1) - pcField), ...u32(0x100), 0];
    bytes = bytes.concat(u32(head.length + program.length), head, program);
  });
  return { bytes, fdeAt };
}

const section = (bytes: number[] | Uint8Array) => ({ address: sectionAddress, bytes: Uint8Array.from(bytes) });

/** Indexes `bytes` and looks up `pcs` within a deadline; the lookups must not throw. */
function hostile(bytes: number[] | Uint8Array, pcs: number[], deadlineMs = 2000) {
  const started = performance.now();
  const info = indexCallFrames({ ehFrame: section(bytes) });
  const rows = pcs.map((pc) => info.rowAt(pc));
  const took = performance.now() - started;
  assert.ok(took < deadlineMs, `took ${took} ms`);
  return { info, rows };
}

test('crafted sections: a sound one reads, 64-bit lengths too', () => {
  const { bytes } = crafted([[0x41, 0x0e, 16, 0x86, 2]]); // advance 1; def_cfa_offset 16; rbp at CFA-16
  const { rows } = hostile(bytes, [0x1000, 0x1001, 0x10ff, 0x1100]);
  assert.equal(rows[0]?.cfa.type === 'register' && rows[0].cfa.offset, 8);
  assert.deepEqual(rows[1]?.registers.get(6), { type: 'offset', offset: -16 });
  assert.equal(rows[2]?.end, 0x1100);
  assert.equal(rows[3], undefined);
  // The same in the 64-bit format: length 0xffffffff, a 64-bit length, an 8-byte id and CIE pointer.
  const wide = (body: number[]) => [0xff, 0xff, 0xff, 0xff, ...u32(body.length), 0, 0, 0, 0, ...body];
  const cie = wide([0, 0, 0, 0, ...cieBody]);
  const pcField = sectionAddress + cie.length + 20;
  const fde = wide([...u32(cie.length + 12), 0, 0, 0, 0, ...u32(0x1000 - pcField), ...u32(0x100), 0, 0x41, 0x0e, 16]);
  const wideRows = hostile([...cie, ...fde, 0, 0, 0, 0], [0x1001]).rows;
  assert.equal(wideRows[0]?.cfa.type === 'register' && wideRows[0].cfa.offset, 16);
});

test('hostile sections give no row, never a throw or a hang', () => {
  // A CIE length of 0xffffffff, then a 64-bit length of 2^60.
  const huge = hostile([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x10, ...cieBody], [0x1000]);
  assert.equal(huge.rows[0], undefined);
  assert.equal(huge.info.skipped.counts.get('entry'), 1);

  // An FDE whose CIE pointer names itself.
  const self = crafted([[]]);
  self.bytes.splice(self.fdeAt[0]! + 4, 4, ...u32(4));
  assert.deepEqual(hostile(self.bytes, [0x1000]).rows, [undefined]);

  // 100 000 remember_state, an endless run of nops, a LEB128 of 11 bytes, an unknown instruction, a register past
  // the cap, restore_state with nothing remembered; then a sound FDE that still reads.
  const { bytes } = crafted([
    new Array(100_000).fill(0x0a),
    new Array(1_000_000).fill(0),
    [0x0e, ...new Array(10).fill(0x80), 1],
    [0x3f],
    [0x07, ...uleb(100_000)],
    [0x0b],
    [0x41, 0x0e, 24],
  ]);
  const { info, rows } = hostile(bytes, [0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7001]);
  assert.deepEqual(rows.slice(0, 6), new Array(6).fill(undefined));
  assert.equal(rows[6]?.cfa.type === 'register' && rows[6].cfa.offset, 24);
  assert.equal(info.skipped.counts.get('program'), 6);

  // Every cut of a sound section, and a search table pointing past a cut: no throw, nothing past the cut read.
  const sound = crafted([
    [0x41, 0x0e, 16],
    [0x42, 0x0e, 32],
    [0x0a, 0x41, 0x0e, 48, 0x0b],
  ]).bytes;
  for (let cut = 0; cut < sound.length; cut++) hostile(sound.slice(0, cut), [0x1000, 0x2003, 0x3001]);
});

test('the costly hostile sections: a flood of unusable FDEs, remember/restore pairs over 256 registers', () => {
  // 64 MiB (the section cap) of 8-byte FDEs, each naming a CIE of its own that does not exist: scanning stops after
  // maxUnusableEntries of them, in little time and memory (each failure was kept once, and filled the heap).
  const flood = new Uint8Array(64 << 20);
  const view = new DataView(flood.buffer);
  for (let at = 0; at < flood.length; at += 8) {
    view.setUint32(at, 4, true);
    view.setUint32(at + 4, 0x7fffffff - at / 8, true);
  }
  const heap = process.memoryUsage().heapUsed;
  const { info } = hostile(flood, [0x1000]);
  assert.equal(info.entries, 0);
  assert.equal(info.skipped.counts.get('entry'), callFrameLimits.maxUnusableEntries + 1);
  assert.ok(process.memoryUsage().heapUsed - heap < 64 << 20, 'the heap did not grow with the section');

  // A row after all 256 registers were given rules, then 49 000 remember/restore pairs: each copy is charged per
  // rule, so the row runs out of its instruction budget instead of costing half a second; 127 lookups, a sample's
  // worth, within the deadline.
  const allRegisters = Array.from({ length: 256 }, (_, r) => [0x05, ...uleb(r), 1]).flat();
  const pairs = new Array<number[]>(49_000).fill([0x0a, 0x0b]).flat();
  const costly = crafted([[...allRegisters, ...pairs]]).bytes;
  const { rows } = hostile(costly, new Array<number>(127).fill(0x1000), 2000);
  assert.deepEqual(new Set(rows), new Set([undefined]));
});

test('an unusable .eh_frame_hdr table is counted and .eh_frame scanned instead', () => {
  const { bytes, fdeAt } = crafted([
    [0x41, 0x0e, 16],
    [0x41, 0x0e, 32],
  ]);
  const hdrAddress = 0x8000;
  const table = (entries: [number, number][]) => ({
    address: hdrAddress,
    bytes: Uint8Array.from([
      1, 0x1b, 0x03, 0x3b, ...u32(sectionAddress - (hdrAddress + 4)), ...u32(entries.length),
      ...entries.flatMap(([pc, fde]) => [...u32(pc - hdrAddress), ...u32(sectionAddress + fde - hdrAddress)]),
    ]), // prettier-ignore
  });
  const good = indexCallFrames({
    ehFrame: section(bytes),
    ehFrameHdr: table([
      [0x1000, fdeAt[0]!],
      [0x2000, fdeAt[1]!],
    ]),
  });
  assert.equal(good.indexedBy, 'eh_frame_hdr');
  const unsorted = indexCallFrames({
    ehFrame: section(bytes),
    ehFrameHdr: table([
      [0x2000, fdeAt[1]!],
      [0x1000, fdeAt[0]!],
    ]),
  });
  assert.equal(unsorted.indexedBy, 'scan');
  assert.equal(unsorted.skipped.counts.get('search table'), 1);
  for (const info of [good, unsorted]) {
    assert.deepEqual(info.rowAt(0x1001)?.cfa, { type: 'register', register: 7, offset: 16 });
    assert.deepEqual(info.rowAt(0x2001)?.cfa, { type: 'register', register: 7, offset: 32 });
  }
});
