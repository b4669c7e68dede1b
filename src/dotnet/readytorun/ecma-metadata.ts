// ECMA-335 metadata (the `BSJB` blob a CLI header points to) in, the rows profcpu needs to name methods out: the
// assembly's name, TypeRef, TypeDef, MethodDef, NestedClass and TypeSpec, with the string and blob heaps. Every table
// before the ones read must be sized to find them, so the whole schema of ECMA-335 II.22 is here, column kinds only.
// All counts and offsets come from the target's file: they are checked against the blob, never trusted.

import { ByteReader, PeFormatError } from './pe-image.js';

/** Table numbers used by name elsewhere. */
export const tables = Object.freeze({
  Module: 0x00,
  TypeRef: 0x01,
  TypeDef: 0x02,
  Field: 0x04,
  MethodDef: 0x06,
  Param: 0x08,
  MemberRef: 0x0a,
  Event: 0x14,
  Property: 0x17,
  ModuleRef: 0x1a,
  TypeSpec: 0x1b,
  Assembly: 0x20,
  AssemblyRef: 0x23,
  File: 0x26,
  ExportedType: 0x27,
  NestedClass: 0x29,
  GenericParam: 0x2a,
});

// Coded indexes (II.24.2.6): the tables a tag selects, in tag order. -1 marks unused tags.
const coded = {
  TypeDefOrRef: [0x02, 0x01, 0x1b],
  HasConstant: [0x04, 0x08, 0x17],
  HasCustomAttribute: [
    0x06, 0x04, 0x01, 0x02, 0x08, 0x09, 0x0a, 0x00, 0x0e, 0x17, 0x14, 0x11, 0x1a, 0x1b, 0x20, 0x23, 0x26, 0x27, 0x28,
    0x2a, 0x2c, 0x2b,
  ],
  HasFieldMarshal: [0x04, 0x08],
  HasDeclSecurity: [0x02, 0x06, 0x20],
  MemberRefParent: [0x02, 0x01, 0x1a, 0x06, 0x1b],
  HasSemantics: [0x14, 0x17],
  MethodDefOrRef: [0x06, 0x0a],
  MemberForwarded: [0x04, 0x06],
  Implementation: [0x26, 0x23, 0x27],
  CustomAttributeType: [-1, -1, 0x06, 0x0a, -1],
  ResolutionScope: [0x00, 0x1a, 0x23, 0x01],
  TypeOrMethodDef: [0x02, 0x06],
} as const;
type CodedKind = keyof typeof coded;

/** A column: fixed 2 or 4 bytes, a heap index, a table index (number), or a coded index. */
type Column = 2 | 4 | 'str' | 'guid' | 'blob' | { table: number } | { coded: CodedKind };
const t = (table: number) => ({ table });
const c = (kind: CodedKind) => ({ coded: kind });

const schema: Record<number, Column[]> = {
  0x00: [2, 'str', 'guid', 'guid', 'guid'],
  0x01: [c('ResolutionScope'), 'str', 'str'],
  0x02: [4, 'str', 'str', c('TypeDefOrRef'), t(0x04), t(0x06)],
  0x03: [t(0x04)],
  0x04: [2, 'str', 'blob'],
  0x05: [t(0x06)],
  0x06: [4, 2, 2, 'str', 'blob', t(0x08)],
  0x07: [t(0x08)],
  0x08: [2, 2, 'str'],
  0x09: [t(0x02), c('TypeDefOrRef')],
  0x0a: [c('MemberRefParent'), 'str', 'blob'],
  0x0b: [2, c('HasConstant'), 'blob'],
  0x0c: [c('HasCustomAttribute'), c('CustomAttributeType'), 'blob'],
  0x0d: [c('HasFieldMarshal'), 'blob'],
  0x0e: [2, c('HasDeclSecurity'), 'blob'],
  0x0f: [2, 4, t(0x02)],
  0x10: [4, t(0x04)],
  0x11: ['blob'],
  0x12: [t(0x02), t(0x14)],
  0x13: [t(0x14)],
  0x14: [2, 'str', c('TypeDefOrRef')],
  0x15: [t(0x02), t(0x17)],
  0x16: [t(0x17)],
  0x17: [2, 'str', 'blob'],
  0x18: [2, t(0x06), c('HasSemantics')],
  0x19: [t(0x02), c('MethodDefOrRef'), c('MethodDefOrRef')],
  0x1a: ['str'],
  0x1b: ['blob'],
  0x1c: [2, c('MemberForwarded'), 'str', t(0x1a)],
  0x1d: [4, t(0x04)],
  0x1e: [4, 4],
  0x1f: [4],
  0x20: [4, 2, 2, 2, 2, 4, 'blob', 'str', 'str'],
  0x21: [4],
  0x22: [4, 4, 4],
  0x23: [2, 2, 2, 2, 4, 'blob', 'str', 'str', 'blob'],
  0x24: [4, t(0x23)],
  0x25: [4, 4, 4, t(0x23)],
  0x26: [4, 'str', 'blob'],
  0x27: [4, 4, 'str', 'str', c('Implementation')],
  0x28: [4, 4, 'str', c('Implementation')],
  0x29: [t(0x02), t(0x02)],
  0x2a: [2, 2, c('TypeOrMethodDef'), 'str'],
  0x2b: [c('MethodDefOrRef'), 'blob'],
  0x2c: [t(0x2a), c('TypeDefOrRef')],
};

