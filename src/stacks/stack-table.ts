// The folder's memory: interned frames and the distinct stacks built from them. Takes stacks as arrays of frame
// ids (one sample at a time), gives folded stacks and the naming-quality figures. Memory grows with the number of
// distinct frames and stacks, never with the number of samples: a stack is joined into a string only once, at
// the end.
import { sumCounts } from '../diagnostics.js';
import { addStack, type FoldedStacks } from './folded.js';
import { frameKinds, isManaged, isNamed, type FrameKind } from './frame-kind.js';

export interface NamingQuality {
  /** Samples kept. */
  samples: number;
  /** Samples with no frame of kind native-unnamed or unknown. */
  fullyNamed: number;
  /** Same, ignoring unnamed frames inside libcoreclr.so (the runtime, whose debug file is often missing). */
  fullyNamedExceptCoreclr: number;
  /**
   * Same, ignoring unnamed frames inside any native library or executable (libcoreclr.so, libc...): the samples
   * whose app and framework frames are all named. Debug files name the rest (`profcpu symbols`).
   */
  fullyNamedExceptLibraries: number;
  /** Samples with unnamed frames inside each native library, by file name. */
  unnamedLibraries: Record<string, number>;
  /** Frames of each kind, over all kept samples (a frame in 3 samples counts 3). */
  framesByKind: Record<FrameKind, number>;
  /** Samples by the kind of their leaf frame (unknown for a sample without frames). */
  samplesByLeafKind: Record<FrameKind, number>;
  /**
   * Samples whose user call chain stops short of a thread's start (isThreadStart): a function without a frame
   * pointer (glibc's, most distribution libraries') cut it, or the chain was longer than perf records. Samples with
   * kernel frames only are not counted.
   */
  brokenChains: number;
  /**
   * The same samples, by the file of the outermost frame perf reached in a known place (`[jit]` for managed code,
   * `[unknown]` when none is).
   */
  brokenChainsByFile: Record<string, number>;
}

/**
 * The frames a thread's call chain ends at when it is whole, as perf names them: glibc's (`_start` for the main
 * thread under DWARF unwinding, `__libc_start_call_main` and `__libc_start_main` above main under frame pointers,
 * `start_thread` and `clone3` for other threads) and musl's.
 */
const threadStarts = new Set([
  '_start',
  '__libc_start_main',
  '__libc_start_main_impl',
  '__libc_start_call_main',
  'start_thread',
  'clone',
  'clone3',
  '__clone',
  '__clone3',
  '__GI___clone',
  '__GI___clone3',
  '_start_c',
  'libc_start_main_stage2',
  'start',
  'start_c',
]);

/** Whether a frame's folded name is one a whole call chain ends at (thread start), annotations aside. */
export function isThreadStart(name: string): boolean {
  return threadStarts.has(name.replace(/_\[[kij]\]$/, ''));
}

/**
 * Whether `file` is a C library (glibc's libc.so.6, musl's libc.musl-*.so.1 and ld-musl-*.so.1). Every whole chain ends
 * in it (start_thread, clone3, __libc_start_call_main), so an unnamed outermost frame there, in a libc stripped of
 * its symbols and without its debug file, is taken for the thread's start: a chain cut by a missing frame pointer
 * ends instead at a return address read from wherever rbp pointed, most often in no mapping at all.
 */
function isCLibrary(file: string | undefined): boolean {
  return file !== undefined && /^(libc\.so\.\d+|libc\.musl-[\w-]+\.so\.1|ld-musl-[\w-]+\.so\.1)$/.test(file);
}

/** Naming figures with every count zero. */
export function emptyNamingQuality(): NamingQuality {
  const zero = () => Object.fromEntries(frameKinds.map((kind) => [kind, 0])) as Record<FrameKind, number>;
  return {
    samples: 0,
    fullyNamed: 0,
    fullyNamedExceptCoreclr: 0,
    fullyNamedExceptLibraries: 0,
    unnamedLibraries: {},
    framesByKind: zero(),
    samplesByLeafKind: zero(),
    brokenChains: 0,
    brokenChainsByFile: {},
  };
}

/** Adds `q`'s counts to `into`'s. */
export function addNamingQuality(into: NamingQuality, q: NamingQuality): void {
  into.samples += q.samples;
  into.fullyNamed += q.fullyNamed;
  into.fullyNamedExceptCoreclr += q.fullyNamedExceptCoreclr;
  into.fullyNamedExceptLibraries += q.fullyNamedExceptLibraries;
  into.unnamedLibraries = sumCounts([Object.entries(into.unnamedLibraries), Object.entries(q.unnamedLibraries)]);
  for (const kind of frameKinds) {
    into.framesByKind[kind] += q.framesByKind[kind];
    into.samplesByLeafKind[kind] += q.samplesByLeafKind[kind];
  }
  into.brokenChains += q.brokenChains;
  into.brokenChainsByFile = sumCounts([Object.entries(into.brokenChainsByFile), Object.entries(q.brokenChainsByFile)]);
}

