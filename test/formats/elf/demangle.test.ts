// The demangler against binutils' c++filt in perf's mode (no parameters, no verbose forms: `c++filt -p -i`; perf 6.1
// demangles with libiberty, as c++filt does): every C++ function symbol of the node binary and of libstdc++ (tens of
// thousands: templates of templates, lambdas, local names, function pointers, packs) is written exactly as c++filt
// writes it, and the names that once stayed mangled in perf's folds are checked one by one.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test, type TestContext } from 'node:test';
import { execa } from 'execa';
import { demangle } from '../../../src/formats/elf/demangle.js';
import { needCommand } from '../../support/requirements.js';

/**
 * c++filt's names for `names`, in order (a name it cannot demangle comes back as it is): without parameters (`-p`,
 * perf 6.1's form) or with them (libstdc++'s abi::__cxa_demangle, which perf 6.4 and later use, is libiberty with
 * parameters as `c++filt -i` is).
 */
async function cxxfilt(names: string[], params = false): Promise<string[]> {
  const args = params ? ['-i'] : ['-p', '-i'];
  const { stdout } = await execa('c++filt', args, { input: names.join('\n'), maxBuffer: 1 << 28 });
  return stdout.split('\n');
}

/** The C++ function symbols of `file` (static and dynamic tables), as perf loads them. */
async function functionNames(file: string): Promise<string[]> {
  const names = new Set<string>();
  for (const args of [
    ['--defined-only', file],
    ['-D', '--defined-only', file],
  ]) {
    const { stdout } = await execa('nm', args, { maxBuffer: 1 << 28, reject: false });
    for (const line of stdout.split('\n')) {
      const [, type = '', versioned = ''] = line.split(' ');
      // nm writes a dynamic symbol's version after it (`@@GLIBCXX_3.4`), which is no part of its name.
      const name = versioned.split('@')[0]!;
      if ('TtWwi'.includes(type) && type !== '' && name.startsWith('_Z')) names.add(name);
    }
  }
  return [...names];
}

