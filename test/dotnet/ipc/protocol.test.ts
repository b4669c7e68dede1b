import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isProfcpuError } from '../../../src/error.js';
import {
  decodeHeader,
  decodeProcessInfo,
  decodeServerReply,
  encodeDisablePerfMapRequest,
  encodeEnablePerfMapRequest,
  encodeProcessInfo2Request,
  encodeProcessInfoRequest,
  encodeRequest,
  encodeString,
  hresultName,
  ipcHresult,
  perfMapType,
} from '../../../src/dotnet/ipc/protocol.js';
import { errorReply, okReply, processInfoPayload } from './ipc-bytes.js';

const magicHex = Buffer.from('DOTNET_IPC_V1\0', 'latin1').toString('hex');

describe('encoding requests', () => {
  it('lays out the 20-byte header: magic, u16 size, command set, command id, reserved', () => {
    const bytes = encodeProcessInfo2Request();
    assert.equal(bytes.toString('hex'), `${magicHex}1400` + '04' + '04' + '0000');
  });

  it('encodes each command profcpu sends with its id and payload', () => {
    assert.equal(encodeProcessInfoRequest().subarray(14).toString('hex'), '1400' + '0400' + '0000');
    assert.equal(encodeDisablePerfMapRequest().subarray(14).toString('hex'), '1400' + '0406' + '0000');
    const enable = encodeEnablePerfMapRequest(perfMapType.all);
    assert.equal(enable.length, 24);
    assert.equal(enable.subarray(14).toString('hex'), '1800' + '0405' + '0000' + '01000000');
    assert.equal(encodeEnablePerfMapRequest(perfMapType.perfMap).subarray(20).toString('hex'), '03000000');
  });

  it('refuses a message larger than the u16 size field', () => {
    assert.throws(() => encodeRequest(4, 0, new Uint8Array(0xffff - 19)), RangeError);
    assert.equal(encodeRequest(4, 0, new Uint8Array(0xffff - 20)).readUInt16LE(14), 0xffff);
  });

  it('encodes strings as a u32 count of UTF-16 units including the NUL, then UTF-16LE', () => {
    assert.equal(encodeString('ab').toString('hex'), '03000000' + '6100' + '6200' + '0000');
    assert.equal(encodeString('').toString('hex'), '01000000' + '0000');
    assert.equal(encodeString(null).toString('hex'), '00000000');
    // A character outside the BMP is two code units.
    assert.equal(encodeString('😀').readUInt32LE(0), 3);
  });
});

describe('decoding replies', () => {
  it('reads an OK header and gives its payload', () => {
    const reply = okReply(Buffer.from([0, 0, 0, 0]));
    const header = decodeHeader(reply);
    assert.deepEqual(header, { size: 24, commandSet: 0xff, commandId: 0 });
    assert.deepEqual([...decodeServerReply(header, reply.subarray(20), 'X')], [0, 0, 0, 0]);
  });

  it('turns an error reply into IPC_UNSUPPORTED for UNKNOWN_COMMAND (runtime older than .NET 8)', () => {
    const reply = errorReply(ipcHresult.UNKNOWN_COMMAND);
    assert.equal(reply.length, 24);
    assert.throws(
      () => decodeServerReply(decodeHeader(reply), reply.subarray(20), 'EnablePerfMap'),
      (error: unknown) =>
        isProfcpuError(error, 'IPC_UNSUPPORTED') &&
        /EnablePerfMap/.test(error.message) &&
        /0x80131385/.test(error.message) &&
        /DOTNET_PerfMapEnabled=1/.test(error.remedy ?? ''),
    );
  });

  it('turns other error HRESULTs into IPC_PROTOCOL naming the HRESULT', () => {
    const reply = errorReply(ipcHresult.NOT_YET_AVAILABLE);
    assert.throws(
      () => decodeServerReply(decodeHeader(reply), reply.subarray(20), 'ProcessInfo2'),
      (error: unknown) =>
        isProfcpuError(error, 'IPC_PROTOCOL') && /NOT_YET_AVAILABLE \(0x8013135B\)/.test(error.message),
    );
    assert.equal(hresultName(0x80004005), '0x80004005');
  });

  it('rejects a short header, a wrong magic, a size below the header, a wrong command set or id', () => {
    const protocol = (error: unknown) => isProfcpuError(error, 'IPC_PROTOCOL') && error.remedy !== undefined;
    assert.throws(() => decodeHeader(okReply().subarray(0, 19)), protocol);
    const wrongMagic = okReply();
    wrongMagic.write('DOTNET_IPC_V2', 0, 'latin1');
    assert.throws(() => decodeHeader(wrongMagic), /wrong magic "DOTNET_IPC_V2/);
    const tiny = okReply();
    tiny.writeUInt16LE(12, 14);
    assert.throws(() => decodeHeader(tiny), /size field 12/);
    assert.throws(() => decodeServerReply({ size: 20, commandSet: 4, commandId: 0 }, Buffer.alloc(0), 'X'), /set 0x4/);
    assert.throws(() => decodeServerReply({ size: 20, commandSet: 0xff, commandId: 7 }, Buffer.alloc(0), 'X'), /0x7/);
    assert.throws(
      () => decodeServerReply({ size: 22, commandSet: 0xff, commandId: 0xff }, Buffer.alloc(2), 'X'),
      /no HRESULT/,
    );
  });
});

describe('ProcessInfo payloads', () => {
  const fields = {
    pid: 4242,
    cookie: Buffer.from('00112233445566778899aabbccddeeff', 'hex'),
    commandLine: '/app/Service --port 80 ünïcode',
    os: 'Linux',
    arch: 'x64',
    entrypoint: 'Service',
    version: '10.0.12',
  };

  it('parses a ProcessInfo2 payload built byte by byte', () => {
    const info = decodeProcessInfo(processInfoPayload(fields, 2), 2);
    assert.deepEqual(info, {
      pid: 4242,
      runtimeCookie: '33221100-5544-7766-8899-aabbccddeeff',
      commandLine: fields.commandLine,
      os: 'Linux',
      arch: 'x64',
      managedEntrypointAssemblyName: 'Service',
      clrProductVersion: '10.0.12',
    });
  });

  it('parses ProcessInfo (v1) without the ProcessInfo2 fields, and null strings', () => {
    const info = decodeProcessInfo(processInfoPayload({ ...fields, commandLine: null }, 1), 1);
    assert.equal(info.commandLine, null);
    assert.equal(info.arch, 'x64');
    assert.equal('clrProductVersion' in info, false);
  });

  it('rejects a payload cut anywhere, naming the field', () => {
    const payload = processInfoPayload(fields, 2);
    for (let cut = 0; cut < payload.length; cut++) {
      assert.throws(
        () => decodeProcessInfo(payload.subarray(0, cut), 2),
        (error: unknown) =>
          isProfcpuError(error, 'IPC_PROTOCOL') && /ProcessInfo2 payload ends at byte/.test(error.message),
        `cut at ${cut}`,
      );
    }
  });

  it('rejects a string whose length runs past the payload', () => {
    const payload = processInfoPayload(fields, 1);
    payload.writeUInt32LE(0x7fffffff, 24); // the command line's length
    assert.throws(() => decodeProcessInfo(payload, 1), /inside command line/);
  });
});
