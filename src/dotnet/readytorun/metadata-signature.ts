// Signature blobs (ECMA-335 II.23.2, with ReadyToRun's additions) in, type trees out, and type trees to text the way
// the .NET runtime writes them into perf maps and jitdumps, so a method named from an image reads exactly like the
// same method named by the runtime:
//   in signatures   `class [System.Runtime]System.IO.TextWriter`, `valuetype System.Guid/GuidResult&`, `!!0[]`
//   in instantiations `System.Collections.Generic.Dictionary`2[System.Int32,System.__Canon]`
// Blobs come from the target's file: depth and length are bounded, and an unknown element type is an error.

import { tables, type EcmaMetadata, type Token } from './ecma-metadata.js';
import { PeFormatError } from './pe-image.js';

export type TypeNode =
  | { kind: 'primitive'; element: number }
  | { kind: 'named'; token: Token; valueType: boolean; module: number }
  | { kind: 'generic'; base: TypeNode; args: TypeNode[] }
  | { kind: 'var'; index: number; method: boolean }
  | { kind: 'pointer' | 'byref' | 'szarray'; of: TypeNode }
  | { kind: 'array'; of: TypeNode; rank: number }
  | { kind: 'canon' }
  | { kind: 'modified'; required: boolean; token: Token; module: number; of: TypeNode }
  | { kind: 'fnptr'; convention: number; ret: TypeNode; params: TypeNode[] };

const maxDepth = 32;
/** Type nodes printed for one name at most (see TypeNames.budget); past it, `…`. */
export const nodesPerName = 20_000;
const maxArgs = 1024;

const primitive: Record<number, [sig: string, full: string]> = {
  0x01: ['void', 'System.Void'],
  0x02: ['bool', 'System.Boolean'],
  0x03: ['char', 'System.Char'],
  0x04: ['int8', 'System.SByte'],
  0x05: ['uint8', 'System.Byte'],
  0x06: ['int16', 'System.Int16'],
  0x07: ['uint16', 'System.UInt16'],
  0x08: ['int32', 'System.Int32'],
  0x09: ['uint32', 'System.UInt32'],
  0x0a: ['int64', 'System.Int64'],
  0x0b: ['uint64', 'System.UInt64'],
  0x0c: ['float32', 'System.Single'],
  0x0d: ['float64', 'System.Double'],
  0x0e: ['string', 'System.String'],
  0x16: ['typedref', 'System.TypedReference'],
  0x18: ['native int', 'System.IntPtr'],
  0x19: ['native uint', 'System.UIntPtr'],
  0x1c: ['object', 'System.Object'],
};

/** What a pointer, byref or array adds after its element type: `*`, `&`, `[]`, `[,]`; the same in both notations. */
function suffixOf(node: Extract<TypeNode, { kind: 'pointer' | 'byref' | 'szarray' | 'array' }>): string {
  if (node.kind === 'array') return `[${','.repeat(Math.max(0, node.rank - 1))}]`;
  return node.kind === 'pointer' ? '*' : node.kind === 'byref' ? '&' : '[]';
}

/** Calling conventions of function pointers, as the runtime writes them (the default one is not written). */
const callingConventions: Record<number, string> = {
  1: 'unmanaged cdecl',
  2: 'unmanaged stdcall',
  3: 'unmanaged thiscall',
  4: 'unmanaged fastcall',
  5: 'vararg',
  9: 'unmanaged',
};

/** Reads one blob: compressed integers, tokens and types, each bounded. */
export class SignatureReader {
  at = 0;
  constructor(
    readonly blob: Buffer,
    readonly metadata: EcmaMetadata,
  ) {}

  private byte(): number {
    if (this.at >= this.blob.length) throw new PeFormatError('signature ends early');
    return this.blob[this.at++]!;
  }

