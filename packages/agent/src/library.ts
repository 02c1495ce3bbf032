/** Where this package's native files are. */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The client preload library: put it first in LD_PRELOAD, ahead of the backend. */
export function agentLibraryPath(): string {
  return join(
    dirname(fileURLToPath(import.meta.url)),
    '..',
    'build',
    'Release',
    'libheaphook_agent.so',
  );
}
