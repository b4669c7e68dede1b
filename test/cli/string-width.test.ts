// The CLI bundle (scripts/build.mjs) puts narrowTextWidth in front of the `string-width` packages yargs uses, and
// moves yargs into a chunk: its help and usage errors must stay what unbundled yargs prints (run here from the
// TypeScript source through tsx), in English and in a language yargs has locale files for.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { execa } from 'execa';
import { commands } from '../../src/cli/commands.js';
import { narrowTextWidth } from '../../src/cli/string-width.js';
import { repoRoot, runCli } from '../support/cli.js';

/** Every installed copy of `string-width` (yargs, cliui and wrap-ansi import two versions of it). */
function stringWidthFiles(): string[] {
  const modules = join(repoRoot, 'node_modules');
  const dirs = [join(modules, 'string-width')];
  for (const name of readdirSync(modules)) dirs.push(join(modules, name, 'node_modules', 'string-width'));
  return dirs.filter((dir) => existsSync(join(dir, 'index.js'))).map((dir) => join(dir, 'index.js'));
}

test('narrowTextWidth gives the widths string-width gives, and leaves other text to it', async () => {
  const printable = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i));
  const punctuation = ['\u2018', '\u2019', '\u201c', '\u201d', '\u2013', '\u2014', '\u2026', '\u2192'];
  const texts = [
    ...printable,
    ...punctuation,
    '',
    printable.join(''),
    '  -h, --help  Show help  [boolean]',
    '[k]_[j] 0x7f01',
    'collect\u2019s target/ snapshots \u2192 \u201cfolded\u201d \u2014 \u2026',
  ];
  const files = stringWidthFiles();
  assert.ok(files.length >= 2, files.join(', '));
  for (const file of files) {
    const { default: stringWidth } = (await import(pathToFileURL(file).href)) as {
      default: (s: string, options?: { ambiguousIsNarrow?: boolean }) => number;
    };
    for (const text of texts) assert.equal(narrowTextWidth(text), stringWidth(text), `${file}: ${text}`);
    // Asked to count ambiguous characters wide, string-width counts the punctuation 2: the fast path leaves it.
    for (const text of punctuation) {
      assert.equal(narrowTextWidth(text, { ambiguousIsNarrow: false }), undefined, text);
      assert.equal(stringWidth(text, { ambiguousIsNarrow: false }), 2, `${file}: ${text}`);
    }
  }
  for (const other of ['a\nb', 'tab\there', '\u001b[1mbold', 'caf\u00e9', '\u2190', '\u{1f525}', '\u007f'])
    assert.equal(narrowTextWidth(other), undefined, JSON.stringify(other));
  assert.equal(narrowTextWidth(undefined), undefined);
});

test('every command’s help is laid out by the fast path: yargs lays it out on every run of the command', async () => {
  const names = commands.map((entry) => entry.command.split(' ')[0]!);
  for (const args of [['--help'], ...names.map((name) => [name, '--help'])]) {
    const { all, exitCode } = await runCli(args, { env: { COLUMNS: undefined } });
    assert.equal(exitCode, 0, args.join(' '));
    for (const line of all.split('\n')) assert.notEqual(narrowTextWidth(line), undefined, `${args.join(' ')}: ${line}`);
  }
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
