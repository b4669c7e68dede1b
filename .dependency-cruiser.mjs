// The import rules of src/ (docs/architecture.md gives each folder's role): imports run down the layers below, from
// the ground up, and never in a circle. `npm run lint` fails on a breach. A folder may import its own files and any
// folder of a lower layer; folders of one layer do not import each other (dotnet/'s parts excepted: one runtime).
const layers = [
  ['error.ts', 'diagnostics.ts'],
  ['files'],
  ['target', 'formats', 'stacks'],
  ['perf', 'render'],
  ['output'],
  ['step'],
  ['binaries', 'kernel', 'debug-files', 'jit', 'dotnet'],
  ['engine'],
  ['postprocess', 'diff'],
  ['collect', 'dump'],
  ['watch'],
  ['cli'],
];

const pattern = (names) => `^src/(${names.map((n) => n.replace('.', '[.]')).join('|')})($|/)`;

const forbidden = [
  {
    name: 'no-circular',
    comment: 'Two modules that import each other, however far round: one of them belongs lower.',
    severity: 'error',
    from: { path: '^src/' },
    to: { circular: true },
  },
  ...layers.slice(0, -1).map((layer, i) => ({
    name: `down-only-${layer.join('-').replace(/[.]ts/g, '')}`,
    comment: `${layer.join(', ')} import only what lies below them: ${layers
      .slice(i + 1)
      .flat()
      .join(', ')} lie above.`,
    severity: 'error',
    from: { path: pattern(layer) },
    to: { path: pattern(layers.slice(i + 1).flat()) },
  })),
  ...layers
    .filter((layer) => layer.length > 1)
    .map((layer) => ({
      name: `no-sideways-${layer.join('-').replace(/[.]ts/g, '')}`,
      comment: `${layer.join(', ')} are one layer: none imports another.`,
      severity: 'error',
      from: { path: pattern(layer) },
      to: { path: pattern(layer), pathNot: '^src/$1($|/)' },
    })),
  {
    name: 'no-unresolvable',
    comment: 'An import that names no file.',
    severity: 'error',
    from: {},
    to: { couldNotResolve: true },
  },
];

export default {
  forbidden,
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|node_modules)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      extensions: ['.ts', '.js', '.mjs', '.json'],
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
    },
  },
};
