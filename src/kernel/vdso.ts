// The vDSO image of this process: the kernel maps the same one into every 64-bit process it runs, so the sidecar's
// is the target's (a 32-bit process has another, which profcpu does not profile). Read from this process's own memory,
// nothing of the target's: collect keeps it (target/vdso), the built-in engine names [vdso] frames with it.
import { open, readFile } from 'node:fs/promises';

/** A vdso is a few pages (8 KiB on x86-64 today). */
export const maxVdsoBytes = 1 << 20;

/** This process's vdso, or undefined when it has none (or a larger one than maxVdsoBytes). */
export async function ownVdso(): Promise<Buffer | undefined> {
  const maps = await readFile('/proc/self/maps', 'utf8');
  const line = maps.split('\n').find((l) => l.endsWith('[vdso]'));
  const range = line && /^([0-9a-f]+)-([0-9a-f]+)/.exec(line);
  if (!range) return undefined;
  const start = parseInt(range[1]!, 16);
  const length = parseInt(range[2]!, 16) - start;
  if (length <= 0 || length > maxVdsoBytes) return undefined;
  const mem = await open('/proc/self/mem', 'r');
  try {
    const bytes = Buffer.alloc(length);
    const { bytesRead } = await mem.read(bytes, 0, length, start);
    return bytes.subarray(0, bytesRead);
  } finally {
    await mem.close();
  }
}
