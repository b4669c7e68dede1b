// The files a postprocess run writes, each first under a `.partial` name next to its final one. Takes layout names,
// gives open files to write to, then either renames them all into place (commit) or deletes them (discard). So an
// aborted or failed run leaves no half-written file under a real name and keeps the outputs of an earlier run
// intact; the raw data (perf.data, target/) is never touched. Everything goes through OutputFolder: in a folder
// somebody sent, a link planted at a final or partial name, or a subfolder that is a link, is never written through.
import type { FileHandle } from 'node:fs/promises';
import { outputModes, type OutputFolder } from '../files/output-folder.js';
import { ContentHasher, HashWorker, type ContentHash } from './output-hash.js';

/** A file opened by openHashed(): what its writer writes goes to `file` and, as it is written, to `hasher`. */
export interface HashedFile {
  file: FileHandle;
  hasher: ContentHasher;
}

export class PartialOutputs {
  /** Final name → partial name, in the order opened. */
  private readonly pending = new Map<string, string>();
  /** Subfolders this run created (e.g. flamescope/), removed again by discard if left empty. */
  private readonly created: string[] = [];
  /** The size and hash of what this run wrote, by final name: the manifest need not read those files back. */
  private readonly hashes = new Map<string, Promise<ContentHash> | ContentHasher>();
  /** Hashes this run's files (off the main thread when asked); stopped by discard(). */
  readonly hashing: HashWorker;

  /** `hashOffThread`: hash on a worker thread (default false: on the calling thread). */
  constructor(
    private readonly folder: OutputFolder,
    { hashOffThread = false }: { hashOffThread?: boolean } = {},
  ) {
    this.hashing = new HashWorker(hashOffThread);
  }

  /** Creates the partial file for a layout name (e.g. `flamescope/perf_script.out`), and its folder. */
  async open(name: string, mode: number = outputModes.file): Promise<FileHandle> {
    const slash = name.lastIndexOf('/');
    if (slash > 0 && !(await this.folder.lstat(name.slice(0, slash)))) this.created.push(name.slice(0, slash));
    const partial = `${name}.partial`;
    const file = await this.folder.create(partial, mode);
    this.pending.set(name, partial);
    return file;
  }

  /** open(), with a hasher the file's writer gives every byte it writes to (see writtenHash). */
  async openHashed(name: string, mode: number = outputModes.file): Promise<HashedFile> {
    const file = await this.open(name, mode);
    const hasher = this.hashing.contentHasher();
    this.hashes.set(name, hasher);
    return { file, hasher };
  }

  async write(name: string, content: string | Uint8Array, mode: number = outputModes.file): Promise<void> {
    const bytes = typeof content === 'string' ? Buffer.from(content) : content;
    const file = await this.open(name, mode);
    try {
      await file.writeFile(bytes);
    } finally {
      await file.close();
    }
    // Bytes made here from a string are nobody else's: the worker may take them.
    const hash = this.hashing.contentHasher().whole(bytes, typeof content === 'string');
    hash.catch(() => {});
    this.hashes.set(name, hash);
  }

  /**
   * The size and SHA-256 of what this run wrote under `name` with write() or openHashed() (once its writer finished);
   * undefined for other names. Rejects when the hash could not be taken as it was written.
   */
  writtenHash(name: string): Promise<ContentHash> | undefined {
    const hash = this.hashes.get(name);
    if (hash === undefined) return undefined;
    return hash instanceof ContentHasher ? hash.digest() : hash;
  }

  /** The name `name` is written under until commit; undefined when it was not opened. */
  partialOf(name: string): string | undefined {
    return this.pending.get(name);
  }

  /** Renames every partial file to its final name; gives final paths by layout name. */
  async commit(): Promise<Record<string, string>> {
    const files: Record<string, string> = {};
    for (const [name, partial] of this.pending) {
      await this.folder.rename(partial, name);
      files[name] = `${this.folder.path}/${name}`;
    }
    this.pending.clear();
    this.created.length = 0;
    return files;
  }

  /** Deletes every partial file not yet committed. Never throws. */
  async discard(): Promise<void> {
    const partials = [...this.pending.values()];
    this.pending.clear();
    this.hashing.close();
    this.hashes.clear();
    await Promise.all(partials.map((path) => this.folder.remove(path).catch(() => undefined)));
    // Only empty folders go: one holding an earlier run's outputs is kept.
    for (const folder of this.created.splice(0).reverse()) await this.folder.removeEmptyFolder(folder);
  }
}
