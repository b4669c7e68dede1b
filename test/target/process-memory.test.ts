// ProcMemory against this test's own process (reading one's own /proc/self/mem needs no privilege): a read lands at
// exactly the address asked (the ELF header at the start of node's first mapping, one byte in), and addresses whose
// read position a number cannot hold exactly (2^53 and above) are refused before any read.
import assert from 'node:assert/strict';
import { readFile, realpath } from 'node:fs/promises';
import { test } from 'node:test';
import { parseProcMaps } from '../../src/target/proc-maps.js';
import { MemoryBudget, MemoryReadError, ProcMemory, maxReadAddress } from '../../src/target/process-memory.js';

test('reads land at the exact address; addresses from 2^53 on are refused', { timeout: 10_000 }, async () => {
  const maps = parseProcMaps(await readFile('/proc/self/maps', 'utf8')).mappings;
  const node = await realpath(process.execPath);
  const executable = maps.find((m) => m.offset === 0n && m.path === node);
  assert.ok(executable, `node's own mapping among:\n${maps.map((m) => m.path).join('\n')}`);
  const memory = await ProcMemory.open(process.pid, new MemoryBudget());
  try {
    assert.equal(Buffer.from(await memory.read(executable.start + 1n, 3)).toString('latin1'), 'ELF');
    // Unmapped but below the cap: the kernel refuses it.
    await assert.rejects(memory.read(maxReadAddress - 8n, 8), (e: unknown) => e instanceof MemoryReadError && !e.limit);
    // Past the cap (2^53 + 1 would round to 2^53 as a number): refused before reading.
    await assert.rejects(memory.read(maxReadAddress + 1n, 1), /outside the address space/);
    await assert.rejects(memory.read(maxReadAddress - 4n, 8), /outside the address space/);
    assert.equal(memory.reads, 2);
  } finally {
    await memory.close();
  }
});
