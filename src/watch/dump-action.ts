// The dump action of a watch rule (`kind: dump`, `type: mini|heap|triage|full`): one `profcpu dump` of the triggering
// process into the run's folder (the dump file and its manifest.json, as `profcpu dump --output` writes them). The
// watch's `stop` lets a dump under way finish (a dump cannot be cut short and still be read); its `signal` abandons
// it, and the watch removes the run's folder.
import { basename, join } from 'node:path';
import type { DumpTypeName } from '../dotnet/ipc/dump-protocol.js';
import { takeDump, type DumpOptions } from '../dump/take-dump.js';
import type { ActionRunner } from './actions.js';

export function dumpAction(base: Partial<Omit<DumpOptions, 'target' | 'type' | 'output'>> = {}): ActionRunner {
  return async (request, context) => {
    if (request.action.kind !== 'dump') throw new Error(`dump action given a ${request.action.kind} action`);
    const result = await takeDump(
      { ...base, target: request.target, type: request.action.type as DumpTypeName, output: request.dir },
      { signal: context.signal, abandon: context.signal, warn: context.warn, info: context.info },
    );
    const mib = (result.written / (1 << 20)).toFixed(1);
    return {
      summary: `${request.action.type} dump, ${mib} MiB on disk`,
      figures: { type: request.action.type, bytesOnDisk: result.written },
      links: { dump: join(request.id, basename(result.path)), manifest: join(request.id, 'manifest.json') },
    };
  };
}