  /** ECMA-335 II.23.2 compressed unsigned integer. */
  uint(): number {
    const b = this.byte();
    if ((b & 0x80) === 0) return b;
    if ((b & 0xc0) === 0x80) return ((b & 0x3f) << 8) | this.byte();
    if ((b & 0xe0) === 0xc0) return (((b & 0x1f) << 24) | (this.byte() << 16) | (this.byte() << 8) | this.byte()) >>> 0;
    throw new PeFormatError('bad compressed integer in a signature');
  }

  /** TypeDefOrRefOrSpecEncoded. */
  typeToken(): Token {
    const value = this.uint();
    const table = [tables.TypeDef, tables.TypeRef, tables.TypeSpec][value & 3];
    if (table === undefined) throw new PeFormatError('bad type token in a signature');
    return { table, row: value >>> 2 };
  }

  /**
   * One type. `module` is the ReadyToRun module override its tokens belong to (0: the signature's own module), set by
   * the signature's context or by ELEMENT_TYPE_MODULE_ZAPSIG inside it.
   */
  type(depth = 0, module = 0): TypeNode {
    if (depth > maxDepth) throw new PeFormatError('signature nested too deeply');
    const element = this.byte();
    if (primitive[element]) return { kind: 'primitive', element };
    switch (element) {
      case 0x0f:
        return { kind: 'pointer', of: this.type(depth + 1, module) };
      case 0x10:
        return { kind: 'byref', of: this.type(depth + 1, module) };
      case 0x11:
      case 0x12:
        return { kind: 'named', token: this.typeToken(), valueType: element === 0x11, module };
      case 0x13:
      case 0x1e:
        return { kind: 'var', index: this.uint(), method: element === 0x1e };
      case 0x14: {
        const of = this.type(depth + 1, module);
        const rank = this.uint();
        for (let n = this.uint(), i = 0; i < n; i++) this.uint();
        for (let n = this.uint(), i = 0; i < n; i++) this.uint();
        return { kind: 'array', of, rank };
      }
      case 0x15: {
        const base = this.type(depth + 1, module);
        const count = this.uint();
        if (count > maxArgs) throw new PeFormatError('too many generic arguments');
        const args: TypeNode[] = [];
        for (let i = 0; i < count; i++) args.push(this.type(depth + 1, module));
        return { kind: 'generic', base, args };
      }
      case 0x1b: {
        const convention = (this.blob[this.at] ?? 0) & 0x0f;
        const { ret, params } = this.methodSignature(depth + 1, module);
        return { kind: 'fnptr', convention, ret, params };
      }
      case 0x1d:
        return { kind: 'szarray', of: this.type(depth + 1, module) };
      case 0x1f:
      case 0x20: {
        const token = this.typeToken();
        return { kind: 'modified', required: element === 0x1f, token, module, of: this.type(depth + 1, module) };
      }
      case 0x45:
        return this.type(depth + 1, module);
      case 0x3e: // ELEMENT_TYPE_CANON_ZAPSIG: System.__Canon in shared generic code
        return { kind: 'canon' };
      case 0x3f: {
        // ELEMENT_TYPE_MODULE_ZAPSIG: the type's tokens are another module's.
        const override = this.uint();
        return this.type(depth + 1, override !== 0 ? override : module);
      }
      default:
        throw new PeFormatError(`element type 0x${element.toString(16)} in a signature`);
    }
  }

  /** A MethodDefSig / MethodRefSig: whether it has `this`, the return type and the parameters. */
  methodSignature(depth = 0, module = 0): { instance: boolean; ret: TypeNode; params: TypeNode[] } {
    const flags = this.byte();
    if (flags & 0x10) this.uint(); // generic parameter count
    const count = this.uint();
    if (count > maxArgs) throw new PeFormatError('too many parameters');
    const ret = this.type(depth, module);
    const params: TypeNode[] = [];
    for (let i = 0; i < count; i++) {
      if (this.blob[this.at] === 0x41) this.at++; // sentinel of a vararg call site
      params.push(this.type(depth, module));
    }
    return { instance: (flags & 0x20) !== 0, ret, params };
  }
}

