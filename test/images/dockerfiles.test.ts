// Static checks of the Dockerfiles under images/ and scripts/containers/standins/ (no engine needed): known
// instructions, the distinct FROM images (those users pull), stages defined before use, COPY sources that exist in the build context,
// exec-form ENTRYPOINT/CMD; the shell scripts parse; the kernel checksum list is well formed.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import { repoRoot } from '../support/cli.js';

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

const known = new Set(['FROM', 'RUN', 'COPY', 'ADD', 'ARG', 'ENV', 'WORKDIR', 'LABEL', 'ENTRYPOINT', 'CMD', 'USER']);

/** Dockerfile text to instructions: comments and blank lines dropped, backslash continuations joined. */
function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending = '';
  let start = 0;
  text.split('\n').forEach((raw, i) => {
    if (!pending && /^\s*(#|$)/.test(raw)) return;
    if (!pending) start = i + 1;
    if (pending && /^\s*#/.test(raw)) return;
    const continued = /\\\s*$/.test(raw);
    pending += `${raw.replace(/\\\s*$/, '')} `;
    if (continued) return;
    const match = /^\s*(\S+)\s+(.*)$/.exec(pending.trim());
    assert.ok(match, `line ${start}: not an instruction: ${pending}`);
    out.push({ keyword: match[1]!, args: match[2]!.trim(), line: start });
    pending = '';
  });
  assert.equal(pending, '', 'the file ends inside a continuation');
  return out;
}

interface Checked {
  stages: string[];
  froms: string[];
  instructions: Instruction[];
}

/** Checks one Dockerfile whose build context is `context`; returns its stages and FROM images. */
async function checkDockerfile(file: string, context: string | undefined): Promise<Checked> {
  const instructions = parseDockerfile(await readFile(join(repoRoot, file), 'utf8'));
  const stages: string[] = [];
  const froms: string[] = [];
  for (const { keyword, args, line } of instructions) {
    const where = `${file}:${line}`;
    assert.ok(known.has(keyword), `${where}: unknown or lower-case instruction ${keyword}`);
    if (keyword === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/.exec(args);
      assert.ok(m, `${where}: FROM image [AS name]`);
      if (!stages.includes(m[1]!) && !froms.includes(m[1]!)) froms.push(m[1]!);
      stages.push(m[2] ?? `#${stages.length}`);
    }
    if (keyword === 'COPY' || keyword === 'ADD') {
      assert.equal(keyword, 'COPY', `${where}: use COPY`);
      const words = args.split(/\s+/);
      const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
      const paths = words.filter((w) => !w.startsWith('--'));
      assert.ok(paths.length >= 2, `${where}: COPY needs a source and a destination`);
      if (from !== undefined)
        assert.ok(stages.slice(0, -1).includes(from), `${where}: stage ${from} not defined before`);
      else if (context !== undefined)
        for (const source of paths.slice(0, -1))
          assert.ok(existsSync(join(context, source)), `${where}: ${source} is not in the build context`);
    }
    if (keyword === 'ENTRYPOINT' || keyword === 'CMD') {
      const value: unknown = JSON.parse(args);
      assert.ok(Array.isArray(value) && value.every((v) => typeof v === 'string'), `${where}: use the exec form`);
    }
  }
  return { stages, froms, instructions };
}

test('the sidecar Dockerfile: Debian trixie stages, kernel-source perf stage, profcpu on PATH, shell by default', async () => {
  const { stages, froms, instructions } = await checkDockerfile('images/sidecar/Dockerfile', repoRoot);
  assert.deepEqual(froms, ['debian:trixie-slim']);
  assert.deepEqual(stages, ['perf', 'build', '#2']);
  const args = instructions.filter((i) => i.keyword === 'ARG').map((i) => i.args);
  assert.ok(args.includes('KERNEL_VERSION='), 'KERNEL_VERSION is a build argument, empty by default');
  const final = instructions.slice(instructions.map((i) => i.keyword).lastIndexOf('FROM'));
  const text = final.map((i) => `${i.keyword} ${i.args}`).join('\n');
  assert.match(text, /apt-get install [^\n]*\bnodejs\b[^\n]*\bbinutils\b/);
  // perf 7.2 or later (trixie's 6.12 spins on exited threads), from trixie-backports.
  assert.match(text, /trixie-backports main/);
  assert.match(text, /apt-get install [^\n]*-t trixie-backports linux-perf/);
  assert.match(text, /COPY --from=perf \/opt\/perf \/opt\/perf/);
  assert.match(text, /ln -s \/opt\/profcpu\/dist\/cli\/main\.js \/usr\/local\/bin\/profcpu/);
  assert.match(text, /WORKDIR \/workspace/);
  assert.match(text, /ENTRYPOINT \["profcpu-entrypoint"\]\nCMD \["bash"\]$/);
  assert.ok(!/BUILD_CA_CERTS/.test(text), 'the build-time CA certificates stay out of the final stage');
});

test('the sample target Dockerfile builds FROM the official .NET images', async () => {
  const { froms, instructions } = await checkDockerfile('images/sample-target/Dockerfile', repoRoot);
  assert.deepEqual(froms, ['mcr.microsoft.com/dotnet/sdk:10.0', 'mcr.microsoft.com/dotnet/runtime:10.0']);
  assert.deepEqual(instructions.at(-1), { keyword: 'ENTRYPOINT', args: '["dotnet", "SampleTarget.dll"]', line: 14 });
});

test('the test stand-ins carry the names the sample target uses', async () => {
  const runtime = await checkDockerfile('scripts/containers/standins/runtime.Dockerfile', undefined);
  assert.deepEqual(runtime.froms, ['debian:trixie-slim']);
  const sdk = await checkDockerfile('scripts/containers/standins/sdk.Dockerfile', undefined);
  assert.deepEqual(sdk.froms, ['mcr.microsoft.com/dotnet/runtime:10.0']);
});

test('the shell scripts parse with a POSIX shell', async () => {
  for (const script of [
    'scripts/start-profiling-container.sh',
    'scripts/containers/runc-without-sys-resource.sh',
    'images/sidecar/entrypoint.sh',
    'images/sidecar/build-perf.sh',
  ]) {
    const r = await execa('sh', ['-n', join(repoRoot, script)], { reject: false });
    assert.equal(r.exitCode, 0, `${script}: ${r.stderr}`);
  }
});

test('kernel-versions/sha256sums: one sha256sum line per base release, sorted by version', async () => {
  const lines = (await readFile(join(repoRoot, 'kernel-versions/sha256sums'), 'utf8')).trimEnd().split('\n');
  assert.ok(lines.length >= 3);
  const versions = lines.map((line) => {
    const m = /^([0-9a-f]{64}) {2}linux-(\d+)\.(\d+)\.tar\.xz$/.exec(line);
    assert.ok(m, `not a sha256sum line for a base release: ${line}`);
    return Number(m[2]) * 1000 + Number(m[3]);
  });
  assert.deepEqual(
    versions,
    [...versions].sort((a, b) => a - b),
  );
  assert.equal(new Set(lines.map((l) => l.slice(0, 64))).size, lines.length, 'no checksum twice');
});
