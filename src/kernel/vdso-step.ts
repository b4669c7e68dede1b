// The vDSO image kept with the recording (target/vdso), so that a folder post-processed elsewhere, by the native
// engine, names [vdso] frames (clock_gettime, gettimeofday) from this kernel's vdso rather than from the one of the
// machine post-processing. The sidecar's own vdso is the target's (src/kernel/vdso.ts).
import { layout } from '../output/layout.js';
import { OutputFolder, outputModes } from '../files/output-folder.js';
import { bytesSource, readElf } from '../formats/elf/elf.js';
import { ownVdso } from './vdso.js';
import type { CollectStep, StepReport } from '../step/step.js';

export function vdsoStep(): CollectStep {
  return {
    name: 'vdso',
    async afterRecording(context): Promise<StepReport> {
      const image = await ownVdso().catch(() => undefined);
      if (!image) return { kept: false, reason: 'no readable vdso' };
      const buildId = (await readElf(bytesSource(image), '[vdso]').catch(() => undefined))?.buildId;
      const folder = await OutputFolder.open(context.dir);
      try {
        await folder.writeFile(layout.vdso, image, outputModes.file);
      } finally {
        await folder.close();
      }
      return { kept: true, bytes: image.length, ...(buildId && { buildId }) };
    },
  };
}
