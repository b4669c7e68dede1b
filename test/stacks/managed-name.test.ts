import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatManagedName, parseManagedName } from '../../src/stacks/managed-name.js';

const none = { keepModule: false, keepArguments: false, keepTier: false };
const runInternal =
  'instance void [System.Private.CoreLib] System.Threading.ExecutionContext::RunInternal(class System.Threading.ExecutionContext,class System.Threading.ContextCallback,object)[OptimizedTier1]';

test('a .NET signature becomes Type::Method', () => {
  assert.equal(formatManagedName(runInternal, none), 'System.Threading.ExecutionContext::RunInternal');
});

test('module, arguments and tier are kept on request', () => {
  assert.equal(
    formatManagedName(runInternal, { keepModule: true, keepArguments: false, keepTier: true }),
    'System.Private.CoreLib!System.Threading.ExecutionContext::RunInternal[OptimizedTier1]',
  );
  assert.equal(
    formatManagedName(runInternal, { keepModule: false, keepArguments: true, keepTier: false }),
    'System.Threading.ExecutionContext::RunInternal(class System.Threading.ExecutionContext,class System.Threading.ContextCallback,object)',
  );
});

test('generic, nested and array types survive', () => {
  assert.deepEqual(
    parseManagedName(
      'class System.String[] [System.Private.CoreLib] System.String::Split(char[],valuetype System.StringSplitOptions)[PreJIT]',
    ),
    {
      module: 'System.Private.CoreLib',
      method: 'System.String::Split',
      args: '(char[],valuetype System.StringSplitOptions)',
      tier: '[PreJIT]',
    },
  );
  assert.equal(
    formatManagedName(
      'instance !!0 [MyApp] MyApp.Outer`1+Inner<!!0>::Get<class System.String>(method void *(int32),native int)[QuickJitted]',
      none,
    ),
    'MyApp.Outer`1+Inner<!!0>::Get<class System.String>',
  );
});

test('a signature without module keeps the last word before the arguments', () => {
  assert.equal(
    formatManagedName('void dynamicClass::IL_STUB_PInvoke(int32)[Optimized]', none),
    'dynamicClass::IL_STUB_PInvoke',
  );
});

test('names that are not .NET signatures are unchanged', () => {
  for (const name of [
    'stub<3> AllocateTemporaryEntryPoints<PRESTUB_METHOD>',
    'JS:*fib /tmp/app.js:1:13',
    'LazyCompile:~<anonymous> node:internal/main:1',
    'plain_function',
    'f(int)',
  ]) {
    assert.equal(formatManagedName(name, none), name);
  }
});
