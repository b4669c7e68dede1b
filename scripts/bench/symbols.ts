// `npm run bench symbols`: fetch-and-verify time for a large debug file from a loopback server, the way profcpu gets
// libcoreclr.so.dbg (a few hundred MB). Builds the native test library, pads its debug file with a non-allocated
// section of random bytes to PROFCPU_BENCH_SYMBOLS_MB (default 160) while keeping its build-id, serves it from an
// SSQP-layout folder over HTTP on 127.0.0.1, and times: the download into profcpu's cache with the build-id check,
// then a second request (cache hit), then the placement in a perf build-id cache. Prints MB/s and peak RSS. The
// server runs in a child process (this script with `serve DIR`), so the figures are the client's alone.
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { placeDebugFile } from '../../src/debug-files/debug-placement.js';
import { readElfFile } from '../../src/formats/elf/elf.js';
import { SymbolFetcher } from '../../src/debug-files/symbol-server-fetch.js';
import { ssqpDebugKey } from '../../src/debug-files/symbol-server.js';
import { buildNativeLib } from '../../test/fixtures/native-lib/build.js';
import { startStaticServer } from '../../test/support/static-server.js';

if (process.argv[2] === 'serve') {
  const server = await startStaticServer(process.argv[3]!);
  console.log(server.url);
  process.on('SIGTERM', () => void server.close());
} else {
  await bench();
}

async function startServerProcess(root: string): Promise<{ url: string; close(): void }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), 'serve', root], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(child.stdout, 'data')) as [Buffer];
  return { url: line.toString().trim(), close: () => child.kill('SIGTERM') };
}

async function bench(): Promise<void> {
  const megabytes = Number(process.env['PROFCPU_BENCH_SYMBOLS_MB'] ?? 160);
  const work = mkdtempSync(join(tmpdir(), 'profcpu-bench-symbols-'));
  const mb = (bytes: number) => bytes / 1e6;

  try {
    const lib = buildNativeLib(join(work, 'lib'));
    const pad = join(work, 'pad.bin');
    // Made by another process, so the peak RSS below is the fetch's own.
    execFileSync('sh', ['-c', 'head -c "$1" /dev/urandom > "$2"', 'sh', String(megabytes * 1e6), pad]);
    const key = join(work, 'store', ssqpDebugKey(lib.buildId));
    mkdirSync(dirname(key), { recursive: true });
    execFileSync('objcopy', ['--add-section', `.profcpu_bench_pad=${pad}`, lib.debug, key]);
    rmSync(pad);
    const size = statSync(key).size;
    const check = await readElfFile(key);
    if (check.buildId !== lib.buildId) throw new Error('padding changed the build-id');

    const server = await startServerProcess(join(work, 'store'));
    try {
      let progressLines = 0;
      const fetcher = new SymbolFetcher({
        servers: [{ kind: 'ssqp', url: server.url, origin: 'bench' }],
        cacheDir: join(work, 'cache'),
        progress: () => progressLines++,
      });
      const t0 = performance.now();
      const first = await fetcher.fetch(lib.buildId);
      const t1 = performance.now();
      if (first.status !== 'downloaded') throw new Error(`download failed: ${JSON.stringify(first.attempts)}`);
      const second = await fetcher.fetch(lib.buildId);
      const t2 = performance.now();
      const placed = await placeDebugFile({
        buildIdDir: join(work, 'perf-debug'),
        buildId: lib.buildId,
        debugFile: first.path!,
        dsoPath: '/usr/lib/libhotlib.so',
      });
      const t3 = performance.now();
      const seconds = (t1 - t0) / 1000;
      console.log(`debug file       ${mb(size).toFixed(1)} MB (build-id ${lib.buildId}, kept after padding)`);
      console.log(
        `fetch + verify   ${seconds.toFixed(2)} s, ${(mb(size) / seconds).toFixed(0)} MB/s from ${server.url}`,
      );
      console.log(`progress         ${progressLines} reports`);
      console.log(`cache hit        ${(t2 - t1).toFixed(1)} ms (${second.status})`);
      console.log(`perf placement   ${(t3 - t2).toFixed(1)} ms (${placed.how})`);
      console.log(`load average     ${loadavg()[0]!.toFixed(1)} (the machine's other work slows the figures)`);
      console.log(`peak RSS         ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`);
    } finally {
      server.close();
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
