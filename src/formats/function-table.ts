// Function symbols as perf keeps them for one file or the kernel, whatever they were read from (ELF .symtab/.dynsym,
// kallsyms, perf maps): takes the symbols, sorts them, keeps one per address as perf chooses it, gives size-0 symbols
// their ends (tools/perf/util/symbol.c: symbols__fixup_duplicate, symbols__fixup_end, choose_best_symbol), and gives
// a lookup from an offset to the symbol holding it. function-columns.ts builds the same lookup for large tables.
import { demangle, type DemangleForm } from './elf/demangle.js';

const STB_GLOBAL = 1;
const STB_WEAK = 2;

/** A symbol as perf's choice among symbols at one address sees it; `name` is asked only when the rest ties. */
export interface Contender {
  /** Its size (after the end fixes) is not 0. */
  sized: boolean;
  binding: number;
  name(): string;
}

/**
 * perf's choose_best_symbol, for the columns of function-columns.ts and the objects here alike: true when `a` wins over
 * `b`. A sized symbol, then a strong one, then a global one; then fewer leading underscores, then the longer name in
 * bytes (perf's strlen); on a full tie the one met first (`b`) stays (arch__choose_best_symbol on x86).
 */
export function perfPrefers(a: Contender, b: Contender): boolean {
  if (a.sized !== b.sized) return a.sized;
  const weakA = a.binding === STB_WEAK;
  const weakB = b.binding === STB_WEAK;
  if (weakA !== weakB) return weakB;
  const globalA = a.binding === STB_GLOBAL;
  const globalB = b.binding === STB_GLOBAL;
  if (globalA !== globalB) return globalA;
  const nameA = a.name();
  const nameB = b.name();
  const underscoresA = /^_*/.exec(nameA)![0].length;
  const underscoresB = /^_*/.exec(nameB)![0].length;
  if (underscoresA !== underscoresB) return underscoresB > underscoresA;
  return Buffer.byteLength(nameA) > Buffer.byteLength(nameB);
}

export interface FunctionTable {
  /** The symbol holding file offset `offset`, and how far into it. */
  lookup(offset: bigint): { name: string; offset: bigint } | undefined;
  readonly size: number;
}

export interface FunctionSymbol {
  start: bigint;
  end: bigint;
  name: string;
  binding: number;
  /** Its size was 0: its end was set to the next symbol's start. */
  label?: boolean;
  /** kallsyms: 0 for the kernel's own symbol, another number for a module's (see kallsyms.ts), for the end rule. */
  group?: number;
  /**
   * Set while `name` is still the C++ mangled name: demangled (and this suffix appended) by nameOf when first needed,
   * as most symbols of a library are never looked up.
   */
  mangledSuffix?: string;
  /** How `name` is demangled when it is (set with mangledSuffix; default perf 6.1's form). */
  demangleForm?: DemangleForm;
}

/**
 * The name perf shows for `sym`: a mangled C++ name is demangled the first time it is asked for (perf demangles as it
 * loads, but only a frame or a tie between symbols at one address ever reads the name).
 */
export function nameOf(sym: FunctionSymbol): string {
  if (sym.mangledSuffix === undefined) return sym.name;
  sym.name = (demangle(sym.name, sym.demangleForm) ?? sym.name) + sym.mangledSuffix;
  sym.mangledSuffix = undefined;
  return sym.name;
}

/**
 * perf's symbols__fixup_duplicate and symbols__fixup_end, in the order perf runs them for ELF files; kallsyms has its
 * ends fixed first (`endsFirst`), so of symbols at one address the last listed wins there.
 */
export function sortedAsPerf(syms: FunctionSymbol[], endsFirst = false): FunctionSymbol[] {
  syms.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  if (endsFirst) endsOfUnsized(syms, true);
  const kept: FunctionSymbol[] = [];
  for (const sym of syms) {
    const last = kept[kept.length - 1];
    if (last && last.start === sym.start) {
      if (prefer(sym, last)) kept[kept.length - 1] = sym;
      continue;
    }
    kept.push(sym);
  }
  endsOfUnsized(kept);
  return kept;
}

/**
 * Ends for symbols of size 0: the next symbol's start, or a page past its page for the last one and, in kallsyms
 * (`kallsyms`), for one followed by a symbol of another group, as perf's symbols__fixup_end leaves the gap between
 * the kernel and its modules to no symbol.
 */
function endsOfUnsized(syms: FunctionSymbol[], kallsyms = false): void {
  const pageAfter = (start: bigint) => ((start + 4095n) / 4096n) * 4096n + 4096n;
  for (let i = 0; i + 1 < syms.length; i++) {
    const sym = syms[i]!;
    if (sym.end !== sym.start) continue;
    if (kallsyms && (sym.group ?? 0) !== (syms[i + 1]!.group ?? 0)) sym.end = pageAfter(sym.start);
    else {
      sym.end = syms[i + 1]!.start;
      sym.label = true;
    }
  }
  const last = syms[syms.length - 1];
  if (last && last.end === last.start) last.end = pageAfter(last.start);
}

/** perf's choose_best_symbol: true when `a` wins over `b`. */
function prefer(a: FunctionSymbol, b: FunctionSymbol): boolean {
  return perfPrefers(
    { sized: a.end > a.start, binding: a.binding, name: () => nameOf(a) },
    { sized: b.end > b.start, binding: b.binding, name: () => nameOf(b) },
  );
}

/** A lookup table over symbols already fixed up. */
export function lookupTable(syms: FunctionSymbol[]): FunctionTable {
  return {
    size: syms.length,
    lookup(offset) {
      let lo = 0;
      let hi = syms.length - 1;
      let found = -1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        if (syms[mid]!.start <= offset) {
          found = mid;
          lo = mid + 1;
        } else hi = mid - 1;
      }
      const sym = syms[found];
      if (!sym || offset >= sym.end) return undefined;
      // A label inside a sized function: perf's tree search meets the function first and names the frame by it.
      if (sym.label)
        for (let i = found - 1; i >= 0 && i >= found - 16; i--) {
          const outer = syms[i]!;
          if (!outer.label && outer.start <= offset && offset < outer.end)
            return { name: nameOf(outer), offset: offset - outer.start };
        }
      return { name: nameOf(sym), offset: offset - sym.start };
    },
  };
}
