// Versions, for the manifest and for diagnosing an output folder made elsewhere: the perf on this machine (`perf version`),
// the running kernel's release, and what a recording's own header says about the machine that recorded it (the `#`
// lines `perf script --header` prints before the first sample).
import { release } from 'node:os';
import type { PerfExecOptions } from './exec.js';

/** The version `perf version` prints (`perf version 6.1.187` → `6.1.187`), or its whole first line if unusual. */
export async function perfVersion(options: PerfExecOptions = {}): Promise<string> {
  // Loaded when asked: the manifest's other facts (kernelRelease) need no process-running code.
  const { runPerf } = await import('./exec.js');
  const { stdout } = await runPerf(['version'], options);
  return parsePerfVersion(stdout);
}

export function parsePerfVersion(text: string): string {
  const first = text.trim().split('\n')[0]?.trim() ?? '';
  const match = /^perf version\s+(\S+)/.exec(first);
  return match ? match[1]! : first;
}

/** Whether a version (`6.1.187`, `6.18.44-fc-v669`) is `major.minor` or later; false when it is not one. */
export function versionAtLeast(version: string, major: number, minor: number): boolean {
  const match = /^(\d+)\.(\d+)/.exec(version);
  if (!match) return false;
  const [found, foundMinor] = [Number(match[1]), Number(match[2])];
  return found > major || (found === major && foundMinor >= minor);
}

/** The running kernel's release, as `uname -r` prints it. */
export function kernelRelease(): string {
  return release();
}

/** What a perf.data header says about the recording; fields perf did not write are absent. */
export interface RecordingHeader {
  capturedOn?: string;
  hostname?: string;
  osRelease?: string;
  perfVersion?: string;
  arch?: string;
  cpusOnline?: number;
  /** The `perf record` command line, as perf stored it. */
  cmdline?: string;
  /** Event names, in the order perf lists them. */
  events?: string[];
  firstSampleTime?: number;
  lastSampleTime?: number;
  sampleDurationMs?: number;
  /** `samples` when the times were read from the samples, perf.data's header having none. */
  sampleTimesFrom?: 'samples';
}

/**
 * Reads the `# key : value` lines of `perf script --header` output (perf 5.x-6.x spelling). Lines that are not header
 * lines are ignored, so the caller may pass everything up to the first sample.
 */
export function parseRecordingHeader(lines: Iterable<string>): RecordingHeader {
  const header: RecordingHeader = {};
  for (const line of lines) {
    const match = /^#\s*([a-z][a-z ]*?)\s*:\s?(.*)$/.exec(line);
    if (!match) continue;
    const value = match[2]!.trim();
    switch (match[1]) {
      case 'captured on':
        header.capturedOn = value;
        break;
      case 'hostname':
        header.hostname = value;
        break;
      case 'os release':
        header.osRelease = value;
        break;
      case 'perf version':
        header.perfVersion = value;
        break;
      case 'arch':
        header.arch = value;
        break;
      case 'nrcpus online':
        header.cpusOnline = finite(Number(value));
        break;
      case 'cmdline':
        header.cmdline = value;
        break;
      case 'event': {
        const name = /^name = ([^,]+)/.exec(value)?.[1]?.trim();
        if (name) (header.events ??= []).push(name);
        break;
      }
      case 'time of first sample':
        header.firstSampleTime = finite(Number(value));
        break;
      case 'time of last sample':
        header.lastSampleTime = finite(Number(value));
        break;
      case 'sample duration':
        header.sampleDurationMs = finite(Number(value.replace(/\s*ms$/, '')));
        break;
    }
  }
  return Object.fromEntries(Object.entries(header).filter(([, v]) => v !== undefined)) as RecordingHeader;
}

function finite(n: number): number | undefined {
  return Number.isFinite(n) ? n : undefined;
}
