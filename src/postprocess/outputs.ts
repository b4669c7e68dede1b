// The files a postprocess run writes, each first under a `.partial` name next to its final one. Takes layout names,
// gives partial paths to write to, then either renames them all into place (commit) or deletes them (discard). So an
// aborted or failed run leaves no half-written file under a real name and keeps the outputs of an earlier run
// intact; the raw data (perf.data, target/) is never touched.
import { mkdir, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export class PartialOutputs {
  private readonly pending = new Map<string, string>();
  /** Folders this run created (e.g. flamescope/), removed again by discard if left empty. */
  private readonly created: string[] = [];

  constructor(private readonly dir: string) {}

  /** The partial path for a layout name (e.g. `flamescope/perf_script.out`), creating its folder. */
  async open(name: string): Promise<string> {
    const final = join(this.dir, name);
    const made = await mkdir(dirname(final), { recursive: true });
    if (made !== undefined) this.created.push(made);
    const partial = `${final}.partial`;
    this.pending.set(name, partial);
    return partial;
  }

  async write(name: string, content: string): Promise<void> {
    await writeFile(await this.open(name), content);
  }

  /** Renames every partial file to its final name; gives final paths by layout name. */
  async commit(): Promise<Record<string, string>> {
    const files: Record<string, string> = {};
    for (const [name, partial] of this.pending) {
      const final = join(this.dir, name);
      await rename(partial, final);
      files[name] = final;
    }
    this.pending.clear();
    this.created.length = 0;
    return files;
  }

  /** Deletes every partial file not yet committed. Never throws. */
  async discard(): Promise<void> {
    const partials = [...this.pending.values()];
    this.pending.clear();
    await Promise.all(partials.map((path) => rm(path, { force: true }).catch(() => undefined)));
    // Only empty folders go: rmdir fails on one holding an earlier run's outputs, which is then kept.
    for (const folder of this.created.splice(0).reverse()) await rmdir(folder).catch(() => undefined);
  }
}
