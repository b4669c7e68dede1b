// .NET method names as the runtime writes them to perf-PID.map and the jitdump, made readable: takes
//   `instance void [System.Private.CoreLib] System.Threading.ExecutionContext::RunInternal(class ...)[OptimizedTier1]`
// and gives `System.Threading.ExecutionContext::RunInternal`, keeping the module, arguments or tier on request.
// Names that do not have this shape (stubs such as `stub<3> Kind<Owner>`, other runtimes' JIT names) come back
// unchanged. Type names keep their `+` (nested types), backticks, `<>` and `!!0`.

export interface ManagedNameOptions {
  /** Prefix the assembly, `System.Private.CoreLib!Type::Method`. */
  keepModule: boolean;
  /** Keep the argument list `(class System.String,int32)`. */
  keepArguments: boolean;
  /** Keep the tier suffix `[OptimizedTier1]`. */
  keepTier: boolean;
}

export interface ManagedNameParts {
  /** The assembly, `System.Private.CoreLib`, or undefined when the name has none. */
  module: string | undefined;
  /** `Namespace.Type+Nested::Method`, generic arguments included. */
  method: string;
  /** `(…)`, parentheses included. */
  args: string;
  /** `[OptimizedTier1]`, brackets included, or '' when the name has none. */
  tier: string;
}

const tierPattern = /^\[[A-Za-z][A-Za-z0-9]*\]$/;
const modulePattern = /^[^\s,[\]]+$/;

/** Splits a .NET signature into its parts, or returns undefined when `name` is not one. */
export function parseManagedName(name: string): ManagedNameParts | undefined {
  let body = name;
  let tier = '';
  if (body.endsWith(']')) {
    const open = body.lastIndexOf('[');
    if (open > 0 && body[open - 1] === ')' && tierPattern.test(body.slice(open))) {
      tier = body.slice(open);
      body = body.slice(0, open);
    }
  }
  if (!body.endsWith(')')) return undefined;
  const argsStart = matchingOpen(body, body.length - 1);
  if (argsStart <= 0) return undefined;
  const args = body.slice(argsStart);
  const head = body.slice(0, argsStart);
  const found = findModule(head);
  const method = found ? head.slice(found.methodStart) : lastTopLevelWord(head);
  if (!method.includes('::')) return undefined;
  return { module: found?.module, method, args, tier };
}

/** The readable form of a .NET signature (see ManagedNameOptions); other names unchanged. */
export function formatManagedName(name: string, options: ManagedNameOptions): string {
  const parts = parseManagedName(name);
  if (!parts) return name;
  let out = parts.method;
  if (options.keepModule && parts.module) out = `${parts.module}!${out}`;
  if (options.keepArguments) out += parts.args;
  if (options.keepTier) out += parts.tier;
  return out;
}

/** Index of the `(` matching the `)` at `close`, or -1. */
export function matchingOpen(s: string, close: number): number {
  let depth = 0;
  for (let i = close; i >= 0; i--) {
    const c = s.charCodeAt(i);
    if (c === 41) depth++;
    else if (c === 40 && --depth === 0) return i;
  }
  return -1;
}

/** The first ` [Assembly] ` token: brackets holding a name without spaces or commas (array ranks have none). */
function findModule(head: string): { module: string; methodStart: number } | undefined {
  let from = 0;
  for (;;) {
    const open = head.indexOf('[', from);
    if (open < 0) return undefined;
    const close = head.indexOf(']', open + 1);
    if (close < 0) return undefined;
    const module = head.slice(open + 1, close);
    if ((open === 0 || head[open - 1] === ' ') && head[close + 1] === ' ' && modulePattern.test(module)) {
      return { module, methodStart: close + 2 };
    }
    from = open + 1;
  }
}

/** The text after the last space that is not inside `<…>` (generic arguments may hold `class X`). */
function lastTopLevelWord(head: string): string {
  let depth = 0;
  for (let i = head.length - 1; i >= 0; i--) {
    const c = head[i];
    if (c === '>') depth++;
    else if (c === '<') depth--;
    else if (c === ' ' && depth === 0) return head.slice(i + 1);
  }
  return head;
}
