#!/usr/bin/env node
// Base images for a machine that reaches no image registry (the project's CI): Debian trixie from Debian's package
// mirror with debootstrap, imported under the name the Dockerfiles' FROM uses (debian:trixie-slim), and stand-ins for
// mcr.microsoft.com/dotnet/runtime:10.0 and sdk:10.0 made from that base and this machine's .NET installation. The
// Dockerfiles users build stay as they are; only where their FROM images come from changes.
// The debootstrapped root filesystem is cached as a tarball (PROFCPU_IMAGE_CACHE, default /var/cache/profcpu-images)
// and rebuilt when older than 30 days. By hand, with an engine running (engine.mjs start):
//   DOCKER_HOST=... node scripts/containers/base-images.mjs
import { $, fs, path } from 'zx';
import { fileURLToPath } from 'node:url';

export const baseDefaults = Object.freeze({
  /** Where the debootstrapped root filesystem tarball is kept between runs. */
  cacheDir: process.env.PROFCPU_IMAGE_CACHE || '/var/cache/profcpu-images',
  suite: 'trixie',
  mirror: 'http://deb.debian.org/debian',
  /** A cached tarball older than this is rebuilt, so the base picks up security updates. */
  maxAgeDays: 30,
  /** The .NET installation the stand-ins copy (the machine's SDK). */
  dotnetRoot: '/usr/share/dotnet',
  /** The FROM names the stand-ins are tagged with. */
  debianImage: 'debian:trixie-slim',
  runtimeImage: 'mcr.microsoft.com/dotnet/runtime:10.0',
  sdkImage: 'mcr.microsoft.com/dotnet/sdk:10.0',
});

const here = path.dirname(fileURLToPath(import.meta.url));

/** Returns the cached rootfs tarball for `suite`, running debootstrap first when it is missing or stale. */
export async function ensureRootfsTarball(options = {}) {
  const given = Object.entries(options).filter(([, v]) => v !== undefined);
  const o = { ...baseDefaults, log: console.error, ...Object.fromEntries(given) };
  const tarball = path.join(o.cacheDir, `debian-${o.suite}-minbase.tar`);
  const stat = await fs.stat(tarball).catch(() => undefined);
  if (stat && Date.now() - stat.mtimeMs < o.maxAgeDays * 86_400_000) {
    o.log(`base: cached ${tarball}`);
    return tarball;
  }
  if ((await $({ nothrow: true, quiet: true })`command -v debootstrap`).exitCode !== 0)
    throw new Error('debootstrap is missing: apt-get install debootstrap');
  await fs.mkdirp(o.cacheDir);
  const rootfs = await fs.mkdtemp(path.join(o.cacheDir, `rootfs-${o.suite}-`));
  try {
    o.log(`base: debootstrap --variant=minbase ${o.suite} (about a minute)`);
    await $({ quiet: true })`debootstrap --variant=minbase ${o.suite} ${rootfs} ${o.mirror}`;
    // Like the official slim images: no apt lists or caches in the base.
    await $`rm -rf ${rootfs}/var/lib/apt/lists ${rootfs}/var/cache/apt/archives`;
    await fs.mkdirp(path.join(rootfs, 'var/lib/apt/lists/partial'));
    await fs.mkdirp(path.join(rootfs, 'var/cache/apt/archives/partial'));
    const partial = `${tarball}.partial`;
    await $`tar --numeric-owner -C ${rootfs} -cf ${partial} .`;
    await fs.rename(partial, tarball);
  } finally {
    await fs.rm(rootfs, { recursive: true, force: true });
  }
  return tarball;
}

/**
 * Imports the Debian base under its FROM name, unless the engine already has it from this very tarball: a new import
 * gets a new image id, which would throw away the build cache of every image built on it. `env` carries DOCKER_HOST.
 */
export async function importDebianBase({ env, tarball, image = baseDefaults.debianImage, log = console.error }) {
  const stat = await fs.stat(tarball);
  const source = `${path.basename(tarball)}@${stat.size}:${Math.floor(stat.mtimeMs)}`;
  const have = await $({
    env,
    nothrow: true,
    quiet: true,
  })`docker image inspect --format ${'{{index .Config.Labels "profcpu.rootfs"}}'} ${image}`;
  if (have.exitCode === 0 && have.stdout.trim() === source) {
    log(`base: ${image} already imported from ${path.basename(tarball)}`);
    return;
  }
  await $({ env, quiet: true })`docker import --change ${`LABEL profcpu.rootfs=${source}`} ${tarball} ${image}`;
  log(`base: ${image} imported from ${path.basename(tarball)}`);
}

/** The newest version folder under `dir` (`10.0.12` over `10.0.9`). */
async function newest(dir) {
  const names = (await fs.readdir(dir)).filter((n) => /^\d+\.\d+\.\d+/.test(n));
  if (names.length === 0) throw new Error(`nothing installed under ${dir}`);
  const key = (n) => n.split(/[.-]/).map((p) => Number.parseInt(p, 10) || 0);
  return names.sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    for (let i = 0; i < Math.max(x.length, y.length); i++)
      if ((x[i] ?? 0) !== (y[i] ?? 0)) return (y[i] ?? 0) - (x[i] ?? 0);
    return 0;
  })[0];
}

/**
 * Builds the .NET stand-ins from the Dockerfiles in scripts/containers/standins/, with this machine's runtime (and,
 * for the SDK, the SDK itself) as build context. Returns the versions used.
 */
export async function buildDotnetStandIns({ env, dotnetRoot = baseDefaults.dotnetRoot, log = console.error }) {
  const runtime = await newest(path.join(dotnetRoot, 'shared/Microsoft.NETCore.App'));
  const sdk = await newest(path.join(dotnetRoot, 'sdk'));
  const standins = path.join(here, 'standins');
  const runtimeFiles = ['dotnet', 'LICENSE.txt', 'host', `shared/Microsoft.NETCore.App/${runtime}`];
  await $({
    env,
    quiet: true,
  })`tar -c -C ${standins} runtime.Dockerfile -C ${dotnetRoot} ${runtimeFiles} | docker build --build-arg DOTNET_VERSION=${runtime} -f runtime.Dockerfile -t ${baseDefaults.runtimeImage} -`;
  log(`base: ${baseDefaults.runtimeImage} from this machine's .NET runtime ${runtime}`);
  // All targeting packs: restore asks for the ASP.NET Core one even for a console app.
  const sdkFiles = [`sdk/${sdk}`, 'sdk-manifests', 'packs'];
  await $({
    env,
    quiet: true,
  })`tar -c -C ${standins} sdk.Dockerfile -C ${dotnetRoot} ${sdkFiles} | docker build --build-arg SDK_VERSION=${sdk} -f sdk.Dockerfile -t ${baseDefaults.sdkImage} -`;
  log(`base: ${baseDefaults.sdkImage} from this machine's .NET SDK ${sdk}`);
  return { runtime, sdk };
}

async function main() {
  const env = { ...process.env };
  if (!env.DOCKER_HOST) throw new Error('set DOCKER_HOST to the engine (node scripts/containers/engine.mjs start)');
  const tarball = await ensureRootfsTarball();
  await importDebianBase({ env, tarball });
  await buildDotnetStandIns({ env });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((error) => {
    console.error(`base-images: ${error.message}`);
    process.exitCode = 1;
  });
}
