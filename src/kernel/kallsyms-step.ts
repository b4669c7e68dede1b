// The kernel's symbols kept with the recording (target/kallsyms), so that a folder post-processed elsewhere, by the
// built-in engine, names kernel frames as perf would have here. Takes the sidecar's /proc/kallsyms (the kernel is the
// host's, shared by every container), keeps its code symbols (types t, T, w, W: what perf names frames with), and
// writes nothing when the addresses are hidden (all 0 without CAP_SYSLOG, or with kptr_restrict): kernel frames then
// stay unnamed, as perf leaves them.
import { layout } from '../output/layout.js';
import { readPathCapped } from '../files/bounded-read.js';
import { OutputFolder, outputModes } from '../files/output-folder.js';
import type { CollectStep, StepReport } from '../step/step.js';

/** /proc/kallsyms is about 10 MB with 200 000 symbols; a kernel with many modules stays well under this. */
const maxKallsymsBytes = 64 << 20;

/** The code symbols of kallsyms text, or undefined when its addresses are hidden. */
export function codeSymbols(text: string): string | undefined {
  const kept = text.split('\n').filter((line) => /^[0-9a-f]+ [tTwW] /.test(line));
  if (!kept.some((line) => !/^0+ /.test(line))) return undefined;
  return `${kept.join('\n')}\n`;
}

export function kallsymsStep(): CollectStep {
  return {
    name: 'kallsyms',
    async afterRecording(context): Promise<StepReport> {
      const { bytes, truncated } = await readPathCapped(`${context.procRoot}/kallsyms`, {
        maxBytes: maxKallsymsBytes,
        timeoutMs: 10_000,
        signal: context.signal,
      });
      const symbols = truncated ? undefined : codeSymbols(bytes.toString('utf8'));
      if (!symbols) return { kept: false, reason: truncated ? 'larger than 64 MiB' : 'addresses hidden' };
      const folder = await OutputFolder.open(context.dir);
      try {
        await folder.writeFile(layout.kallsyms, symbols, outputModes.file);
      } finally {
        await folder.close();
      }
      return { kept: true, symbols: symbols.split('\n').length - 1 };
    },
  };
}
