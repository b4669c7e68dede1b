// The .NET diagnostic IPC wire format, pure: the few requests profcpu sends (ProcessInfo, ProcessInfo2,
// EnablePerfMap, DisablePerfMap; the dump commands are in dump-protocol.ts) to bytes, and reply bytes to typed values
// or a ProfcpuError. No I/O here.
// Ground truth: dotnet/diagnostics documentation/design-docs/ipc-protocol.md and dotnet/runtime
// src/native/eventpipe/ds-protocol.c, ds-process-protocol.c (see /work/shared/FACTS.md §2).
import { ProfcpuError } from '../../error.js';

/** "DOTNET_IPC_V1" and its NUL: the first 14 bytes of every request and reply. */
export const IPC_MAGIC = Buffer.from('DOTNET_IPC_V1\0', 'latin1');
export const HEADER_SIZE = 20;
/** The size field is a u16, so no message can be larger. */
export const MAX_MESSAGE_SIZE = 0xffff;

export const commandSet = Object.freeze({ dump: 0x01, process: 0x04, server: 0xff });

/** Process command set ids profcpu sends (with the dump set's GenerateCoreDump*, dump-protocol.ts). */
export const processCommand = Object.freeze({
  processInfo: 0x00,
  processInfo2: 0x04,
  enablePerfMap: 0x05,
  disablePerfMap: 0x06,
});

/** Server command set reply ids. */
export const serverReply = Object.freeze({ ok: 0x00, error: 0xff });

/** HRESULTs the diagnostic server answers with (ds-protocol.h), as unsigned 32-bit values. */
export const ipcHresult = Object.freeze({
  BAD_ENCODING: 0x80131384,
  UNKNOWN_COMMAND: 0x80131385,
  UNKNOWN_MAGIC: 0x80131386,
  NOTSUPPORTED: 0x80131515,
  NOT_YET_AVAILABLE: 0x8013135b,
});

/** Same values as DOTNET_PerfMapEnabled. */
export const perfMapType = Object.freeze({ disabled: 0, all: 1, jitDump: 2, perfMap: 3 });
export type PerfMapType = (typeof perfMapType)[keyof typeof perfMapType];

export interface IpcHeader {
  /** Total message size, header included. */
  size: number;
  commandSet: number;
  commandId: number;
}

export interface ProcessInfo {
  /** The pid inside the target's PID namespace. */
  pid: number;
  /** 16-byte runtime instance cookie, as lower-case GUID text. */
  runtimeCookie: string;
  commandLine: string | null;
  os: string | null;
  arch: string | null;
  /** ProcessInfo2 only; `undefined` when the runtime answered only ProcessInfo. */
  managedEntrypointAssemblyName?: string | null;
  /** ProcessInfo2 only, e.g. "10.0.12". */
  clrProductVersion?: string | null;
}

/** Dump command set ids (ds-dump-protocol.h): one payload for all three; 2 takes flags, 3 answers errors in words. */
export const dumpCommand = Object.freeze({ generateCoreDump: 0x01, generateCoreDump2: 0x02, generateCoreDump3: 0x03 });

/**
 * Whether `request` is one of the commands profcpu may send. Whoever reaches the socket can also make the runtime
 * load code (startup hooks, profilers), so the transport refuses everything else.
 */
export function isAllowedRequest(request: Uint8Array): boolean {
  if (request.length < HEADER_SIZE) return false;
  const allowed: number[] =
    request[16] === commandSet.process
      ? Object.values(processCommand)
      : request[16] === commandSet.dump
        ? Object.values(dumpCommand)
        : [];
  return allowed.includes(request[17]!);
}

export function hresultName(hresult: number): string {
  const name = Object.entries(ipcHresult).find(([, value]) => value === hresult)?.[0];
  const hex = `0x${hresult.toString(16).toUpperCase().padStart(8, '0')}`;
  return name ? `${name} (${hex})` : hex;
}

/** A request: the 20-byte header followed by the payload. */
export function encodeRequest(set: number, id: number, payload: Uint8Array = new Uint8Array(0)): Buffer {
  const size = HEADER_SIZE + payload.length;
  if (size > MAX_MESSAGE_SIZE) throw new RangeError(`IPC message of ${size} bytes exceeds ${MAX_MESSAGE_SIZE}`);
  const message = Buffer.alloc(size);
  IPC_MAGIC.copy(message, 0);
  message.writeUInt16LE(size, 14);
  message.writeUInt8(set, 16);
  message.writeUInt8(id, 17);
  message.writeUInt16LE(0, 18);
  Buffer.from(payload).copy(message, HEADER_SIZE);
  return message;
}

/** Wire string: u32 count of UTF-16 code units including the NUL, then UTF-16LE; null is count 0. */
export function encodeString(value: string | null): Buffer {
  if (value === null) return Buffer.alloc(4);
  const text = Buffer.from(`${value}\0`, 'utf16le');
  const out = Buffer.alloc(4 + text.length);
  out.writeUInt32LE(text.length / 2, 0);
  text.copy(out, 4);
  return out;
}

export function encodeProcessInfoRequest(): Buffer {
  return encodeRequest(commandSet.process, processCommand.processInfo);
}

export function encodeProcessInfo2Request(): Buffer {
  return encodeRequest(commandSet.process, processCommand.processInfo2);
}

export function encodeEnablePerfMapRequest(type: PerfMapType): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32LE(type, 0);
  return encodeRequest(commandSet.process, processCommand.enablePerfMap, payload);
}

export function encodeDisablePerfMapRequest(): Buffer {
  return encodeRequest(commandSet.process, processCommand.disablePerfMap);
}

