// What a sidecar started by the launcher is told through its environment, for every command that writes results
// (collect, watch, dump, postprocess): a module of its own so that a command reads it without loading collect.
import type { Reporter } from './reporter.js';

/** What the launcher tells a sidecar, read by sidecarSettings. */
export interface SidecarSettings {
  owner?: { uid: number; gid: number };
  showPath?: (path: string) => string;
  launcherRun?: string;
}

/**
 * What the launcher (scripts/start-profiling-container.sh) tells a sidecar: PROFCPU_OUTPUT_OWNER=`uid:gid`, the user
 * the results are for; PROFCPU_HOST_OUTPUT=`HOST_DIR=SIDECAR_DIR`, where the sidecar's results folder is on the
 * host, so the paths printed are ones the user can open; PROFCPU_LAUNCHER_RUN, the launcher's name for this run.
 */
export function sidecarSettings(env: NodeJS.ProcessEnv, reporter: Pick<Reporter, 'warn'>): SidecarSettings {
  const settings: SidecarSettings = {};
  const owner = env['PROFCPU_OUTPUT_OWNER'];
  if (owner) {
    const match = /^(\d+):(\d+)$/.exec(owner);
    if (match) settings.owner = { uid: Number(match[1]), gid: Number(match[2]) };
    else reporter.warn(`PROFCPU_OUTPUT_OWNER=${owner} is not uid:gid: the results stay as created`);
  }
  const mapping = env['PROFCPU_HOST_OUTPUT'];
  const at = mapping?.lastIndexOf('=') ?? -1;
  if (mapping && at > 0) {
    const host = mapping.slice(0, at).replace(/\/+$/, '');
    const inside = mapping.slice(at + 1).replace(/\/+$/, '');
    settings.showPath = (path) =>
      path === inside || path.startsWith(`${inside}/`) ? host + path.slice(inside.length) : path;
  }
  const run = env['PROFCPU_LAUNCHER_RUN'];
  if (run) {
    if (/^[A-Za-z0-9._-]{1,64}$/.test(run)) settings.launcherRun = run;
    else reporter.warn(`PROFCPU_LAUNCHER_RUN=${run} is not a run name (letters, digits, . _ -): not recorded`);
  }
  return settings;
}
