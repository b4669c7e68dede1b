// The Kubernetes recipe for `profcpu watch` (images/kubernetes/pod-watch.yaml) without a cluster: its ConfigMap's
// rules pass watch's validation, the sidecar's command is a watch reading them where the ConfigMap is mounted and
// writing into the results volume, and the commands in its comments name what it defines.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { parseRulesText } from '../../src/watch/rules.js';
import { repoRoot } from '../support/cli.js';

interface Doc {
  kind: string;
  metadata: { name: string };
  data?: Record<string, string>;
  spec?: {
    shareProcessNamespace?: boolean;
    containers: {
      name: string;
      image: string;
      args?: string[];
      volumeMounts?: { name: string; mountPath: string }[];
    }[];
    volumes?: { name: string; configMap?: { name: string } }[];
  };
}

test('pod-watch.yaml: valid rules in its ConfigMap, the sidecar watching with them, comments that match', async () => {
  const text = await readFile(join(repoRoot, 'images/kubernetes/pod-watch.yaml'), 'utf8');
  const docs = parseAllDocuments(text);
  const list = (Array.isArray(docs) ? docs : [docs]).map((d) => d.toJS() as Doc);
  const configMap = list.find((d) => d.kind === 'ConfigMap')!;
  const pod = list.find((d) => d.kind === 'Pod')!;
  const rules = parseRulesText(configMap.data!['rules.yaml']!);
  assert.deepEqual(
    rules.rules.map((r) => [r.name, r.trigger.type]),
    [
      ['hot', 'cpu'],
      ['on-demand', 'demand'],
    ],
  );

  assert.equal(pod.spec!.shareProcessNamespace, true);
  const sidecar = pod.spec!.containers.find((c) => c.image.startsWith('profcpu:'))!;
  const args = sidecar.args!;
  assert.deepEqual(args.slice(0, 2), ['profcpu', 'watch']);
  const rulesPath = args[args.indexOf('--rules') + 1]!;
  const output = args[args.indexOf('--output') + 1]!;
  const mounts = sidecar.volumeMounts!;
  const volumes = pod.spec!.volumes!;
  const rulesMount = mounts.find((m) => rulesPath === join(m.mountPath, 'rules.yaml'));
  assert.ok(rulesMount, `${rulesPath} is in a mounted volume`);
  assert.equal(volumes.find((v) => v.name === rulesMount.name)?.configMap?.name, configMap.metadata.name);
  assert.ok(mounts.some((m) => output.startsWith(`${m.mountPath}/`) && m.mountPath === '/workspace/profilings'));

  const logs = /kubectl logs (\S+) -c (\S+)/.exec(text);
  assert.deepEqual([logs?.[1], logs?.[2]], [pod.metadata.name, sidecar.name]);
  const touch = /kubectl exec (\S+) -c (\S+) -- touch (\S+)\/triggers\/(\S+)/.exec(text);
  assert.deepEqual(
    [touch?.[1], touch?.[2], touch?.[3], touch?.[4]],
    [pod.metadata.name, sidecar.name, output, 'on-demand'],
  );
  const cp = /kubectl cp -c (\S+) (\S+):(\S+) /.exec(text);
  assert.deepEqual([cp?.[1], cp?.[2], cp?.[3]], [sidecar.name, pod.metadata.name, output]);
});