async function compareWithCxxfilt(t: TestContext, file: string): Promise<void> {
  const names = await functionNames(file);
  assert.ok(names.length > 1000, `only ${names.length} C++ symbols in ${file}`);
  const expected = await cxxfilt(names);
  const wrong: string[] = [];
  names.forEach((name, i) => {
    // perf prints a clone (`.isra.0`, `.cold`) under its function's name, where c++filt adds `[clone .isra.0]`.
    const theirs = expected[i]!.replace(/ \[clone [^\]]*\]/g, '');
    const ours = demangle(name) ?? name;
    if (ours !== theirs) wrong.push(`${name}\n  ours     ${ours}\n  c++filt  ${theirs}`);
  });
  assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} of ${names.length} names of ${file} written differently`);
  t.diagnostic(`${names.length} names of ${file}, all as c++filt writes them`);
}

test('the C++ function names of the node binary demangle exactly as c++filt -p -i writes them', async (t) => {
  if (!needCommand(t, 'nm', 'binutils') || !needCommand(t, 'c++filt', 'binutils')) return;
  await compareWithCxxfilt(t, process.execPath);
});

test('the C++ function names of libstdc++ demangle exactly as c++filt -p -i writes them', async (t) => {
  if (!needCommand(t, 'nm', 'binutils') || !needCommand(t, 'c++filt', 'binutils')) return;
  const libstdcxx = '/usr/lib/x86_64-linux-gnu/libstdc++.so.6';
  if (!existsSync(libstdcxx)) return t.skip(`no ${libstdcxx}`);
  await compareWithCxxfilt(t, libstdcxx);
});

// Names that stayed mangled (or were written otherwise) in the built-in engine's folds of whole-machine recordings,
// one per construct: a local class in a template argument with a pack expansion (Dp), the address of a member function
// as a template argument (Xad), a null pointer literal, pointers to members, arrays and references to arrays, generic
// lambdas (auto:N), noexcept function types, default arguments, closures in member initializers, std abbreviations
// written in full before a destructor, an empty pack first in a list, a transaction clone, a C function's address.
const gaps = [
  '_ZN2v88internal11StringShape33DispatchToSpecificTypeWithoutCastIZNS1_22DispatchToSpecificTypeIZNKS0_6String7GetImplEiNS0_16PtrComprCageBaseERKNS0_31SharedStringAccessGuardIfNeededEE19StringGetDispatchertJRiRS5_S8_EEET0_S4_DpOT1_E17CastingDispatchertJRS4_SA_SB_S8_EEESC_SF_',
  '_ZN12v8_inspector9V8Console4callIXadL_ZNS0_10createTaskERKN2v820FunctionCallbackInfoINS2_5ValueEEEEEEEvS7_',
  '_ZN4node10BaseObject16InternalFieldSetILi3EXadL_ZNK2v85Value10IsFunctionEvEEEEvNS2_5LocalINS2_6StringEEENS4_IS3_EERKNS2_20PropertyCallbackInfoIvEE',
  '_ZN4node10StreamBase8JSMethodIXadL_ZNS0_11WriteStringILNS_8encodingE0EEEiRKN2v820FunctionCallbackInfoINS4_5ValueEEEEEEEvS9_',
  '_ZN10hash_tableI13cselib_hasherLb0E11xcallocatorE8traverseIP8_IO_FILEXadL_Z15dump_cselib_valPP10cselib_valS5_EEEEvT_',
  '_ZN4node18SnapshotSerializer5WriteIN2v811StartupDataELPv0ELS4_0EEEmRKT_',
  '_ZN4node12_GLOBAL__N_16Parser5ProxyIMS1_FiPKcmEXadL_ZNS1_15on_header_fieldES4_mEEE3RawEP18llhttp__internal_sS4_m',
  '_ZN4node11SPrintFImplIPN2v86ObjectEJRA17_KcEEENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEPS4_OT_DpOT0_',
  '_ZNSt10_HashtableImSt4pairIKmSt10unique_ptrIA_cSt14default_deleteIS3_EEESaIS7_ENSt8__detail10_Select1stESt8equal_toImESt4hashImENS9_18_Mod_range_hashingENS9_20_Default_ranged_hashENS9_20_Prime_rehash_policyENS9_17_Hashtable_traitsILb0ELb0ELb1EEEE5clearEv',
  '_ZSt16__insertion_sortIPSt4pairISt17basic_string_viewIcSt11char_traitsIcEES4_EN9__gnu_cxx5__ops15_Iter_comp_iterIZN4node6reportL22PrintComponentVersionsEPNSA_10JSONWriterEEUlRT_RT0_E_EEEvSE_SE_SG_',
  '_ZSt6all_ofIPKcPDoFbcEEbT_S4_T0_',
  '_ZNSt17_Function_handlerIFvN2v88internal10HeapObjectENS1_14FullObjectSlotES2_EZNS1_18SharedFunctionInfo23DiscardCompiledMetadataEPNS1_7IsolateESt8functionIS4_EEd_UlS2_S3_S2_E_E10_M_managerERSt9_Any_dataRKSC_St18_Manager_operation',
  '_ZN15FLAGS_nofromenvMUlvE_4_FUNEv',
  '_ZTv0_n24_NSoD1Ev',
  '_ZNSsC1ERKSs',
  '_ZNSt17_Function_handlerIFvvEZN2v84base8CallOnceIJEvEEvPSt6atomicIhENS2_16FunctionWithArgsIJDpT_EE4typeES9_EUlvE_E9_M_invokeERKSt9_Any_data',
  '_ZGTtNKSt11logic_error4whatEv',
  '_ZNSt6vectorISt10unique_ptrI9evp_md_stN4node15FunctionDeleterIS1_XadL_Z11EVP_MD_freeEEEEESaIS5_EE17_M_realloc_insertIJRPS1_EEEvN9__gnu_cxx17__normal_iteratorIPS5_S7_EEDpOT_',
  '_ZZNSt9once_flag18_Prepare_executionC4IZSt9call_onceIMSt6threadFvvEJPS3_EEvRS_OT_DpOT0_EUlvE_EERS8_ENUlvE_4_FUNEv',
  '_ZN6icu_726number4impl10MicroPropsUt_D1Ev',
  '_ZTHN9grpc_core9Timestamp25thread_local_time_source_E',
];

/**
 * Where the full form is known to differ from libiberty, each by construct (a few in 10 000 names): a template
 * argument that is an expression in a return type (`enable_if<(... && ...)>`: not covered, the name stays mangled), a
 * template parameter of a function enclosing a local name inside template arguments, read later (libiberty resolves
 * it where it is printed), and names libiberty fails on with parameters but not without.
 */
function knownFullFormGap(name: string, ours: string | undefined, theirs: string): string | undefined {
  if (theirs === name) return 'libiberty leaves it mangled';
  if (ours === undefined && /X\w/.test(name)) return 'an expression in a template argument';
  if (/IZ.*T\d*_/.test(name)) return 'a local name’s template parameter in template arguments';
  return undefined;
}

async function compareFullForm(t: TestContext, file: string): Promise<void> {
  const names = await functionNames(file);
  const expected = await cxxfilt(names, true);
  const wrong: string[] = [];
  const gaps = new Map<string, number>();
  names.forEach((name, i) => {
    const ours = demangle(name, 'full');
    const theirs = expected[i]!;
    if ((ours ?? name) === theirs) return;
    const gap = knownFullFormGap(name, ours, theirs);
    if (gap) gaps.set(gap, (gaps.get(gap) ?? 0) + 1);
    else wrong.push(`${name}\n  ours     ${ours}\n  c++filt  ${theirs}`);
  });
  assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} of ${names.length} names of ${file} written differently`);
  const gapCount = [...gaps.values()].reduce((a, b) => a + b, 0);
  assert.ok(gapCount * 1000 < names.length, `${gapCount} known gaps in ${names.length} names`);
  t.diagnostic(
    `${names.length} names of ${file}: ${names.length - gapCount} as c++filt -i writes them; ${[...gaps].map(([gap, n]) => `${n}: ${gap}`).join('; ') || 'no gap'}`,
  );
}

