/**
 * The tlsf-rec column: TLSF with the pool `heaphook recommend` gives for the workload itself.
 * Before the timed runs, each workload marked `recommendPool` (fragmentation) is run once under
 * heaphook's tracer over glibc, without call stacks (the replay needs none; the calls are the
 * same under every allocator: the workloads are deterministic), and its log is replayed through
 * the real TLSF code by `recommend()` of @heaphook/heaptrack, exactly as `heaphook recommend
 * heaplog.<pid>.log` does. The recommendation's environment (INITIAL_MEMPOOL_SIZE,
 * ADDITIONAL_MEMPOOL_SIZE, HEAPHOOK_TLSF_THREAD_HEAPS) is what tlsf-rec runs that workload
 * with; the pool is touched lazily, as the backend does unless PREFAULT is asked for.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

import { recommend } from '@heaphook/heaptrack';

import type { Workload } from './types.js';

/** What latest.json keeps of one recommendation (`recommended_pools`). */
export interface PoolRecommendation {
  workload: string;
  status: 'ok' | 'failed';
  error?: string;
  /** The environment tlsf-rec runs the workload with. */
  env: Record<string, string>;
  initial_pool_bytes: number | null;
  additional_pool_bytes: number | null;
  /** From the replay: the peak of live bytes asked for, and the smallest pool that served. */
  peak_live_bytes: number | null;
  replayed_minimum_bytes: number | null;
  /** Events in the trace, and seconds spent recording and replaying. */
  events: number | null;
  record_s: number;
  recommend_s: number;
}

export interface RecommendOptions {
  /** libheaphook_heaptrack.so */
  readonly tracerLibrary: string;
  readonly scratchRoot: string;
  readonly timeoutS: number;
}

function failed(w: Workload, error: string, recordS: number, recommendS = 0): PoolRecommendation {
  return {
    workload: w.name,
    status: 'failed',
    error,
    env: {},
    initial_pool_bytes: null,
    additional_pool_bytes: null,
    peak_live_bytes: null,
    replayed_minimum_bytes: null,
    events: null,
    record_s: recordS,
    recommend_s: recommendS,
  };
}

/** Records one run of `w` under heaphook's tracer and replays it with recommend(). */
export async function recommendPool(
  w: Workload,
  opts: RecommendOptions,
): Promise<PoolRecommendation> {
  const scratch = mkdtempSync(join(opts.scratchRoot, `recommend.${w.name}.`));
  try {
    const t0 = Date.now();
    const env: Record<string, string | undefined> = {
      ...process.env,
      ...w.env,
      LD_PRELOAD: opts.tracerLibrary,
      HEAPHOOK_STACKS: '0',
    };
    const r = spawnSync(w.command, [...w.args], {
      cwd: scratch,
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: opts.timeoutS * 1000,
      maxBuffer: 1 << 20,
    });
    const recordS = (Date.now() - t0) / 1000;
    if (r.error || r.status !== 0) {
      const why = r.error?.message ?? `exit code ${r.status ?? r.signal}`;
      return failed(w, `recording under heaphook-heaptrack failed: ${why}`, recordS);
    }
    // One log per process; a workload that forks leaves several: the largest is the program.
    const logs = readdirSync(scratch)
      .filter((f) => /^heaplog\..*\.log$/.test(f))
      .map((f) => ({ path: join(scratch, f), bytes: statSync(join(scratch, f)).size }))
      .sort((a, b) => b.bytes - a.bytes);
    if (logs.length === 0) return failed(w, 'the tracer wrote no heaplog', recordS);
    const t1 = Date.now();
    try {
      const rec = await recommend(logs[0]!.path);
      return {
        workload: w.name,
        status: 'ok',
        env: { ...rec.env },
        initial_pool_bytes: rec.initialPoolSize,
        additional_pool_bytes: rec.additionalPoolSize,
        peak_live_bytes: rec.peakLiveBytes,
        replayed_minimum_bytes: rec.replayedMinimum,
        events: rec.events,
        record_s: recordS,
        recommend_s: (Date.now() - t1) / 1000,
      };
    } catch (e) {
      return failed(
        w,
        `heaphook recommend failed: ${(e as Error).message}`,
        recordS,
        (Date.now() - t1) / 1000,
      );
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
