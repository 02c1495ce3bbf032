/** Errors of the heaphook API. Every message says what is wrong and how to fix it. */

export interface HeaphookErrorOptions {
  /** The CLI's exit status for this error (default EXIT_USAGE). */
  readonly exitStatus?: number;
  /** Say which subcommand failed: `heaphook report: ...` instead of `heaphook: ...`. */
  readonly namesCommand?: boolean;
}

/** Exit status of a usage error: a bad option, a path that is not what the command needs. */
export const EXIT_USAGE = 2;

export class HeaphookError extends Error {
  readonly exitStatus: number;
  readonly namesCommand: boolean;

  constructor(message: string, options: HeaphookErrorOptions = {}) {
    super(message);
    this.name = new.target.name;
    this.exitStatus = options.exitStatus ?? EXIT_USAGE;
    this.namesCommand = options.namesCommand === true;
  }
}

/** Error codes of the file system that mean "the path given is not usable", not a bug. */
const FILE_SYSTEM_PROBLEMS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EISDIR: 'is a directory',
  EEXIST: 'already exists',
  ENOTDIR: 'a component of the path is not a directory',
  ELOOP: 'too many levels of symbolic links (a link loop?)',
  ENAMETOOLONG: 'the name is too long',
  EROFS: 'the file system is read-only',
  ENOSPC: 'no space left on the device',
  EMFILE: 'too many open files',
  ENXIO: 'no such device or address',
  EIO: 'input/output error',
  EAGAIN: 'no data without waiting',
};

/**
 * One line for a file-system error (Node's errors carry code, syscall and path), or undefined
 * when `error` is not one. The CLI prints it instead of a stack trace: the user gave a path
 * that does not work, and the line must say which and why.
 */
export function describeFileSystemError(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, path, dest } = error as NodeJS.ErrnoException & { dest?: string };
  const problem = code !== undefined ? FILE_SYSTEM_PROBLEMS[code] : undefined;
  if (problem === undefined) return undefined;
  const where = path ?? dest;
  return where !== undefined ? `${where}: ${problem} (${code})` : `${problem} (${code})`;
}

/** No installed package declares a backend of that name. */
export class BackendNotFoundError extends HeaphookError {
  constructor(
    readonly backend: string,
    readonly known: readonly string[],
  ) {
    super(
      `no heaphook backend named "${backend}"` +
        (known.length > 0 ? ` (installed: ${known.join(', ')})` : ' (none installed)') +
        `. Install its package, e.g. npm i @heaphook/${backend}, or run "heaphook list".`,
    );
  }
}

/** The backend is declared but its preload library has not been built or shipped. */
export class LibraryNotBuiltError extends HeaphookError {
  constructor(
    readonly backend: string,
    readonly libraryPath: string,
    readonly nxProject: string,
    /** What to install or build (nativeFileMissing's answer), when known. */
    readonly remedy?: string,
  ) {
    super(
      remedy !== undefined
        ? `the preload library of backend "${backend}": ${remedy}`
        : `the preload library of backend "${backend}" is missing at ${libraryPath}. ` +
            `Build it with "npx nx build ${nxProject}".`,
    );
  }
}
