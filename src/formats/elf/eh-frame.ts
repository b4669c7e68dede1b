// An x86-64 ELF file's call frame information in (`.eh_frame`, its `.eh_frame_hdr` search table, `.debug_frame` of a
// debug file: each section's bytes and virtual address), the unwind row in effect at an address out (cfa-program.ts):
// how to find the CFA and each saved register, to unwind native frames built without frame pointers. FDEs are
// indexed once: from `.eh_frame_hdr`'s sorted table when it is valid, else by scanning the section and sorting; a
// lookup then parses one FDE (its CIE cached) and runs its instructions up to the address. The sections are the
// target's: every read is bounded, and a malformed entry (a length past the section, an FDE whose CIE pointer names no
// CIE, a program past the caps) is a counted skip at indexing and "no row" at lookup, never a throw or a hang.
import { SkipCounter, type Warn } from '../../diagnostics.js';
import { cfaProgramLimits, runProgram, type ProgramContext, type RowState, type UnwindRow } from './cfa-program.js';
import { CfiDataError, DwarfCursor, pointerEncoding } from './dwarf-cursor.js';
import { readLoadSegments } from './elf-functions.js';
import { readSectionContents, type ByteSource, type SectionContents } from './elf.js';

export { cfaProgramLimits, type CfaRule, type RegisterRule, type UnwindRow } from './cfa-program.js';

export const callFrameLimits = Object.freeze({
  /** Largest section read (`/usr/bin/node`'s `.eh_frame` is 2.7 MB, libc's 150 KB). */
  maxSectionBytes: 64 << 20,
  /** FDEs indexed per section at most (node has 75 000); the rest are skipped, counted. */
  maxEntries: 1 << 21,
  /** CIEs (or the failures to read one) kept per section (libc has 2, node a handful). */
  maxCachedCies: 4096,
  /** Unusable entries met while scanning a section before the rest of it is skipped (a sound file has none). */
  maxUnusableEntries: 1024,
  /** Longest augmentation string read ("zPLR" is the longest in use). */
  maxAugmentationBytes: 16,
});

/** The sections, as readSectionContents gives them. */
export interface CallFrameSections {
  ehFrame?: SectionContents | undefined;
  ehFrameHdr?: SectionContents | undefined;
  debugFrame?: SectionContents | undefined;
}

export interface CallFrameOptions {
  /** Told once per kind of skip (a malformed entry, an unusable search table, an unusable program). */
  warn?: Warn;
}

/** The indexed call frame information of one file. */
export interface CallFrameInfo {
  /** The unwind row at `pc` (a virtual address of the file), undefined when no usable FDE covers it. */
  rowAt(pc: number): UnwindRow | undefined;
  /** FDEs indexed, over both sections. */
  readonly entries: number;
  /** The sections' bytes held (what keeping this costs, with the index: 16 bytes an FDE). */
  readonly bytes: number;
  /** How `.eh_frame` was indexed: from `.eh_frame_hdr`'s table, or by a scan (no or an unusable table). */
  readonly indexedBy: 'eh_frame_hdr' | 'scan' | 'none';
  /** What was skipped, by kind. */
  readonly skipped: SkipCounter;
}

/** Reads the call frame sections of the ELF file in `source` and indexes them (ELF_MALFORMED for a broken file). */
export async function readCallFrameInfo(
  source: ByteSource,
  label: string,
  options: CallFrameOptions = {},
): Promise<CallFrameInfo> {
  const found = await readSectionContents(
    source,
    ['.eh_frame', '.eh_frame_hdr', '.debug_frame'],
    label,
    callFrameLimits.maxSectionBytes,
  );
  return indexCallFrames(
    { ehFrame: found.get('.eh_frame'), ehFrameHdr: found.get('.eh_frame_hdr'), debugFrame: found.get('.debug_frame') },
    options,
  );
}

/**
 * The unwind row at a file offset (as a mapping's pgoff counts: perf's and the kernel's addresses come to a file so),
 * moved to the ELF's own address by the PT_LOAD segment holding it; undefined outside every segment. `loaded` says
 * whether an offset lies in a PT_LOAD segment at all (a single-file .NET app's bundled images lie past them).
 */
export async function readCallFrameInfoByOffset(
  source: ByteSource,
  label: string,
  options: CallFrameOptions = {},
): Promise<{
  info: CallFrameInfo;
  rowAtOffset(offset: bigint): UnwindRow | undefined;
  loaded(offset: bigint): boolean;
}> {
  const info = await readCallFrameInfo(source, label, options);
  const segments = await readLoadSegments(source);
  const segmentAt = (offset: bigint) => segments.find((s) => offset >= s.offset && offset < s.offset + s.memsz);
  return {
    info,
    rowAtOffset(offset) {
      const segment = segmentAt(offset);
      return segment && info.rowAt(Number(offset - segment.offset + segment.vaddr));
    },
    loaded: (offset) => segmentAt(offset) !== undefined,
  };
}

