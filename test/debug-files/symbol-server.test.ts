import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { readElfFile } from '../../src/formats/elf/elf.js';
import { SymbolFetcher } from '../../src/debug-files/symbol-server-fetch.js';
import {
  debugFileUrl,
  microsoftSymbolServer,
  parseSymbolServer,
  ssqpDebugKey,
  symbolServerList,
  type SymbolServer,
} from '../../src/debug-files/symbol-server.js';
import { startStaticServer } from '../support/static-server.js';
import { need } from '../support/requirements.js';

const collect = () => {
  const warnings: string[] = [];
  return { warnings, warn: (m: string) => warnings.push(m) };
};

test('flags come first, then PROFCPU_SYMBOL_SERVERS; they replace the defaults', () => {
  const { warnings, warn } = collect();
  const list = symbolServerList(
    {
      flags: ['https://symbols.example.com/store/', 'debuginfod:http://10.0.0.1:8002'],
      env: {
        PROFCPU_SYMBOL_SERVERS: 'http://debuginfod.example.org, microsoft',
        DEBUGINFOD_URLS: 'https://debuginfod.debian.net',
      },
    },
    warn,
  );
  assert.deepEqual(
    list.map((s) => [s.kind, s.url, s.origin]),
    [
      ['ssqp', 'https://symbols.example.com/store', '--symbol-server'],
      ['debuginfod', 'http://10.0.0.1:8002', '--symbol-server'],
      ['debuginfod', 'http://debuginfod.example.org', 'PROFCPU_SYMBOL_SERVERS'],
      ['ssqp', microsoftSymbolServer, 'PROFCPU_SYMBOL_SERVERS'],
    ],
  );
  assert.deepEqual(warnings, []);
});

test('by default: every DEBUGINFOD_URLS server, then Microsoft’s; --offline: none', () => {
  const { warn } = collect();
  const env = { DEBUGINFOD_URLS: 'https://debuginfod.debian.net  http://127.0.0.1:8002/' };
  assert.deepEqual(
    symbolServerList({ env }, warn).map((s) => `${s.kind}:${s.url}`),
    ['debuginfod:https://debuginfod.debian.net', 'debuginfod:http://127.0.0.1:8002', `ssqp:${microsoftSymbolServer}`],
  );
  assert.deepEqual(
    symbolServerList({ env: {} }, warn).map((s) => s.url),
    [microsoftSymbolServer],
  );
  assert.deepEqual(symbolServerList({ flags: ['http://x.example'], env, offline: true }, warn), []);
});

test('malformed entries are skipped with a warning that gives the reason; duplicates are dropped', () => {
  const { warnings, warn } = collect();
  const list = symbolServerList(
    {
      flags: ['not-a-url', 'ftp://host/x', 'http://h.example/s?x=1', 'http://h.example/s', 'ssqp:http://h.example/s/'],
    },
    warn,
  );
  assert.deepEqual(
    list.map((s) => s.url),
    ['http://h.example/s'],
  );
  assert.equal(warnings.length, 3);
  assert.match(warnings[0]!, /"not-a-url" from --symbol-server: not a URL/);
  assert.match(warnings[1]!, /unsupported scheme ftp:/);
  assert.match(warnings[2]!, /no query or fragment/);
  assert.equal(typeof parseSymbolServer('http://user:pw@h.example', 'test'), 'string');
});

test('SSQP keys are lower case and zero-padded to 20 bytes; debuginfod URLs follow its protocol', () => {
  assert.equal(
    ssqpDebugKey('180A373D6AFBABF0EB1F09BE1BC45BD796A71085'),
    '_.debug/elf-buildid-sym-180a373d6afbabf0eb1f09be1bc45bd796a71085/_.debug',
  );
  // The worked example of dotnet/symstore's SSQP_Key_Conventions.md: a 16-byte build-id.
  assert.equal(
    ssqpDebugKey('180a373d6afbabf0eb1f09be1bc45bd7'),
    '_.debug/elf-buildid-sym-180a373d6afbabf0eb1f09be1bc45bd700000000/_.debug',
  );
  const ssqp: SymbolServer = { kind: 'ssqp', url: 'https://s.example/symbols', origin: 't' };
  const dbg: SymbolServer = { kind: 'debuginfod', url: 'http://d.example:8002', origin: 't' };
  assert.equal(
    debugFileUrl(ssqp, 'ab12'),
    'https://s.example/symbols/_.debug/elf-buildid-sym-ab12000000000000000000000000000000000000/_.debug',
  );
  assert.equal(debugFileUrl(dbg, 'AB12'), 'http://d.example:8002/buildid/ab12/debuginfo');
});

test('the exact SSQP request for the SDK’s libcoreclr.so, and a 404 remembered', async (t) => {
  const root = '/usr/share/dotnet/shared/Microsoft.NETCore.App';
  const versions = existsSync(root) ? readdirSync(root).sort() : [];
  const coreclr = versions.map((v) => join(root, v, 'libcoreclr.so')).find((p) => existsSync(p));
  if (!need(t, coreclr !== undefined, `the .NET SDK's libcoreclr.so (under ${root})`)) return;
  const buildId = (await readElfFile(coreclr!)).buildId!;
  const work = mkdtempSync(join(tmpdir(), 'profcpu-ssqp-'));
  const server = await startStaticServer(join(work, 'empty-store'));
  t.after(async () => {
    await server.close();
    rmSync(work, { recursive: true, force: true });
  });
  const servers = [{ kind: 'ssqp' as const, url: `${server.url}/download/symbols`, origin: 'test' }];
  const cacheDir = join(work, 'cache');
  const result = await new SymbolFetcher({ servers, cacheDir }).fetch(buildId);
  assert.deepEqual(server.requests, [`/download/symbols/_.debug/elf-buildid-sym-${buildId}/_.debug`]);
  assert.equal(result.status, 'not-found');
  assert.deepEqual(result.attempts, [
    {
      server: servers[0]!.url,
      url: `${server.url}/download/symbols/_.debug/elf-buildid-sym-${buildId}/_.debug`,
      outcome: 'not-found',
      reason: 'HTTP 404',
    },
  ]);
  // Against Microsoft's server the same key: its documented URL for this runtime's debug file.
  assert.equal(
    debugFileUrl({ kind: 'ssqp', url: microsoftSymbolServer, origin: 'default' }, buildId),
    `https://msdl.microsoft.com/download/symbols/_.debug/elf-buildid-sym-${buildId}/_.debug`,
  );
  const again = await new SymbolFetcher({ servers, cacheDir }).fetch(buildId);
  assert.equal(again.attempts[0]?.outcome, 'remembered-miss');
  assert.equal(server.requests.length, 1);
});
