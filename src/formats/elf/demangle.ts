// C++ symbol names (Itanium ABI, `_Z...`) turned back into the names perf prints for them: perf demangles without
// parameters (libiberty's DMGL_NO_OPTS), so `_ZN4node5StartEiPPc` is `node::Start` and template arguments are kept
// (`v8::internal::Deserializer<v8::internal::Isolate>::ReadObject`), written as libiberty writes them (`char const*`,
// `> >`, `char const (&) [17]`, `{lambda(auto:1&)#1}`, `&ns::f`, a pack expanded once per argument). Names this
// demangler does not cover (expressions in template arguments other than a function's address, decltype, vendor
// qualifiers...) give undefined, and the caller keeps the mangled name, as perf does with what libiberty refuses.
// Bounded: the input is a symbol name, at most a few KiB, parsed once left to right with a depth limit (a pack
// expansion reads its pattern once per argument of the pack, and may not nest).

class Unsupported extends Error {}

const builtins: Record<string, string> = {
  v: 'void',
  w: 'wchar_t',
  b: 'bool',
  c: 'char',
  a: 'signed char',
  h: 'unsigned char',
  s: 'short',
  t: 'unsigned short',
  i: 'int',
  j: 'unsigned int',
  l: 'long',
  m: 'unsigned long',
  x: 'long long',
  y: 'unsigned long long',
  n: '__int128',
  o: 'unsigned __int128',
  f: 'float',
  d: 'double',
  e: 'long double',
  g: '__float128',
  z: '...',
};

const extendedBuiltins: Record<string, string> = {
  n: 'decltype(nullptr)',
  i: 'char32_t',
  s: 'char16_t',
  u: 'char8_t',
  a: 'auto',
  c: 'decltype(auto)',
};

const operators: Record<string, string> = {
  nw: 'new',
  na: 'new[]',
  dl: 'delete',
  da: 'delete[]',
  ps: '+',
  ng: '-',
  ad: '&',
  de: '*',
  co: '~',
  pl: '+',
  mi: '-',
  ml: '*',
  dv: '/',
  rm: '%',
  an: '&',
  or: '|',
  eo: '^',
  aS: '=',
  pL: '+=',
  mI: '-=',
  mL: '*=',
  dV: '/=',
  rM: '%=',
  aN: '&=',
  oR: '|=',
  eO: '^=',
  ls: '<<',
  rs: '>>',
  lS: '<<=',
  rS: '>>=',
  eq: '==',
  ne: '!=',
  lt: '<',
  gt: '>',
  le: '<=',
  ge: '>=',
  ss: '<=>',
  nt: '!',
  aa: '&&',
  oo: '||',
  pp: '++',
  mm: '--',
  cm: ',',
  pm: '->*',
  pt: '->',
  cl: '()',
  ix: '[]',
  qu: '?',
};

const stdAbbreviations: Record<string, string> = {
  a: 'std::allocator',
  b: 'std::basic_string',
  s: 'std::string',
  i: 'std::istream',
  o: 'std::ostream',
  d: 'std::iostream',
};

/** The std abbreviations in full, as libiberty writes them before a constructor or destructor. */
const stdFullForms: Record<string, string> = {
  s: 'std::basic_string<char, std::char_traits<char>, std::allocator<char> >',
  i: 'std::basic_istream<char, std::char_traits<char> >',
  o: 'std::basic_ostream<char, std::char_traits<char> >',
  d: 'std::basic_iostream<char, std::char_traits<char> >',
};

const literalSuffixes: Record<string, string> = { i: '', j: 'u', l: 'l', m: 'ul', x: 'll', y: 'ull' };

const maxDepth = 64;
const maxLength = 4096;

/**
 * How perf writes a C++ name. `perf6.1`: perf up to 6.3 demangles with libiberty without parameters (DMGL_NO_OPTS):
 * `node::Start`, a compiler clone (`.isra.0`, `.part.0`, `.cold`) under its function's name alone. `full`: perf 6.4 and
 * later, as the distributions build it, demangle with libstdc++'s abi::__cxa_demangle (tools/perf/util/demangle-cxx.cpp),
 * libiberty with parameters: `node::Start(int, char**)`, a template function's return type first
 * (`void f<int>(int)`), clones as ` [clone .part.0]`.
 */