/**
 * Distinct unnamed native frames kept apart by address at most (frames past it are kept by name alone, as folded):
 * each address is one frame and splits the stacks through it, so a target with millions of distinct unnamed addresses
 * must not grow the fold with them.
 */
export const maxAddressedFrames = 1 << 16;

/** Frames by id: their folded name, and kind (undefined for root frames, the process names). */
export class FrameTable {
  readonly names: string[] = [];
  readonly kinds: (FrameKind | undefined)[] = [];
  readonly coreclr: boolean[] = [];
  readonly library: (string | undefined)[] = [];
  /** The native file of each frame, as the first line interned as it named it (a name is rarely in two files). */
  readonly file: (string | undefined)[] = [];
  /** The address of an unnamed native frame kept apart by it (see intern), as perf printed it. */
  readonly address: (string | undefined)[] = [];
  private readonly ids = new Map<string, number>();
  private addressed = 0;

  /**
   * The id of a frame. `address`: an unnamed native frame's address, which keeps it apart from the frames of the same
   * name at other addresses (up to maxAddressedFrames of them); its name folds as theirs.
   */
  intern(
    name: string,
    kind: FrameKind | undefined,
    coreclr: boolean,
    library?: string,
    file?: string,
    address?: string,
  ): number {
    const base = `${kind ?? 'root'}\0${coreclr ? 1 : 0}\0${library ?? ''}\0${name}`;
    const key = address === undefined ? base : `${base}\0${address}`;
    let id = this.ids.get(key);
    if (id !== undefined) return id;
    if (address !== undefined && this.addressed >= maxAddressedFrames)
      return this.intern(name, kind, coreclr, library, file);
    id = this.names.length;
    this.names.push(name);
    this.kinds.push(kind);
    this.coreclr.push(coreclr);
    this.library.push(library);
    this.file.push(file);
    this.address.push(address);
    if (address !== undefined) this.addressed++;
    this.ids.set(key, id);
    return id;
  }

  /** The native file of each frame that has one, by name (the first file a name was interned with). */
  files(): Map<string, string> {
    const files = new Map<string, string>();
    for (let id = 0; id < this.names.length; id++) {
      const file = this.file[id];
      if (file !== undefined && !files.has(this.names[id]!)) files.set(this.names[id]!, file);
    }
    return files;
  }
}

/**
 * Part of a folded stack's weight whose unnamed native frames were at these addresses: `stack` is the folded stack (a
 * key of the folded stacks, which counts this weight too), `addresses` each of its frames' address (root first, as
 * the stack's frames split at `;`), undefined for frames without one.
 */
export interface AddressedStack {
  stack: string;
  addresses: (string | undefined)[];
  weight: number;
}

export interface StackEntry {
  /** Root first. */
  ids: Int32Array;
  weight: number;
  samples: number;
  next: StackEntry | undefined;
}

/** Distinct stacks, found by a hash of their frame ids. */
export class StackTable {
  private readonly buckets = new Map<number, StackEntry>();
  private readonly entries: StackEntry[] = [];

  /** Adds one sample: `root`, then `leafFirst[n-1]` (outermost) down to `leafFirst[0]` (leaf); gives its stack. */
  add(root: number, leafFirst: Int32Array, n: number, weight: number): StackEntry {
    let h = Math.imul(0x811c9dc5 ^ root, 16777619) ^ n;
    for (let i = n - 1; i >= 0; i--) h = Math.imul(h ^ leafFirst[i]!, 16777619);
    let entry = this.buckets.get(h);
    const head = entry;
    while (entry !== undefined && !sameStack(entry.ids, root, leafFirst, n)) entry = entry.next;
    if (entry === undefined) {
      const ids = new Int32Array(n + 1);
      ids[0] = root;
      for (let i = 0; i < n; i++) ids[i + 1] = leafFirst[n - 1 - i]!;
      entry = { ids, weight: 0, samples: 0, next: head };
      this.buckets.set(h, entry);
      this.entries.push(entry);
    }
    entry.weight += weight;
    entry.samples++;
    return entry;
  }

  /** Adds one more sample of a stack add() gave. */
  count(entry: StackEntry, weight: number): void {
    entry.weight += weight;
    entry.samples++;
  }

  get size(): number {
    return this.entries.length;
  }

