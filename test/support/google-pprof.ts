// Google's pprof (github.com/google/pprof), the command-line tool that symbolises native code by build-id: the
// symbolisation check of profcpu's pprof output runs it. `go tool pprof`, the copy the Go distribution ships, is not
// that tool: it reads symbols of Go binaries only and matches no build-id. Debian's golang-go carries the tool's source
// (the Go command vendors it, with the demangler it needs, under GOROOT/src/cmd/vendor), so the test builds it from
// there, offline, once into the test cache: a go.mod naming the vendored versions and a main that calls its driver.
import { execFile } from 'node:child_process';
import { cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { promisify } from 'node:util';
import { buildIntoCache } from './build-cache.js';
import { testCacheDir } from './dotnet-app.js';
import { need, needCommand } from './requirements.js';

const execFileAsync = promisify(execFile);
let built: Promise<string> | undefined;

/** The modules the tool is built from, as GOROOT/src/cmd/vendor/modules.txt names them. */
const modules = ['github.com/google/pprof', 'github.com/ianlancetaylor/demangle'];

/** pprof's path, built; when it cannot be, the test fails under CI=true or is skipped, and this gives undefined. */
export async function needGooglePprof(t: TestContext): Promise<string | undefined> {
  if (!needCommand(t, 'go', 'golang-go')) return undefined;
  try {
    built ??= build();
    return await built;
  } catch (error) {
    need(t, false, `Google's pprof, built from the Go distribution's vendored source: ${(error as Error).message}`);
    return undefined;
  }
}

async function build(): Promise<string> {
  const goroot = (await execFileAsync('go', ['env', 'GOROOT'])).stdout.trim();
  const vendor = join(goroot, 'src', 'cmd', 'vendor');
  const list = await readFile(join(vendor, 'modules.txt'), 'utf8');
  const versions = modules.map((name) => {
    const version = new RegExp(`^# ${name.replaceAll('.', '\\.')} (\\S+)$`, 'm').exec(list)?.[1];
    if (!version) throw new Error(`${join(vendor, 'modules.txt')} vendors no ${name}`);
    return { name, version };
  });
  const go = /^go(\d+\.\d+)/.exec((await execFileAsync('go', ['env', 'GOVERSION'])).stdout.trim())?.[1] ?? '1.19';
  const finalDir = join(testCacheDir, `google-pprof-${versions.map((v) => v.version).join('-')}`);
  return buildIntoCache({
    finalDir,
    executable: join(finalDir, 'pprof'),
    async build(workDir) {
      await mkdir(join(workDir, 'vendor', 'github.com'), { recursive: true });
      for (const { name } of versions) await cp(join(vendor, name), join(workDir, 'vendor', name), { recursive: true });
      // modules.txt's entries of those modules, each with its packages.
      const entries = list
        .split(/^(?=# )/m)
        .filter((entry) => modules.some((name) => entry.startsWith(`# ${name} `)))
        .join('');
      await writeFile(join(workDir, 'vendor', 'modules.txt'), entries);
      const requires = versions.map((v) => `\t${v.name} ${v.version}\n`).join('');
      await writeFile(join(workDir, 'go.mod'), `module pprofbuild\n\ngo ${go}\n\nrequire (\n${requires})\n`);
      await writeFile(
        join(workDir, 'main.go'),
        'package main\n\nimport (\n\t"os"\n\n\t"github.com/google/pprof/driver"\n)\n\n' +
          'func main() {\n\tif err := driver.PProf(&driver.Options{}); err != nil {\n\t\tos.Exit(2)\n\t}\n}\n',
      );
      await execFileAsync('go', ['build', '-mod=vendor', '-o', 'pprof', '.'], {
        cwd: workDir,
        env: { ...process.env, GOFLAGS: '-mod=vendor', GOPROXY: 'off', GOCACHE: join(testCacheDir, 'go-build') },
        timeout: 300_000,
      });
    },
  });
}
