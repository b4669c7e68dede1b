// A ReadyToRun assembly's bytes in (a framework `.dll` the target mapped), the names of its precompiled code out: one
// entry per code block (RVA range) with the method's name as the runtime writes it,
//   `instance int32 [System.Private.CoreLib] System.Collections.Generic.Dictionary`2[System.__Canon,System.__Canon]::Initialize(int32)[PreJIT]`
// The runtime logs these methods to the jitdump only when the perf map is on, and some (interop stubs compiled into
// the image) never: the image itself is the one complete source. Read: the PE headers, the ReadyToRun header's
// RuntimeFunctions (every code block), MethodDefEntryPoints (methods of non-generic types, by MethodDef row) and
// InstanceMethodEntryPoints (generic instantiations, keyed by signature), HotColdMap (cold parts of split methods),
// and the ECMA-335 metadata for the names. A code block that is no method's entry point belongs to the method before
// it (funclets follow their method). Format: dotnet/runtime docs/design/coreclr/botr/readytorun-format.md.

import { tables, EcmaMetadata } from './ecma-metadata.js';
import { SignatureReader, TypeNames, type TypeNode } from './metadata-signature.js';
import { decodeUnsigned, forEachNativeArrayElement, forEachNativeHashtableEntry } from './native-format.js';
import {
  bytesAtRva,
  machineAmd64,
  offsetOfRva,
  PeFormatError,
  readCliHeader,
  readPeImage,
  type PeImage,
  type PeSection,
} from './pe-image.js';

/** One code block: [start, end) as RVAs, and its method's name. */
export interface ReadyToRunMethod {
  start: number;
  end: number;
  name: string;
}

export interface ReadyToRunNames {
  /** The assembly's simple name. */
  assembly: string;
  /** The metadata's module version id, hex: identifies this build of the assembly. */
  mvid: string;
  /** The image's sections, to turn a file offset (what perf prints) into an RVA. */
  sections: PeSection[];
  /** Code blocks sorted by start. */
  methods: ReadyToRunMethod[];
  /** Entry points whose method could not be named (another module's method, an unreadable signature). */
  unnamed: number;
}

/** Why an assembly has no names to give: not precompiled, or precompiled into a composite image elsewhere. */
export class NotReadyToRunError extends PeFormatError {}

const sectionTypes = Object.freeze({
  RuntimeFunctions: 102,
  MethodDefEntryPoints: 103,
  InstanceMethodEntryPoints: 109,
  ComponentAssemblies: 115,
  OwnerCompositeExecutable: 116,
  HotColdMap: 120,
});

/** READYTORUN_FLAG_COMPONENT: the header of one assembly inside a composite image. */
const flagComponent = 0x20;

/** Signature flags of a ReadyToRun method entry (READYTORUN_METHOD_SIG_*). */
const methodSig = Object.freeze({
  MethodInstantiation: 0x04,
  SlotInsteadOfToken: 0x08,
  MemberRefToken: 0x10,
  Constrained: 0x20,
  OwnerType: 0x40,
  UpdateContext: 0x80,
});

