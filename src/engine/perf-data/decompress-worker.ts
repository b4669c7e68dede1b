// Worker-thread entry of compressed.ts: decodes a recording's zstd stream, payload by payload, as they come (each
// message one COMPRESSED record's payload, handed over), and answers each with the bytes it decompressed to (handed
// back) or the error that ends the stream. Runs only as a worker; its parent stops it past a deadline.
import { parentPort } from 'node:worker_threads';
import { CompressedStreamError, type DecodeReply } from './compressed.js';
import { ZstdStreamDecoder } from './zstd-decoder.js';

if (parentPort) {
  const port = parentPort;
  const decoder = new ZstdStreamDecoder();
  port.on('message', (payload: Uint8Array) => {
    try {
      const bytes = decoder.decode(payload);
      const reply: DecodeReply = {
        bytes: bytes.buffer as ArrayBuffer,
        byteOffset: bytes.byteOffset,
        length: bytes.length,
      };
      // A buffer of Buffer's pool is shared: only a buffer of its own is handed over.
      const own = bytes.byteOffset === 0 && bytes.length === bytes.buffer.byteLength;
      port.postMessage(reply, own ? [bytes.buffer as ArrayBuffer] : []);
    } catch (error) {
      const reply: DecodeReply = {
        error:
          error instanceof CompressedStreamError
            ? error.message
            : `zstd data that cannot be decoded (${String(error)})`,
        tooLargeWindow: error instanceof CompressedStreamError && error.tooLargeWindow,
      };
      port.postMessage(reply);
    }
  });
}