/** Indexes the sections; `.eh_frame`'s FDEs are looked in first, `.debug_frame`'s after. */
export function indexCallFrames(sections: CallFrameSections, options: CallFrameOptions = {}): CallFrameInfo {
  const skipped = new SkipCounter(options.warn);
  const tables: FrameSection[] = [];
  let indexedBy: CallFrameInfo['indexedBy'] = 'none';
  if (sections.ehFrame) {
    const eh = new FrameSection(sections.ehFrame, false, skipped);
    indexedBy = sections.ehFrameHdr && eh.indexFromHeader(sections.ehFrameHdr) ? 'eh_frame_hdr' : 'scan';
    if (indexedBy === 'scan') eh.indexByScan();
    tables.push(eh);
  }
  if (sections.debugFrame) {
    const debug = new FrameSection(sections.debugFrame, true, skipped);
    debug.indexByScan();
    tables.push(debug);
  }
  const entries = tables.reduce((sum, t) => sum + t.starts.length, 0);
  const held = [sections.ehFrame, sections.ehFrameHdr, sections.debugFrame];
  return {
    entries,
    bytes: held.reduce((sum, section) => sum + (section?.bytes.byteLength ?? 0), 0) + 16 * entries,
    indexedBy,
    skipped,
    rowAt(pc) {
      if (!Number.isFinite(pc)) return undefined;
      for (const table of tables) {
        const row = table.rowAt(pc);
        if (row !== 'not covered') return row;
      }
      return undefined;
    },
  };
}

interface Cie {
  codeAlignment: number;
  dataAlignment: number;
  returnAddressRegister: number;
  /** How the FDE's initial location is encoded (DW_EH_PE_*; udata4/8 by address size in `.debug_frame`). */
  fdeEncoding: number;
  /** The augmentation has `z`: the FDE has augmentation data, its length first. */
  augmented: boolean;
  signalFrame: boolean;
  instructionsAt: number;
  end: number;
  /** The row after the initial instructions, made at the first lookup. */
  initial?: RowState;
}

interface Fde {
  cie: Cie;
  pcBegin: number;
  pcEnd: number;
  instructionsAt: number;
  end: number;
}

/** An entry's length field read: where its contents start and end, its id or CIE pointer, and its offset size. */
interface EntryHeader {
  /** 0 for a zero terminator. */
  length: number;
  idAt: number;
  end: number;
  id: number;
  is64: boolean;
}

class FrameSection {
  starts = new Float64Array(0);
  offsets = new Float64Array(0);
  private readonly cies = new Map<number, Cie | CfiDataError>();
  private readonly bytes: Uint8Array;
  private readonly address: number;

  constructor(
    section: SectionContents,
    private readonly debug: boolean,
    private readonly skipped: SkipCounter,
  ) {
    this.bytes = section.bytes;
    this.address = section.address;
  }

  /** Takes `.eh_frame_hdr`'s table when it is usable: version 1, for this section, sorted, every FDE inside. */
  indexFromHeader(hdr: SectionContents): boolean {
    try {
      const c = new DwarfCursor(hdr.bytes, hdr.address, 0, hdr.bytes.length);
      const bases = { data: hdr.address };
      if (c.u8() !== 1) throw new CfiDataError('version');
      const [framePtrEnc, countEnc, tableEnc] = [c.u8(), c.u8(), c.u8()];
      if (c.pointer(framePtrEnc, bases).value !== this.address) throw new CfiDataError('table for another section');
      if (countEnc === pointerEncoding.omit || tableEnc === pointerEncoding.omit) throw new CfiDataError('no table');
      const count = c.pointer(countEnc, bases).value;
      if (count > callFrameLimits.maxEntries || count * 2 > c.left) throw new CfiDataError(`${count} entries`);
      const starts = new Float64Array(count);
      const offsets = new Float64Array(count);
      for (let i = 0; i < count; i++) {
        starts[i] = c.pointer(tableEnc, bases).value;
        offsets[i] = c.pointer(tableEnc, bases).value - this.address;
        if (i > 0 && starts[i]! < starts[i - 1]!) throw new CfiDataError('table not sorted');
        if (offsets[i]! < 0 || offsets[i]! >= this.bytes.length) throw new CfiDataError('FDE outside .eh_frame');
      }
      this.starts = starts;
      this.offsets = offsets;
      return true;
    } catch (error) {
      if (!(error instanceof CfiDataError)) throw error;
      this.skipped.add('search table', `.eh_frame_hdr unusable (${error.message}): .eh_frame scanned instead`);
      return false;
    }
  }