  /**
   * The folded stacks (stacks that join to the same text are summed), and the weight of those holding a frame kept
   * apart by its address, by address (none when no frame was).
   */
  folded(frames: FrameTable): { stacks: FoldedStacks; addressed: AddressedStack[] } {
    const stacks: FoldedStacks = new Map();
    const addressed: AddressedStack[] = [];
    for (const entry of this.entries) {
      let text = frames.names[entry.ids[0]!]!;
      let anyAddress = false;
      for (let i = 1; i < entry.ids.length; i++) {
        text += `;${frames.names[entry.ids[i]!]!}`;
        if (frames.address[entry.ids[i]!] !== undefined) anyAddress = true;
      }
      addStack(stacks, text, entry.weight);
      if (anyAddress)
        addressed.push({
          stack: text,
          addresses: Array.from(entry.ids, (id) => frames.address[id]),
          weight: entry.weight,
        });
    }
    return { stacks, addressed };
  }

  quality(frames: FrameTable): NamingQuality {
    const quality = emptyNamingQuality();
    const libraries = new Set<string>();
    const unnamedLibraries = new Map<string, number>();
    const brokenByFile = new Map<string, number>();
    for (const { ids, samples } of this.entries) {
      let named = true;
      let namedExceptCoreclr = true;
      let namedExceptLibraries = true;
      libraries.clear();
      for (let i = 1; i < ids.length; i++) {
        const kind = frames.kinds[ids[i]!] ?? 'unknown';
        quality.framesByKind[kind] += samples;
        if (!isNamed(kind)) {
          named = false;
          if (!frames.coreclr[ids[i]!]) namedExceptCoreclr = false;
          const library = frames.library[ids[i]!];
          if (library === undefined) namedExceptLibraries = false;
          else libraries.add(library);
        }
      }
      if (ids.length > 1) this.countChain(frames, ids, samples, quality, brokenByFile);
      const leaf = ids.length > 1 ? (frames.kinds[ids[ids.length - 1]!] ?? 'unknown') : 'unknown';
      quality.samplesByLeafKind[leaf] += samples;
      quality.samples += samples;
      if (named) quality.fullyNamed += samples;
      if (namedExceptCoreclr) quality.fullyNamedExceptCoreclr += samples;
      if (namedExceptLibraries) quality.fullyNamedExceptLibraries += samples;
      for (const library of libraries) unnamedLibraries.set(library, (unnamedLibraries.get(library) ?? 0) + samples);
    }
    // Counted in maps: a file is named by the target (`__proto__`, `toString`), never a key of a plain object's.
    quality.unnamedLibraries = sumCounts([unnamedLibraries]);
    quality.brokenChainsByFile = sumCounts([brokenByFile]);
    return quality;
  }

  /**
   * Counts the stack `ids` (root first) as broken unless its outermost frame is a thread's start or the kernel's, by
   * the file of the outermost frame in a known place: frames past it that are in no mapping are what perf read where
   * a frame kept no frame pointer (that frame's, or a caller's that its leaf did not touch).
   */
  private countChain(
    frames: FrameTable,
    ids: Int32Array,
    samples: number,
    quality: NamingQuality,
    byFile: Map<string, number>,
  ): void {
    const outermost = ids[1]!;
    const kind = frames.kinds[outermost] ?? 'unknown';
    if (kind === 'kernel' || isThreadStart(frames.names[outermost]!)) return;
    // Under the thread's start there is at least one frame: a lone unnamed libc frame is a hot libc function cut off.
    if (kind === 'native-unnamed' && ids.length > 2 && isCLibrary(frames.file[outermost])) return;
    // A stripped executable's unnamed _start, which calls __libc_start_main (DWARF unwinding reaches it).
    if (kind === 'native-unnamed' && ids.length > 2 && isThreadStart(frames.names[ids[2]!]!)) return;
    quality.brokenChains += samples;
    let at = 1;
    while (at + 1 < ids.length && (frames.kinds[ids[at]!] ?? 'unknown') === 'unknown') at++;
    const where = ids[at]!;
    const whereKind = frames.kinds[where] ?? 'unknown';
    const file = frames.file[where] ?? (isManaged(whereKind) ? '[jit]' : '[unknown]');
    byFile.set(file, (byFile.get(file) ?? 0) + samples);
  }
}

function sameStack(ids: Int32Array, root: number, leafFirst: Int32Array, n: number): boolean {
  if (ids.length !== n + 1 || ids[0] !== root) return false;
  for (let i = 0; i < n; i++) if (ids[i + 1] !== leafFirst[n - 1 - i]) return false;
  return true;
}
