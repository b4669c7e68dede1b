// A ReadyToRun assembly's bytes in (a framework `.dll` the target mapped), the names of its precompiled code out: one
// entry per code block (RVA range) with the method's name as the runtime writes it,
//   `instance int32 [System.Private.CoreLib] System.Collections.Generic.Dictionary`2[System.__Canon,System.__Canon]::Initialize(int32)[PreJIT]`
// The runtime logs these methods to the jitdump only when the perf map is on, and some (interop stubs compiled into
// the image) never: the image itself is the one complete source. Read: the PE headers, the ReadyToRun header's
// RuntimeFunctions (every code block), MethodDefEntryPoints (methods of non-generic types, by MethodDef row) and
// InstanceMethodEntryPoints (generic instantiations, keyed by signature), HotColdMap (cold parts of split methods),
// and the ECMA-335 metadata for the names. A code block that is no method's entry point belongs to the method before
// it (funclets follow their method). A composite image (`App.r2r.dll`, `framework-r2r.dll`) holds the code of many
// assemblies: one RuntimeFunctions and InstanceMethodEntryPoints for all, a MethodDefEntryPoints per component, and
// the components' metadata in their own files beside it (the caller reads them: see ReadyToRunReadOptions).
// Format: dotnet/runtime docs/design/coreclr/botr/readytorun-format.md.

import { createHash } from 'node:crypto';
import { oneLine } from '../../stacks/frame-name.js';
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
  type CliHeader,
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
  ManifestAssemblyMvids: 118,
  HotColdMap: 120,
});

/** Components of one composite image at most (the whole shared framework is about 170). */
const maxComponents = 4096;

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

export interface ReadyToRunReadOptions {
  /**
   * The metadata of a composite image's component assembly, by its simple name (`System.Private.CoreLib`): what
   * assemblyMetadata() gives for `<name>.dll` beside the composite image, or undefined when it cannot be had (its
   * methods then stay unnamed).
   */
  componentMetadata?: (name: string) => Buffer | undefined;
  /** The image's file name, which names a composite image (whose own metadata names no assembly). */
  fileName?: string;
}

/** One assembly whose methods an image holds: itself, or one component of a composite image. */
interface ModuleNames {
  assembly: string;
  names: TypeNames;
  /** Its MethodDefEntryPoints section. */
  methodDefs: { rva: number; size: number } | undefined;
}

/**
 * Reads the names of an image's precompiled code: a single-assembly image, or a composite one (the framework or an app
 * compiled as a whole, `*.r2r.dll`) with the metadata of its components from their own files. Throws
 * NotReadyToRunError for IL-only images and for a composite image's components (whose code is in the composite).
 */