  /** Walks every entry, keeps the FDEs that parse and cover something, sorted by start. */
  indexByScan(): void {
    const found: [number, number][] = [];
    let unusable = 0;
    for (let at = 0; at < this.bytes.length;) {
      let header: EntryHeader;
      try {
        header = this.header(at);
      } catch (error) {
        if (!(error instanceof CfiDataError)) throw error;
        this.skipped.add('entry', `call frame entry at ${at} unusable (${error.message}): the rest skipped`);
        break;
      }
      if (header.length !== 0 && !this.isCie(header)) {
        if (found.length >= callFrameLimits.maxEntries) {
          this.skipped.add('entry', `more than ${callFrameLimits.maxEntries} FDEs: the rest skipped`);
          break;
        }
        try {
          const fde = this.fde(at);
          if (fde.pcEnd > fde.pcBegin) found.push([fde.pcBegin, at]);
        } catch (error) {
          if (!(error instanceof CfiDataError)) throw error;
          this.skipped.add('entry', `FDE at ${at} unusable (${error.message})`);
          // Each names a CIE of its own (cached, failed): a section of nothing else must not fill the memory.
          if (++unusable >= callFrameLimits.maxUnusableEntries) {
            this.skipped.add('entry', `${unusable} unusable FDEs: the rest of the section skipped`);
            break;
          }
        }
      }
      at = header.end;
    }
    found.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    this.starts = Float64Array.from(found, (f) => f[0]);
    this.offsets = Float64Array.from(found, (f) => f[1]);
  }