/** A decoded coded index: the table it points into and the 1-based row (0: null). */
export interface Token {
  table: number;
  row: number;
}

interface TableInfo {
  rows: number;
  offset: number;
  rowSize: number;
  columns: { offset: number; size: number; column: Column }[];
}

export class EcmaMetadata {
  private readonly reader: ByteReader;
  private readonly tableInfo = new Map<number, TableInfo>();
  private readonly strings: { offset: number; size: number };
  private readonly blobs: { offset: number; size: number };
  private readonly guids: { offset: number; size: number };

  /** `blob` is the metadata, from its `BSJB` signature on. */
  constructor(blob: Buffer) {
    const r = (this.reader = new ByteReader(blob));
    if (r.u32(0, 'metadata signature') !== 0x424a5342) throw new PeFormatError('no BSJB metadata signature');
    const versionLength = r.u32(12, 'metadata version length');
    let at = 16 + versionLength + 2;
    r.check(at, 2, 'metadata stream count');
    const streamCount = r.u16(at);
    at += 2;
    const streams = new Map<string, { offset: number; size: number }>();
    for (let i = 0; i < streamCount && i < 16; i++) {
      const offset = r.u32(at, 'stream offset');
      const size = r.u32(at + 4, 'stream size');
      const name = r.cString(at + 8, 32, 'stream name');
      r.check(offset, size, `metadata stream ${name}`);
      streams.set(name, { offset, size });
      at += 8 + ((name.length + 4) & ~3);
    }
    const tableStream = streams.get('#~') ?? streams.get('#-');
    if (!tableStream) throw new PeFormatError('no metadata table stream');
    this.strings = streams.get('#Strings') ?? { offset: 0, size: 0 };
    this.blobs = streams.get('#Blob') ?? { offset: 0, size: 0 };
    this.guids = streams.get('#GUID') ?? { offset: 0, size: 0 };
    this.readTables(tableStream.offset, tableStream.size);
  }

  private readTables(start: number, size: number): void {
    const r = this.reader;
    const end = start + size;
    const heapSizes = r.u8(start + 6, 'heap sizes');
    const validLow = r.u32(start + 8);
    const validHigh = r.u32(start + 12);
    const rows = new Array<number>(64).fill(0);
    let at = start + 24;
    for (let table = 0; table < 64; table++) {
      const present = table < 32 ? (validLow >>> table) & 1 : (validHigh >>> (table - 32)) & 1;
      if (!present) continue;
      rows[table] = r.u32(at, 'row count');
      at += 4;
    }
    // Uncompressed (#-) streams of edited assemblies may carry an extra 4 bytes.
    if (heapSizes & 0x40) at += 4;
    const stringSize = heapSizes & 1 ? 4 : 2;
    const guidSize = heapSizes & 2 ? 4 : 2;
    const blobSize = heapSizes & 4 ? 4 : 2;
    const indexSize = (table: number) => (rows[table]! < 0x10000 ? 2 : 4);
    const codedSize = (kind: CodedKind) => {
      const targets = coded[kind];
      const tagBits = Math.ceil(Math.log2(targets.length));
      const most = Math.max(...targets.map((tb) => (tb < 0 ? 0 : rows[tb]!)));
      return most < 1 << (16 - tagBits) ? 2 : 4;
    };
    const sizeOf = (column: Column): number => {
      if (column === 2 || column === 4) return column;
      if (column === 'str') return stringSize;
      if (column === 'guid') return guidSize;
      if (column === 'blob') return blobSize;
      return 'table' in column ? indexSize(column.table) : codedSize(column.coded);
    };
    for (let table = 0; table < 64; table++) {
      if (rows[table] === 0) continue;
      const columns = schema[table];
      // A table ECMA-335 does not define: its rows cannot be skipped, so nothing after it can be found.
      if (!columns) break;
      let rowSize = 0;
      const placed = columns.map((column) => {
        const size = sizeOf(column);
        const entry = { offset: rowSize, size, column };
        rowSize += size;
        return entry;
      });
      const bytes = rows[table]! * rowSize;
      if (at + bytes > end) throw new PeFormatError(`metadata table ${table.toString(16)} runs past its stream`);
      this.tableInfo.set(table, { rows: rows[table]!, offset: at, rowSize, columns: placed });
      at += bytes;
    }
  }

