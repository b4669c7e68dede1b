// The one error type profcpu raises on purpose: a stable code, a message, the remedy a user can act on, and the
// cause kept. The CLI prints message and remedy; anything that is not a ProfcpuError is a bug and prints a stack.

export type ErrorCode =
  | 'USAGE'
  | 'NO_PERF'
  | 'PERF_FAILED'
  | 'PERF_PERMISSION'
  | 'NO_PERF_DATA'
  | 'PERF_DATA_OWNER'
  | 'NO_SAMPLES'
  | 'ALL_FILTERED'
  | 'BAD_INPUT'
  | 'NEEDS_PERF'
  | 'NO_TARGET'
  | 'TARGET_NOT_VISIBLE'
  | 'TARGET_AMBIGUOUS'
  | 'PREFLIGHT_FAILED'
  | 'IPC_UNREACHABLE'
  | 'IPC_PROTOCOL'
  | 'IPC_UNSUPPORTED'
  | 'IPC_TIMEOUT'
  | 'DUMP_REFUSED'
  | 'NO_SPACE'
  | 'ELF_MALFORMED'
  | 'SYMBOL_FETCH'
  | 'IO'
  | 'NO_DOTNET_SDK'
  | 'BUILD_FAILED'
  | 'ABORTED';

export interface ProfcpuErrorOptions {
  /** What the user can do about it, one or two sentences. */
  remedy?: string;
  cause?: unknown;
}

export class ProfcpuError extends Error {
  override readonly name = 'ProfcpuError';
  readonly code: ErrorCode;
  readonly remedy: string | undefined;

  constructor(code: ErrorCode, message: string, options: ProfcpuErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.remedy = options.remedy;
  }
}

export function isProfcpuError(error: unknown, code?: ErrorCode): error is ProfcpuError {
  return error instanceof ProfcpuError && (code === undefined || error.code === code);
}
