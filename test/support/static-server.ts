// A real HTTP server on a free loopback port serving a folder (an SSQP-layout symbol store in the tests), with
// faults that can be switched on per path: a status code, no answer at all, a body cut short, a body without
// Content-Length, a gzip-encoded body. Records every request path, so a test can assert the exact URL a client asked for.
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join, normalize } from 'node:path';
import { gzipSync } from 'node:zlib';

export type Fault =
  | { kind: 'status'; status: number }
  /** Accept the request and never answer. */
  | { kind: 'hang' }
  /** Announce the whole file in Content-Length, send `bytes` of it, then drop the connection. */
  | { kind: 'truncate'; bytes: number }
  /** Send the file chunked, without Content-Length (the client only learns the size as it reads). */
  | { kind: 'no-length' }
  /** Send the file gzip-compressed (Content-Encoding: gzip, Content-Length of the compressed bytes). */
  | { kind: 'gzip' };

export interface StaticServer {
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  /** Request paths in arrival order. */
  readonly requests: string[];
  /** Faults by request path (`/_.debug/...`); `*` applies to every path. */
  readonly faults: Map<string, Fault>;
  close(): Promise<void>;
}

export async function startStaticServer(root: string): Promise<StaticServer> {
  const requests: string[] = [];
  const faults = new Map<string, Fault>();
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    requests.push(path);
    void respond(path, faults.get(path) ?? faults.get('*'), res);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function respond(path: string, fault: Fault | undefined, res: ServerResponse): Promise<void> {
    if (fault?.kind === 'hang') return;
    if (fault?.kind === 'status') {
      res.writeHead(fault.status, { 'content-type': 'text/plain' }).end(`fault ${fault.status}\n`);
      return;
    }
    const file = join(root, normalize(decodeURIComponent(path)).replace(/^(\.\.(\/|$))+/, ''));
    let size: number;
    try {
      const info = await stat(file);
      if (!info.isFile()) throw new Error('not a file');
      size = info.size;
    } catch {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    if (fault?.kind === 'truncate') {
      res.writeHead(200, { 'content-length': String(size) });
      const stream = createReadStream(file, { start: 0, end: Math.max(0, fault.bytes - 1) });
      stream.on('end', () => res.socket?.destroy());
      stream.pipe(res, { end: false });
      return;
    }
    if (fault?.kind === 'gzip') {
      const body = gzipSync(await readFile(file));
      res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': String(body.length) }).end(body);
      return;
    }
    res.writeHead(200, fault?.kind === 'no-length' ? {} : { 'content-length': String(size) });
    createReadStream(file).pipe(res);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    faults,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
