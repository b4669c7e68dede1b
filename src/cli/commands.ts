// The list of commands, and the long option names that may also be written with one dash, as the original shell
// tool took them (`-pid 1`).
import type { CommandModule } from 'yargs';
import collect from './collect.js';
import demo from './demo.js';
import doctor from './doctor.js';
import dump from './dump.js';
import fold from './fold.js';
import postprocess from './postprocess.js';
import ps from './ps.js';
import render from './render.js';
import symbols from './symbols.js';
import watch from './watch.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const commands: CommandModule<any, any>[] = [
  collect,
  watch,
  postprocess,
  dump,
  demo,
  doctor,
  ps,
  symbols,
  fold,
  render,
];

/** Long options accepted with a single dash, as the original shell tool spelled them. */
export const singleDashOptions: ReadonlySet<string> = new Set([
  'pid',
  'duration',
  'dir',
  'frequency',
  'output',
  'event',
  'name',
  'quiet',
  'perfmap',
  'symbols',
  'format',
  'title',
  'width',
  'perf',
  'offline',
  'rules',
  'type',
  'timeout',
  'max-size',
]);
