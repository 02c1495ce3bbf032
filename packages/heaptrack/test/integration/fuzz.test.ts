/**
 * The readers are safe on any file: a corpus of damaged and hostile logs (test/fuzz/corpus.ts,
 * generated here from real logs of the workload, with a fixed seed) goes through every reader of
 * dump, report and recommend. Each gives valid output or a clean error (one line, a documented
 * exit status, no stack trace), in bounded time (a generous per-process timeout: a hang
 * detector, not a speed goal) and in at most 256 MB of memory.
 */
import { readFileSync } from 'node:fs';

import { beforeAll, describe, expect, it } from 'vitest';

import { generateCorpus, type CorpusEntry, type CorpusSource } from '../fuzz/corpus.js';
import { expectCleanError, heaphookCli, MEMORY_BOUND, readInChild } from '../fuzz/harness.js';
import { logsIn, scratch, traced, workload } from '../helpers.js';

let corpus: CorpusEntry[] = [];

function recordSource(codec: CorpusSource['codec']): CorpusSource {
  const dir = scratch(`fuzz-src-${codec}`);
  const run = traced(dir, workload, ['counts'], { HEAPHOOK_COMPRESS: codec });
  expect(run.status, run.stderr).toBe(0);
  return { codec, bytes: readFileSync(logsIn(dir)[0]!) };
}

beforeAll(() => {
  const sources = (['zstd', 'deflate', 'none'] as const).map(recordSource);
  corpus = generateCorpus(sources, scratch('fuzz-corpus'));
});

describe('the fuzz corpus', () => {
  it('has 80+ files of every kind', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(80);
    const kinds = new Set(corpus.map((e) => e.kind));
    expect([...kinds].sort()).toEqual(['bitflip', 'bomb', 'flip-crc', 'header', 'truncation']);
  });

  for (const kind of ['truncation', 'bitflip', 'flip-crc', 'header', 'bomb'] as const) {
    it(`${kind}: every reader gives output or a clean one-line error, in ≤ 256 MB`, () => {
      const entries = corpus.filter((e) => e.kind === kind);
      const { outcomes, maxRssBytes } = readInChild(entries.map((e) => e.path));
      expect(outcomes).toHaveLength(entries.length * 5); // the readers of read-logs.mjs
      const crashes = outcomes.filter((o) => o.outcome !== 'ok' && o.outcome !== 'error');
      expect(crashes).toEqual([]);
      for (const o of outcomes) {
        if (o.outcome === 'error') expect(o.message, o.log).not.toContain('\n');
      }
      expect(maxRssBytes).toBeLessThanOrEqual(MEMORY_BOUND);
    });
  }

  it('a sample through the real CLI: at most one line on stderr, status 0, 2 or 3, no stack trace, ≤ 256 MB', () => {
    const sample = ['truncation', 'bitflip', 'flip-crc', 'header', 'bomb'].flatMap((kind) =>
      corpus.filter((e) => e.kind === kind).filter((_, i) => i % 9 === 0),
    );
    for (const e of sample) {
      for (const command of [['dump', '--summary'], ['report'], ['recommend']]) {
        const what = `${command.join(' ')} ${e.name}`;
        const run = heaphookCli([...command, e.path]);
        expect(run.timedOut, `${what}: hung`).toBe(false);
        expect([0, 2, 3], `${what}: ${run.errorLines.join('\n')}`).toContain(run.status);
        if (run.status !== 0) expectCleanError(run, run.status!, what);
        else expect(run.errorLines, what).toEqual([]);
        if (run.maxRssBytes !== undefined)
          expect(run.maxRssBytes, what).toBeLessThanOrEqual(MEMORY_BOUND);
      }
    }
  });
});
