// pprof profiles read back by a decoder we did not write (Datadog's pprof-format), and turned into folded stacks the
// way profcpu's pprof writer says it lays them out: the thread_name label as the root frame, then each location's
// lines outermost first, by each function's system_name.
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';

export function decodePprof(bytes: Uint8Array): Profile {
  const raw = bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes) : bytes;
  return Profile.decode(raw);
}

/** The profile's string at `index`. */
export function stringAt(profile: Profile, index: number | bigint): string {
  return profile.stringTable.strings[Number(index)]!;
}

/** Folded stacks of the profile's samples, weighed by value `valueIndex`. */
export function pprofToFolded(profile: Profile, valueIndex = 0): Map<string, number> {
  const functions = new Map(profile.function.map((f) => [Number(f.id), stringAt(profile, f.systemName)]));
  const locations = new Map(
    profile.location.map((l) => [Number(l.id), l.line.map((line) => functions.get(Number(line.functionId))!)]),
  );
  const threadKey = profile.stringTable.strings.indexOf('thread_name');
  const stacks = new Map<string, number>();
  for (const sample of profile.sample) {
    const frames: string[] = [];
    const thread = sample.label.find((label) => Number(label.key) === threadKey);
    if (thread) frames.push(stringAt(profile, thread.str));
    // Leaf first in pprof, innermost line first in a location.
    for (let i = sample.locationId.length - 1; i >= 0; i--)
      frames.push(...[...locations.get(Number(sample.locationId[i]))!].reverse());
    const key = frames.join(';');
    stacks.set(key, (stacks.get(key) ?? 0) + Number(sample.value[valueIndex]));
  }
  return stacks;
}
