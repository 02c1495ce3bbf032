/** SO_PEERCRED of a connected Unix socket, through the peercred.node addon. */
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface PeerCredentials {
  readonly pid: number;
  readonly uid: number;
  readonly gid: number;
}

interface PeercredAddon {
  peerCredentials(fd: number): PeerCredentials;
}

let addon: PeercredAddon | undefined;

/** The built addon: build/Release/peercred.node of this package. */
export function peercredAddonPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return join(here, '..', '..', 'build', 'Release', 'peercred.node');
}

export function peerCredentials(fd: number): PeerCredentials {
  if (addon === undefined) {
    const path = peercredAddonPath();
    if (!existsSync(path)) {
      throw new Error(`${path} is missing: build the agent package (npx nx build agent)`);
    }
    addon = createRequire(import.meta.url)(path) as PeercredAddon;
  }
  return addon.peerCredentials(fd);
}