export function protocolError(message: string): ProfcpuError {
  return new ProfcpuError('IPC_PROTOCOL', `malformed diagnostic IPC reply: ${message}`, {
    remedy:
      'The socket answered, but not like a .NET runtime. Check that the path is the target\'s "dotnet-diagnostic-*-socket" and that nothing else listens there.',
  });
}

/** Checks the 20 header bytes of a reply and returns its fields; throws IPC_PROTOCOL when they are not a header. */
export function decodeHeader(bytes: Uint8Array): IpcHeader {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.length < HEADER_SIZE) throw protocolError(`${buf.length} bytes, shorter than the ${HEADER_SIZE}-byte header`);
  if (!buf.subarray(0, IPC_MAGIC.length).equals(IPC_MAGIC)) {
    throw protocolError(`wrong magic ${JSON.stringify(buf.subarray(0, IPC_MAGIC.length).toString('latin1'))}`);
  }
  const size = buf.readUInt16LE(14);
  if (size < HEADER_SIZE) throw protocolError(`size field ${size} is smaller than the header`);
  return { size, commandSet: buf.readUInt8(16), commandId: buf.readUInt8(17) };
}

/**
 * What a server reply means: OK with its payload, or the runtime's error HRESULT as a ProfcpuError
 * (UNKNOWN_COMMAND becomes IPC_UNSUPPORTED: the runtime is too old for the command).
 */
export function decodeServerReply(header: IpcHeader, payload: Uint8Array, command: string): Uint8Array {
  if (header.commandSet !== commandSet.server) {
    throw protocolError(`command set 0x${header.commandSet.toString(16)} where the server set 0xff was expected`);
  }
  if (header.commandId === serverReply.ok) return payload;
  if (header.commandId !== serverReply.error) {
    throw protocolError(`reply id 0x${header.commandId.toString(16)} is neither OK (0x00) nor error (0xff)`);
  }
  if (payload.length < 4) throw protocolError(`error reply with a ${payload.length}-byte payload, no HRESULT`);
  const hresult = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).readUInt32LE(0);
  if (hresult === ipcHresult.UNKNOWN_COMMAND) {
    return unsupported(command, hresult);
  }
  throw new ProfcpuError('IPC_PROTOCOL', `the .NET runtime refused ${command}: ${hresultName(hresult)}`, {
    remedy:
      hresult === ipcHresult.NOT_YET_AVAILABLE
        ? 'The runtime is still starting; try again in a moment.'
        : 'Report this with the runtime version (`profcpu ps`); set DOTNET_PerfMapEnabled=1 on the target instead.',
  });
}

function unsupported(command: string, hresult: number): never {
  throw new ProfcpuError('IPC_UNSUPPORTED', `the .NET runtime does not know ${command} (${hresultName(hresult)})`, {
    remedy:
      'The target runs a .NET older than 8: start it with DOTNET_PerfMapEnabled=1 (or COMPlus_PerfMapEnabled=1) to get perf maps.',
  });
}

/** Reads payload values in order; every read checks the bounds and throws IPC_PROTOCOL past the end. */
export class PayloadReader {
  private offset = 0;
  private readonly buf: Buffer;

  constructor(
    bytes: Uint8Array,
    private readonly what: string,
  ) {
    this.buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  private need(n: number, field: string): void {
    if (this.offset + n > this.buf.length) {
      throw protocolError(`${this.what} ends at byte ${this.buf.length} inside ${field} (needs ${this.offset + n})`);
    }
  }

  u32(field: string): number {
    this.need(4, field);
    const value = this.buf.readUInt32LE(this.offset);
    this.offset += 4;
    return value;
  }

  u64(field: string): bigint {
    this.need(8, field);
    const value = this.buf.readBigUInt64LE(this.offset);
    this.offset += 8;
    return value;
  }

  guid(field: string): string {
    this.need(16, field);
    const b = this.buf.subarray(this.offset, this.offset + 16);
    this.offset += 16;
    // GUID text order: the first three fields are little-endian, the last eight bytes as they are.
    const hex = (from: number, to: number, reverse: boolean): string => {
      const part = Buffer.from(b.subarray(from, to));
      return (reverse ? part.reverse() : part).toString('hex');
    };
    return `${hex(0, 4, true)}-${hex(4, 6, true)}-${hex(6, 8, true)}-${hex(8, 10, false)}-${hex(10, 16, false)}`;
  }

  string(field: string): string | null {
    const units = this.u32(`${field} length`);
    if (units === 0) return null;
    this.need(units * 2, field);
    const text = this.buf.toString('utf16le', this.offset, this.offset + units * 2);
    this.offset += units * 2;
    return text.endsWith('\0') ? text.slice(0, -1) : text;
  }

  get remaining(): number {
    return this.buf.length - this.offset;
  }
}

/** ProcessInfo (v1) or ProcessInfo2 (v2) OK payload to a ProcessInfo. */
export function decodeProcessInfo(payload: Uint8Array, version: 1 | 2): ProcessInfo {
  const reader = new PayloadReader(payload, `ProcessInfo${version === 2 ? '2' : ''} payload`);
  const pid = reader.u64('pid');
  const info: ProcessInfo = {
    pid: Number(pid),
    runtimeCookie: reader.guid('runtime cookie'),
    commandLine: reader.string('command line'),
    os: reader.string('OS'),
    arch: reader.string('architecture'),
  };
  if (version === 2) {
    info.managedEntrypointAssemblyName = reader.string('entrypoint assembly name');
    info.clrProductVersion = reader.string('CLR product version');
  }
  return info;
}
