// The bounds unpack.ts puts on a prof.tar.gz somebody sent: a module of their own, so that the CLI's help can state
// them without loading the archive code (node-tar's parser).
import { folderLimits } from './tarball.js';

export interface UnpackLimits {
  /** Entries the archive may hold (folders included). Default: an output folder's, 10 000. */
  maxEntries: number;
  /** Folders below the top one. Default: an output folder's, 8. */
  maxDepth: number;
  /** Bytes of file contents, all entries together (the disk's free space less 256 MiB caps it further). 4 GiB. */
  maxBytes: number;
  /** Milliseconds the whole unpacking may take. Default 5 minutes. */
  deadlineMs: number;
}

export const defaultUnpackLimits: Readonly<UnpackLimits> = Object.freeze({
  maxEntries: folderLimits.maxEntries,
  maxDepth: folderLimits.maxDepth,
  maxBytes: 4 * 1024 ** 3,
  deadlineMs: 5 * 60_000,
});