/**
 * The other modules a signature's tokens may belong to (a composite image's component assemblies), by ReadyToRun module
 * override index; undefined when the index names no module whose metadata is at hand.
 */
export type ModuleResolver = (index: number) => TypeNames | undefined;

/**
 * Names of TypeDefs, TypeRefs and TypeSpecs of one module, memoised (a framework image names ~100 000 types). The
 * modules of one composite image share a resolver and one budget.
 */
export class TypeNames {
  private readonly enclosing = new Map<number, number>();
  private readonly defNames = new Map<number, { ns: string; name: string }>();
  private readonly specs = new Map<number, TypeNode | undefined>();
  /**
   * Type nodes one name may still print. TypeSpecs can refer to TypeSpecs with many arguments each, so a few hundred
   * bytes of a hostile image could otherwise stand for a name of astronomic length.
   */
  private readonly budget: { left: number };

  constructor(
    readonly metadata: EcmaMetadata,
    private readonly modules?: ModuleResolver,
    shareBudgetWith?: TypeNames,
  ) {
    this.budget = shareBudgetWith?.budget ?? { left: nodesPerName };
    for (let row = 1; row <= metadata.rowCount(tables.NestedClass); row++)
      this.enclosing.set(metadata.raw(tables.NestedClass, row, 0), metadata.raw(tables.NestedClass, row, 1));
  }

  /** The names of the module a token of module override `index` belongs to: this one for 0, else the resolver's. */
  private moduleOf(index: number): TypeNames | undefined {
    return index === 0 ? this : this.modules?.(index);
  }

  /** `Ns.Outer+Inner` (separator `+`) or `Ns.Outer/Inner` (`/`, as signatures write nested types). */
  typeDef(row: number, separator: '+' | '/'): string {
    const parts: string[] = [];
    for (let current = row, hops = 0; current !== 0 && hops < maxDepth; hops++) {
      const { ns, name } = this.defName(current);
      const outer = this.enclosing.get(current) ?? 0;
      parts.unshift(outer === 0 && ns !== '' ? `${ns}.${name}` : name);
      current = outer;
    }
    return parts.join(separator);
  }

  private defName(row: number): { ns: string; name: string } {
    let found = this.defNames.get(row);
    if (!found) {
      found = {
        name: this.metadata.string(tables.TypeDef, row, 1),
        ns: this.metadata.string(tables.TypeDef, row, 2),
      };
      this.defNames.set(row, found);
    }
    return found;
  }

  /** A TypeRef's name and, when another assembly defines it, that assembly's name. */
  typeRef(row: number, separator: '+' | '/'): { name: string; assembly: string | undefined } {
    const parts: string[] = [];
    let assembly: string | undefined;
    for (let current = row, hops = 0; current !== 0 && hops < maxDepth; hops++) {
      const name = this.metadata.string(tables.TypeRef, current, 1);
      const ns = this.metadata.string(tables.TypeRef, current, 2);
      const scope = this.metadata.token(tables.TypeRef, current, 0);
      const nested = scope.table === tables.TypeRef;
      parts.unshift(!nested && ns !== '' ? `${ns}.${name}` : name);
      if (!nested) {
        if (scope.table === tables.AssemblyRef && scope.row > 0)
          assembly = this.metadata.string(tables.AssemblyRef, scope.row, 6);
        break;
      }
      current = scope.row;
    }
    return { name: parts.join(separator), assembly };
  }

  /** Starts a new name: the budget of type nodes it may print is full again. */
  beginName(): void {
    this.budget.left = nodesPerName;
  }

  /** A type as signatures print it (`class [Asm]Ns.Type`, `valuetype Ns.Outer/Inner`, `int32`, `!0`). */
  signatureText(node: TypeNode, depth = 0): string {
    return this.typeText(node, 'signature', depth);
  }

