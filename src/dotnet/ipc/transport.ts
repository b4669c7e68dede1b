// One diagnostic IPC exchange over a unix socket: request bytes in, the reply's header and payload out. The runtime
// serves one command per connection. Every call has a deadline, a size cap and an AbortSignal, so a silent,
// short or garbled peer gives a typed error instead of a hang. Socket paths longer than sun_path allows are
// reached through a short symlink in a private temp directory.
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ProfcpuError } from '../../error.js';
import { decodeHeader, HEADER_SIZE, isAllowedRequest, MAX_MESSAGE_SIZE, type IpcHeader } from './protocol.js';

export interface IpcCallOptions {
  signal?: AbortSignal;
  /** Deadline for connect, send and the whole reply. Default 5000 ms. */
  timeoutMs?: number;
  /** Largest reply accepted, header included. Default 65535, the most a u16 size field can say. */
  maxReplyBytes?: number;
}

export const ipcCallDefaults = Object.freeze({ timeoutMs: 5000, maxReplyBytes: MAX_MESSAGE_SIZE });

/** sun_path holds 108 bytes including the terminating NUL. */
export const SUN_PATH_MAX = 107;

export interface IpcReply {
  header: IpcHeader;
  payload: Buffer;
}

/** Sends `request` to the socket at `socketPath` and reads one reply. */
export async function exchange(socketPath: string, request: Buffer, options: IpcCallOptions = {}): Promise<IpcReply> {
  if (!isAllowedRequest(request)) {
    throw new RangeError(
      'profcpu sends only ProcessInfo, ProcessInfo2, EnablePerfMap, DisablePerfMap and GenerateCoreDump (1 to 3)',
    );
  }
  if (Buffer.byteLength(socketPath) <= SUN_PATH_MAX) return exchangeAt(socketPath, socketPath, request, options);
  // Too long for connect(2): a symlink to it from a short private path resolves in the kernel, where no limit applies.
  const base = Buffer.byteLength(tmpdir()) < 60 ? tmpdir() : '/tmp';
  const dir = await mkdtemp(join(base, 'profcpu-ipc-'));
  try {
    const link = join(dir, 's');
    await symlink(resolve(socketPath), link);
    return await exchangeAt(link, socketPath, request, options);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function exchangeAt(path: string, shownPath: string, request: Buffer, options: IpcCallOptions): Promise<IpcReply> {
  const timeoutMs = options.timeoutMs ?? ipcCallDefaults.timeoutMs;
  const maxReplyBytes = options.maxReplyBytes ?? ipcCallDefaults.maxReplyBytes;
  const signal = options.signal;
  if (signal?.aborted) return Promise.reject(aborted(signal.reason));

  return new Promise<IpcReply>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let header: IpcHeader | undefined;
    let connected = false;
    let settled = false;
    const socket: Socket = connect({ path });

    const finish = (error: unknown, reply?: IpcReply): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      if (reply) resolve(reply);
      else reject(error);
    };
    const onAbort = (): void => finish(aborted(signal?.reason));
    const timer = setTimeout(
      () =>
        finish(
          new ProfcpuError(
            'IPC_TIMEOUT',
            `no complete diagnostic IPC reply from ${shownPath} within ${timeoutMs} ms (${connected ? `${received} bytes received` : 'not connected'})`,
            {
              remedy:
                'The runtime may be paused (DOTNET_DefaultDiagnosticPortSuspend=1, a debugger, SIGSTOP) or overloaded; retry, or start the target with DOTNET_PerfMapEnabled=1 so no IPC is needed.',
            },
          ),
        ),
      timeoutMs,
    );
    signal?.addEventListener('abort', onAbort, { once: true });

    socket.on('connect', () => {
      connected = true;
      socket.write(request);
    });
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.length;
      try {
        if (header === undefined && received >= HEADER_SIZE) {
          header = decodeHeader(Buffer.concat(chunks));
          if (header.size > maxReplyBytes) {
            throw new ProfcpuError(
              'IPC_PROTOCOL',
              `malformed diagnostic IPC reply: announces ${header.size} bytes, more than the ${maxReplyBytes} accepted`,
              { remedy: 'Check that the socket belongs to a .NET runtime.' },
            );
          }
        }
        if (header !== undefined && received >= header.size) {
          // Anything after the announced size is not part of this reply; the runtime closes the connection next.
          const all = Buffer.concat(chunks);
          finish(undefined, { header, payload: all.subarray(HEADER_SIZE, header.size) });
        }
      } catch (error) {
        finish(error);
      }
    });
    socket.on('end', () => {
      const expected = header ? `${header.size}` : `at least ${HEADER_SIZE}`;
      finish(
        new ProfcpuError(
          'IPC_PROTOCOL',
          `malformed diagnostic IPC reply: ${shownPath} closed the connection after ${received} of ${expected} bytes`,
          {
            remedy:
              'The runtime hung up without a full answer: it may be shutting down, or the socket is not a .NET runtime’s.',
          },
        ),
      );
    });
    socket.on('error', (error: NodeJS.ErrnoException) => finish(connectError(error, shownPath, connected)));
  });
}

function aborted(reason: unknown): ProfcpuError {
  return new ProfcpuError('ABORTED', 'diagnostic IPC call aborted', { cause: reason });
}

function connectError(error: NodeJS.ErrnoException, path: string, connected: boolean): ProfcpuError {
  if (connected) {
    return new ProfcpuError('IPC_PROTOCOL', `diagnostic IPC connection to ${path} failed: ${error.message}`, {
      remedy: 'The runtime dropped the connection; it may be shutting down. Retry.',
      cause: error,
    });
  }
  const remedy =
    error.code === 'EACCES' || error.code === 'EPERM'
      ? 'The socket is mode 0600: run profcpu as root or as the target’s user.'
      : error.code === 'ECONNREFUSED'
        ? 'Nobody listens on it: a stale socket left by an exited process, or the runtime’s diagnostics are off. Check the pid with `profcpu ps`.'
        : 'Check that the process is a running .NET app and that its /tmp is visible through /proc/PID/root.';
  return new ProfcpuError('IPC_UNREACHABLE', `cannot connect to ${path}: ${error.code ?? error.message}`, {
    remedy,
    cause: error,
  });
}
