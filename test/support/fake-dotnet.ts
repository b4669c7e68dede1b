// A fake `dotnet` for tests of the demo's choice: a host with a .NET runtime and no SDK, as a runtime-only image has.
// `dotnet --version` fails as the real one does then; `--list-runtimes` lists one runtime.
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Writes `<dir>/dotnet` and gives `dir`, to put in front of PATH. */
export async function runtimeOnlyDotnet(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const script = [
    '#!/bin/sh',
    'case "$1" in',
    '  --list-runtimes) echo "Microsoft.NETCore.App 10.0.12 [/usr/share/dotnet/shared/Microsoft.NETCore.App]" ;;',
    '  *) echo "No .NET SDKs were found." >&2; exit 145 ;;',
    'esac',
    '',
  ].join('\n');
  await writeFile(join(dir, 'dotnet'), script);
  await chmod(join(dir, 'dotnet'), 0o755);
  return dir;
}