  /** A type as instantiations print it (`System.Int32`, `System.Collections.Generic.List`1[System.__Canon]`). */
  fullText(node: TypeNode, depth = 0): string {
    return this.typeText(node, 'full', depth);
  }

  /**
   * Both printers walk the node kinds the same way, within the same depth and budget; `style` picks the words: a
   * signature's (`class`/`valuetype`, `<...>`, modifiers and function pointers spelled out) or a full name's (`[...]`,
   * modifiers dropped, a function pointer as System.IntPtr).
   */
  private typeText(node: TypeNode, style: 'signature' | 'full', depth: number): string {
    if (depth > maxDepth) return '?';
    if (--this.budget.left < 0) return '…';
    const signature = style === 'signature';
    const inner = (child: TypeNode) => this.typeText(child, style, depth + 1);
    switch (node.kind) {
      case 'primitive':
        return primitive[node.element]![signature ? 0 : 1];
      case 'canon':
        return signature ? 'class System.__Canon' : 'System.__Canon';
      case 'fnptr': {
        if (!signature) return 'System.IntPtr';
        const convention = callingConventions[node.convention];
        const args = node.params.map(inner).join(',');
        return `method ${convention ? `${convention} ` : ''}${inner(node.ret)} *(${args})`;
      }
      case 'modified': {
        if (!signature) return inner(node.of);
        const modifier = node.required ? 'modreq' : 'modopt';
        const owner = this.moduleOf(node.module);
        const name = owner ? owner.tokenFullName(node.token, depth) : '?';
        return `${inner(node.of)} ${modifier}(${name})`;
      }
      case 'var':
        return `${node.method ? '!!' : '!'}${node.index}`;
      case 'pointer':
      case 'byref':
      case 'szarray':
      case 'array':
        return inner(node.of) + suffixOf(node);
      case 'generic': {
        const [open, close] = signature ? ['<', '>'] : ['[', ']'];
        return `${inner(node.base)}${open}${node.args.map(inner).join(',')}${close}`;
      }
      case 'named':
        if (!signature) return this.moduleOf(node.module)?.tokenFullName(node.token, depth) ?? '?';
        return (node.valueType ? 'valuetype ' : 'class ') + this.tokenSignatureName(node, depth);
    }
  }

  private tokenSignatureName(node: { token: Token; module: number }, depth: number, defPrefix = ''): string {
    const { token } = node;
    const owner = this.moduleOf(node.module);
    if (!owner) return '?';
    // Another module's TypeDef is written with its assembly, as a TypeRef to it would be.
    if (owner !== this)
      return owner.tokenSignatureName({ token, module: 0 }, depth, `[${owner.metadata.assemblyName()}]`);
    if (token.table === tables.TypeDef) return defPrefix + this.typeDef(token.row, '/');
    if (token.table === tables.TypeRef) {
      const ref = this.typeRef(token.row, '/');
      return ref.assembly ? `[${ref.assembly}]${ref.name}` : ref.name;
    }
    const spec = this.typeSpec(token.row);
    return spec ? this.signatureText(spec, depth + 1).replace(/^(class|valuetype) /, '') : '?';
  }

  private tokenFullName(token: Token, depth: number): string {
    if (token.table === tables.TypeDef) return this.typeDef(token.row, '+');
    if (token.table === tables.TypeRef) return this.typeRef(token.row, '+').name;
    const spec = this.typeSpec(token.row);
    return spec ? this.fullText(spec, depth + 1) : '?';
  }

  typeSpec(row: number): TypeNode | undefined {
    if (row < 1 || row > this.metadata.rowCount(tables.TypeSpec)) return undefined;
    if (!this.specs.has(row)) {
      let node: TypeNode | undefined;
      try {
        node = new SignatureReader(this.metadata.blob(tables.TypeSpec, row, 0), this.metadata).type(1);
      } catch {
        node = undefined;
      }
      this.specs.set(row, node);
    }
    return this.specs.get(row);
  }
}
