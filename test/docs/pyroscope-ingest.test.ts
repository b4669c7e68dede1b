// docs/outputs.md tells how to send profile.pb.gz to a Grafana Pyroscope server with curl. No Pyroscope server runs
// here, so the documented command itself is run, against a server on loopback that reads the request the way
// Pyroscope's /ingest reads a pprof upload (pkg/og/convert/pprof: the multipart form's `profile` field, the name,
// from, until and format query parameters): the profile that arrives must be the folder's, whole.
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import { renderPprof } from '../../src/render/pprof.js';
import { parseFoldedText } from '../../src/stacks/folded.js';
import { repoRoot } from '../support/cli.js';
import { decodePprof, pprofToFolded } from '../support/pprof.js';
import { needCommand } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

interface Received {
  url: URL;
  contentType: string;
  body: Buffer;
}

/** The `name` field of a multipart/form-data body, as Go's multipart reader would give it. */
function formField(body: Buffer, contentType: string, name: string): Buffer | undefined {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/.exec(contentType);
  if (!boundary) return undefined;
  const delimiter = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    const start = at + delimiter.length + 2;
    const next = body.indexOf(delimiter, start);
    if (next < 0) break;
    const part = body.subarray(start, next - 2);
    const headerEnd = part.indexOf('\r\n\r\n');
    const headers = part.subarray(0, headerEnd).toString('latin1');
    if (new RegExp(`name="${name}"`).test(headers)) return part.subarray(headerEnd + 4);
    at = next;
  }
  return undefined;
}

test('the documented curl command uploads profile.pb.gz as Pyroscope’s /ingest reads it', async (t) => {
  if (!needCommand(t, 'curl', 'curl')) return;
  const docs = await readFile(join(repoRoot, 'docs/outputs.md'), 'utf8');
  const block = [...docs.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.includes('/ingest'));
  assert.ok(block, 'docs/outputs.md has a sh block posting to /ingest');

  const received: Received[] = [];
  const server = createServer((request: IncomingMessage, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({
        url: new URL(request.url ?? '/', 'http://localhost'),
        contentType: request.headers['content-type'] ?? '',
        body: Buffer.concat(chunks),
      });
      response.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const { port } = server.address() as AddressInfo;

  const dir = await tempDir(t, 'pyroscope');
  const stacks = parseFoldedText(await readFile(join(repoRoot, 'test/render/fixtures/dotnet.folded'), 'utf8')).stacks;
  await writeFile(join(dir, 'perf.data'), 'PERFILE2');
  await writeFile(join(dir, 'profile.pb.gz'), renderPprof(stacks));
  const script = block.replaceAll('http://pyroscope:4040', `http://127.0.0.1:${port}`);
  const run = await execa('bash', ['-euo', 'pipefail', '-c', script], { cwd: dir, reject: false, all: true });
  assert.equal(run.exitCode, 0, `${script}\n${run.all}`);

  assert.equal(received.length, 1);
  const [request] = received;
  assert.equal(request!.url.pathname, '/ingest');
  const query = request!.url.searchParams;
  assert.equal(query.get('format'), 'pprof');
  assert.ok(query.get('name'), 'an application name');
  const from = Number(query.get('from'));
  const until = Number(query.get('until'));
  assert.ok(Number.isInteger(from) && Number.isInteger(until) && from < until, `from ${from}, until ${until}`);
  assert.ok(Math.abs(until - Date.now() / 1000) < 600, 'until is perf.data’s date, in Unix seconds');
  assert.match(request!.contentType, /^multipart\/form-data; boundary=/);
  const profile = formField(request!.body, request!.contentType, 'profile');
  assert.ok(profile, 'a `profile` field');
  assert.deepEqual(pprofToFolded(decodePprof(profile)), stacks);
});
