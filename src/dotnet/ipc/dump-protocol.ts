// The diagnostic IPC dump commands, pure: a dump request (path in the target's file system, type) to bytes, and the
// runtime's reply to success or a ProfcpuError that says why. Ground truth: dotnet/runtime
// src/native/eventpipe/ds-dump-protocol.c and dotnet/diagnostics DiagnosticsClient.WriteDump. GenerateCoreDump (1),
// GenerateCoreDump2 (2) and GenerateCoreDump3 (3) take the same payload (string path, u32 type, u32 flags; for 1 the
// flags are a "log" boolean); a failed 3 answers the error with the runtime's own message (u32 HRESULT, string),
// the others with the HRESULT alone. A runtime without the command answers UNKNOWN_COMMAND.
import { ProfcpuError } from '../../error.js';
import {
  commandSet,
  dumpCommand,
  encodeRequest,
  encodeString,
  hresultName,
  ipcHresult,
  PayloadReader,
  protocolError,
  serverReply,
  type IpcHeader,
} from './protocol.js';

/** Dump types as the runtime numbers them (MINIDUMP_TYPE-like, createdump's --normal/--withheap/--triage/--full). */
export const dumpTypes = Object.freeze({ mini: 1, heap: 2, triage: 3, full: 4 });
export type DumpTypeName = keyof typeof dumpTypes;
export const dumpTypeNames = Object.freeze(Object.keys(dumpTypes) as DumpTypeName[]);

/** The dump command versions, newest first: the order they are tried in. */
export const dumpCommandVersions = Object.freeze([3, 2, 1] as const);
export type DumpCommandVersion = (typeof dumpCommandVersions)[number];

const commandIds: Record<DumpCommandVersion, number> = {
  1: dumpCommand.generateCoreDump,
  2: dumpCommand.generateCoreDump2,
  3: dumpCommand.generateCoreDump3,
};

export function dumpCommandName(version: DumpCommandVersion): string {
  return version === 1 ? 'GenerateCoreDump' : `GenerateCoreDump${version}`;
}

/** A request for a dump of `type` written at `path` (a path in the target's mount namespace), flags 0 (no logging). */
export function encodeGenerateCoreDumpRequest(version: DumpCommandVersion, path: string, type: DumpTypeName): Buffer {
  const values = Buffer.alloc(8);
  values.writeUInt32LE(dumpTypes[type], 0);
  values.writeUInt32LE(0, 4);
  return encodeRequest(commandSet.dump, commandIds[version], Buffer.concat([encodeString(path), values]));
}

/** What a dump reply says went wrong, when it did. */
export interface DumpRefusal {
  hresult: number;
  /** GenerateCoreDump3 only: the runtime's (createdump's) words, e.g. "Insufficient space". */
  message?: string;
}

/**
 * The reply to a dump command: undefined when the dump was written, IPC_UNSUPPORTED when the runtime does not know
 * this command version (the caller tries an older one), DUMP_REFUSED with the runtime's reason otherwise.
 */
export function decodeDumpReply(header: IpcHeader, payload: Uint8Array, version: DumpCommandVersion): void {
  const command = dumpCommandName(version);
  if (header.commandSet !== commandSet.server) {
    throw protocolError(`command set 0x${header.commandSet.toString(16)} where the server set 0xff was expected`);
  }
  if (header.commandId === serverReply.ok) return;
  if (header.commandId !== serverReply.error) {
    throw protocolError(`reply id 0x${header.commandId.toString(16)} is neither OK (0x00) nor error (0xff)`);
  }
  const refusal = readRefusal(payload, version);
  if (refusal.hresult === ipcHresult.UNKNOWN_COMMAND) {
    throw new ProfcpuError('IPC_UNSUPPORTED', `the .NET runtime does not know ${command}`, {
      remedy: 'Dumps over the diagnostic socket need .NET 5 or later (GenerateCoreDump2 .NET 6, 3 .NET 7).',
    });
  }
  throw dumpRefused(refusal);
}

function readRefusal(payload: Uint8Array, version: DumpCommandVersion): DumpRefusal {
  const reader = new PayloadReader(payload, `${dumpCommandName(version)} error reply`);
  const hresult = reader.u32('HRESULT');
  // Only version 3 says more; an older runtime may send the HRESULT alone.
  if (version !== 3 || reader.remaining < 4) return { hresult };
  const message = reader.string('error message')?.trim();
  return message ? { hresult, message } : { hresult };
}

export function dumpRefused(refusal: DumpRefusal): ProfcpuError {
  const why = refusal.message ? `${refusal.message} (${hresultName(refusal.hresult)})` : hresultName(refusal.hresult);
  return new ProfcpuError('DUMP_REFUSED', `the .NET runtime did not write the dump: ${why}`, {
    remedy:
      refusal.hresult === ipcHresult.NOTSUPPORTED
        ? 'This runtime cannot write dumps (Mono, or createdump missing next to libcoreclr.so).'
        : 'The runtime runs createdump as the target’s user into its temp folder: check that folder has room and is writable, and that ptrace is allowed in the container (createdump attaches to the process).',
  });
}
