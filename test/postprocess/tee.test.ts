import assert from 'node:assert/strict';
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { PerfScriptTee } from '../../src/postprocess/tee.js';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'profcpu-tee-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const text = [
  '# ========',
  '# hostname : vm',
  '# perf version : 6.1.187',
  '# ========',
  '#',
  'node  9846   534.168759:    5025125 cpu-clock: ',
  '\t          167145 __strcmp_evex+0x25 (/usr/lib/x86_64-linux-gnu/libc.so.6)',
  '',
  'node  9846   534.188868:    5025125 cpu-clock: ',
  '\t           979bb _int_malloc+0x65b (/usr/lib/x86_64-linux-gnu/libc.so.6)',
  '',
  '',
].join('\n');

for (const size of [1, 7, 4096]) {
  test(`chunks of ${size} bytes reach the file and the fold unchanged; header and samples are counted`, async () => {
    const path = join(dir, `out-${size}`);
    const folded: Buffer[] = [];
    const tee = new PerfScriptTee(await open(path, 'w'), (chunk) => folded.push(Buffer.from(chunk)));
    const bytes = Buffer.from(text);
    for (let at = 0; at < bytes.length; at += size) await tee.sink(bytes.subarray(at, at + size));
    await tee.finish();
    assert.equal(await readFile(path, 'utf8'), text);
    assert.equal(Buffer.concat(folded).toString(), text);
    assert.deepEqual(tee.headerLines(), text.split('\n').slice(0, 5));
    assert.deepEqual(tee.counts, { bytes: bytes.length, samples: 2 });
  });
}