/** Reads the names of an image's precompiled code. Throws NotReadyToRunError for IL-only and composite parts. */
export function readReadyToRunNames(bytes: Buffer): ReadyToRunNames {
  const image = readPeImage(bytes);
  const cli = readCliHeader(image);
  if (cli.managedNativeHeader.rva === 0 || cli.managedNativeHeader.size < 16)
    throw new NotReadyToRunError('IL only: no ReadyToRun code');
  const r = image.reader;
  const headerAt = offsetOfRva(image, cli.managedNativeHeader.rva, 'ReadyToRun header');
  if (r.u32(headerAt, 'ReadyToRun signature') !== 0x00525452) throw new NotReadyToRunError('no ReadyToRun header');
  const flags = r.u32(headerAt + 8);
  if (flags & flagComponent) throw new NotReadyToRunError('its code is in a composite ReadyToRun image');
  const sectionCount = Math.min(r.u32(headerAt + 12), 256);
  const sections = new Map<number, { rva: number; size: number }>();
  for (let i = 0; i < sectionCount; i++) {
    const at = headerAt + 16 + i * 12;
    sections.set(r.u32(at), { rva: r.u32(at + 4), size: r.u32(at + 8) });
  }
  // A composite image holds the code of several assemblies, each with a header of its own: not read yet.
  if (sections.has(sectionTypes.ComponentAssemblies) || sections.has(sectionTypes.OwnerCompositeExecutable))
    throw new NotReadyToRunError('composite ReadyToRun images are not read yet');

  const metadata = new EcmaMetadata(bytesAtRva(image, cli.metadata.rva, cli.metadata.size, 'metadata'));
  const names = new TypeNames(metadata);
  const assembly = metadata.assemblyName();
  const mvid = readMvid(metadata);

  const functions = readRuntimeFunctions(image, sections.get(sectionTypes.RuntimeFunctions));
  const owners = new Array<string | undefined>(functions.count);
  let unnamed = 0;
  const nameEntry = (index: number, name: () => string) => {
    if (index >= functions.count) return;
    try {
      owners[index] = name();
    } catch {
      owners[index] = '';
      unnamed++;
    }
  };

  const methodDefs = sections.get(sectionTypes.MethodDefEntryPoints);
  if (methodDefs) {
    const at = offsetOfRva(image, methodDefs.rva, 'MethodDefEntryPoints');
    forEachNativeArrayElement(r, at, metadata.rowCount(tables.MethodDef), (index, offset) => {
      const rid = index + 1;
      nameEntry(runtimeFunctionIndex(image, offset), () => methodName(names, assembly, rid, undefined));
    });
  }

  const instances = sections.get(sectionTypes.InstanceMethodEntryPoints);
  if (instances) {
    const at = offsetOfRva(image, instances.rva, 'InstanceMethodEntryPoints');
    forEachNativeHashtableEntry(r, at, at + instances.size, (offset) => {
      let entry: { index: number; name: () => string };
      try {
        entry = instanceEntry(image, names, assembly, offset);
      } catch {
        unnamed++;
        return;
      }
      nameEntry(entry.index, entry.name);
    });
  }

  const cold = readHotColdMap(image, sections.get(sectionTypes.HotColdMap), owners);
  const methods: ReadyToRunMethod[] = [];
  let current: string | undefined;
  for (let i = 0; i < functions.count; i++) {
    const own = owners[i];
    if (own !== undefined) current = own;
    // A block that starts no method continues the one before it (funclets), unless it is a cold part.
    const name = cold.get(i) ?? current;
    if (name === undefined || name === '') continue;
    const start = functions.begin(i);
    const end = functions.end(i);
    if (end > start) methods.push({ start, end, name });
  }
  methods.sort((a, b) => a.start - b.start);
  return { assembly, mvid, sections: image.sections, methods, unnamed };
}

function readMvid(metadata: EcmaMetadata): string {
  if (metadata.rowCount(tables.Module) === 0) return '';
  const index = metadata.raw(tables.Module, 1, 2);
  return metadata.guid(index);
}

function readRuntimeFunctions(image: PeImage, section: { rva: number; size: number } | undefined) {
  if (!section) throw new NotReadyToRunError('no RuntimeFunctions section');
  const entrySize = image.machine === machineAmd64 ? 12 : 8;
  const at = offsetOfRva(image, section.rva, 'RuntimeFunctions');
  const count = Math.floor(section.size / entrySize);
  image.reader.check(at, count * entrySize, 'RuntimeFunctions');
  const r = image.reader;
  const begin = (i: number) => r.u32(at + i * entrySize);
  // Without an end field (arm64, x86), a block ends where the next begins.
  const end =
    entrySize === 12
      ? (i: number) => r.u32(at + i * entrySize + 4)
      : (i: number) => (i + 1 < count ? begin(i + 1) : begin(i) + 1);
  return { count, begin, end };
}

/** The RuntimeFunctions index an entry point's data starts with (fixups, if any, follow and are not needed). */
function runtimeFunctionIndex(image: PeImage, offset: number): number {
  const id = decodeUnsigned(image.reader, offset).value;
  return id & 1 ? id >>> 2 : id >>> 1;
}

function methodName(names: TypeNames, assembly: string, rid: number, ownerText: string | undefined): string {
  const md = names.metadata;
  if (rid < 1 || rid > md.rowCount(tables.MethodDef)) throw new PeFormatError(`no method ${rid}`);
  names.beginName();
  const name = md.string(tables.MethodDef, rid, 3);
  const sig = new SignatureReader(md.blob(tables.MethodDef, rid, 4), md).methodSignature();
  const owner = ownerText ?? names.typeDef(ownerTypeDef(md, rid), '+');
  const args = sig.params.map((p) => names.signatureText(p)).join(',');
  return `${sig.instance ? 'instance ' : ''}${names.signatureText(sig.ret)} [${assembly}] ${owner}::${name}(${args})[PreJIT]`;
}

