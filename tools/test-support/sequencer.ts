/**
 * The order `npm test` starts test files in: longest first, so that on a 2-core machine the
 * long files (a conformance suite under qemu, a colcon build) do not start last and leave the
 * other workers idle while they finish.
 *
 * A file's expected duration comes from vitest's own cache of the last run on this machine
 * when there is one, else from tools/test-durations.json (seconds per file, measured on this
 * project's kind of machine and committed, so a fresh clone orders well on its first run),
 * else from its size (vitest's own fallback). Refresh the committed figures after a run with
 * `node tools/scripts/run-tests.mjs --record-durations`; a stale figure only costs time.
 */
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

import { BaseSequencer, type TestSpecification } from 'vitest/node';

const root = join(import.meta.dirname, '..', '..');

function committedDurations(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(join(root, 'tools', 'test-durations.json'), 'utf8')) as Record<
      string,
      number
    >;
  } catch {
    return {};
  }
}

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const durations = committedDurations();
    const cache = this.ctx.cache;
    const expected = (spec: TestSpecification): number | undefined => {
      const cached = cache.getFileTestResults(
        `${spec.project.name}:${relative(this.ctx.config.root, spec.moduleId)}`,
      );
      if (cached !== undefined) return cached.duration / 1000;
      return durations[relative(root, spec.moduleId)];
    };
    const sizes = await super.sort(files); // vitest's order: cached durations, else file size
    const rank = new Map(sizes.map((spec, index) => [spec, index]));
    return [...files].sort((a, b) => {
      const da = expected(a);
      const db = expected(b);
      if (da !== undefined && db !== undefined) return db - da;
      if (da !== undefined) return -1;
      if (db !== undefined) return 1;
      return (rank.get(a) ?? 0) - (rank.get(b) ?? 0);
    });
  }
}