  /** Rows in `table` (0 when absent). */
  rowCount(table: number): number {
    return this.tableInfo.get(table)?.rows ?? 0;
  }

  /** Column `column` of row `row` (1-based) as a raw number; coded indexes undecoded. */
  raw(table: number, row: number, column: number): number {
    const info = this.tableInfo.get(table);
    if (!info || row < 1 || row > info.rows) throw new PeFormatError(`no row ${row} in table ${table.toString(16)}`);
    const col = info.columns[column];
    if (!col) throw new PeFormatError(`no column ${column} in table ${table.toString(16)}`);
    const at = info.offset + (row - 1) * info.rowSize + col.offset;
    return col.size === 2 ? this.reader.u16(at) : this.reader.u32(at);
  }

  /** A coded index column decoded. */
  token(table: number, row: number, column: number): Token {
    const info = this.tableInfo.get(table)!;
    const col = info?.columns[column]?.column;
    const value = this.raw(table, row, column);
    if (typeof col !== 'object' || !('coded' in col)) return { table: (col as { table: number }).table, row: value };
    const targets = coded[col.coded];
    const tagBits = Math.ceil(Math.log2(targets.length));
    const target = targets[value & ((1 << tagBits) - 1)] ?? -1;
    return { table: target, row: value >>> tagBits };
  }

  /** A string column (UTF-8 from #Strings, cut at 1 KiB). */
  string(table: number, row: number, column: number): string {
    return this.heapString(this.raw(table, row, column));
  }

  heapString(index: number): string {
    if (index === 0 || index >= this.strings.size) return '';
    const start = this.strings.offset + index;
    return this.reader.cString(start, Math.min(1024, this.strings.offset + this.strings.size - start), 'string');
  }

  /** A blob column's bytes (its compressed length prefix read and checked). */
  blob(table: number, row: number, column: number): Buffer {
    return this.heapBlob(this.raw(table, row, column));
  }

  heapBlob(index: number): Buffer {
    if (index === 0 || index >= this.blobs.size) return Buffer.alloc(0);
    const r = this.reader;
    let at = this.blobs.offset + index;
    const first = r.u8(at);
    let length: number;
    if ((first & 0x80) === 0) {
      length = first;
      at += 1;
    } else if ((first & 0xc0) === 0x80) {
      length = ((first & 0x3f) << 8) | r.u8(at + 1);
      at += 2;
    } else {
      length = ((first & 0x1f) << 24) | (r.u8(at + 1) << 16) | (r.u8(at + 2) << 8) | r.u8(at + 3);
      at += 4;
    }
    if (at + length > this.blobs.offset + this.blobs.size) throw new PeFormatError('blob runs past the #Blob heap');
    return r.slice(at, length, 'blob');
  }

  /** GUID `index` (1-based) of the #GUID heap as 32 hex digits, '' when absent. */
  guid(index: number): string {
    if (index < 1 || index * 16 > this.guids.size) return '';
    return this.reader.slice(this.guids.offset + (index - 1) * 16, 16, 'guid').toString('hex');
  }

  /** The assembly's simple name (`System.Private.CoreLib`), else the module's name without its extension. */
  assemblyName(): string {
    if (this.rowCount(tables.Assembly) > 0) return this.string(tables.Assembly, 1, 7);
    if (this.rowCount(tables.Module) > 0) return this.string(tables.Module, 1, 1).replace(/\.(dll|exe)$/i, '');
    return '';
  }
}