  /** The row at `pc`; 'not covered' when no FDE here covers it, undefined when the one that does is unusable. */
  rowAt(pc: number): UnwindRow | undefined | 'not covered' {
    const { starts } = this;
    let low = 0;
    let high = starts.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (starts[mid]! <= pc) low = mid + 1;
      else high = mid;
    }
    if (low === 0) return 'not covered';
    try {
      const fde = this.fde(this.offsets[low - 1]!);
      if (pc < fde.pcBegin || pc >= fde.pcEnd) return 'not covered';
      return this.row(fde, pc);
    } catch (error) {
      if (!(error instanceof CfiDataError)) throw error;
      this.skipped.add('program', `no unwind row at 0x${pc.toString(16)} (${error.message})`);
      return undefined;
    }
  }

  private row(fde: Fde, pc: number): UnwindRow {
    const { cie } = fde;
    const budget = { left: cfaProgramLimits.maxInstructions };
    const context: ProgramContext = {
      codeAlignment: cie.codeAlignment,
      dataAlignment: cie.dataAlignment,
      address: (c) => c.pointer(cie.fdeEncoding).value,
      initial: undefined,
    };
    if (!cie.initial) {
      const state: RowState = { cfa: { type: 'register', register: 7, offset: 0 }, registers: new Map() };
      runProgram(this.cursor(cie.instructionsAt, cie.end), context, state, 0, Infinity, budget);
      cie.initial = state;
    }
    context.initial = cie.initial;
    const state: RowState = { cfa: cie.initial.cfa, registers: new Map(cie.initial.registers) };
    const cursor = this.cursor(fde.instructionsAt, fde.end);
    const { start, next } = runProgram(cursor, context, state, fde.pcBegin, pc, budget);
    return {
      start,
      end: Math.min(next, fde.pcEnd),
      cfa: state.cfa,
      registers: state.registers,
      returnAddressRegister: cie.returnAddressRegister,
      signalFrame: cie.signalFrame,
    };
  }

  private cursor(at: number, end: number): DwarfCursor {
    return new DwarfCursor(this.bytes, this.address, at, end);
  }

  /** The length field and id of the entry at `at`; its end must lie inside the section. */
  private header(at: number): EntryHeader {
    const c = this.cursor(at, this.bytes.length);
    let length = c.u32();
    if (length === 0) return { length: 0, idAt: c.at, end: c.at, id: 0, is64: false };
    const is64 = length === 0xffffffff;
    if (is64) length = c.u64();
    else if (length >= 0xfffffff0) throw new CfiDataError(`reserved length 0x${length.toString(16)}`);
    const idAt = c.at;
    if (length > c.left) throw new CfiDataError(`length ${length} past the section's end`);
    const end = idAt + length;
    c.end = end;
    // `.debug_frame`'s CIE id is all ones, `.eh_frame`'s 0; the id field of a 64-bit entry has 8 bytes (readelf).
    let id: number;
    if (!is64) id = c.u32();
    else {
      const wide = c.u64n();
      if (wide === 0xffffffffffffffffn) id = -1;
      else if (wide > BigInt(Number.MAX_SAFE_INTEGER)) throw new CfiDataError('CIE pointer past 2^53');
      else id = Number(wide);
    }
    return { length, idAt, end, id, is64 };
  }

  private isCie(h: EntryHeader): boolean {
    return this.debug ? h.id === (h.is64 ? -1 : 0xffffffff) : h.id === 0;
  }

  private fde(at: number): Fde {
    const h = this.header(at);
    if (h.length === 0 || this.isCie(h)) throw new CfiDataError('not an FDE');
    // `.eh_frame`: the CIE lies that many bytes before the pointer; `.debug_frame`: at that offset.
    const cieAt = this.debug ? h.id : h.idAt - h.id;
    const cie = this.cie(cieAt);
    const c = this.cursor(h.idAt + (h.is64 ? 8 : 4), h.end);
    const begin = c.pointer(cie.fdeEncoding);
    if (begin.indirect) throw new CfiDataError('indirect initial location');
    const range = c.encodedValue(cie.fdeEncoding);
    if (cie.augmented) c.skip(c.uleb());
    const pcEnd = begin.value + range;
    if (range < 0 || !Number.isSafeInteger(pcEnd)) throw new CfiDataError(`range ${range}`);
    return { cie, pcBegin: begin.value, pcEnd, instructionsAt: c.at, end: h.end };
  }

  private cie(at: number): Cie {
    let cie = this.cies.get(at);
    if (cie === undefined) {
      try {
        cie = this.parseCie(at);
      } catch (error) {
        if (!(error instanceof CfiDataError)) throw error;
        cie = error;
      }
      // Real files have a few CIEs; a hostile index could name a million: past the cap they are parsed each time.
      if (this.cies.size < callFrameLimits.maxCachedCies) this.cies.set(at, cie);
    }
    if (cie instanceof CfiDataError) throw cie;
    return cie;
  }

  private parseCie(at: number): Cie {
    if (!Number.isSafeInteger(at) || at < 0 || at >= this.bytes.length) throw new CfiDataError(`CIE at ${at}`);
    const h = this.header(at);
    if (h.length === 0 || !this.isCie(h)) throw new CfiDataError(`no CIE at ${at}`);
    const c = this.cursor(h.idAt + (h.is64 ? 8 : 4), h.end);
    const version = c.u8();
    if (version !== 1 && version !== 3 && version !== 4) throw new CfiDataError(`CIE version ${version}`);
    const augmentation = c.cString(callFrameLimits.maxAugmentationBytes);
    let addressSize = 8;
    if (version === 4) {
      addressSize = c.u8();
      if (c.u8() !== 0) throw new CfiDataError('segment selectors');
    }
    const cie: Cie = {
      codeAlignment: c.uleb(),
      dataAlignment: c.sleb(),
      returnAddressRegister: version === 1 ? c.u8() : c.uleb(),
      fdeEncoding: addressSize === 4 ? pointerEncoding.udata4 : pointerEncoding.absptr,
      augmented: augmentation.startsWith('z'),
      signalFrame: false,
      instructionsAt: 0,
      end: h.end,
    };
    if (addressSize !== 4 && addressSize !== 8) throw new CfiDataError(`address size ${addressSize}`);
    let dataEnd = c.at;
    if (cie.augmented) {
      const length = c.uleb();
      dataEnd = c.at + length;
      if (length > c.left) throw new CfiDataError('augmentation data past the CIE');
    }
    for (const letter of augmentation.slice(cie.augmented ? 1 : 0)) {
      if (letter === 'R') cie.fdeEncoding = c.u8();
      else if (letter === 'P')
        c.skipPointer(c.u8()); // the personality routine: not needed to unwind
      else if (letter === 'L')
        c.u8(); // the LSDA's encoding: the FDE's augmentation data is skipped whole
      else if (letter === 'S') cie.signalFrame = true;
      else if (letter === 'B' || letter === 'G')
        continue; // aarch64's pointer authentication, MTE
      else if (cie.augmented)
        break; // the length lets the rest be skipped
      else throw new CfiDataError(`augmentation "${augmentation}"`);
    }
    cie.instructionsAt = cie.augmented ? dataEnd : c.at;
    if (cie.instructionsAt > cie.end) throw new CfiDataError('CIE instructions past its end');
    return cie;
  }
}