export type DemangleForm = 'perf6.1' | 'full';

/** perf's name for `mangled`, or undefined when it is not a C++ name this demangler covers. */
export function demangle(mangled: string, form: DemangleForm = 'perf6.1'): string | undefined {
  if (!mangled.startsWith('_Z') || mangled.length > maxLength) return undefined;
  const dot = mangled.indexOf('.');
  const symbol = dot < 0 ? mangled : mangled.slice(0, dot);
  try {
    const full = form === 'full';
    const parser = new Parser(symbol, full);
    const name = finish(parser.encodingName());
    if (!full || dot < 0) return name;
    const clones = cloneSuffixes(mangled.slice(dot));
    return clones === undefined ? undefined : name + clones;
  } catch (error) {
    if (error instanceof Unsupported || error instanceof RangeError) return undefined;
    throw error;
  }
}

/**
 * libiberty's d_clone_suffix, repeated: `.` and a lower-case word (or digits), then `.digits` groups, each clone
 * written ` [clone .isra.0]`; undefined when something else is left (the whole name then stays mangled).
 */
function cloneSuffixes(suffix: string): string | undefined {
  let out = '';
  let at = 0;
  while (at < suffix.length) {
    const m = /^\.[a-z0-9_][a-z0-9_]*(?:\.[0-9]+)*/.exec(suffix.slice(at));
    if (!m) return undefined;
    out += ` [clone ${m[0]}]`;
    at += m[0].length;
  }
  return out;
}

interface Name {
  text: string;
  /** ` const` (and the like) of a member function: written after its parameters in a local name. */
  qualifiers: string;
  /** The name is a constructor or destructor (it has no return type in its encoding). */
  structor: boolean;
  /** The last unqualified name (for constructors and destructors of the enclosing class). */
  last: string;
  /** Template arguments ended the name. */
  template: boolean;
}

class Parser {
  private at = 2;
  private readonly subs: string[] = [];
  private templateArgs: Arg[] = [];
  /** While a pack expansion (`Dp`) is read: the element of its pack to write, and the pack's length once met. */
  private expansion: { element: number; length: number | undefined } | undefined;
  /** The parameters of a lambda are read: template parameters are its own (`auto:N`). */
  private inLambda = false;
  private depth = 0;
  /** The last unqualified name read was a constructor or destructor. */
  private structor = false;

  constructor(
    private readonly s: string,
    /** Parameters, return types and qualifiers written, as DemangleForm `full`. */
    private readonly full = false,
  ) {}

  encodingName(): string {
    // Thunks are written with their target's parameters.
    if (this.take('Th')) {
      this.callOffset();
      return `non-virtual thunk to ${this.withParameters()}`;
    }
    if (this.take('Tv')) {
      this.callOffset();
      this.callOffset();
      return `virtual thunk to ${this.withParameters()}`;
    }
    if (this.take('GTt')) return `transaction clone for ${this.withParameters()}`;
    if (this.take('TH')) return `TLS init function for ${this.name(false).text}`;
    if (this.take('TW')) return `TLS wrapper function for ${this.name(false).text}`;
    if (this.peek() === 'T' || this.peek() === 'G') throw new Unsupported();
    const name = this.name(false);
    // A data symbol has no parameters; without `full`, a function's are not written.
    if (!this.full || this.at >= this.s.length) return name.text;
    return this.signature(name);
  }

  /** `[return type] name(params) qualifiers` of a function encoding whose name was read. */
  private signature(fn: Name): string {
    let returns = '';
    if (fn.template && !fn.structor && !/^operator /.test(fn.last)) {
      returns = this.type();
      // A function pointer or array returned is written around the name: not covered.
      if (returns.includes(hole)) throw new Unsupported();
      returns = `${finish(returns)} `;
    }
    const types: string[] = [];
    while (this.at < this.s.length) types.push(finish(this.type()));
    const params = types.length === 1 && types[0] === 'void' ? '' : listed(types);
    return `${returns}${fn.text}(${params})${fn.qualifiers}`;
  }

  private peek(offset = 0): string {
    return this.s[this.at + offset] ?? '';
  }

