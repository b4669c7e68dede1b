// Executables of this machine by name, as a shell or execa finds them: takes a name and an environment, gives the
// path of the first regular, executable file of that name in the PATH's folders, or undefined. Only reads the
// folders' entries; runs nothing.
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { delimiter, join } from 'node:path';

export interface PathLookupOptions {
  /** Only the PATH's absolute folders (a relative one means the working directory, which a caller may distrust). */
  absoluteOnly?: boolean;
}

/** The first regular, executable file `name` in `env`'s PATH, or undefined. */
export async function executableOnPath(
  name: string,
  env: Readonly<Record<string, string | undefined>>,
  { absoluteOnly = false }: PathLookupOptions = {},
): Promise<string | undefined> {
  const folders = (env['PATH'] ?? '')
    .split(delimiter)
    .filter((folder) => folder !== '' && (!absoluteOnly || folder.startsWith('/')));
  for (const folder of folders) {
    const candidate = join(folder, name);
    if (await isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

/** Whether `path` is a regular file this process may execute. */
export async function isExecutableFile(path: string): Promise<boolean> {
  const info = await stat(path).catch(() => undefined);
  if (!info?.isFile()) return false;
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}
