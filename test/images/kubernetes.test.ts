// The Kubernetes recipe without a cluster: every manifest under images/kubernetes/ parses as YAML and holds the
// Pod fields the recipe relies on (shared PID namespace, the sidecar's privileges, a results volume that exists),
// and the commands in its comments name the pod and containers the manifest defines.
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../support/cli.js';

const dir = join(repoRoot, 'images/kubernetes');

interface Container {
  name: string;
  image: string;
  args?: string[];
  securityContext?: { privileged?: boolean; capabilities?: { add?: string[] }; seccompProfile?: { type: string } };
  volumeMounts?: { name: string; mountPath: string }[];
}

interface Pod {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: { shareProcessNamespace?: boolean; containers: Container[]; volumes?: { name: string }[] };
}

async function manifests(): Promise<{ file: string; text: string; docs: unknown[] }[]> {
  const files = (await readdir(dir)).filter((f) => /\.ya?ml$/.test(f)).sort();
  assert.ok(files.length > 0, 'no manifests found');
  return Promise.all(
    files.map(async (file) => {
      const text = await readFile(join(dir, file), 'utf8');
      const parsed = parseAllDocuments(text);
      const documents = Array.isArray(parsed) ? parsed : [parsed];
      for (const d of documents) assert.deepEqual(d.errors, [], `${file}: ${d.errors.map(String).join('; ')}`);
      return { file, text, docs: documents.map((d) => d.toJS() as unknown) };
    }),
  );
}

test('every manifest is valid YAML with apiVersion, kind and a DNS-label name', async () => {
  for (const { file, docs } of await manifests()) {
    for (const doc of docs) {
      const d = doc as Partial<Pod>;
      assert.equal(typeof d.apiVersion, 'string', `${file}: apiVersion`);
      assert.equal(typeof d.kind, 'string', `${file}: kind`);
      assert.match(d.metadata?.name ?? '', /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, `${file}: metadata.name`);
    }
  }
});

test('the shared-PID pod: app and profcpu sidecar, perf privileges, results volume, commands that match', async () => {
  const found = (await manifests()).find((m) => m.file === 'pod-shared-pid.yaml');
  assert.ok(found);
  const pod = found.docs[0] as Pod;
  assert.equal(pod.apiVersion, 'v1');
  assert.equal(pod.kind, 'Pod');
  assert.equal(pod.spec.shareProcessNamespace, true);
  const names = pod.spec.containers.map((c) => c.name);
  assert.equal(new Set(names).size, names.length, 'container names are unique');
  const sidecar = pod.spec.containers.find((c) => c.image.startsWith('profcpu:'));
  assert.ok(sidecar, 'a container runs the profcpu image');
  const caps = sidecar.securityContext?.capabilities?.add ?? [];
  assert.ok(
    sidecar.securityContext?.privileged === true ||
      (['PERFMON', 'SYS_PTRACE', 'SYS_ADMIN'].every((c) => caps.includes(c)) &&
        sidecar.securityContext?.seccompProfile?.type === 'Unconfined'),
    'the sidecar may open perf events and read the app through /proc',
  );
  assert.deepEqual(sidecar.args, ['sleep', 'infinity'], 'the sidecar idles until exec');
  const volumes = new Set((pod.spec.volumes ?? []).map((v) => v.name));
  for (const c of pod.spec.containers)
    for (const m of c.volumeMounts ?? []) assert.ok(volumes.has(m.name), `${c.name} mounts unknown volume ${m.name}`);
  assert.ok(sidecar.volumeMounts?.some((m) => m.mountPath === '/workspace/profilings'));
  const app = pod.spec.containers.find((c) => c !== sidecar)!;
  assert.ok(!(app.volumeMounts ?? []).some((m) => m.mountPath === '/tmp'), 'the app keeps a /tmp of its own');

  // The commands in the comments name what the manifest defines.
  const exec = /kubectl exec -it (\S+) -c (\S+) -- profcpu collect/.exec(found.text);
  assert.ok(exec, 'the manifest says how to collect');
  assert.deepEqual([exec[1], exec[2]], [pod.metadata.name, sidecar.name]);
  const cp = /kubectl cp -c (\S+) (\S+):(\S+) /.exec(found.text);
  assert.ok(cp, 'the manifest says how to copy the results out');
  assert.deepEqual([cp[1], cp[2], cp[3]], [sidecar.name, pod.metadata.name, '/workspace/profilings']);
});