/** A method of another assembly's type compiled into this image (`List<MyType>.Add`), by its MemberRef. */
function memberRefName(names: TypeNames, rid: number, ownerText: string | undefined): string {
  const md = names.metadata;
  if (rid < 1 || rid > md.rowCount(tables.MemberRef)) throw new PeFormatError(`no member reference ${rid}`);
  names.beginName();
  const name = md.string(tables.MemberRef, rid, 1);
  const sig = new SignatureReader(md.blob(tables.MemberRef, rid, 2), md).methodSignature();
  const parent = md.token(tables.MemberRef, rid, 0);
  let typeRef = parent.table === tables.TypeRef ? parent.row : 0;
  if (parent.table === tables.TypeSpec) {
    const spec = names.typeSpec(parent.row);
    const base = spec?.kind === 'generic' ? spec.base : spec;
    if (base?.kind === 'named' && base.token.table === tables.TypeRef) typeRef = base.token.row;
  }
  if (typeRef === 0) throw new PeFormatError('member reference without a type reference');
  const ref = names.typeRef(typeRef, '+');
  const owner = ownerText ?? ref.name;
  const args = sig.params.map((p) => names.signatureText(p)).join(',');
  return `${sig.instance ? 'instance ' : ''}${names.signatureText(sig.ret)} [${ref.assembly ?? md.assemblyName()}] ${owner}::${name}(${args})[PreJIT]`;
}

/** The TypeDef owning MethodDef `rid`: the last type whose method list starts at or before it. */
function ownerTypeDef(md: EcmaMetadata, rid: number): number {
  let low = 1;
  let high = md.rowCount(tables.TypeDef);
  let found = 0;
  while (low <= high) {
    const mid = (low + high) >>> 1;
    if (md.raw(tables.TypeDef, mid, 5) <= rid) {
      found = mid;
      low = mid + 1;
    } else high = mid - 1;
  }
  if (found === 0) throw new PeFormatError(`method ${rid} has no owning type`);
  return found;
}

/**
 * An InstanceMethodEntryPoints entry: the method's ReadyToRun signature (flags, owner type, token, instantiation),
 * then the entry point. The name is worked out apart, so that an unnameable method still marks where its code starts.
 */
function instanceEntry(
  image: PeImage,
  names: TypeNames,
  assembly: string,
  offset: number,
): { index: number; name: () => string } {
  const r = image.reader;
  // The signature's integers are ECMA-compressed; read them from a bounded window of the image.
  const window = r.slice(offset, Math.min(4096, r.length - offset), 'instance entry');
  const sig = new SignatureReader(window, names.metadata);
  const flags = sig.uint();
  let foreign = false;
  if (flags & methodSig.UpdateContext) foreign = sig.uint() !== 0;
  let owner: TypeNode | undefined;
  if (flags & methodSig.OwnerType) owner = sig.type(0, foreign);
  if (flags & methodSig.SlotInsteadOfToken) throw new PeFormatError('slot-based method entry');
  const rid = sig.uint();
  const memberRef = (flags & methodSig.MemberRefToken) !== 0;
  if (flags & methodSig.MethodInstantiation) {
    const count = sig.uint();
    if (count > 1024) throw new PeFormatError('too many method type arguments');
    for (let i = 0; i < count; i++) sig.type(0, foreign);
  }
  if (flags & methodSig.Constrained) sig.type(0, foreign);
  const index = runtimeFunctionIndex(image, offset + sig.at);
  return {
    index,
    name: () => {
      if (foreign) throw new PeFormatError('method of another module');
      names.beginName();
      const ownerText = owner ? names.fullText(owner) : undefined;
      if (ownerText?.includes('?')) throw new PeFormatError('owner type of another module');
      return memberRef ? memberRefName(names, rid, ownerText) : methodName(names, assembly, rid, ownerText);
    },
  };
}

/** Cold blocks of split methods, named after their hot part: pairs of (cold, hot) RuntimeFunctions indices. */
function readHotColdMap(
  image: PeImage,
  section: { rva: number; size: number } | undefined,
  owners: readonly (string | undefined)[],
): Map<number, string> {
  const cold = new Map<number, string>();
  if (!section) return cold;
  const at = offsetOfRva(image, section.rva, 'HotColdMap');
  const pairs = Math.floor(section.size / 8);
  image.reader.check(at, pairs * 8, 'HotColdMap');
  for (let i = 0; i < pairs; i++) {
    const a = image.reader.u32(at + i * 8);
    const b = image.reader.u32(at + i * 8 + 4);
    const [coldIndex, hotIndex] = owners[a] !== undefined && owners[b] === undefined ? [b, a] : [a, b];
    const name = owners[hotIndex];
    if (name) cold.set(coldIndex, name);
  }
  return cold;
}
