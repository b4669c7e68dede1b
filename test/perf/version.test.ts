import assert from 'node:assert/strict';
import { release } from 'node:os';
import { test } from 'node:test';
import { kernelRelease, parsePerfVersion, parseRecordingHeader, perfVersion } from '../../src/perf/version.js';
import { needCommand } from '../support/requirements.js';

// The header perf 6.1 printed for `perf record -F 199 -g -e cpu-clock -o perf.data -- node --perf-basic-prof burn.js`.
const header = `# ========
# captured on    : Sun Nov 22 03:08:46 2026
# header version : 1
# data offset    : 264
# hostname : vm
# os release : 6.18.44-fc-v669
# perf version : 6.1.187
# arch : x86_64
# nrcpus online : 2
# nrcpus avail : 2
# cmdline : /usr/bin/perf record -F 199 -g -e cpu-clock -o perf.data -- node --perf-basic-prof burn.js 1500 
# event : name = cpu-clock, , id = { 331, 332 }, type = 1, size = 128, { sample_period, sample_freq } = 199
# event : name = page-faults, , id = { 333 }, type = 1
# CPU_TOPOLOGY info available, use -I to display
# time of first sample : 534.168759
# time of last sample : 535.851361
# sample duration :   1682.602 ms
# missing features: TRACING_DATA BRANCH_STACK
# ========
#
node  9846   534.168759:    5025125 cpu-clock: `;

test('parsePerfVersion takes the version word', () => {
  assert.equal(parsePerfVersion('perf version 6.1.187\n'), '6.1.187');
  assert.equal(parsePerfVersion('perf version 5.15.0-91.g1b2c\n'), '5.15.0-91.g1b2c');
  assert.equal(parsePerfVersion('something else\nmore'), 'something else');
});

test('parseRecordingHeader reads the machine, command line and sample times', () => {
  assert.deepEqual(parseRecordingHeader(header.split('\n')), {
    capturedOn: 'Sun Nov 22 03:08:46 2026',
    hostname: 'vm',
    osRelease: '6.18.44-fc-v669',
    perfVersion: '6.1.187',
    arch: 'x86_64',
    cpusOnline: 2,
    cmdline: '/usr/bin/perf record -F 199 -g -e cpu-clock -o perf.data -- node --perf-basic-prof burn.js 1500',
    events: ['cpu-clock', 'page-faults'],
    firstSampleTime: 534.168759,
    lastSampleTime: 535.851361,
    sampleDurationMs: 1682.602,
  });
  assert.deepEqual(parseRecordingHeader(['not a header', '# nrcpus online : x']), {});
});

test('perfVersion runs the real perf', async (t) => {
  if (!needCommand(t, 'perf', 'linux-perf')) return;
  assert.match(await perfVersion(), /^\d+\.\d+/);
  assert.equal(kernelRelease(), release());
});