  private take(text: string): boolean {
    if (!this.s.startsWith(text, this.at)) return false;
    this.at += text.length;
    return true;
  }

  private expect(text: string): void {
    if (!this.take(text)) throw new Unsupported();
  }

  private enter(): void {
    if (++this.depth > maxDepth) throw new Unsupported();
  }

  /** <name>; `asType`: the whole name is a type (a substitution candidate). */
  private name(asType: boolean): Name {
    this.enter();
    try {
      const c = this.peek();
      if (c === 'N') return this.nestedName(asType);
      if (c === 'Z') return this.localName();
      let name: Name;
      if (c === 'S' && this.peek(1) !== 't') {
        const sub = this.substitution();
        name = {
          text: sub,
          last: sub.slice(sub.lastIndexOf('::') + 2),
          template: false,
          qualifiers: '',
          structor: false,
        };
        if (this.peek() !== 'I') return name;
      } else {
        const std = this.take('St');
        // `L`: internal linkage, not written.
        this.take('L');
        this.structor = false;
        const unqualified = this.unqualifiedName('');
        const text = (std ? 'std::' : '') + unqualified;
        name = { text, last: unqualified, template: false, qualifiers: '', structor: this.structor };
        if (this.peek() !== 'I') return name;
        this.subs.push(text);
      }
      const args = this.templateArgList(true);
      return { ...name, text: templated(name.text, args), template: true };
    } finally {
      this.depth--;
    }
  }

  private nestedName(asType: boolean): Name {
    this.expect('N');
    let qualifiers = '';
    for (;;) {
      const q = { r: ' restrict', V: ' volatile', K: ' const' }[this.peek()];
      if (q === undefined) break;
      qualifiers += q;
      this.at++;
    }
    if (this.take('R')) qualifiers += ' &';
    else if (this.take('O')) qualifiers += ' &&';
    let text = '';
    let last = '';
    let template = false;
    // A prefix that is itself a substitution is not a new candidate.
    let known = false;
    // The last part is a constructor or destructor (template arguments after it may read other names meanwhile).
    let structor = false;
    for (;;) {
      if (this.take('E')) break;
      if (text !== '' && !template && !known) this.subs.push(text);
      template = false;
      known = false;
      const c = this.peek();
      if (c === 'S' && this.peek(1) === 't' && text === '') {
        // `NSt...`: a name in std, `std` not a candidate by itself.
        this.at += 2;
        this.structor = false;
        const part = this.unqualifiedName(last);
        structor = this.structor;
        last = part;
        text = `std::${part}`;
        continue;
      }
      if (c === 'S' && this.peek(1) !== 't' && text === '') {
        structor = false;
        text = this.substitution();
        // Before a constructor or destructor, libiberty writes a std abbreviation in full (`std::basic_string<char,
        // std::char_traits<char>, std::allocator<char> >::basic_string`).
        const full = /[CD]/.test(this.peek()) ? stdFullForms[this.s[this.at - 1]!] : undefined;
        if (full && this.s[this.at - 2] === 'S') text = full;
        last = withoutTemplateArgs(text.slice(text.lastIndexOf('::', text.indexOf('<') >>> 0) + 2));
        known = true;
        continue;
      }
      if (c === 'T' && text === '') {
        structor = false;
        text = this.templateParam();
        last = text;
        continue;
      }
      if (c === 'I') {
        if (text === '') throw new Unsupported();
        const args = this.templateArgList(true);
        text = templated(text, args);
        template = true;
        // The template-id is a prefix too, unless it ends the name.
        if (this.peek() !== 'E') this.subs.push(text);
        continue;
      }
      if (c === 'L') this.at++;
      this.structor = false;
      const part = this.unqualifiedName(last);
      structor = this.structor;
      // libiberty names a constructor after the last class with a name: an unnamed type or a closure is none.
      if (!part.startsWith('{')) last = part.startsWith('~') ? part.slice(1) : part;
      text = text === '' ? part : `${text}::${part}`;
      // `<member name> M`: a closure type in a data member's initializer, in the member's scope.
      this.take('M');
    }
    if (asType && template) this.subs.push(text);
    this.structor = structor;
    return { text, last, template, qualifiers, structor };
  }

