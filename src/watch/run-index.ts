// The watch folder's record of what was collected and why: `index.json` (every run: rule, trigger reason and figures,
// target, outcome, size, and when retention removed it) and `index.html` (the same as a table linking each run's flame
// graph), both rewritten after each run through the output folder (never through a link), and retention: at most
// `maxRuns` runs and `maxBytes` bytes kept, oldest removed first, the newest always kept.
import { lchown, lstat, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { OutputFolder, outputModes } from '../files/output-folder.js';
import type { Retention } from './rules.js';

export interface RunEntry {
  /** The run's folder name in the watch folder. */
  id: string;
  rule: string;
  action: string;
  target: { pid: number; comm: string; commandLine: string };
  trigger: { type: string; reason: string; figures: Record<string, number | string> };
  startedAt: string;
  endedAt?: string;
  status: 'running' | 'done' | 'failed' | 'discarded';
  /** One line on the outcome: samples and seconds, or the error. */
  summary?: string;
  figures?: Record<string, number | string>;
  /** Files of the run worth linking, relative to the watch folder. */
  links?: Record<string, string>;
  bytes?: number;
  /** When retention removed the run's folder. */
  removedAt?: string;
}

export interface Owner {
  uid: number;
  gid: number;
}

export const indexFiles = Object.freeze({ json: 'index.json', html: 'index.html' });

/** Entries kept in the index at most: the oldest removed runs are forgotten past it. */
export const maxIndexEntries = 1000;

/**
 * Bytes on disk under `dir` (allocated blocks, as du counts: the kept binaries are mostly holes), counting at most
 * `maxEntries` entries and `maxDepth` levels (a run has a few hundred).
 */
export async function folderBytes(dir: string, limits = { maxEntries: 100_000, maxDepth: 8 }): Promise<number> {
  let total = 0;
  let entries = 0;
  const walk = async (path: string, depth: number): Promise<void> => {
    const names = await readdir(path).catch(() => [] as string[]);
    for (const name of names) {
      if (++entries > limits.maxEntries) return;
      const stat = await lstat(join(path, name)).catch(() => undefined);
      if (!stat) continue;
      if (stat.isDirectory()) {
        if (depth < limits.maxDepth) await walk(join(path, name), depth + 1);
      } else total += stat.blocks * 512;
    }
  };
  await walk(dir, 0);
  return total;
}

export class RunIndex {
  private constructor(
    private readonly folder: OutputFolder,
    readonly entries: RunEntry[],
    private readonly owner: Owner | undefined,
  ) {}

  /** Opens the watch folder's index, carrying on from an earlier watch's index.json when one is there. */
  static async open(folder: OutputFolder, owner?: Owner): Promise<RunIndex> {
    const earlier = await folder
      .read(indexFiles.json, { maxBytes: 16 << 20, timeoutMs: 10_000 })
      .then((r) => JSON.parse(r.bytes.toString('utf8')) as { runs?: unknown })
      .catch(() => undefined);
    const runs = Array.isArray(earlier?.runs) ? (earlier.runs as RunEntry[]).filter(isEntry) : [];
    // A run an earlier watch left under way was cut short (the sidecar killed): said so, not left running.
    for (const run of runs) if (run.status === 'running') run.status = 'discarded';
    return new RunIndex(folder, runs.slice(-maxIndexEntries), owner);
  }

  add(entry: RunEntry): void {
    this.entries.push(entry);
    // Forget the oldest removed runs first; runs still on disk are never forgotten.
    while (this.entries.length > maxIndexEntries) {
      const at = this.entries.findIndex((e) => e.removedAt !== undefined);
      if (at < 0) break;
      this.entries.splice(at, 1);
    }
  }

  /** Removes the oldest runs until the kept ones fit `retention`; gives the ids removed. */
  async applyRetention(retention: Retention, now: Date): Promise<string[]> {
    const kept = this.entries.filter((e) => e.removedAt === undefined && e.status !== 'running');
    let bytes = kept.reduce((sum, e) => sum + (e.bytes ?? 0), 0);
    const removed: string[] = [];
    for (const entry of kept.slice(0, -1)) {
      if (kept.length - removed.length <= retention.maxRuns && bytes <= retention.maxBytes) break;
      await rm(join(this.folder.path, entry.id), { recursive: true, force: true });
      entry.removedAt = now.toISOString();
      bytes -= entry.bytes ?? 0;
      removed.push(entry.id);
    }
    return removed;
  }

  /** Writes index.json and index.html afresh (each through a temporary name, then renamed). */
  async save(): Promise<void> {
    const json = `${JSON.stringify({ runs: this.entries }, null, 2)}\n`;
    await this.replace(indexFiles.json, json);
    await this.replace(indexFiles.html, indexHtml(this.entries));
  }

  private async replace(name: string, text: string): Promise<void> {
    const temporary = `.${name}.tmp`;
    await this.folder.remove(temporary);
    await this.folder.writeFile(temporary, text, outputModes.file);
    await this.folder.rename(temporary, name);
    // Given to the user the results are for (the launcher's PROFCPU_OUTPUT_OWNER); lchown never follows a link.
    if (this.owner) await lchown(join(this.folder.path, name), this.owner.uid, this.owner.gid);
  }
}

function isEntry(value: unknown): value is RunEntry {
  const e = value as Partial<RunEntry> | null;
  return (
    typeof e === 'object' &&
    e !== null &&
    typeof e.id === 'string' &&
    /^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(e.id) &&
    // Retention removes a run's folder by its id: never one of the watch folder's own entries.
    ![indexFiles.json, indexFiles.html, 'triggers'].includes(e.id) &&
    typeof e.rule === 'string' &&
    typeof e.status === 'string'
  );
}

const escapes: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text for HTML: markup characters escaped, control characters made visible (names come from the target). */
export function htmlText(text: string): string {
  return text
    .replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)
    .replace(/[&<>"']/g, (c) => escapes[c]!);
}

const figuresText = (figures: Record<string, number | string> | undefined) =>
  Object.entries(figures ?? {})
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');

/** index.html: newest run first, one row each; links only to files inside the run's own folder. */
export function indexHtml(entries: readonly RunEntry[]): string {
  const rows = [...entries].reverse().map((e) => {
    const links = e.removedAt
      ? `removed ${htmlText(e.removedAt)}`
      : Object.entries(e.links ?? {})
          .filter(([, path]) => path.startsWith(`${e.id}/`) && !path.includes('..'))
          .map(([label, path]) => `<a href="${htmlText(encodeURI(path))}">${htmlText(label)}</a>`)
          .join(' ');
    const cells = [
      htmlText(e.startedAt),
      htmlText(e.rule),
      htmlText(e.action),
      htmlText(`${e.target.pid} ${e.target.comm}`),
      `${htmlText(e.trigger.reason)}<br><small>${htmlText(figuresText(e.trigger.figures))}</small>`,
      `${htmlText(e.status)}${e.summary ? `<br><small>${htmlText(e.summary)}</small>` : ''}`,
      links || (e.status === 'done' ? `<a href="${htmlText(encodeURI(`${e.id}/`))}">folder</a>` : ''),
    ];
    return `<tr>${cells.map((c) => `<td>${c}</td>`).join('')}</tr>`;
  });
  return [
    '<!DOCTYPE html>',
    '<html lang="en"><head><meta charset="utf-8"><title>profcpu watch</title>',
    '<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}</style>',
    '</head><body><h1>profcpu watch: runs</h1>',
    '<table><thead><tr><th>started</th><th>rule</th><th>action</th><th>process</th><th>trigger</th><th>outcome</th><th>files</th></tr></thead><tbody>',
    ...rows,
    '</tbody></table></body></html>',
    '',
  ].join('\n');
}
