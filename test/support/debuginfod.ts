// A real elfutils debuginfod server (Debian package `debuginfod`) on a free loopback port, indexing a folder of
// debug files: any folder, one debug file (serveDebugFile), or the files of an installed Debian debug package
// (serveDebianDebugPackage, e.g. libc6-dbg). `startDebuginfod` returns once the server serves the build-id it was
// told to wait for, so a test never races the initial scan.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { copyFileSync, mkdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Debuginfod {
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Starts debuginfod over `folder` (its sqlite database goes to `workDir`), and waits until it serves the debug file
 * of `readyBuildId`.
 */
export async function startDebuginfod(folder: string, workDir: string, readyBuildId: string): Promise<Debuginfod> {
  for (let tries = 0; ; tries++) {
    const port = await freePort();
    const child = spawn(
      'debuginfod',
      ['-F', '-p', String(port), '-d', join(workDir, `debuginfod-${port}.sqlite`), '-t', '0', '-g', '0', folder],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let log = '';
    child.stderr?.setEncoding('utf8').on('data', (text: string) => (log = (log + text).slice(-4000)));
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && child.exitCode === null) {
      const status = await fetch(`${url}/buildid/${readyBuildId}/debuginfo`).then(
        async (r) => (await r.arrayBuffer(), r.status),
        () => 0,
      );
      if (status === 200) return { url, close: () => stop(child) };
      await sleep(200);
    }
    await stop(child);
    // Another process took the port between freePort() and debuginfod's bind: try another one.
    if (tries < 3 && /bind|address already in use/i.test(log)) continue;
    throw new Error(`debuginfod did not serve ${readyBuildId} within 30 s:\n${log}`);
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/** Serves one debug file: copies it into `<workDir>/debuginfod-files` and starts debuginfod over that folder. */
export async function serveDebugFile(debugFile: string, buildId: string, workDir: string): Promise<Debuginfod> {
  const folder = join(workDir, 'debuginfod-files');
  mkdirSync(folder, { recursive: true });
  copyFileSync(debugFile, join(folder, basename(debugFile)));
  return startDebuginfod(folder, workDir, buildId);
}

/**
 * Serves the build-id debug files (`/usr/lib/debug/.build-id/xx/rest.debug`) of an installed Debian package, as a
 * distribution's debuginfod would: copied into `<workDir>/<package>-files` (a server over /usr/lib/debug itself would
 * serve every other package's too). Waits until `readyBuildId` is served. Needs dpkg-query and the package.
 */
export async function serveDebianDebugPackage(pkg: string, workDir: string, readyBuildId: string): Promise<Debuginfod> {
  const folder = join(workDir, `${pkg}-files`);
  mkdirSync(folder, { recursive: true });
  const listed = execFileSync('dpkg-query', ['-L', pkg], { encoding: 'utf8' }).split('\n');
  for (const file of listed.filter((f) => /^\/usr\/lib\/debug\/\.build-id\/[0-9a-f]{2}\/[0-9a-f]+\.debug$/.test(f))) {
    if (!statSync(file).isFile()) continue;
    // xx/rest.debug → xxrest.debug: the whole build-id, so two files never share a name.
    copyFileSync(file, join(folder, file.split('/').slice(-2).join('')));
  }
  return startDebuginfod(folder, workDir, readyBuildId);
}