  /** <unqualified-name>; `enclosing` names the class of a constructor or destructor. */
  private unqualifiedName(enclosing: string): string {
    const c = this.peek();
    let name: string;
    if (c >= '0' && c <= '9') {
      name = this.sourceName();
    } else if (c === 'C' && /[1-5I]/.test(this.peek(1))) {
      const inheriting = this.peek(1) === 'I';
      this.at += inheriting ? 3 : 2;
      if (inheriting) this.type();
      name = withoutTemplateArgs(enclosing);
      this.structor = true;
    } else if (c === 'D' && /[0-5]/.test(this.peek(1))) {
      this.at += 2;
      name = `~${withoutTemplateArgs(enclosing)}`;
      this.structor = true;
    } else if (c === 'U' && this.peek(1) === 'l') {
      this.at += 2;
      // A generic lambda's parameters name its own template parameters: `auto:1`.
      const outer = this.inLambda;
      this.inLambda = true;
      let params: string;
      try {
        params = this.parameterList('E');
      } finally {
        this.inLambda = outer;
      }
      name = `{lambda(${autoParams(params)})#${this.discriminatorNumber()}}`;
    } else if (c === 'U' && this.peek(1) === 't') {
      this.at += 2;
      name = `{unnamed type#${this.discriminatorNumber()}}`;
    } else {
      name = this.operatorName();
    }
    while (this.take('B')) name += `[abi:${this.sourceName()}]`;
    return name;
  }

  /**
   * <local-name>: `Z <function encoding> E <entity>`: the function is written with its parameters (libiberty does so
   * even without DMGL_PARAMS), then `::` and the entity.
   */
  private localName(): Name {
    this.expect('Z');
    const savedArgs = this.templateArgs;
    const fn = this.name(false);
    // A local name in a variable's initializer (no parameters): the enclosing name alone.
    const enclosing = this.take('E') ? fn.text : `${fn.text}(${this.functionParameters(fn)})${fn.qualifiers}`;
    this.templateArgs = savedArgs;
    if (this.take('s')) {
      this.discriminator();
      return {
        text: `${enclosing}::string literal`,
        last: 'string literal',
        template: false,
        qualifiers: '',
        structor: false,
      };
    }
    // `d [<number>] _`: an entity in a default argument, `{default arg#1}` for `d_`.
    let scope = enclosing;
    if (this.take('d')) scope += `::{default arg#${this.discriminatorNumber()}}`;
    const entity = this.name(false);
    this.discriminator();
    return { ...entity, text: `${scope}::${entity.text}` };
  }

  /** `[n] <number> _` of a thunk: not printed. */
  private callOffset(): void {
    this.take('n');
    const digits = /^\d+/.exec(this.s.slice(this.at))?.[0];
    if (!digits) throw new Unsupported();
    this.at += digits.length;
    this.expect('_');
  }

  /** A whole function encoding with its parameters: `name(params) const`. */
  private withParameters(): string {
    const fn = this.name(false);
    if (this.full) return this.signature(fn);
    const types: string[] = [];
    if (fn.template && !fn.structor && !/^operator /.test(fn.last)) this.type();
    while (this.at < this.s.length) types.push(finish(this.type()));
    const params = types.length === 1 && types[0] === 'void' ? '' : listed(types);
    return `${fn.text}(${params})${fn.qualifiers}`;
  }

  /** The parameters of a function encoding, its return type skipped when it has one (a template function). */
  private functionParameters(fn: Name): string {
    if (fn.template && !fn.structor && !/^operator /.test(fn.last)) this.type();
    return this.parameterList('E');
  }

  /** Types up to (not including) `end`, as a parameter list: `v` alone is none. */
  private parameterList(end: string): string {
    const types: string[] = [];
    while (this.peek() !== end) {
      if (this.at >= this.s.length) throw new Unsupported();
      types.push(finish(this.type()));
    }
    this.expect(end);
    return types.length === 1 && types[0] === 'void' ? '' : listed(types);
  }

  /** `[<number>] _` after a lambda or unnamed type: #1 without a number, #n+2 with n. */
  private discriminatorNumber(): number {
    const digits = /^\d*/.exec(this.s.slice(this.at))![0];
    this.at += digits.length;
    this.expect('_');
    return digits === '' ? 1 : Number(digits) + 2;
  }

