// Reading the runtime's memory without ptrace access: the fixture app runs as root, and profcpu's reader runs as
// nobody (setpriv), as an unprivileged sidecar would: opening /proc/PID/mem is refused with the reason and a remedy,
// and readRuntimeStubs fails the same way (the collect step reports it skipped, the profile goes on). Also the ELF
// reader that finds the descriptor's symbol, against truncated and oversized files.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { bytesSource } from '../../../src/formats/elf/elf.js';
import { readDynamicSymbols, dynamicSymbolLimits } from '../../../src/formats/elf/elf-dynamic-symbols.js';
import { startDotnetApp } from '../../support/dotnet-app.js';
import { needCommand, needDotnet, needRoot } from '../../support/requirements.js';

const execFileAsync = promisify(execFile);
const root = fileURLToPath(new URL('../../..', import.meta.url));

test(
  'without ptrace access the memory cannot be opened: the error says why and what to do',
  { timeout: 120_000 },
  async (t) => {
    if (!needRoot(t) || !needCommand(t, 'setpriv', 'util-linux') || !needDotnet(t)) return;
    const app = await startDotnetApp({ workloads: ['generic'] });
    t.after(() => app.kill());
    const script = `
    import { ProcMemory, MemoryBudget } from './src/target/process-memory.ts';
    try { await ProcMemory.open(${app.pid}, new MemoryBudget()); console.log('opened'); }
    catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message, remedy: e.remedy })); }`;
    const { stdout } = await execFileAsync(
      'setpriv',
      [
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        process.execPath,
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        script,
      ],
      { cwd: root, timeout: 60_000 },
    );
    const refused = JSON.parse(stdout.trim()) as { code: string; message: string; remedy?: string };
    assert.equal(refused.code, 'PREFLIGHT_FAILED');
    assert.match(refused.message, new RegExp(`cannot read the memory of process ${app.pid} \\((EACCES|EPERM)\\)`));
    assert.match(refused.remedy ?? '', /CAP_SYS_PTRACE/);
  },
);

test(
  'the dynamic-symbol reader refuses truncated, oversized and foreign ELF files quickly',
  { timeout: 10_000 },
  async () => {
    const header = Buffer.alloc(64);
    header.writeUInt32BE(0x7f454c46, 0);
    header[4] = 2;
    header[5] = 1;
    const withSections = (sections: Buffer[], total = 64 + sections.length * 64) => {
      const file = Buffer.alloc(total);
      header.copy(file);
      file.writeBigUInt64LE(64n, 40);
      file.writeUInt16LE(64, 58);
      file.writeUInt16LE(sections.length, 60);
      sections.forEach((s, i) => s.copy(file, 64 + i * 64));
      return file;
    };
    const section = (type: number, offset: bigint, size: bigint, link: number) => {
      const s = Buffer.alloc(64);
      s.writeUInt32LE(type, 4);
      s.writeBigUInt64LE(offset, 24);
      s.writeBigUInt64LE(size, 32);
      s.writeUInt32LE(link, 40);
      return s;
    };
    const names = ['DotNetRuntimeContractDescriptor'];
    await assert.rejects(readDynamicSymbols(bytesSource(Buffer.from('not an elf')), names, 'x'), /lies outside|no ELF/);
    const big = Buffer.from(header);
    big[4] = 1;
    await assert.rejects(readDynamicSymbols(bytesSource(big), names, 'x'), /not 64-bit little-endian/);
    // A .dynsym claiming more than the cap, one claiming bytes past the end, one linking to no string table.
    const huge = BigInt(dynamicSymbolLimits.maxTableBytes) + 24n;
    await assert.rejects(
      readDynamicSymbols(bytesSource(withSections([section(11, 64n, huge, 1), section(3, 64n, 16n, 0)])), names, 'x'),
      /\.dynsym of/,
    );
    await assert.rejects(
      readDynamicSymbols(
        bytesSource(withSections([section(11, 1n << 40n, 240n, 1), section(3, 64n, 16n, 0)])),
        names,
        'x',
      ),
      /lies outside/,
    );
    await assert.rejects(
      readDynamicSymbols(bytesSource(withSections([section(11, 64n, 24n, 9)])), names, 'x'),
      /links to no string table/,
    );
    // Section headers claiming 65 535 entries of 65 535 bytes: refused before any is read.
    const wide = withSections([section(1, 0n, 0n, 0)]);
    wide.writeUInt16LE(65_535, 58);
    wide.writeUInt16LE(65_535, 60);
    await assert.rejects(readDynamicSymbols(bytesSource(wide), names, 'x'), /section headers of 4294836225 bytes/);
    // No .dynsym at all: nothing found, no error.
    assert.equal((await readDynamicSymbols(bytesSource(withSections([section(1, 0n, 0n, 0)])), names, 'x')).size, 0);
  },
);
