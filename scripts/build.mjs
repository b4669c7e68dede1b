#!/usr/bin/env node
// Builds profcpu: TypeScript to dist/ (tsc: one file per module, which tests, worker threads and the demo workload
// load), then the CLI itself bundled over dist/cli/main.js (esbuild), then the offline flame-graph viewer bundle
// into assets/.
//
// The CLI bundle is for start-up time: an ESM entry holding what every run needs, and chunks in dist/cli/ that only
// the command being run loads (commands.ts imports each lazily), with the npm packages inside them, so that
// `profcpu --help` reads a handful of files instead of a hundred. Paths found from import.meta.url stay those of
// tsc's files (ownModuleUrl below).
// Two rewrites keep yargs's output what it is unbundled: its `string-width` imports get the fast
// path of src/cli/string-width.ts in front of the real package (loaded only for other text), and its locale files
// are copied next to the chunks and looked up there.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit' });

run(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json']);

/** The place yargs's locale files are copied to, relative to the chunks in dist/cli/. */
const localesDir = 'yargs-locales';

/** Every `string-width` import of the bundled packages gets the fast path; the real package is required lazily. */
const fastStringWidth = {
  name: 'fast-string-width',
  setup(b) {
    b.onResolve({ filter: /^string-width$/ }, async (args) => {
      if (args.pluginData === 'real') return undefined;
      const real = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: 'real' });
      if (real.errors.length) return { errors: real.errors };
      // Relative to the repository: the bundle's comments name this path, and must not name the builder's folders.
      return { path: relative(root, real.path), namespace: 'fast-string-width' };
    });
    b.onLoad({ filter: /.*/, namespace: 'fast-string-width' }, (args) => {
      const real = join(root, args.path);
      return {
        contents: [
          `import { narrowTextWidth } from ${JSON.stringify(join(root, 'src/cli/string-width.ts'))};`,
          `export default function stringWidth(text, options) {`,
          `  return narrowTextWidth(text, options) ?? require(${JSON.stringify(real)}).default(text, options);`,
          `}`,
        ].join('\n'),
        resolveDir: dirname(real),
        loader: 'js',
      };
    });
  },
};

/**
 * Each module of src/ sees as its import.meta.url that of its own file in tsc's dist/ (built above), wherever its
 * code lands in the bundle: paths found from it (package.json, assets/, worker and child scripts) stay those of the
 * unbundled build.
 */
const ownModuleUrl = {
  name: 'own-module-url',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, (args) => {
      const source = relative(join(root, 'src'), args.path);
      if (source.startsWith('..')) return undefined;
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return undefined;
      const built = relative(join(root, 'dist/cli'), join(root, 'dist', source.replace(/\.ts$/, '.js')));
      const url = `new URL(${JSON.stringify(built.split(sep).join('/'))}, import.meta.url).href`;
      return { contents: text.replaceAll('import.meta.url', url), loader: 'ts' };
    });
  },
};

/** yargs finds its locale files from its own module's path: in the bundle, from the chunk's. */
const yargsLocales = {
  name: 'yargs-locales',
  setup(b) {
    b.onLoad({ filter: /[\\/]yargs[\\/]lib[\\/]platform-shims[\\/]esm\.mjs$/ }, (args) => {
      const text = readFileSync(args.path, 'utf8');
      const from = "resolve(__dirname, '../../../locales')";
      if (!text.includes(from)) throw new Error(`${args.path} no longer holds ${from}: check how yargs finds locales`);
      const to = `fileURLToPath(new URL(${JSON.stringify(`./${localesDir}`)}, import.meta.url))`;
      return { contents: text.replace(from, to), loader: 'js' };
    });
  },
};

// Chunks of an earlier build (their names hold a hash) would stay beside the new ones.
for (const name of readdirSync(join(root, 'dist/cli'))) {
  if (/-[0-9A-Z]{8}\.js(\.map)?$/.test(name)) rmSync(join(root, 'dist/cli', name));
}
await build({
  absWorkingDir: root,
  entryPoints: ['src/cli/main.ts'],
  outdir: 'dist',
  outbase: 'src',
  chunkNames: 'cli/[name]-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: ['node20'],
  sourcemap: true,
  // The CommonJS packages inside (cross-spawn under execa...) require Node's modules: give them a require.
  banner: {
    js: "import { createRequire as profcpuCreateRequire } from 'node:module';\nconst require = profcpuCreateRequire(import.meta.url);",
  },
  logLevel: 'warning',
  plugins: [ownModuleUrl, fastStringWidth, yargsLocales],
});
cpSync(join(root, 'node_modules/yargs/locales'), join(root, 'dist/cli', localesDir), { recursive: true });
chmodSync(`${root}/dist/cli/main.js`, 0o755);
if (existsSync(`${root}/scripts/build-viewer.mjs`)) run(process.execPath, ['scripts/build-viewer.mjs']);