  /** `_ <digit>` or `__ <number> _` after a local name: not printed. */
  private discriminator(): void {
    if (this.s.startsWith('__', this.at)) {
      this.at += 2;
      while (/\d/.test(this.peek())) this.at++;
      this.expect('_');
    } else if (this.peek() === '_' && /\d/.test(this.peek(1))) this.at += 2;
  }

  private sourceName(): string {
    const digits = /^\d+/.exec(this.s.slice(this.at, this.at + 6))?.[0];
    if (!digits) throw new Unsupported();
    const length = Number(digits);
    this.at += digits.length;
    if (this.at + length > this.s.length) throw new Unsupported();
    const id = this.s.slice(this.at, this.at + length);
    this.at += length;
    return id.startsWith('_GLOBAL__N') ? '(anonymous namespace)' : id;
  }

  private operatorName(): string {
    const code = this.s.slice(this.at, this.at + 2);
    if (code === 'cv') {
      this.at += 2;
      return `operator ${this.type()}`;
    }
    if (code === 'li') {
      this.at += 2;
      return `operator"" ${this.sourceName()}`;
    }
    const op = operators[code];
    if (!op) throw new Unsupported();
    this.at += 2;
    return /^[a-z]/.test(op) ? `operator ${op}` : `operator${op}`;
  }

  private substitution(): string {
    this.expect('S');
    const c = this.peek();
    const abbreviation = stdAbbreviations[c];
    if (abbreviation) {
      this.at++;
      return abbreviation;
    }
    let index = 0;
    if (c !== '_') {
      const id = /^[0-9A-Z]+/.exec(this.s.slice(this.at, this.at + 8))?.[0];
      if (!id) throw new Unsupported();
      index = parseInt(id, 36) + 1;
      this.at += id.length;
    }
    this.expect('_');
    const sub = this.subs[index];
    if (sub === undefined) throw new Unsupported();
    if (this.inLambda || !sub.includes(lambdaParam)) return sub;
    return sub.replace(lambdaParamPattern, (_, i: string) => {
      const arg = this.templateArgs[Number(i)];
      if (arg === undefined) throw new Unsupported();
      return typeof arg === 'string' ? arg : joinPack(arg);
    });
  }

  private templateParam(): string {
    this.expect('T');
    let index = 0;
    if (this.peek() !== '_') {
      const id = /^\d+/.exec(this.s.slice(this.at, this.at + 6))?.[0];
      if (!id) throw new Unsupported();
      index = Number(id) + 1;
      this.at += id.length;
    }
    this.expect('_');
    // A lambda's own parameter: `auto:N` in the lambda's name, but a substitution made of it names, outside the
    // lambda, the template argument of the function in context (libiberty keeps the parameter, not its text): it is
    // kept as a marker until then (see substitution and lambdaParams).
    if (this.inLambda) return `${lambdaParam}${index}${lambdaParamEnd}`;
    const arg = this.templateArgs[index];
    if (arg === undefined) throw new Unsupported();
    if (typeof arg === 'string') return arg;
    if (!this.expansion) return joinPack(arg);
    this.expansion.length ??= arg.length;
    return arg[this.expansion.element] ?? '';
  }

  /** <template-args>; `outer`: these are the arguments T_ refers to from now on. */
  private templateArgList(outer: boolean): Arg[] {
    this.expect('I');
    const args: Arg[] = [];
    while (!this.take('E')) {
      if (this.at >= this.s.length) throw new Unsupported();
      args.push(this.templateArg());
    }
    if (outer) this.templateArgs = args;
    return args;
  }

  private templateArg(): Arg {
    const c = this.peek();
    if (c === 'L') return this.literal();
    if (c === 'X') return this.expression();
    if (this.take('J')) {
      // A pack: its arguments, written in line.
      const pack: string[] = [];
      while (!this.take('E')) {
        if (this.at >= this.s.length) throw new Unsupported();
        const arg = this.templateArg();
        pack.push(typeof arg === 'string' ? arg : joinPack(arg));
      }
      return pack;
    }
    return this.type();
  }

