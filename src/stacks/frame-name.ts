// One `perf script` frame to the folded frame(s) it stands for: takes the address, symbol text and dso of a frame
// line, gives names and kinds. Runs once per distinct frame line (the folder caches the result), so it may work on
// strings. Two rule sets: `compat` reproduces stackcollapse-perf.pl's tidying exactly; the default one is
// .NET-aware (readable managed names, frames perf left unnamed offered to a resolver, kinds always annotated).
import { isManaged, type FrameKind } from './frame-kind.js';
import { formatManagedName, matchingOpen, type ManagedNameOptions } from './managed-name.js';

/**
 * `text` with C0 control characters and DEL made `?`: a name or line that came from the target (or a received file)
 * stays one line wherever it is written, and moves no cursor.
 */
export function oneLine(text: string): string {
  return text.replace(/[\x00-\x1f\x7f]/g, '?');
}

/**
 * Names frames perf left unnamed (symbol `[unknown]`), e.g. .NET JIT code in memfd:doublemapper mappings or
 * ReadyToRun code in .dll mappings; implemented in src/dotnet/naming/. `ip` is the address as perf script printed it,
 * `dso` the text in its parentheses, `pid` the sample's pid when perf printed one (`pid/tid`; with the default
 * fields perf prints only the tid). Asked once per distinct (pid, frame line); never for kernel frames.
 */
export interface FrameResolver {
  resolve(frame: UnnamedFrame): ResolvedFrame | undefined;
}

/** A frame perf printed without a name. */
export interface UnnamedFrame {
  /** The sample's pid as perf script printed it, if it printed one. */
  pid: number | undefined;
  /** The address exactly as perf script printed it. */
  ip: bigint;
  /** The mapping's name as perf script printed it between parentheses. */
  dso: string;
}

export interface ResolvedFrame {
  /** The raw .NET name, as the runtime logged it (e.g. `instance void [Mod] Ns.Type::Method(...)[OptimizedTier1]`). */
  name: string;
  kind: FrameKind;
}

export interface FrameNamingOptions {
  compat: boolean;
  annotateKernel: boolean;
  annotateJit: boolean;
  addrs: boolean;
  keepNativeArguments: boolean;
  managed: ManagedNameOptions;
}

export interface FrameLine {
  /** The address as printed, without `0x`. */
  ip: string;
  /** The symbol text, offset included (`main+0x1a`). */
  sym: string;
  /** The text in parentheses, or undefined when the line has none (`perf script -F ip,sym`). */
  dso: string | undefined;
  pid: number | undefined;
  /** The sample's root frame starts with `java` (stackcollapse-perf.pl then drops the `L` of Java class names). */
  javaComm: boolean;
}

export interface NamedFrame {
  name: string;
  kind: FrameKind;
  /** Unnamed code inside libcoreclr.so (the runtime itself: its debug file is usually missing). */
  coreclr: boolean;
  /**
   * For unnamed code inside a native library or executable (not a .NET image, a perf map or anonymous memory): the
   * file's name. A debug file names these; the app's and the framework's own code does not depend on them.
   */
  library?: string;
  /** The file of a native frame, named or not (a library's or executable's name): where a call chain may break. */
  file?: string;
  /**
   * For unnamed code inside a native file: the address as perf printed it (hex, an offset into the file for perf 6.1,
   * the absolute address for newer perf), so that a profile can carry it to whoever names it later (pprof).
   */
  ip?: string;
}

