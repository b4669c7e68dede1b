// A hostile stand-in for a .NET runtime, run as PID 1 of a target's namespaces by dump-hostile.test.ts: it listens on
// /tmp/dotnet-diagnostic-1-<start ticks>-socket like a runtime and answers dump requests as `argv[2]` says, putting in
// place of the dump whatever a compromised target could (a link out of its root, a FIFO, a sparse 1 TiB file, a file
// that keeps growing, a hard link), or a sparse 16 GiB file (sparse16g, under the cap: a copy that lasts), or a
// plain 1 MiB file (plain), or refusing; or, as createdump does, creating the file only at the end (late: once the test creates /tmp/go; each path
// written is appended to /tmp/written). Each request's command id is appended to /tmp/requests.
import {
  appendFileSync,
  existsSync,
  linkSync,
  openSync,
  readFileSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:net';

const [mode, secret] = process.argv.slice(2);
const ticks = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ')[19];

function reply(socket, id, payload = Buffer.alloc(0)) {
  const header = Buffer.alloc(20);
  header.write('DOTNET_IPC_V1\0', 0, 'latin1');
  header.writeUInt16LE(20 + payload.length, 14);
  header[16] = 0xff;
  header[17] = id;
  socket.end(Buffer.concat([header, payload]));
}

function hresult(value, message) {
  const out = Buffer.alloc(4);
  out.writeUInt32LE(value >>> 0, 0);
  if (message === undefined) return out;
  const text = Buffer.from(`${message}\0`, 'utf16le');
  const count = Buffer.alloc(4);
  count.writeUInt32LE(text.length / 2, 0);
  return Buffer.concat([out, count, text]);
}

/** The dump path of a GenerateCoreDump* payload: u32 UTF-16 units (NUL included), then the text. */
function dumpPath(request) {
  const units = request.readUInt32LE(20);
  return request.toString('utf16le', 24, 24 + (units - 1) * 2);
}

function place(path) {
  switch (mode) {
    case 'symlink':
      symlinkSync(secret, path);
      break;
    case 'fifo':
      execFileSync('mkfifo', [path]);
      break;
    case 'sparse':
      openSync(path, 'w');
      truncateSync(path, 2 ** 40);
      break;
    case 'hardlink':
      appendFileSync('/tmp/victim', 'the target’s own file\n');
      linkSync('/tmp/victim', path);
      break;
    case 'plain':
      writeFileSync(path, Buffer.alloc(1 << 20, 0x5a));
      break;
    case 'sparse16g':
      openSync(path, 'w');
      truncateSync(path, 16 * 2 ** 30);
      break;
    case 'growing': {
      const fd = openSync(path, 'w');
      const chunk = Buffer.alloc(1 << 20, 0x5a);
      for (let i = 0; i < 64; i++) writeSync(fd, chunk);
      let more = 448;
      const timer = setInterval(() => {
        writeSync(fd, chunk);
        if (--more === 0) clearInterval(timer);
      }, 5);
      break;
    }
  }
}

/** As createdump: the file appears only at the end (once /tmp/go exists), then the answer. */
function writeLate(socket, id, path) {
  const timer = setInterval(() => {
    if (!existsSync('/tmp/go')) return;
    clearInterval(timer);
    writeFileSync(path, Buffer.alloc(4 << 20, 0x5a));
    appendFileSync('/tmp/written', `${path}\n`);
    if (!socket.destroyed) reply(socket, 0x00, Buffer.alloc(4));
  }, 20);
}

createServer((socket) => {
  let request = Buffer.alloc(0);
  socket.on('error', () => {});
  socket.on('data', (chunk) => {
    request = Buffer.concat([request, chunk]);
    if (request.length < 20 || request.length < request.readUInt16LE(14)) return;
    const [set, id] = [request[16], request[17]];
    appendFileSync('/tmp/requests', `${set}.${id}\n`);
    if (set !== 0x01) return reply(socket, 0xff, hresult(0x80131385));
    if (mode === 'old') return reply(socket, 0xff, hresult(0x80131385));
    if (mode === 'silent') return;
    if (mode === 'refuse')
      return reply(
        socket,
        0xff,
        id === 3 ? hresult(0x80004005, 'Insufficient space to write the dump') : hresult(0x80004005),
      );
    if (mode === 'late') return writeLate(socket, id, dumpPath(request));
    place(dumpPath(request));
    reply(socket, 0x00, Buffer.alloc(4));
  });
}).listen(`/tmp/dotnet-diagnostic-1-${ticks}-socket`);
