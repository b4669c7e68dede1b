// Checks an output folder before perf is started, so that the common mistakes get a precise message and a remedy
// rather than perf's own: no folder, no perf.data, an empty perf.data, a perf.data perf will refuse because another
// user owns it. Takes the folder, gives the perf.data path and its stat.
import type { Stats } from 'node:fs';
import { lstat, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { layout } from '../output/layout.js';
import type { Warn } from '../diagnostics.js';
import { ProfcpuError } from '../error.js';
import type { OutputFolder } from '../files/output-folder.js';
import { perfDataState, recoverPerfData, type Recovered } from '../perf/recover.js';

const recordHint = 'Point --dir at a folder written by `profcpu collect`, or record one with `profcpu collect`.';

export async function checkPerfData(
  dir: string,
  options: { force: boolean; euid: number | undefined },
): Promise<{ path: string; stat: Stats }> {
  const dirStat = await stat(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT')
      throw new ProfcpuError('NO_PERF_DATA', `${dir} does not exist`, { remedy: recordHint });
    throw new ProfcpuError('IO', `cannot read ${dir}: ${error.message}`, { cause: error });
  });
  if (!dirStat.isDirectory()) {
    throw new ProfcpuError('NO_PERF_DATA', `${dir} is not a folder`, {
      remedy: `Pass the folder that holds ${layout.perfData}, not a file. ${recordHint}`,
    });
  }
  const path = join(dir, layout.perfData);
  // lstat: a perf.data that is a link (to a FIFO, a device, a file elsewhere) is refused, not followed.
  const fileStat = await lstat(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') {
      throw new ProfcpuError('NO_PERF_DATA', `no ${layout.perfData} in ${dir}`, { remedy: recordHint });
    }
    throw new ProfcpuError('IO', `cannot read ${path}: ${error.message}`, { cause: error });
  });
  if (!fileStat.isFile()) {
    const what = fileStat.isSymbolicLink() ? 'a symbolic link' : 'not a regular file';
    throw new ProfcpuError('NO_PERF_DATA', `${path} is ${what}`, {
      remedy: `perf.data must be a regular file in the folder. ${recordHint}`,
    });
  }
  if (fileStat.size === 0) {
    throw new ProfcpuError('NO_PERF_DATA', `${path} is empty: perf record did not get to write it`, {
      remedy: 'Record again and let perf record finish (stop it with Ctrl-C or SIGINT, not SIGKILL).',
    });
  }
  // perf itself refuses files owned by anyone but the current user or root, unless given -f.
  const euid = options.euid;
  if (!options.force && euid !== undefined && fileStat.uid !== euid && fileStat.uid !== 0) {
    throw new ProfcpuError(
      'PERF_DATA_OWNER',
      `${path} belongs to uid ${fileStat.uid}, not to you (uid ${euid}) or root: perf refuses to read it`,
      {
        remedy:
          `Take it over with \`chown ${euid} ${path}\` (or run profcpu as uid ${fileStat.uid} or root), ` +
          'or pass --force to make perf read it anyway if you trust the file.',
      },
    );
  }
  return { path, stat: fileStat };
}

/**
 * Finishes a perf.data whose perf was killed before it could (the target's stop ended the sidecar with it): its whole
 * records are kept and its header completed (src/perf/recover.ts). Undefined when perf finished it.
 */
export async function finishPerfData(
  folder: OutputFolder,
  warn: Warn,
  signal?: AbortSignal,
): Promise<Recovered | undefined> {
  if ((await perfDataState(folder, layout.perfData)) !== 'unfinished') return undefined;
  const recovered = await recoverPerfData(folder, layout.perfData, signal);
  warn(
    `${layout.perfData} was not finished (perf was killed, as when the target's container stops): ` +
      `${recovered.samples === undefined ? 'its whole (compressed) records' : `${recovered.samples} samples`} recovered${recovered.cutBytes > 0 ? `, ${recovered.cutBytes} bytes of a record cut short left out` : ''}`,
  );
  return recovered;
}
