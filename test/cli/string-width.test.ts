// The CLI bundle (scripts/build.mjs) puts printableAsciiWidth in front of the `string-width` packages yargs uses, and
// moves yargs into a chunk: its help and usage errors must stay what unbundled yargs prints (run here from the
// TypeScript source through tsx), in English and in a language yargs has locale files for.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { execa } from 'execa';
import { printableAsciiWidth } from '../../src/cli/string-width.js';
import { repoRoot, runCli } from '../support/cli.js';

/** Every installed copy of `string-width` (yargs, cliui and wrap-ansi import two versions of it). */
function stringWidthFiles(): string[] {
  const modules = join(repoRoot, 'node_modules');
  const dirs = [join(modules, 'string-width')];
  for (const name of readdirSync(modules)) dirs.push(join(modules, name, 'node_modules', 'string-width'));
  return dirs.filter((dir) => existsSync(join(dir, 'index.js'))).map((dir) => join(dir, 'index.js'));
}

test('printableAsciiWidth gives the widths string-width gives, and leaves other text to it', async () => {
  const printable = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i));
  const texts = [...printable, '', printable.join(''), '  -h, --help  Show help  [boolean]', '[k]_[j] 0x7f01'];
  const files = stringWidthFiles();
  assert.ok(files.length >= 2, files.join(', '));
  for (const file of files) {
    const { default: stringWidth } = (await import(pathToFileURL(file).href)) as { default: (s: string) => number };
    for (const text of texts) assert.equal(printableAsciiWidth(text), stringWidth(text), `${file}: ${text}`);
  }
  for (const other of ['a\nb', 'tab\there', '\u001b[1mbold', 'caf\u00e9', '\u2026', '\u{1f525}', '\u007f'])
    assert.equal(printableAsciiWidth(other), undefined, JSON.stringify(other));
  assert.equal(printableAsciiWidth(undefined), undefined);
});

test('the bundled CLI prints the help and usage errors unbundled yargs prints', async () => {
  const cases = [['--help'], ['fold', '--help'], ['render', '--help'], ['nonsense']];
  for (const LANG of ['C.UTF-8', 'fr_FR.UTF-8']) {
    for (const args of cases) {
      const env = { LANG, LC_ALL: undefined, LC_MESSAGES: undefined, LANGUAGE: undefined, COLUMNS: undefined };
      const bundled = await runCli(args, { env });
      const source = await execa(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
        cwd: repoRoot,
        env,
        reject: false,
        all: true,
      });
      const what = `LANG=${LANG} profcpu ${args.join(' ')}`;
      assert.equal(bundled.all, source.all, what);
      assert.equal(bundled.exitCode, source.exitCode, what);
      assert.ok(bundled.all.length > 0, what);
      // The bundle found yargs's locale files.
      if (LANG.startsWith('fr') && args[0] === '--help') assert.match(bundled.all, /Affiche l'aide/, what);
    }
  }
});