  /**
   * `X <expression> E` as a template argument: only a template parameter (`X T_ E`, its argument) and the address of
   * a function (`Xad L_Z...E E`) are covered.
   */
  private expression(): string {
    if (this.s.startsWith('XT', this.at)) {
      this.at++;
      const param = this.templateParam();
      this.expect('E');
      return param;
    }
    this.expect('Xad');
    this.expect('L');
    this.take('_');
    this.expect('Z');
    const saved = this.templateArgs;
    const qualified = this.peek() === 'N' || this.s.startsWith('St', this.at);
    const fn = this.name(false);
    // A function with C linkage has no type in its encoding.
    if (this.take('E')) {
      this.templateArgs = saved;
      this.expect('E');
      return `&${fn.text}`;
    }
    // libiberty writes a qualified function without its type (`&ns::f`, as it would a pointer to member), another one
    // with its parameters (`&(f(int))`, `&(ns::C::f() const)`), a template with its return type too
    // (`&(int ns::f<1>(char))`).
    const returns = fn.template && !fn.structor && !/^operator /.test(fn.last) ? finish(this.type()) : undefined;
    const params = this.parameterList('E');
    this.templateArgs = saved;
    this.expect('E');
    if (returns !== undefined) return `&(${returns} ${fn.text}(${params})${fn.qualifiers})`;
    return qualified && fn.qualifiers === '' ? `&${fn.text}` : `&(${fn.text}(${params})${fn.qualifiers})`;
  }

  private literal(): string {
    this.expect('L');
    if (this.peek() === 'Z') throw new Unsupported();
    const type = this.peek();
    // A value of a class, enum or pointer type: `(Type)value`.
    if (type === 'N' || type === 'S' || type === 'P' || (type >= '0' && type <= '9')) {
      const name = this.type();
      const negative = this.take('n');
      const digits = /^\d+/.exec(this.s.slice(this.at))?.[0];
      if (!digits) throw new Unsupported();
      this.at += digits.length;
      this.expect('E');
      return `(${name})${negative ? '-' : ''}${digits}`;
    }
    this.at++;
    const negative = this.take('n');
    const digits = /^\d+/.exec(this.s.slice(this.at))?.[0];
    if (!digits) throw new Unsupported();
    this.at += digits.length;
    this.expect('E');
    const value = (negative ? '-' : '') + digits;
    if (type === 'b') return value === '0' ? 'false' : 'true';
    const suffix = literalSuffixes[type];
    if (suffix !== undefined) return value + suffix;
    const builtin = builtins[type];
    if (!builtin) throw new Unsupported();
    return `(${builtin})${value}`;
  }

  private type(): string {
    this.enter();
    try {
      return this.typeInner();
    } finally {
      this.depth--;
    }
  }

