#!/usr/bin/env node
// Draws the README's picture again: runs the built CLI's demo on the .NET workload (`profcpu demo --workload dotnet`,
// 10 s at 499 Hz, or the seconds given as the first argument: a smooth picture even when the workload gets a fraction
// of a core) into a temporary folder, checks that its flame graph names the demo's ProfcpuDemo methods and stays
// small, and copies it to docs/images/demo-flamegraph.svg.
// Needs root (perf), the .NET SDK and `npm run build` first. Usage: `npm run picture [-- seconds]`.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const cli = join(root, 'dist/cli/main.js');
const picture = join(root, 'docs/images/demo-flamegraph.svg');
const seconds = process.argv[2] ?? '10';
/** The methods of src/collect/dotnet-demo/Program.cs that a 10 s profile always shows. */
const methods = [
  'ProfcpuDemo.Workload::Round',
  'ProfcpuDemo.PrimeSieve::CountPrimes',
  'ProfcpuDemo.OrderBook::SortOrders',
  'ProfcpuDemo.InvoiceFormatter::FormatInvoices',
  'ProfcpuDemo.WordCounter::CountWords',
];
const maxBytes = 1 << 20;

function fail(message) {
  console.error(`readme-picture: ${message}`);
  process.exitCode = 1;
}

if (!existsSync(cli)) {
  fail(`${cli} is missing: run \`npm run build\` first`);
} else {
  const work = mkdtempSync(join(tmpdir(), 'profcpu-picture-'));
  try {
    const out = join(work, 'out');
    const started = Date.now();
    execFileSync(
      process.execPath,
      [cli, 'demo', '--workload', 'dotnet', '--duration', seconds, '--frequency', '499', '--output', out],
      {
        stdio: 'inherit',
      },
    );
    const wall = (Date.now() - started) / 1000;
    const svgPath = join(out, 'flamegraph.svg');
    const svg = readFileSync(svgPath, 'utf8');
    const missing = methods.filter((name) => !svg.includes(name));
    const bytes = statSync(svgPath).size;
    if (missing.length) fail(`the flame graph does not name ${missing.join(', ')}; ${svgPath} not copied`);
    else if (bytes > maxBytes) fail(`the flame graph is ${bytes} bytes, more than ${maxBytes}; not copied`);
    else {
      mkdirSync(join(root, 'docs/images'), { recursive: true });
      copyFileSync(svgPath, picture);
      const samples = /<title>all \(([\d,]+) samples/.exec(svg)?.[1] ?? '?';
      console.log(
        `readme-picture: ${picture}: ${samples} samples, ${(bytes / 1024).toFixed(0)} KiB, demo ${wall.toFixed(1)} s`,
      );
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
