// The environment the benches run node in: without NODE_EXTRA_CA_CERTS, which some machines set (this one, to the
// system's CA bundle) and which has every node process read and parse those certificates as it starts: about half of
// what `node -e 0` costs, though no bench opens a TLS connection. `PROFCPU_BENCH_KEEP_CA_CERTS=1` keeps it.
const keep = process.env['PROFCPU_BENCH_KEEP_CA_CERTS'] === '1';

export const benchNodeEnv: Record<string, string | undefined> = Object.fromEntries(
  Object.entries(process.env).filter(([name]) => keep || name !== 'NODE_EXTRA_CA_CERTS'),
);

/** Says what happened to NODE_EXTRA_CA_CERTS, when it is set. */
export function describeNodeEnv(): void {
  if (process.env['NODE_EXTRA_CA_CERTS'] === undefined) return;
  console.log(
    keep
      ? 'NODE_EXTRA_CA_CERTS is set and kept: every node start reads its certificates'
      : 'NODE_EXTRA_CA_CERTS is set here: the runs go without it (PROFCPU_BENCH_KEEP_CA_CERTS=1 keeps it)',
  );
}
