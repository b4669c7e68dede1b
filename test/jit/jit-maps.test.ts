// The perf maps the built-in engine names JIT code from (src/jit/jit-maps.ts): this machine's
// /tmp/perf-<pid>.map for a recording made here, else a copy beside perf.data. Both are somebody else's files: a FIFO
// in either place (a writer waiting, as a device's open may act) is never opened and the lookup ends; a recording
// from elsewhere never reads this machine's /tmp.
import assert from 'node:assert/strict';
import { unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { OutputFolder } from '../../src/files/output-folder.js';
import { PerfMaps } from '../../src/jit/jit-maps.js';
import { watchedFifo } from '../support/fifo.js';
import { tempDir } from '../support/temp.js';

// PIDs no process here has (above the kernel's default pid_max): only the file names matter.
const pids = { fifoInTmp: 4_500_001, fifoBeside: 4_500_002, inTmp: 4_500_003, beside: 4_500_004 };

test(
  'a FIFO at /tmp/perf-<pid>.map or beside perf.data is not opened; real maps name, /tmp only when recorded here',
  { timeout: 30_000 },
  async (t) => {
    const dir = await tempDir(t, 'jit-maps');
    const inTmp = await watchedFifo(`/tmp/perf-${pids.fifoInTmp}.map`);
    t.after(() => inTmp.remove());
    const beside = await watchedFifo(join(dir, `perf-${pids.fifoBeside}.map`));
    t.after(() => beside.remove());
    const tmpMap = `/tmp/perf-${pids.inTmp}.map`;
    await writeFile(tmpMap, '7f0000001000 40 profcpu_tmp_jit\n');
    t.after(() => unlink(tmpMap).catch(() => {}));
    await writeFile(join(dir, `perf-${pids.beside}.map`), '7f0000002000 40 profcpu_beside_jit\n');
    const copies = [pids.fifoBeside, pids.beside].map((pid) => ({ from: `perf-${pid}.map`, pid }));

    const folder = await OutputFolder.open(dir);
    t.after(() => folder.close());
    const here = new PerfMaps(folder, { copies, hostFiles: true }, () => {});
    assert.equal((await here.table(pids.fifoInTmp)).size, 0);
    assert.equal((await here.table(pids.fifoBeside)).size, 0);
    assert.equal(await inTmp.opened(), false, 'the FIFO at /tmp was opened');
    assert.equal(await beside.opened(), false, 'the FIFO beside perf.data was opened');
    assert.equal((await here.table(pids.inTmp)).lookup(0x7f0000001010n)?.name, 'profcpu_tmp_jit');
    assert.equal((await here.table(pids.beside)).lookup(0x7f0000002010n)?.name, 'profcpu_beside_jit');
    assert.deepEqual(
      here.used.map(({ pid, file, origin }) => [pid, file, origin]),
      [
        [pids.inTmp, tmpMap, 'machine'],
        [pids.beside, `perf-${pids.beside}.map`, 'folder'],
      ],
    );

    // Recorded elsewhere: this machine's /tmp is another machine's, and is not read.
    const elsewhere = new PerfMaps(folder, { copies, hostFiles: false }, () => {});
    assert.equal((await elsewhere.table(pids.inTmp)).size, 0);
    assert.equal((await elsewhere.table(pids.beside)).lookup(0x7f0000002010n)?.name, 'profcpu_beside_jit');
  },
);
