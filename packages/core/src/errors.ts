/** Errors of the heaphook API. Every message says what is wrong and how to fix it. */

export class HeaphookError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
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
  ) {
    super(
      `the preload library of backend "${backend}" is missing at ${libraryPath}. ` +
        `Build it with "npx nx build ${nxProject}".`,
    );
  }
}