test('the full form (perf 6.4 and later): the node binary’s and libstdc++’s names as c++filt -i writes them', async (t) => {
  if (!needCommand(t, 'nm', 'binutils') || !needCommand(t, 'c++filt', 'binutils')) return;
  await compareFullForm(t, process.execPath);
  const libstdcxx = '/usr/lib/x86_64-linux-gnu/libstdc++.so.6';
  if (existsSync(libstdcxx)) await compareFullForm(t, libstdcxx);
});

test('the full form writes parameters, a template’s return type, qualifiers and clones as libiberty does', () => {
  assert.equal(demangle('_ZN4node5StartEiPPc', 'full'), 'node::Start(int, char**)');
  assert.equal(demangle('_ZN4node5StartEiPPc.cold', 'full'), 'node::Start(int, char**) [clone .cold]');
  assert.equal(demangle('_Z1fv.constprop.0.isra.0', 'full'), 'f() [clone .constprop.0] [clone .isra.0]');
  assert.equal(demangle('_Z1fIiEvT_', 'full'), 'void f<int>(int)');
  assert.equal(demangle('_ZNK1A1fEv', 'full'), 'A::f() const');
  // A data symbol has no parameters; a suffix that is no clone leaves the name mangled, as libiberty does.
  assert.equal(demangle('_ZN1A1xE', 'full'), 'A::x');
  assert.equal(demangle('_Z1fv.Foo', 'full'), undefined);
});

test('names once left mangled are written as c++filt -p -i writes them', async (t) => {
  if (!needCommand(t, 'c++filt', 'binutils')) return;
  const expected = await cxxfilt(gaps);
  gaps.forEach((name, i) => {
    assert.notEqual(expected[i], name, `c++filt demangles ${name}`);
    assert.equal(demangle(name), expected[i], name);
  });
});

test('what is not a C++ name is left alone; clones are named after their function', () => {
  for (const name of ['main', '_Z', '_ZN', '_ZSt', 'x'.repeat(10_000), '_ZN1aXadL_Z1fE', '_ZN1aIDpDpT_EE'])
    assert.equal(demangle(name), undefined, name);
  // perf prints a clone under its function's name.
  assert.equal(demangle('_ZN4node5StartEiPPc.cold'), 'node::Start');
});
