// A forged file-mode perf.data for the reader's tests: the 104-byte header, one cpu-clock attribute of the sample
// type asked (no ids, no features), then `data` as the data section; `patch` edits the header to forge it further.
export function forgedPerfData(data: Buffer, sampleType: bigint, patch: (header: Buffer) => void = () => {}): Buffer {
  const attrSize = 136 + 16;
  const header = Buffer.alloc(104 + attrSize);
  header.write('PERFILE2', 0, 'latin1');
  header.writeBigUInt64LE(104n, 8);
  header.writeBigUInt64LE(BigInt(attrSize), 16);
  header.writeBigUInt64LE(104n, 24);
  header.writeBigUInt64LE(BigInt(attrSize), 32);
  header.writeBigUInt64LE(BigInt(header.length), 40);
  header.writeBigUInt64LE(BigInt(data.length), 48);
  header.writeUInt32LE(1, 104); // PERF_TYPE_SOFTWARE, config 0: cpu-clock
  header.writeUInt32LE(136, 108);
  header.writeBigUInt64LE(sampleType, 104 + 24);
  patch(header);
  return Buffer.concat([header, data]);
}