export function readReadyToRunNames(bytes: Buffer, options: ReadyToRunReadOptions = {}): ReadyToRunNames {
  const image = readPeImage(bytes);
  const cli = readCliHeader(image);
  const header = readHeader(image, cli);
  const metadata = new EcmaMetadata(bytesAtRva(image, cli.metadata.rva, cli.metadata.size, 'metadata'));
  const components = header.sections.get(sectionTypes.ComponentAssemblies);
  const composite = components ? readComponents(image, components, metadata, options) : undefined;
  const self: ModuleNames | undefined = composite
    ? undefined
    : {
        assembly: metadata.assemblyName(),
        names: new TypeNames(metadata),
        methodDefs: header.sections.get(sectionTypes.MethodDefEntryPoints),
      };
  const modules = composite ?? [self!];
  // A single image is its own context (0); another module's code is not named. A composite image's module override
  // indices count from 2 (0 and 1 stand for the composite and its manifest): see componentIndex.
  const moduleOf = (index: number) => (composite ? composite[componentIndex(index)] : index === 0 ? self : undefined);
  // The module index that stands for System.Private.CoreLib: the image itself, or that component of a composite.
  const coreLibIndex = composite ? composite.findIndex((m) => m?.assembly === 'System.Private.CoreLib') + 2 : 0;
  const assembly = composite ? (options.fileName ?? 'composite').replace(/\.(dll|exe)$/i, '') : self!.assembly;
  const mvid = composite ? compositeId(image, header.sections, metadata) : readMvid(metadata);

  const functions = readRuntimeFunctions(image, header.sections.get(sectionTypes.RuntimeFunctions));
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

  const r = image.reader;
  for (const module of modules) {
    if (!module?.methodDefs) continue;
    const at = offsetOfRva(image, module.methodDefs.rva, 'MethodDefEntryPoints');
    const md = module.names.metadata;
    forEachNativeArrayElement(r, at, md.rowCount(tables.MethodDef), (index, offset) => {
      const rid = index + 1;
      nameEntry(runtimeFunctionIndex(image, offset), () => methodName(module.names, module.assembly, rid, undefined));
    });
  }

  const instances = header.sections.get(sectionTypes.InstanceMethodEntryPoints);
  if (instances) {
    const at = offsetOfRva(image, instances.rva, 'InstanceMethodEntryPoints');
    forEachNativeHashtableEntry(r, at, at + instances.size, (offset) => {
      let entry: { index: number; name: () => string };
      try {
        entry = instanceEntry(image, moduleOf, coreLibIndex, metadata, offset);
      } catch {
        unnamed++;
        return;
      }
      nameEntry(entry.index, entry.name);
    });
  }

  const cold = readHotColdMap(image, header.sections.get(sectionTypes.HotColdMap), owners);
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

/**
 * The simple names of a composite image's component assemblies, whose files a reader needs beside the image; empty
 * for an image that is not composite (IL only, single-assembly, or a component).
 */
export function compositeComponentNames(bytes: Buffer): string[] {
  const image = readPeImage(bytes);
  const cli = readCliHeader(image);
  let header: ReadyToRunHeader;
  try {
    header = readHeader(image, cli);
  } catch (error) {
    if (error instanceof NotReadyToRunError) return [];
    throw error;
  }
  const components = header.sections.get(sectionTypes.ComponentAssemblies);
  if (!components) return [];
  const manifest = new EcmaMetadata(bytesAtRva(image, cli.metadata.rva, cli.metadata.size, 'metadata'));
  return componentEntries(image, components, manifest).map((c) => c.name);
}

/**
 * An assembly file's metadata (from its `BSJB` signature on), copied out so that the file's bytes can be let go: what
 * a composite image needs of each component.
 */
export function assemblyMetadata(bytes: Buffer): Buffer {
  const image = readPeImage(bytes);
  const cli = readCliHeader(image);
  return Buffer.from(bytesAtRva(image, cli.metadata.rva, cli.metadata.size, 'metadata'));
}

interface ReadyToRunHeader {
  flags: number;
  sections: Map<number, { rva: number; size: number }>;
}

function readHeader(image: PeImage, cli: CliHeader): ReadyToRunHeader {
  if (cli.managedNativeHeader.rva === 0 || cli.managedNativeHeader.size < 16)
    throw new NotReadyToRunError('IL only: no ReadyToRun code');
  const r = image.reader;
  const headerAt = offsetOfRva(image, cli.managedNativeHeader.rva, 'ReadyToRun header');
  if (r.u32(headerAt, 'ReadyToRun signature') !== 0x00525452) throw new NotReadyToRunError('no ReadyToRun header');
  const flags = r.u32(headerAt + 8);
  const sections = readSectionList(image, headerAt + 12);
  const owner = sections.get(sectionTypes.OwnerCompositeExecutable);
  if (flags & flagComponent || owner) {
    let file = '';
    if (owner) file = r.cString(offsetOfRva(image, owner.rva, 'OwnerCompositeExecutable'), 260, 'owner name');
    throw new NotReadyToRunError(`its code is in the composite ReadyToRun image ${oneLine(file) || '(unnamed)'}`);
  }
  return { flags, sections };
}

/** A section list (READYTORUN_CORE_HEADER's NumberOfSections then entries), at the offset of its count. */
function readSectionList(image: PeImage, at: number): Map<number, { rva: number; size: number }> {
  const r = image.reader;
  const count = Math.min(r.u32(at, 'ReadyToRun section count'), 256);
  const sections = new Map<number, { rva: number; size: number }>();
  for (let i = 0; i < count; i++) {
    const entry = at + 4 + i * 12;
    sections.set(r.u32(entry), { rva: r.u32(entry + 4), size: r.u32(entry + 8) });
  }
  return sections;
}

/** A composite image's ComponentAssemblies: per component (parallel to the manifest's AssemblyRef rows), its name,
 *  embedded metadata if any, and its core header's sections. */
function componentEntries(
  image: PeImage,
  section: { rva: number; size: number },
  manifest: EcmaMetadata,
): { name: string; corHeader: number; sections: Map<number, { rva: number; size: number }> }[] {
  const r = image.reader;
  const count = Math.min(Math.floor(section.size / 16), manifest.rowCount(tables.AssemblyRef), maxComponents);
  const at = offsetOfRva(image, section.rva, 'ComponentAssemblies');
  r.check(at, count * 16, 'ComponentAssemblies');
  const entries = [];
  for (let i = 0; i < count; i++) {
    const name = manifest.string(tables.AssemblyRef, i + 1, 6);
    const coreHeader = offsetOfRva(image, r.u32(at + i * 16 + 8), 'component header');
    // READYTORUN_CORE_HEADER: Flags, then the section list.
    entries.push({ name, corHeader: r.u32(at + i * 16), sections: readSectionList(image, coreHeader + 4) });
  }
  return entries;
}

/** The components' names: metadata from their own files (or embedded), sharing one resolver and budget. */
function readComponents(
  image: PeImage,
  section: { rva: number; size: number },
  manifest: EcmaMetadata,
  options: ReadyToRunReadOptions,
): (ModuleNames | undefined)[] {
  const modules: (ModuleNames | undefined)[] = [];
  const resolve = (index: number) => modules[componentIndex(index)]?.names;
  let first: TypeNames | undefined;
  for (const entry of componentEntries(image, section, manifest)) {
    let metadata: EcmaMetadata | undefined;
    try {
      if (entry.corHeader !== 0) {
        const cli = readCliHeader(image, entry.corHeader);
        metadata = new EcmaMetadata(bytesAtRva(image, cli.metadata.rva, cli.metadata.size, 'component metadata'));
      } else {
        const blob = options.componentMetadata?.(entry.name);
        if (blob) {
          metadata = new EcmaMetadata(blob);
          // The file must be this component, not another assembly of the same name.
          if (metadata.assemblyName() !== entry.name) metadata = undefined;
        }
      }
    } catch {
      metadata = undefined;
    }
    if (!metadata) {
      modules.push(undefined);
      continue;
    }
    const names: TypeNames = new TypeNames(metadata, resolve, first);
    first ??= names;
    modules.push({ assembly: entry.name, names, methodDefs: entry.sections.get(sectionTypes.MethodDefEntryPoints) });
  }
  return modules;
}

/**
 * The component (0-based, in ComponentAssemblies' order) a module override index of a composite image stands for.
 * From R2R 6.3 on, index i > ILAR + 1 is row i - ILAR - 1 of the manifest's AssemblyRef table, and a composite image's
 * own metadata (ILAR) has no AssemblyRef rows. Checked against the runtime's jitdump (test/dotnet/readytorun/readytorun.test.ts).
 */
function componentIndex(index: number): number {
  return index - 2;
}

/** A composite image's id for its table's name: a digest of its components' MVIDs (or of its manifest). */
function compositeId(image: PeImage, sections: ReadyToRunHeader['sections'], manifest: EcmaMetadata): string {
  const mvids = sections.get(sectionTypes.ManifestAssemblyMvids);
  const hash = createHash('sha256');
  if (mvids && mvids.size > 0) hash.update(bytesAtRva(image, mvids.rva, Math.min(mvids.size, 1 << 20), 'MVIDs'));
  hash.update(readMvid(manifest));
  return hash.digest('hex').slice(0, 32);
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
 * An InstanceMethodEntryPoints entry: the method's ReadyToRun signature (flags, module, owner type, token,
 * instantiation), then the entry point. The name is worked out apart, so that an unnameable method still marks where
 * its code starts. `moduleOf` gives the names of the module a module override index stands for (0: the image's own).
 */
function instanceEntry(
  image: PeImage,
  moduleOf: (index: number) => ModuleNames | undefined,
  coreLibIndex: number,
  metadata: EcmaMetadata,
  offset: number,
): { index: number; name: () => string } {
  const r = image.reader;
  // The signature's integers are ECMA-compressed; read them from a bounded window of the image.
  const window = r.slice(offset, Math.min(4096, r.length - offset), 'instance entry');
  const sig = new SignatureReader(window, metadata);
  const flags = sig.uint();
  let moduleIndex = 0;
  if (flags & methodSig.UpdateContext) moduleIndex = sig.uint();
  let owner: TypeNode | undefined;
  if (flags & methodSig.OwnerType) owner = sig.type(0, moduleIndex);
  if (flags & methodSig.SlotInsteadOfToken) throw new PeFormatError('slot-based method entry');
  const rid = sig.uint();
  const memberRef = (flags & methodSig.MemberRefToken) !== 0;
  if (flags & methodSig.MethodInstantiation) {
    const count = sig.uint();
    if (count > 1024) throw new PeFormatError('too many method type arguments');
    for (let i = 0; i < count; i++) sig.type(0, moduleIndex);
  }
  if (flags & methodSig.Constrained) sig.type(0, moduleIndex);
  const index = runtimeFunctionIndex(image, offset + sig.at);
  return {
    index,
    name: () => {
      // In a composite image an entry names its module by its owner type's (ELEMENT_TYPE_MODULE_ZAPSIG); methods of
      // primitive types (`System.Int32::TryFormat<char>`) are CoreLib's.
      const ownerModule = moduleOfType(owner);
      const module = moduleOf(moduleIndex !== 0 ? moduleIndex : ownerModule === 'corelib' ? coreLibIndex : ownerModule);
      if (!module) throw new PeFormatError('method of a module whose metadata is not at hand');
      const { names } = module;
      names.beginName();
      // The owner type's tokens carry the module's index, which the module's resolver gives back as itself.
      const ownerText = owner ? names.fullText(owner) : undefined;
      if (ownerText?.includes('?')) throw new PeFormatError('owner type of another module');
      return memberRef ? memberRefName(names, rid, ownerText) : methodName(names, module.assembly, rid, ownerText);
    },
  };
}

/**
 * The module override index of a type's definition: a named type's, or a generic instantiation's base type's;
 * `corelib` for the types CoreLib defines that signatures write by element type (`int32`, `string`, `object`).
 */
function moduleOfType(node: TypeNode | undefined): number | 'corelib' {
  if (node?.kind === 'named') return node.module;
  if (node?.kind === 'generic' && node.base.kind === 'named') return node.base.module;
  if (node?.kind === 'primitive' || node?.kind === 'canon') return 'corelib';
  return 0;
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
