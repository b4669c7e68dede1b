// The .NET version of a self-contained app: its runtime (libcoreclr.so) lies in the app's own folder, not under
// `.../Microsoft.NETCore.App/<version>/`, so the path says nothing. The SDK writes the runtime it bundled into the
// app's `<name>.runtimeconfig.json` beside it (`runtimeOptions.includedFrameworks`, e.g. Microsoft.NETCore.App
// 8.0.31). A folder and a file from the target, so the listing is bounded, the file capped, the JSON parsed
// defensively and the version accepted only in its usual form.
import { dirname, posix } from 'node:path';
import type { TargetFiles } from './target-files.js';

/** Largest runtimeconfig.json read: the SDK writes about 1 KB. */
const maxConfigBytes = 64 << 10;
/** runtimeconfig.json files tried at most (a folder normally holds one). */
const maxConfigs = 4;

/** The Microsoft.NETCore.App version a self-contained runtimeconfig.json names, or undefined. */
export function includedRuntimeVersion(text: string): string | undefined {
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch {
    return undefined;
  }
  const frameworks = (config as { runtimeOptions?: { includedFrameworks?: unknown } } | null)?.runtimeOptions
    ?.includedFrameworks;
  if (!Array.isArray(frameworks)) return undefined;
  for (const framework of frameworks.slice(0, 16) as unknown[]) {
    const { name, version } = (framework ?? {}) as { name?: unknown; version?: unknown };
    if (name === 'Microsoft.NETCore.App' && typeof version === 'string' && /^\d+\.\d+\.\d+[\w.+-]{0,64}$/.test(version))
      return version;
  }
  return undefined;
}

/** The version of the runtime bundled beside `coreclrPath` (a path in the target), or undefined when unknown. */
export async function selfContainedVersion(files: TargetFiles, coreclrPath: string): Promise<string | undefined> {
  const folder = dirname(coreclrPath);
  const listing = await files.list(folder).catch(() => undefined);
  const configs = (listing?.names ?? []).filter((name) => name.endsWith('.runtimeconfig.json')).sort();
  for (const name of configs.slice(0, maxConfigs)) {
    const read = await files.read(posix.join(folder, name), maxConfigBytes).catch(() => undefined);
    if (!read || read.truncated) continue;
    const version = includedRuntimeVersion(read.bytes.toString('utf8'));
    if (version) return version;
  }
  return undefined;
}
