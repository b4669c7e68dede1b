// Tar archives written header by header, for the hostile-tarball tests: whatever a hostile sender could put in one
// (links, devices, absolute paths, `..`, sizes of 10 GB, a million entries), which tar(1) and node-tar's create()
// would not write. Headers come from node-tar's Header class (ustar, base-256 sizes past 8 GiB); bodies are padded
// to 512-byte blocks; the archive ends with two zero blocks unless told not to.
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { Header, type HeaderData } from 'tar';
import { constants, createGzip, gzipSync } from 'node:zlib';

export interface CraftedEntry extends Omit<HeaderData, 'size'> {
  path: string;
  /** The body (a file's contents); its length is the declared size unless `size` says otherwise. */
  body?: Buffer | string;
  /** The size declared in the header (default: the body's length). */
  size?: number;
}

export function headerBlock(entry: CraftedEntry): Buffer {
  const body = entry.body === undefined ? Buffer.alloc(0) : Buffer.from(entry.body);
  const block = Buffer.alloc(512);
  const { body: _body, ...fields } = entry;
  new Header({
    type: 'File',
    mode: fields.type === 'Directory' ? 0o755 : 0o644,
    mtime: new Date('2026-11-22T15:02:11Z'),
    uid: 0,
    gid: 0,
    ...fields,
    size: entry.size ?? body.length,
  }).encode(block, 0);
  return block;
}

/** Header, body and padding of one entry. */
export function entryBlocks(entry: CraftedEntry): Buffer {
  const body = entry.body === undefined ? Buffer.alloc(0) : Buffer.from(entry.body);
  const padding = Buffer.alloc((512 - (body.length % 512)) % 512);
  return Buffer.concat([headerBlock(entry), body, padding]);
}

/** A whole tar archive of `entries`. */
export function craftTar(entries: readonly CraftedEntry[], options: { end?: boolean } = {}): Buffer {
  return Buffer.concat([...entries.map(entryBlocks), Buffer.alloc(options.end === false ? 0 : 1024)]);
}

export function craftTarGz(entries: readonly CraftedEntry[], options: { end?: boolean } = {}): Buffer {
  return gzipSync(craftTar(entries, options));
}

/**
 * `count` MiB of zeros as concatenated gzip members (gunzip reads them as one stream): a gigabyte costs about a
 * megabyte on disk and no time to make.
 */
export function gzippedZeros(count: number): Buffer[] {
  const member = gzipSync(Buffer.alloc(1024 ** 2), { level: constants.Z_BEST_COMPRESSION });
  return Array.from({ length: count }, () => member);
}

/** Writes `parts` to `path`, one after the other. */
export async function writeParts(path: string, parts: Iterable<Buffer>): Promise<void> {
  const out = createWriteStream(path);
  for (const part of parts) if (!out.write(part)) await once(out, 'drain');
  out.end();
  await once(out, 'close');
}

/**
 * A gzipped archive of `count` empty files `top/target/f<7 digits>`, streamed to `path` (a million is 512 MB of
 * tar). One header is encoded; the others are copies with their digits and checksum patched, which is fast.
 */
export async function writeManyEntries(path: string, top: string, count: number): Promise<void> {
  const name = (i: number) => `${top}/target/f${String(i).padStart(7, '0')}`;
  const template = headerBlock({ path: name(0) });
  const digitsAt = Buffer.byteLength(name(0)) - 7;
  const sumOf = (block: Buffer) => block.reduce((sum, byte, i) => sum + (i >= 148 && i < 156 ? 0x20 : byte), 0);
  const baseSum = sumOf(template);
  const zeroDigits = 7 * 0x30;
  const gzip = createGzip({ level: 1 });
  const out = createWriteStream(path);
  gzip.pipe(out);
  const perBatch = 4096;
  gzip.write(headerBlock({ path: `${top}/`, type: 'Directory' }));
  for (let start = 0; start < count; start += perBatch) {
    const n = Math.min(perBatch, count - start);
    const batch = Buffer.alloc(n * 512);
    for (let k = 0; k < n; k++) {
      const block = batch.subarray(k * 512, (k + 1) * 512);
      template.copy(block);
      const digits = String(start + k).padStart(7, '0');
      block.write(digits, digitsAt, 'latin1');
      let sum = baseSum - zeroDigits;
      for (let d = 0; d < 7; d++) sum += digits.charCodeAt(d);
      block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
    }
    if (!gzip.write(batch)) await once(gzip, 'drain');
  }
  gzip.end(Buffer.alloc(1024));
  await once(out, 'close');
}