const offsetSuffix = /\+0x[\da-f]+$/;
const goMethod = /\.\(.*\)\./;
const argumentsAfterParen = /\((?!anonymous namespace\)).*/;
const quotes = /["']/g;
const hexAddress = /^[0-9a-fA-F]+$/;
const perfMapDso = /(^|\/)perf-\d+\.map$/;
const jittedDso = /(^|\/)jitted-\d+-\d+\.so$/;

/** The frames one line stands for, leaf first (`outer->inlined` gives the inlined one second). */
export function nameFrameLine(
  line: FrameLine,
  options: FrameNamingOptions,
  resolver: FrameResolver | undefined,
): NamedFrame[] {
  const sym = line.sym.replace(offsetSuffix, '');
  if (sym.startsWith('(')) return [];
  // A return address of 0 with no mapping is where a frame-pointer chain ran out (code without frame pointers
  // below it), not code: the readable mode ends the stack there; stackcollapse-perf.pl keeps it as `[unknown]`.
  if (!options.compat && line.dso === '[unknown]' && isZeroAddress(line.ip) && isUnnamed(sym)) return [];
  let pieces = sym.split('->');
  while (pieces.length > 0 && pieces[pieces.length - 1] === '') pieces.pop();
  // stackcollapse-perf.pl keeps an empty piece (`->f` gives an empty frame); the readable mode drops it.
  if (!options.compat) pieces = pieces.filter((piece) => piece !== '');
  const out: NamedFrame[] = [];
  for (let i = 0; i < pieces.length; i++) {
    const frame = options.compat
      ? compatFrame(pieces[i]!, line, options)
      : readableFrame(pieces[i]!, line, options, resolver);
    if (i > 0) {
      if (!frame.name.includes('_[i]')) frame.name += '_[i]';
    } else if (options.annotateKernel && (options.compat ? compatKernelDso(line.dso) : frame.kind === 'kernel')) {
      frame.name += '_[k]';
    } else if (options.annotateJit && (options.compat ? compatJitDso(line.dso) : isManaged(frame.kind))) {
      if (!frame.name.includes('_[j]')) frame.name += '_[j]';
    }
    out.push(frame);
  }
  return out;
}

function compatFrame(piece: string, line: FrameLine, options: FrameNamingOptions): NamedFrame {
  let name = piece;
  const dso = line.dso ?? '';
  if (name === '[unknown]') {
    const base = dso === '[unknown]' ? 'unknown' : dso.replace(/.*\//, '');
    name = options.addrs ? `[${base} <${line.ip}>]` : `[${base}]`;
  }
  name = name.replaceAll(';', ':');
  if (!goMethod.test(name)) name = name.replace(argumentsAfterParen, '');
  name = name.replace(quotes, '');
  if (line.javaComm && name.includes('/')) name = name.replace(/^L/, '');
  const kind = classify(piece, line);
  return { name, kind, coreclr: isCoreclr(piece, line), ...libraryOf(kind, line), ...fileOf(kind, line) };
}

function readableFrame(
  piece: string,
  line: FrameLine,
  options: FrameNamingOptions,
  resolver: FrameResolver | undefined,
): NamedFrame {
  let kind = classify(piece, line);
  let name = piece;
  if (isUnnamed(piece)) {
    const resolved = resolver && kind !== 'kernel' ? resolve(resolver, line) : undefined;
    if (resolved) {
      name = resolved.name;
      kind = resolved.kind;
    } else {
      // A bracketed dso (`[vdso]`) is not bracketed twice: `[[vdso]]` would read as a module's tag.
      const file = line.dso === undefined || line.dso === '[unknown]' ? 'unknown' : basename(line.dso);
      const base = /^\[.*\]$/.test(file) ? file.slice(1, -1) : file;
      name = options.addrs ? `[${base} <${line.ip}>]` : `[${base}]`;
    }
  }
  if (isManaged(kind)) name = formatManagedName(name, options.managed);
  else if (kind === 'native') {
    name = withoutSymbolVersion(name);
    if (!options.keepNativeArguments) name = withoutTrailingArguments(name);
  }
  const coreclr = kind !== 'kernel' && isCoreclr(piece, line);
  const file = fileOf(kind, line);
  const ip =
    kind === 'native-unnamed' && file.file !== undefined && line.ip.length <= 16 && hexAddress.test(line.ip)
      ? { ip: line.ip }
      : {};
  return { name: name.replaceAll(';', ':'), kind, coreclr, ...libraryOf(kind, line), ...file, ...ip };
}

function isZeroAddress(ip: string): boolean {
  return /^(0x)?0+$/.test(ip);
}

/**
 * `pthread_cond_signal@@GLIBC_2.3.2` to `pthread_cond_signal`: the version perf appends to a versioned dynamic
 * symbol says which ABI the library exports, not which function ran.
 */
function withoutSymbolVersion(name: string): string {
  return name.replace(/@@?[A-Za-z][A-Za-z0-9_]*_[0-9][0-9.]*$/, '');
}

/** `ns::f(int) const` to `ns::f`; parentheses inside the name (`(anonymous namespace)`, Go's `(*T)`) stay. */
function withoutTrailingArguments(name: string): string {
  const body = name.endsWith(' const') ? name.slice(0, -' const'.length) : name;
  if (!body.endsWith(')')) return name;
  const open = matchingOpen(body, body.length - 1);
  return open > 0 ? body.slice(0, open) : name;
}

function resolve(resolver: FrameResolver, line: FrameLine): { name: string; kind: FrameKind } | undefined {
  if (!hexAddress.test(line.ip)) return undefined;
  return resolver.resolve({ pid: line.pid, ip: BigInt(`0x${line.ip}`), dso: line.dso ?? '[unknown]' });
}

/**
 * kernel: a `[kernel.*]` or `vmlinux` dso, or an address in the upper (kernel) half. `[vdso]` is user-mode code the
 * kernel maps into each process: native. jit: a perf map (`perf-N.map`), `[JIT] tid N` or an injected
 * `jitted-N-M.so`. Unnamed frames: native-unnamed inside a file, unknown in anonymous or JIT memory (no file to
 * read symbols from) or without a dso.
 */
export function classify(piece: string, line: FrameLine): FrameKind {
  const dso = line.dso;
  if (dso !== undefined && (dso.startsWith('[kernel.') || dso.endsWith('vmlinux'))) return 'kernel';
  if (isKernelAddress(line.ip) && (dso === undefined || dso.startsWith('['))) return 'kernel';
  if (isUnnamed(piece)) {
    if (dso === undefined || dso === '[unknown]' || isJitDso(dso) || isAnonymous(dso)) return 'unknown';
    return 'native-unnamed';
  }
  if (dso !== undefined && isJitDso(dso)) return 'jit';
  return 'native';
}

function isUnnamed(piece: string): boolean {
  return piece === '[unknown]';
}

/** x86-64 and arm64 kernels live at 0xffff8000_00000000 and above: 16 hex digits starting with `ffff`. */
function isKernelAddress(ip: string): boolean {
  return ip.length === 16 && /^ffff[89a-f]/i.test(ip);
}

function isJitDso(dso: string): boolean {
  return perfMapDso.test(dso) || dso.startsWith('[JIT] tid') || jittedDso.test(dso);
}

function isAnonymous(dso: string): boolean {
  return dso.startsWith('/memfd:') || dso.startsWith('[anon') || dso.startsWith('//anon') || dso === '[heap]';
}

/** `{ library }` for an unnamed frame inside a native library or executable; nothing otherwise. */
function libraryOf(kind: FrameKind, line: FrameLine): { library?: string } {
  if (kind !== 'native-unnamed' || line.dso === undefined || line.dso.startsWith('[')) return {};
  const file = basename(line.dso);
  if (/\.(dll|exe)$/i.test(file) || file.startsWith('memfd:') || perfMapDso.test(line.dso)) return {};
  return { library: file };
}

/** `{ file }` for a frame of native code in a file (named or not); nothing otherwise. */
function fileOf(kind: FrameKind, line: FrameLine): { file?: string } {
  if ((kind !== 'native' && kind !== 'native-unnamed') || line.dso === undefined || line.dso.startsWith('[')) return {};
  return { file: basename(line.dso) };
}

function isCoreclr(piece: string, line: FrameLine): boolean {
  return isUnnamed(piece) && line.dso !== undefined && basename(line.dso) === 'libcoreclr.so';
}

/** The file name of a dso path, without the ` (deleted)` perf appends for unlinked files. */
function basename(dso: string): string {
  const path = dso.endsWith(' (deleted)') ? dso.slice(0, -' (deleted)'.length) : dso;
  return path.slice(path.lastIndexOf('/') + 1);
}

/** stackcollapse-perf.pl's `$mod =~ m/(^\[|vmlinux$)/ && $mod !~ /unknown/`. */
function compatKernelDso(dso: string | undefined): boolean {
  return dso !== undefined && (dso.startsWith('[') || dso.endsWith('vmlinux')) && !dso.includes('unknown');
}

/** stackcollapse-perf.pl's `$mod =~ m:/tmp/perf-\d+\.map:`. */
function compatJitDso(dso: string | undefined): boolean {
  return dso !== undefined && /\/tmp\/perf-\d+\.map/.test(dso);
}
