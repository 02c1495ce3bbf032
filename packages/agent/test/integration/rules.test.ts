/** The example alert rules in docs/alerts.yml are valid and fire as their comments say. */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { packageDir } from '../helpers/agent.js';

const docs = join(packageDir, 'docs');

describe('docs/alerts.yml', () => {
  it('passes promtool check rules with its three rules', () => {
    const out = spawnSync('promtool', ['check', 'rules', 'alerts.yml'], {
      cwd: docs,
      encoding: 'utf8',
    });
    expect(out.status, out.stderr).toBe(0);
    expect(out.stdout).toContain('SUCCESS: 3 rules found');
  });

  it('fires each rule on a series made to trip it and not on its neighbour (promtool test rules)', () => {
    const out = spawnSync('promtool', ['test', 'rules', 'alerts.test.yml'], {
      cwd: docs,
      encoding: 'utf8',
    });
    expect(out.status, out.stdout + out.stderr).toBe(0);
    expect(out.stdout).toContain('SUCCESS');
  });
});
