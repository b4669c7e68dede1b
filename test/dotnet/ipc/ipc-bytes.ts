// Reply bytes as a .NET runtime would send them, built by hand (not with the code under test), and a fake
// diagnostic server on a unix socket that answers each connection with whatever a test scripts.
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function header(size: number, set: number, id: number): Buffer {
  const out = Buffer.alloc(20);
  out.write('DOTNET_IPC_V1\0', 0, 'latin1');
  out.writeUInt16LE(size, 14);
  out[16] = set;
  out[17] = id;
  return out;
}

export function okReply(payload: Buffer = Buffer.alloc(0)): Buffer {
  return Buffer.concat([header(20 + payload.length, 0xff, 0x00), payload]);
}

export function errorReply(hresult: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32LE(hresult >>> 0, 0);
  return Buffer.concat([header(24, 0xff, 0xff), payload]);
}

function wireString(value: string | null): Buffer {
  if (value === null) return Buffer.alloc(4);
  const units = Buffer.from(value + '\0', 'utf16le');
  const count = Buffer.alloc(4);
  count.writeUInt32LE(units.length / 2, 0);
  return Buffer.concat([count, units]);
}

export interface ProcessInfoFields {
  pid: number;
  cookie: Buffer;
  commandLine: string | null;
  os: string | null;
  arch: string | null;
  entrypoint: string | null;
  version: string | null;
}

export function processInfoPayload(f: ProcessInfoFields, version: 1 | 2): Buffer {
  const pid = Buffer.alloc(8);
  pid.writeBigUInt64LE(BigInt(f.pid), 0);
  const parts = [pid, f.cookie, wireString(f.commandLine), wireString(f.os), wireString(f.arch)];
  if (version === 2) parts.push(wireString(f.entrypoint), wireString(f.version));
  return Buffer.concat(parts);
}

/** What the fake server does with one connection, given the request bytes it received. */
export type Script = (request: Buffer, socket: Socket) => void;

export interface FakeIpcServer {
  path: string;
  /** Every request received, in order (one per connection). */
  requests: Buffer[];
  close(): Promise<void>;
}

/**
 * Listens on `path` (default: a socket in a fresh temp directory). Each connection is handed to `script` once
 * 20 bytes (a header) plus the announced payload arrived.
 */
export async function startFakeIpcServer(script: Script, path?: string): Promise<FakeIpcServer> {
  const dir = path ? undefined : await mkdtemp(join(tmpdir(), 'profcpu-fake-ipc-'));
  const socketPath = path ?? join(dir!, 'dotnet-diagnostic-1-1-socket');
  const requests: Buffer[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let received = Buffer.alloc(0);
    let handled = false;
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (handled || received.length < 20 || received.length < received.readUInt16LE(14)) return;
      handled = true;
      requests.push(received);
      script(received, socket);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, resolve);
  });
  return {
    path: socketPath,
    requests,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      if (dir) await rm(dir, { recursive: true, force: true });
    },
  };
}
