// `npm run bench cfi`: indexing an ELF file's call frame information and looking up unwind rows
// (src/formats/elf/eh-frame.ts), for libc.so.6 and /usr/bin/node by default, or the files named after `--`
// (`npm run bench cfi -- /path/lib.so`). Per file: the time to read the sections and index them (from .eh_frame_hdr,
// and again by scanning .eh_frame), then 10 000 lookups (PROFCPU_BENCH_CFI_LOOKUPS) at PCs drawn with a fixed seed
// from `.text`, the first run (CIEs parsed) and a second; how many found a row. Never asserted: read the figures.
import { existsSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { fileByteSource, readSectionContents, type ByteSource } from '../../src/formats/elf/elf.js';
import { indexCallFrames, type CallFrameSections } from '../../src/formats/elf/eh-frame.js';

const lookups = Number(process.env['PROFCPU_BENCH_CFI_LOOKUPS'] ?? 10_000);
const named = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const files = (named.length > 0 ? named : ['/lib/x86_64-linux-gnu/libc.so.6', '/usr/bin/node']).filter((f) =>
  existsSync(f),
);

/** `.text`'s range, from its section header: the bytes are read too (readSectionContents), outside the timings. */
async function textRange(source: ByteSource, file: string): Promise<[number, number]> {
  const text = (await readSectionContents(source, ['.text'], file, 1 << 30)).get('.text');
  if (!text) throw new Error(`${file}: no .text`);
  return [text.address, text.address + text.bytes.length];
}

for (const file of files) {
  const handle = await open(file);
  try {
    const source = fileByteSource(handle, (await handle.stat()).size, (cause) => cause as Error);
    let started = performance.now();
    const found = await readSectionContents(source, ['.eh_frame', '.eh_frame_hdr'], file, 1 << 26);
    const readMs = performance.now() - started;
    const sections: CallFrameSections = { ehFrame: found.get('.eh_frame'), ehFrameHdr: found.get('.eh_frame_hdr') };
    started = performance.now();
    const info = indexCallFrames(sections);
    const indexMs = performance.now() - started;
    started = performance.now();
    const scanned = indexCallFrames({ ehFrame: sections.ehFrame });
    const scanMs = performance.now() - started;
    const [low, high] = await textRange(source, file);
    let seed = 0x2545f491;
    const pcs = Array.from({ length: lookups }, () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return low + Math.floor((seed / 2 ** 32) * (high - low));
    });
    const time = (index: typeof info) => {
      const at = performance.now();
      let hits = 0;
      for (const pc of pcs) if (index.rowAt(pc)) hits++;
      return { ms: performance.now() - at, hits };
    };
    const first = time(info);
    const second = time(info);
    const scannedRun = time(scanned);
    const kb = (n: number | undefined) => ((n ?? 0) / 1024).toFixed(0);
    console.log(`${file}: .eh_frame ${kb(sections.ehFrame?.bytes.length)} KiB, ${info.entries} FDEs`);
    console.log(
      `  read sections ${readMs.toFixed(1)} ms; index from .eh_frame_hdr ${indexMs.toFixed(1)} ms, by scan ${scanMs.toFixed(1)} ms`,
    );
    console.log(
      `  ${lookups} lookups: ${first.ms.toFixed(1)} ms first, ${second.ms.toFixed(1)} ms again (${((second.ms * 1000) / lookups).toFixed(2)} µs each), ` +
        `${scannedRun.ms.toFixed(1)} ms on the scanned index; ${first.hits} found a row`,
    );
  } finally {
    await handle.close();
  }
}