  private typeInner(): string {
    const c = this.peek();
    const builtin = builtins[c];
    if (builtin) {
      this.at++;
      return builtin;
    }
    if (c === 'D' && this.peek(1) === 'p') {
      this.at += 2;
      return this.packExpansion();
    }
    if (c === 'A') return this.arrayType();
    if (c === 'D' && this.peek(1) === 'o' && this.peek(2) === 'F') {
      this.at += 2;
      return this.functionType(true, ' noexcept');
    }
    if (c === 'M') return this.memberPointer();
    if (c === 'D') {
      const extended = extendedBuiltins[this.peek(1)];
      if (!extended) throw new Unsupported();
      this.at += 2;
      return extended;
    }
    if (c === 'K' || c === 'V' || c === 'r') {
      let qualifiers = '';
      while ('rVK'.includes(this.peek()) && this.peek() !== '') {
        const q = this.peek();
        this.at++;
        qualifiers = (q === 'K' ? ' const' : q === 'V' ? ' volatile' : ' restrict') + qualifiers;
      }
      // A qualified function type (of a member function): `int () const`; the function type alone is no candidate.
      if (this.peek() === 'F') {
        const type = this.functionType(false, '') + qualifiers;
        this.subs.push(type);
        return type;
      }
      const inner = this.type();
      // A qualifier the type has already (a template parameter's `unsigned char const`) is written once.
      const added = qualifiers
        .split(' ')
        .filter((q) => q !== '' && !inner.replace(arrayHole, ' [').split(/[ (]/).includes(q))
        .map((q) => ` ${q}`)
        .join('');
      // A qualified array is an array of qualified elements (`char const [11]`); a qualified pointer to a function:
      // `void (* const)(int)`.
      const type = inner.includes(arrayHole)
        ? inner.replace(arrayHole, `${added}${arrayHole}`)
        : inner.includes(hole)
          ? inner.replace(hole, qualifiers + hole)
          : inner + added;
      this.subs.push(type);
      return type;
    }
    if (c === 'P' || c === 'R' || c === 'O') {
      this.at++;
      const inner = this.type();
      const mark = c === 'P' ? '*' : c === 'R' ? '&' : '&&';
      // A pointer to a function goes inside its parentheses: `void (*)(int)`.
      const type = !inner.includes(hole)
        ? collapse(inner, mark)
        : mark !== '*' && /\(&&?\u0001\)/.test(inner)
          ? inner.replace(/&&?\u0001/, (old) => (old === '&&\u0001' && mark === '&&' ? '&&' : '&') + hole)
          : /\([^()]*\u0001\)/.test(inner)
            ? inner.replace(/(&&?)?\u0001/, (old, ref?: string) =>
                ref && mark !== '*'
                  ? `${ref === '&&' && mark === '&&' ? '&&' : '&'}${hole}`
                  : `${ref ?? ''}${mark}${hole}`,
              )
            : inner.replace(hole, `(${mark}${hole})`);
      this.subs.push(type);
      return type;
    }
    if (c === 'F') return this.functionType(true, '');
    if (c === 'T') {
      const param = this.templateParam();
      this.subs.push(param);
      if (this.peek() !== 'I') return param;
      const type = templated(param, this.templateArgList(false));
      this.subs.push(type);
      return type;
    }
    if (c === 'S' && this.peek(1) !== 't') {
      const sub = this.substitution();
      if (this.peek() !== 'I') return sub;
      const type = templated(sub, this.templateArgList(false));
      this.subs.push(type);
      return type;
    }
    if (c === 'Z') {
      // A class local to a function (a lambda's closure type, most often).
      const saved = this.templateArgs;
      const local = this.localName().text;
      this.templateArgs = saved;
      this.subs.push(local);
      return local;
    }
    if (c === 'N' || (c >= '0' && c <= '9') || c === 'S') {
      const saved = this.templateArgs;
      const name = this.nameAsType();
      this.templateArgs = saved;
      return name;
    }
    throw new Unsupported();
  }

  /** `F [Y] <return type> <parameters> E`; `candidate`: the type is a substitution candidate. */
  private functionType(candidate: boolean, suffix: string): string {
    this.expect('F');
    this.take('Y');
    const returns = this.type();
    const params = this.parameterList('E');
    // A function returning a pointer to a function: its parameters go inside the declarator.
    const type = returns.includes(hole)
      ? returns.replace(hole, `${hole}(${params})`)
      : `${returns} (${hole})(${params})${suffix}`;
    if (candidate) this.subs.push(type);
    return type;
  }

  /** `A <number> _ <element type>` (or `A_`): `char [17]`, `char const (&) [17]` once referred to. */
  private arrayType(): string {
    this.expect('A');
    let digits = /^\d*/.exec(this.s.slice(this.at, this.at + 12))![0];
    this.at += digits.length;
    // A dimension that is a template parameter (`A T_ _`): its argument, `[51ul]`.
    if (digits === '' && this.peek() === 'T') digits = this.templateParam();
    this.expect('_');
    const element = this.type();
    // An array of arrays: `int [12][8]`; an array of functions or of pointers to them: not covered.
    if (element.includes(hole) && !element.includes(arrayHole)) throw new Unsupported();
    const type = element.includes(arrayHole)
      ? element.replace(arrayHole, `${arrayHole}${digits}][`)
      : `${element}${arrayHole}${digits}]`;
    this.subs.push(type);
    return type;
  }

  /** `M <class type> <member type>`: `int (Class::*)(char const*)`, `int Class::*`. */
  private memberPointer(): string {
    this.expect('M');
    const owner = finish(this.type());
    const member = this.type();
    const type = member.includes(hole) ? member.replace(hole, `${owner}::*${hole}`) : `${member} ${owner}::*`;
    this.subs.push(type);
    return type;
  }

  /**
   * `Dp <type>`: the type written once per argument of the pack it names, comma-separated (libiberty's way); read
   * again for each, the substitution candidates of the first reading kept.
   */
  private packExpansion(): string {
    if (this.expansion) throw new Unsupported();
    const from = this.at;
    const written: string[] = [];
    let end: number;
    let subs = this.subs.length;
    this.expansion = { element: 0, length: undefined };
    try {
      do {
        this.at = from;
        const type = finish(this.type());
        end = this.at;
        if (this.expansion.element === 0) subs = this.subs.length;
        else this.subs.length = subs;
        if (this.expansion.length === undefined) throw new Unsupported();
        if (this.expansion.length > 0) written.push(type);
      } while (++this.expansion.element < this.expansion.length);
    } finally {
      this.expansion = undefined;
    }
    this.at = end;
    const type = written.join(', ');
    this.subs.push(type);
    return type;
  }

  /** A class or enum type: its name, a substitution candidate once whole. */
  private nameAsType(): string {
    if (this.peek() === 'N') {
      const name = this.nestedName(true);
      if (!name.template) this.subs.push(name.text);
      return name.text;
    }
    const std = this.take('St');
    const unqualified = this.unqualifiedName('');
    let text = (std ? 'std::' : '') + unqualified;
    this.subs.push(text);
    if (this.peek() === 'I') {
      text = templated(text, this.templateArgList(false));
      this.subs.push(text);
    }
    return text;
  }
}

/** `inner` with `mark` (`*`, `&`, `&&`) added, references collapsed as C++ does (`X& &&` is `X&`). */
function collapse(inner: string, mark: string): string {
  if (mark === '*' || !inner.endsWith('&')) return inner + mark;
  if (inner.endsWith('&&') && mark === '&&') return inner;
  return `${inner.replace(/&&?$/, '')}&`;
}

/** A template argument: a pack's arguments stay apart, for its expansions (`Dp`). */
type Arg = string | string[];

/**
 * Arguments or parameters joined as libiberty joins them: one that writes nothing (an empty pack) takes its comma away,
 * but the first one has none to take (`<, void>`).
 */
function listed(items: string[]): string {
  return items.reduce((text, item, i) => (i === 0 ? item : item === '' ? text : `${text}, ${item}`), '');
}

function joinPack(pack: string[]): string {
  return pack.filter((arg) => arg !== '').join(', ');
}

/** Marks where a pointer or reference goes in a function type (`void (*)(int)`); removed from the final name. */
const hole = '\u0001';

/** Where an array type's name goes (`char (&) [17]` once referred to): its hole, then the dimensions. */
const arrayHole = ` (${hole}) [`;

/** `\u0002N\u0003`: a lambda's template parameter N while it is read (see templateParam). */
const lambdaParam = '\u0002';
const lambdaParamEnd = '\u0003';
const lambdaParamPattern = /\u0002(\d+)\u0003/g;

/** A lambda's parameters with its template parameters written as libiberty writes them: `auto:1`. */
function autoParams(text: string): string {
  return text.replace(lambdaParamPattern, (_, i: string) => `auto:${Number(i) + 1}`);
}

function finish(name: string): string {
  return autoParams(name.replaceAll(arrayHole, ' [').replaceAll(`(${hole})`, '').replaceAll(hole, ''));
}

/** `name<args>` as libiberty writes it: `> >` between closing brackets, `operator< <int>`. */
function templated(name: string, list: Arg[]): string {
  const args = list.map((arg) => (typeof arg === 'string' ? arg : joinPack(arg)));
  // An empty pack adds nothing; a function type is finished once it is an argument.
  const inner = listed(args.map(finish));
  const open = name.endsWith('<') ? ' <' : '<';
  // libiberty looks at the last argument, so after an empty pack it writes `>>`.
  const spaced = (args[args.length - 1] ?? '').endsWith('>');
  return `${name}${open}${inner}${spaced ? ' >' : '>'}`;
}

/** A class's name as its constructors bear it: no template arguments, no ABI tags (`failure[abi:cxx11]`). */
function withoutTemplateArgs(name: string): string {
  const open = name.indexOf('<');
  return (open < 0 ? name : name.slice(0, open)).replace(/\[abi:[^\]]*\]/g, '');
}
