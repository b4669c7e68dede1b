// What a watch rule does once triggered: an ActionRunner per action kind, given the process, the run's folder and the
// signals, giving an outcome for the index. The profile action is a collect session into the run's folder, so a run
// holds exactly what `profcpu collect` writes (perf.data, target/, flame graphs, manifest, tarball). A dump action
// plugs in the same way (kind `dump`); until profcpu has one, rule validation refuses it (rules.ts).
import { join } from 'node:path';
import { layout } from '../output/layout.js';
import type { Warn } from '../diagnostics.js';
import { collect, type CollectContext } from '../collect/session.js';
import type { CollectOptions } from '../collect/options.js';
import type { CollectStep } from '../step/step.js';
import type { TargetInfo } from '../target/inspect.js';
import type { Action } from './rules.js';

export interface ActionRequest {
  action: Action;
  target: TargetInfo;
  /** The run's folder (absolute), which the action creates and fills. */
  dir: string;
  /** The run's folder name, relative to the watch folder (for links in the index). */
  id: string;
}

export interface ActionContext {
  /** Aborting ends the action early, keeping what it made (the watch was asked to end: finish the action). */
  stop: AbortSignal;
  /** Aborting abandons the action (ABORTED); the watch discards its folder. */
  signal: AbortSignal;
  warn: Warn;
  info: (message: string) => void;
}

export interface ActionOutcome {
  /** One line: what was made. */
  summary: string;
  figures: Record<string, number | string>;
  /** Files worth linking from the index, by label, relative to the watch folder. */
  links: Record<string, string>;
}

export type ActionRunner = (request: ActionRequest, context: ActionContext) => Promise<ActionOutcome>;

export type ActionRunners = { [K in Action['kind']]?: ActionRunner };

/** The postprocess result fields the profile action reports. */
interface PostprocessFigures {
  files: Record<string, string>;
  fold: { samples: number; keptSamples: number; quality: { samples: number; fullyNamed: number } };
}

/**
 * The profile action: collect with the watch's settings (perf, steps, postprocess, symbols) and the action's duration,
 * frequency and unwinding, into the run's folder.
 */
export function profileAction<R extends PostprocessFigures>(
  base: Partial<CollectOptions>,
  collectContext: Pick<CollectContext<R>, 'postprocess'> & { steps: () => readonly CollectStep[] },
): ActionRunner {
  return async (request, context) => {
    if (request.action.kind !== 'profile') throw new Error(`profile action given a ${request.action.kind} action`);
    const result = await collect<R>(
      {
        ...base,
        pid: request.target.pid,
        output: request.dir,
        durationSeconds: request.action.durationSeconds,
        frequency: request.action.frequency,
        ...(request.action.unwind && { unwind: request.action.unwind }),
        ...(request.action.offCpu && { offCpu: true }),
        ...(request.action.minBlockUs !== undefined && { minBlockUs: request.action.minBlockUs }),
      },
      {
        stop: context.stop,
        signal: context.signal,
        warn: context.warn,
        info: context.info,
        steps: collectContext.steps(),
        ...(collectContext.postprocess && { postprocess: collectContext.postprocess }),
      },
    );
    const figures: Record<string, number | string> = {
      seconds: Number(result.recordedSeconds.toFixed(1)),
      end: result.record.end,
    };
    if (result.record.samples !== undefined) figures['samples'] = result.record.samples;
    const links: Record<string, string> = {};
    const fold = result.postprocess?.fold;
    if (fold && fold.quality.samples > 0)
      figures['named'] = `${((100 * fold.quality.fullyNamed) / fold.quality.samples).toFixed(1)}%`;
    if (result.postprocess) {
      for (const [label, file] of [
        ['flame graph', layout.flamegraphSvg],
        ['html', layout.flamegraphHtml],
        ['speedscope', layout.speedscope],
        ['pprof', layout.pprof],
        ['tarball', layout.tarball],
      ] as const)
        if (result.postprocess.files[file] !== undefined) links[label] = join(request.id, file);
      links['manifest'] = join(request.id, layout.manifest);
    }
    return {
      summary: `${result.record.samples ?? '?'} samples in ${result.recordedSeconds.toFixed(1)} s`,
      figures,
      links,
    };
  };
}
