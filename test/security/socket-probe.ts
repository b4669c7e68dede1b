// Run inside a sidecar by hostile-socket.test.ts: looks for the diagnostic socket of `argv[2]` (the target's pid as
// the sidecar sees it), then asks it for ProcessInfo and to switch perf maps on, and prints one JSON line saying, for
// each step, what it gave or which error (code and message) it threw.
import { getProcessInfo } from '../../src/dotnet/ipc/client.js';
import { preparePerfMap } from '../../src/dotnet/perfmap/perfmap-session.js';
import { findDiagnosticSocket } from '../../src/dotnet/ipc/socket-path.js';

type Outcome = { ok: true; value: unknown } | { ok: false; code: unknown; message: string };

async function outcome(step: () => Promise<unknown>): Promise<Outcome> {
  try {
    return { ok: true, value: await step() };
  } catch (error) {
    return { ok: false, code: (error as { code?: unknown }).code, message: String((error as Error).message) };
  }
}

const pid = Number(process.argv[2]);
const result = {
  find: await outcome(async () => {
    const socket = await findDiagnosticSocket(pid);
    await socket.release();
    return socket.hostPath;
  }),
  processInfo: await outcome(() => getProcessInfo(pid, { timeoutMs: 3000 })),
  perfMapOn: await outcome(async () => {
    const session = await preparePerfMap(pid, 'on', { timeoutMs: 3000 });
    await session.restore();
    return session.state;
  }),
};
process.stdout.write(`${JSON.stringify(result)}\n`);
