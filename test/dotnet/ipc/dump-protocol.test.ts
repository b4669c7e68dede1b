// The dump commands' bytes, checked against the layout dotnet/runtime parses (ds-dump-protocol.c: string path,
// u32 type, u32 flags) and the replies it sends (OK with a u32; an error HRESULT, followed for GenerateCoreDump3 by
// the runtime's message). Reply bytes are built by hand (ipc-bytes.ts), not with the code under test.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isProfcpuError } from '../../../src/error.js';
import { decodeDumpReply, encodeGenerateCoreDumpRequest } from '../../../src/dotnet/ipc/dump-protocol.js';
import { decodeHeader, isAllowedRequest } from '../../../src/dotnet/ipc/protocol.js';
import { errorReply, okReply } from './ipc-bytes.js';

function decode(reply: Buffer, version: 1 | 2 | 3): void {
  decodeDumpReply(decodeHeader(reply), reply.subarray(20), version);
}

function wire(text: string): Buffer {
  const units = Buffer.from(`${text}\0`, 'utf16le');
  const count = Buffer.alloc(4);
  count.writeUInt32LE(units.length / 2, 0);
  return Buffer.concat([count, units]);
}

describe('dump requests', () => {
  it('carry the path, the type and flags 0 in the dump command set, one id per version', () => {
    for (const [version, type, code] of [
      [3, 'full', 4],
      [2, 'heap', 2],
      [1, 'mini', 1],
      [3, 'triage', 3],
    ] as const) {
      const bytes = encodeGenerateCoreDumpRequest(version, '/tmp/d.core', type);
      const payload = Buffer.concat([wire('/tmp/d.core'), Buffer.from([code, 0, 0, 0, 0, 0, 0, 0])]);
      assert.equal(bytes.readUInt16LE(14), 20 + payload.length);
      assert.deepEqual([bytes[16], bytes[17]], [0x01, version]);
      assert.equal(bytes.subarray(20).toString('hex'), payload.toString('hex'));
      assert.ok(isAllowedRequest(bytes), 'the transport lets it through');
    }
  });
});

describe('dump replies', () => {
  it('OK (with its u32 status) means written', () => {
    assert.doesNotThrow(() => decode(okReply(Buffer.alloc(4)), 3));
    assert.doesNotThrow(() => decode(okReply(), 1));
  });

  it('UNKNOWN_COMMAND is IPC_UNSUPPORTED, for the caller to try an older version', () => {
    assert.throws(
      () => decode(errorReply(0x80131385), 3),
      (e) => isProfcpuError(e, 'IPC_UNSUPPORTED'),
    );
  });

  it('a GenerateCoreDump3 error carries the runtime’s words', () => {
    const payload = Buffer.concat([Buffer.from([0x05, 0x40, 0x00, 0x80]), wire('Insufficient space')]);
    const reply = Buffer.concat([errorReply(0).subarray(0, 20), payload]);
    reply.writeUInt16LE(20 + payload.length, 14);
    assert.throws(
      () => decode(reply, 3),
      (e) => isProfcpuError(e, 'DUMP_REFUSED') && /Insufficient space \(0x80004005\)/.test(e.message),
    );
  });

  it('an older version’s error is the HRESULT alone; NOTSUPPORTED says the runtime cannot dump', () => {
    assert.throws(
      () => decode(errorReply(0x80131515), 2),
      (e) => isProfcpuError(e, 'DUMP_REFUSED') && /NOTSUPPORTED/.test(e.message) && /createdump/.test(e.remedy ?? ''),
    );
    // A version-3 error without a message (an empty string, or none) is shown by its HRESULT.
    assert.throws(
      () => decode(errorReply(0x80004005), 3),
      (e) => isProfcpuError(e, 'DUMP_REFUSED') && /0x80004005/.test(e.message),
    );
  });

  it('a message running past the payload is IPC_PROTOCOL, not a read out of bounds', () => {
    const payload = Buffer.concat([Buffer.from([0x05, 0x40, 0x00, 0x80]), Buffer.from([0xff, 0xff, 0, 0, 0x41, 0])]);
    const reply = Buffer.concat([errorReply(0).subarray(0, 20), payload]);
    reply.writeUInt16LE(20 + payload.length, 14);
    assert.throws(
      () => decode(reply, 3),
      (e) => isProfcpuError(e, 'IPC_PROTOCOL'),
    );
  });
});
