// Run inside a sidecar (own mount namespace and /tmp, the target's PID namespace, a fresh /proc) by
// namespaces.test.ts: drives the IPC client against `argv[2]` (the target's pid as the sidecar sees it) and prints
// what it saw as one JSON line.
import { existsSync } from 'node:fs';
import { getProcessInfo } from '../../../src/dotnet/ipc/client.js';
import { preparePerfMap } from '../../../src/dotnet/perfmap/perfmap-session.js';
import { findDiagnosticSocket } from '../../../src/dotnet/ipc/socket-path.js';

const pid = Number(process.argv[2]);
const socket = await findDiagnosticSocket(pid);
await socket.release();
const info = await getProcessInfo(pid);
const session = await preparePerfMap(pid, 'auto');
const result = {
  socketPath: socket.hostPath,
  nspid: socket.nspid,
  infoPid: info.pid,
  state: session.state,
  perfMapPath: session.perfMapPath,
  perfMapVisible: session.perfMapPath !== undefined && existsSync(session.perfMapPath),
  perfMapInOwnTmp: existsSync(`/tmp/perf-${socket.nspid}.map`),
};
await session.restore();
process.stdout.write(`${JSON.stringify(result)}\n`);
