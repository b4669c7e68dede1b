// Byte-level reading of single `perf script` lines: takes a Buffer and a line's [start, end) range, gives the
// positions of its fields without allocating strings. Two line shapes matter:
//   sample header  `comm  pid[/tid] [cpu] time:  period event: `   (any of the fields after comm may be missing)
//   stack frame    `\t  <hex ip> <symbol>[+0x<off>] (<dso>)`
// The rules follow stackcollapse-perf.pl's regular expressions (quoted below) so that --compat output matches it.

const TAB = 9;
const SPACE = 32;
const SLASH = 47;
const COLON = 58;
const OPEN = 40;
const CLOSE = 41;
const DOT = 46;
const OPEN_BRACKET = 91;
const CLOSE_BRACKET = 93;

/** Perl's `\s`: space, \t, \n, \v, \f, \r. */
export function isSpace(b: number): boolean {
  return b === SPACE || (b >= TAB && b <= 13);
}

function isDigit(b: number): boolean {
  return b >= 48 && b <= 57;
}

/** Perl's `\w` on bytes: [A-Za-z0-9_]. */
function isWord(b: number): boolean {
  return (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || b === 95;
}

/** The end of a line without trailing whitespace. */
export function trimEnd(buf: Uint8Array, start: number, end: number): number {
  while (end > start && isSpace(buf[end - 1]!)) end--;
  return end;
}

export interface HeaderFields {
  commEnd: number;
  /** [start, end) of the first number (the pid when a tid follows, else the tid). */
  firstStart: number;
  firstEnd: number;
  /** [start, end) of the number after `/`, or -1 when there is none. */
  secondStart: number;
  secondEnd: number;
}

/**
 * Finds the comm and pid/tid of a sample header on [start, end); returns false when the line is not a header.
 * - compat: stackcollapse-perf.pl's `^(\S.+?)\s+(\d+)\/*(\d+)*\s+`: the comm is the shortest prefix of at least
 *   2 bytes followed by whitespace, digits, optional `/digits` and whitespace.
 * - otherwise the comm may be 1 byte and the numbers may end the line; and as a comm may hold spaces and digits
 *   (`Worker 3`), the first numbers followed by what perf prints next (`[cpu]`, `time:` or nothing) win, before
 *   falling back on the first numbers at all.
 */
export function matchHeader(buf: Uint8Array, start: number, end: number, compat: boolean, out: HeaderFields): boolean {
  if (start >= end || isSpace(buf[start]!)) return false;
  let found = false;
  for (let p = start + (compat ? 2 : 1); p < end; p++) {
    if (!isSpace(buf[p]!)) continue;
    let q = p + 1;
    while (q < end && isSpace(buf[q]!)) q++;
    if (q >= end || !isDigit(buf[q]!)) continue;
    const firstStart = q;
    while (q < end && isDigit(buf[q]!)) q++;
    const firstEnd = q;
    while (q < end && buf[q] === SLASH) q++;
    const secondStart = q;
    while (q < end && isDigit(buf[q]!)) q++;
    const secondEnd = q;
    if (q < end ? !isSpace(buf[q]!) : compat) continue;
    if (!found) {
      out.commEnd = p;
      out.firstStart = firstStart;
      out.firstEnd = firstEnd;
      out.secondStart = secondEnd > secondStart ? secondStart : -1;
      out.secondEnd = secondEnd;
      found = true;
    }
    if (compat || startsCpuOrTime(buf, q, end)) {
      out.commEnd = p;
      out.firstStart = firstStart;
      out.firstEnd = firstEnd;
      out.secondStart = secondEnd > secondStart ? secondStart : -1;
      out.secondEnd = secondEnd;
      return true;
    }
  }
  return found;
}

/** After whitespace from `i`: the end of the line, `[digits]` or `digits.digits:`. */
function startsCpuOrTime(buf: Uint8Array, i: number, end: number): boolean {
  while (i < end && isSpace(buf[i]!)) i++;
  if (i >= end) return true;
  if (buf[i] === OPEN_BRACKET) return i + 1 < end && isDigit(buf[i + 1]!);
  while (i < end && isDigit(buf[i]!)) i++;
  if (i >= end || buf[i] !== DOT) return false;
  i++;
  while (i < end && isDigit(buf[i]!)) i++;
  return i < end && buf[i] === COLON;
}

export interface EventFields {
  /** [start, end) of the event name (`cpu-clock`), or start -1 when the line names none. */
  eventStart: number;
  eventEnd: number;
  /** [start, end) of the period's digits, or start -1 when the line has none. */
  periodStart: number;
  periodEnd: number;
  /** [start, end) of the time (`seconds.micros`) when matchEventAfterTime found it, else start -1. */
  timeStart?: number;
  timeEnd?: number;
}

/**
 * Matches `:\s*(\d+)*\s+(\S+):\s*$` (the period and event of a header): the last word must end in `:`, and be
 * preceded by whitespace and either `:` or `:` + digits. Fills `out`, with eventStart -1 when there is no match.
 */
export function matchEvent(buf: Uint8Array, start: number, end: number, out: EventFields): void {
  out.eventStart = -1;
  out.periodStart = -1;
  const last = trimEnd(buf, start, end);
  if (last - start < 2 || buf[last - 1] !== COLON) return;
  let u = last - 1;
  while (u > start && !isSpace(buf[u - 1]!)) u--;
  if (last - u < 2 || u === start) return;
  let w = u;
  while (w > start && isSpace(buf[w - 1]!)) w--;
  const i = w - 1;
  if (i < start) return;
  if (buf[i] === COLON) {
    out.eventStart = u;
    out.eventEnd = last - 1;
    return;
  }
  if (!isDigit(buf[i]!)) return;
  let j = i;
  while (j > start && isDigit(buf[j - 1]!)) j--;
  let k = j;
  while (k > start && isSpace(buf[k - 1]!)) k--;
  if (k - 1 < start || buf[k - 1] !== COLON) return;
  out.eventStart = u;
  out.eventEnd = last - 1;
  out.periodStart = j;
  out.periodEnd = i + 1;
}

/**
 * The period and event of a header whose time field is known to start at `from` (after comm, pid/tid and cpu:
 * HeaderFields), as perf script prints them: `[cpu] seconds.micros: [period] event: [what follows]`. The event is
 * what follows the time and period up to the first `:` that a space or the line's end follows (event names hold `:`,
 * `cpu-clock:ppp`, `sched:sched_switch`, but never `: `), so a tracepoint's fields or a one-line sample's frame after
 * it are no part of it. Fills `out` and gives the offset just past the event's `: ` (the rest of the line); -1, with
 * eventStart -1, when the line has no time field there.
 */
export function matchEventAfterTime(buf: Uint8Array, from: number, end: number, out: EventFields): number {
  out.eventStart = -1;
  out.periodStart = -1;
  out.timeStart = -1;
  let i = from;
  while (i < end && isSpace(buf[i]!)) i++;
  if (buf[i] === OPEN_BRACKET) {
    i++;
    while (i < end && isDigit(buf[i]!)) i++;
    if (buf[i] !== CLOSE_BRACKET) return -1;
    i++;
    while (i < end && isSpace(buf[i]!)) i++;
  }
  const timeStart = i;
  while (i < end && isDigit(buf[i]!)) i++;
  if (i === timeStart || buf[i] !== DOT) return -1;
  i++;
  while (i < end && isDigit(buf[i]!)) i++;
  if (buf[i] !== COLON) return -1;
  out.timeStart = timeStart;
  out.timeEnd = i;
  i++;
  while (i < end && isSpace(buf[i]!)) i++;
  // A period: digits and whitespace before the name.
  let j = i;
  while (j < end && isDigit(buf[j]!)) j++;
  if (j > i && j < end && isSpace(buf[j]!)) {
    out.periodStart = i;
    out.periodEnd = j;
    i = j;
    while (i < end && isSpace(buf[i]!)) i++;
  }
  const nameStart = i;
  while (i < end && !(buf[i] === COLON && (i + 1 === end || isSpace(buf[i + 1]!)))) i++;
  if (i >= end || i === nameStart) {
    out.periodStart = -1;
    out.timeStart = -1;
    return -1;
  }
  out.eventStart = nameStart;
  out.eventEnd = i;
  return i + 1 < end ? i + 2 : end;
}

export interface FrameFields {
  ipStart: number;
  ipEnd: number;
  symStart: number;
}

function isHex(b: number): boolean {
  return (b >= 48 && b <= 57) || (b >= 65 && b <= 70) || (b >= 97 && b <= 102);
}

/**
 * The address and symbol start of a frame line `^\s*(\w+)\s*(.+)`: returns false when there is no address or no
 * text after it. The address is any word (as in stackcollapse-perf.pl) with `compat`, else hexadecimal digits.
 */
export function matchFrameStart(
  buf: Uint8Array,
  start: number,
  end: number,
  compat: boolean,
  out: FrameFields,
): boolean {
  let i = start;
  while (i < end && isSpace(buf[i]!)) i++;
  const ipStart = i;
  if (compat) while (i < end && isWord(buf[i]!)) i++;
  else while (i < end && isHex(buf[i]!)) i++;
  if (i === ipStart || (!compat && i < end && !isSpace(buf[i]!))) return false;
  const ipEnd = i;
  while (i < end && isSpace(buf[i]!)) i++;
  if (i >= end) return false;
  out.ipStart = ipStart;
  out.ipEnd = ipEnd;
  out.symStart = i;
  return true;
}

/**
 * Splits a frame's text `symbol (dso)` into symbol and dso. Returns [symEnd, dsoStart, dsoEnd], or undefined when
 * there is no `(dso)`.
 * - compat: stackcollapse-perf.pl's `(.+) \((.*)\)`: the last ` (` that a `)` follows, up to the last `)`. A dso
 *   with parentheses of its own (`/memfd:doublemapper (deleted)`) is cut there, as the script cuts it.
 * - otherwise: the parenthesised group that ends at the last `)`, matched with nesting, so the dso stays whole.
 */
export function splitDso(
  buf: Uint8Array,
  symStart: number,
  end: number,
  compat: boolean,
): [number, number, number] | undefined {
  let close = end - 1;
  while (close > symStart && buf[close] !== CLOSE) close--;
  if (close <= symStart) return undefined;
  if (!compat) {
    let depth = 0;
    for (let o = close; o > symStart; o--) {
      const b = buf[o];
      if (b === CLOSE) depth++;
      else if (b === OPEN && --depth === 0) {
        if (buf[o - 1] === SPACE && o - 1 > symStart) return [o - 1, o + 1, close];
        break;
      }
    }
  }
  for (let o = close - 1; o > symStart + 1; o--) {
    if (buf[o] === OPEN && buf[o - 1] === SPACE) return [o - 1, o + 1, close];
  }
  return undefined;
}
