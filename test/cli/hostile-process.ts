// A live process with a hostile name, for tests of what profcpu prints about a target: its comm and command line
// hold an OSC 8 hyperlink, a CSI that clears the screen, BEL, a C1 CSI, a bidi override and a newline followed by
// a forged table row. It stays until killed.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';

export interface HostileProcess {
  readonly pid: number;
  /** Text that appears in the forged part of the command line, and nowhere else on the machine. */
  readonly marker: string;
  /** Its command line, argv[0] first, as the kernel holds it. */
  readonly cmdline: readonly string[];
  /** Its comm, as written to /proc/self/comm (15 bytes at most). */
  readonly comm: string;
  kill(): Promise<void>;
}

/** The comm: ESC [ 2 J and BEL, 10 bytes. The kernel's status file keeps both raw. */
export const hostileComm = '\x1b[2J\x07evil';

/**
 * Starts node with a hostile argv[0] (no slash, so it is also its executable name for --name) and a hostile
 * argument, and resolves once it has set its comm.
 */
export async function startHostileProcess(marker = `FORGED${randomBytes(4).toString('hex')}`): Promise<HostileProcess> {
  const link = (uri: string, text: string) => `\x1b]8;;${uri}\x07${text}\x1b]8;;\x07`;
  const argv0 = `hostile${link('x:evil', 'link')}\x1b[2J\x07\u202e\n${marker} 1 1 .NET 8.0 yes 1K dotnet Forged.dll`;
  const argument = `${link('https://evil.example/', 'click')}\x1b[31m\x9b2J\t\n${marker} 2 2 .NET 8.0 yes 2K`;
  const script =
    `require('fs').writeFileSync('/proc/self/comm', ${JSON.stringify(hostileComm)});` +
    `process.stdout.write('ready\\n'); setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ['-e', script, argument], { argv0, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  const [ready] = await Promise.race([once(child.stdout, 'data'), exited]);
  if (!String(ready).startsWith('ready')) {
    await kill();
    throw new Error('the hostile process did not start');
  }
  return { pid: child.pid!, marker, cmdline: [argv0, '-e', script, argument], comm: hostileComm, kill };
}
