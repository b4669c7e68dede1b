import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { encodeProcessInfo2Request, encodeRequest } from '../../../src/dotnet/ipc/protocol.js';
import { exchange, SUN_PATH_MAX } from '../../../src/dotnet/ipc/transport.js';
import { isProfcpuError, type ErrorCode } from '../../../src/error.js';
import { okReply, processInfoPayload, startFakeIpcServer, type Script } from './ipc-bytes.js';

const request = encodeProcessInfo2Request();
const fields = {
  pid: 7,
  cookie: Buffer.alloc(16, 1),
  commandLine: 'dotnet app.dll',
  os: 'Linux',
  arch: 'x64',
  entrypoint: 'app',
  version: '8.0.1',
};

async function withServer<T>(script: Script, body: (path: string) => Promise<T>): Promise<T> {
  const server = await startFakeIpcServer(script);
  try {
    return await body(server.path);
  } finally {
    await server.close();
  }
}

function rejectsWith(code: ErrorCode, pattern: RegExp) {
  return (error: unknown) => {
    assert.ok(isProfcpuError(error, code), `expected ${code}, got ${String(error)}`);
    assert.match(error.message, pattern);
    return true;
  };
}

describe('one IPC exchange against a fake server', () => {
  it('sends the request and returns header and payload', async () => {
    const payload = processInfoPayload(fields, 2);
    const server = await startFakeIpcServer((_req, socket) => socket.end(okReply(payload)));
    try {
      const reply = await exchange(server.path, request);
      assert.deepEqual(server.requests, [request]);
      assert.equal(reply.header.size, 20 + payload.length);
      assert.deepEqual(reply.payload, payload);
    } finally {
      await server.close();
    }
  });

  it('reassembles a reply sent one byte at a time and ignores bytes past the announced size', async () => {
    const bytes = Buffer.concat([okReply(Buffer.from([1, 2, 3, 4])), Buffer.from('trailing')]);
    const reply = await withServer(
      (_req, socket) => {
        let i = 0;
        const next = (): void => {
          if (i < bytes.length) socket.write(bytes.subarray(i, ++i), next);
        };
        next();
      },
      (path) => exchange(path, request),
    );
    assert.deepEqual([...reply.payload], [1, 2, 3, 4]);
  });

  it('refuses to send any command but the ones profcpu uses', async () => {
    await withServer(
      () => assert.fail('nothing may reach the server'),
      async (path) => {
        for (const [set, id] of [
          [0x04, 0x01], // ResumeRuntime
          [0x04, 0x03], // SetEnvironmentVariable
          [0x04, 0x07], // ApplyStartupHook
          [0x03, 0x01], // AttachProfiler
          [0x01, 0x00], // Dump set, reserved id
          [0x01, 0x04], // Dump set, unknown id
        ] as const) {
          await assert.rejects(exchange(path, encodeRequest(set, id)), RangeError);
        }
      },
    );
  });

  it('short reply: the server closes inside the header', async () => {
    await withServer(
      (_req, socket) => socket.end(okReply().subarray(0, 10)),
      (path) => assert.rejects(exchange(path, request), rejectsWith('IPC_PROTOCOL', /after 10 of at least 20 bytes/)),
    );
  });

  it('closes early: the header announces more payload than arrives', async () => {
    const reply = okReply(Buffer.alloc(40));
    await withServer(
      (_req, socket) => socket.end(reply.subarray(0, 30)),
      (path) => assert.rejects(exchange(path, request), rejectsWith('IPC_PROTOCOL', /after 30 of 60 bytes/)),
    );
  });

  it('closes without a byte', async () => {
    await withServer(
      (_req, socket) => socket.end(),
      (path) => assert.rejects(exchange(path, request), rejectsWith('IPC_PROTOCOL', /after 0 of/)),
    );
  });

  it('wrong magic', async () => {
    const reply = okReply();
    reply.write('HTTP/1.1 400 B', 0, 'latin1');
    await withServer(
      (_req, socket) => socket.write(reply),
      (path) => assert.rejects(exchange(path, request), rejectsWith('IPC_PROTOCOL', /wrong magic "HTTP\/1.1 400 B"/)),
    );
  });

  it('oversize: a size field above the cap fails at once, without waiting for the bytes', async () => {
    const reply = okReply(Buffer.alloc(4));
    reply.writeUInt16LE(0xffff, 14);
    await withServer(
      (_req, socket) => socket.write(reply),
      (path) =>
        assert.rejects(
          exchange(path, request, { maxReplyBytes: 4096, timeoutMs: 60_000 }),
          rejectsWith('IPC_PROTOCOL', /announces 65535 bytes, more than the 4096 accepted/),
        ),
    );
  });

  it('never answers: times out with IPC_TIMEOUT', async () => {
    await withServer(
      () => {},
      (path) =>
        assert.rejects(exchange(path, request, { timeoutMs: 200 }), rejectsWith('IPC_TIMEOUT', /within 200 ms/)),
    );
  });

  it('aborts when the signal fires, and before connecting when it already has', async () => {
    await withServer(
      () => {},
      async (path) => {
        const controller = new AbortController();
        const pending = exchange(path, request, { signal: controller.signal, timeoutMs: 60_000 });
        setTimeout(() => controller.abort(), 50);
        await assert.rejects(pending, rejectsWith('ABORTED', /aborted/));
        await assert.rejects(exchange(path, request, { signal: AbortSignal.abort() }), rejectsWith('ABORTED', /./));
      },
    );
  });
});

describe('reaching sockets', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'profcpu-ipc-test-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a path with no socket is IPC_UNREACHABLE with a remedy', async () => {
    await assert.rejects(exchange(join(dir, 'missing-socket'), request), (error: unknown) => {
      assert.ok(isProfcpuError(error, 'IPC_UNREACHABLE'));
      assert.match(error.message, /ENOENT/);
      assert.ok(error.remedy);
      return true;
    });
  });

  it(`a socket path longer than ${SUN_PATH_MAX} bytes is reached through a short private symlink`, async () => {
    const deep = join(dir, 'a'.repeat(60), 'b'.repeat(60));
    await mkdir(deep, { recursive: true });
    const longPath = join(deep, 'dotnet-diagnostic-1-1-socket');
    assert.ok(Buffer.byteLength(longPath) > SUN_PATH_MAX);
    // The long name is a symlink to the fake server's short one: connect(2) with it fails with ENOENT unless the
    // client shortens it (the real runtime case is in client.test.ts).
    const server = await startFakeIpcServer((_req, socket) => socket.end(okReply(Buffer.from([9, 9, 9, 9]))));
    try {
      await symlink(server.path, longPath);
      const before = (await readdir(tmpdir())).filter((n) => n.startsWith('profcpu-ipc-')).length;
      const reply = await exchange(longPath, request);
      assert.deepEqual([...reply.payload], [9, 9, 9, 9]);
      const afterCount = (await readdir(tmpdir())).filter((n) => n.startsWith('profcpu-ipc-')).length;
      assert.equal(afterCount, before, 'the private symlink directory is removed');
    } finally {
      await server.close();
    }
  });
});
