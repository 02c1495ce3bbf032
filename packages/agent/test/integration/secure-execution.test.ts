/**
 * HEAPHOOK_AGENT with a backend library alone, in a privileged process: under secure execution
 * (a setuid-root program run by nobody, for real: @heaphook/core/testing's runSecureProbe) the
 * core ignores HEAPHOOK_AGENT and HEAPHOOK_AGENT_CLIENT, as every variable naming a path: it
 * loads no client and the process connects nowhere. The control run, unprivileged with the same
 * environment, loads the client and connects.
 */
import { describe, expect, it } from 'vitest';

import {
  runSecureProbe,
  secureProbeUnavailable,
  secureRunProblems,
  skipOutsideCI,
} from '@heaphook/core/testing';

import { agentLib, tlsfLib } from '../helpers/agent.js';

const unavailable = secureProbeUnavailable();

describe.skipIf(skipOutsideCI(unavailable))(
  'secure execution, TLSF alone with HEAPHOOK_AGENT',
  () => {
    const env = ({ dir }: { dir: string }) => ({
      HEAPHOOK_AGENT: `unix:${dir}/socket`,
      HEAPHOOK_AGENT_CLIENT: agentLib,
      HEAPHOOK_LOG_LEVEL: 'debug',
    });

    it('the control: unprivileged, the core loads the client and it connects', async () => {
      const result = await runSecureProbe({ library: tlsfLib, env, privileged: false });
      expect(result.secure).toBe(false);
      expect(result.status).toBe(0);
      expect(result.connections).toBeGreaterThanOrEqual(1);
    });

    it('setuid-root run by nobody: no client, no connection, debug says why', async () => {
      const result = await runSecureProbe({ library: tlsfLib, env, privileged: true });
      expect(secureRunProblems(result)).toEqual([]);
      expect(result.connections).toBe(0);
      expect(result.stderr).toMatch(
        /debug: secure execution \(AT_SECURE\): HEAPHOOK_AGENT is ignored$/m,
      );
    });
  },
);
