// A real HTTP server on a free loopback port whose answer to each path is scripted: a redirect to any Location, or a
// body sent in chunks at a pace (one byte every half second, for a server that trickles). Records every request path
// and counts TCP connections, so a test can tell that a client refused a redirect before connecting anywhere.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type Script =
  /** Answer `status` (default 302) with this Location header, or none when undefined. */
  | { kind: 'redirect'; location: string | undefined; status?: number }
  /** Announce `body` in Content-Length, then send `chunkBytes` of it every `everyMs`. */
  | { kind: 'paced'; body: Uint8Array; chunkBytes: number; everyMs: number };

export interface DownloadServer {
  /** `http://HOST:PORT` */
  readonly url: string;
  readonly port: number;
  /** Request paths in arrival order. */
  readonly requests: string[];
  /** TCP connections accepted so far (a TLS client counts too, though nothing answers it). */
  readonly connections: () => number;
  /** Scripts by request path; `*` applies to every path; a path with none gets 404. */
  readonly scripts: Map<string, Script>;
  close(): Promise<void>;
}

/** Listens on `host` (any 127.0.0.0/8 address on Linux, so two servers can be two hosts). */
export async function startDownloadServer(host = '127.0.0.1'): Promise<DownloadServer> {
  const requests: string[] = [];
  const scripts = new Map<string, Script>();
  const sockets = new Set<Socket>();
  const timers = new Set<ReturnType<typeof setInterval>>();
  let connections = 0;
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    requests.push(path);
    respond(scripts.get(path) ?? scripts.get('*'), res);
  });
  server.on('connection', (socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  function respond(script: Script | undefined, res: ServerResponse): void {
    if (!script) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    if (script.kind === 'redirect') {
      const headers = script.location === undefined ? {} : { location: script.location };
      res.writeHead(script.status ?? 302, headers).end('moved\n');
      return;
    }
    res.writeHead(200, { 'content-length': String(script.body.length) });
    res.flushHeaders();
    let sent = 0;
    const timer = setInterval(() => {
      const chunk = script.body.subarray(sent, sent + script.chunkBytes);
      sent += chunk.length;
      res.write(chunk);
      if (sent >= script.body.length) {
        stopTimer();
        res.end();
      }
    }, script.everyMs);
    const stopTimer = () => {
      clearInterval(timer);
      timers.delete(timer);
    };
    timers.add(timer);
    res.on('close', stopTimer);
  }

  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    port,
    requests,
    connections: () => connections,
    scripts,
    close: () =>
      new Promise<void>((resolve) => {
        for (const timer of timers) clearInterval(timer);
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
