/**
 * The order of the runs. Repetitions are interleaved: every repetition runs each workload under
 * every allocator once (A B C A B C ...), so a burst of noise on the machine hits all
 * allocators alike instead of all the runs of one. Tracer runs join the same rounds, for as
 * many repetitions as `tracerRuns`.
 */
export interface Named {
  readonly name: string;
  readonly status: 'ready' | 'skipped';
  /** A workload the tracers do not run. */
  readonly noTracers?: boolean;
}

export interface ScheduledRun<W extends Named, A extends Named> {
  /** Position in the schedule, 0-based. */
  readonly seq: number;
  /** Repetition, 0-based. */
  readonly rep: number;
  readonly workload: W;
  readonly allocator: A;
}

export function buildSchedule<W extends Named, A extends Named>(
  workloads: readonly W[],
  allocators: readonly A[],
  runs: number,
  tracers: readonly A[] = [],
  tracerRuns = 0,
): Array<ScheduledRun<W, A>> {
  if (!Number.isInteger(runs) || runs < 1)
    throw new Error(`runs must be a positive integer, got ${runs}`);
  const ws = workloads.filter((w) => w.status === 'ready');
  const as = allocators.filter((a) => a.status === 'ready');
  const ts = tracers.filter((t) => t.status === 'ready');
  const out: Array<ScheduledRun<W, A>> = [];
  const reps = Math.max(runs, ts.length > 0 ? tracerRuns : 0);
  for (let rep = 0; rep < reps; rep++) {
    for (const workload of ws) {
      if (rep < runs)
        for (const allocator of as) out.push({ seq: out.length, rep, workload, allocator });
      if (rep < tracerRuns && workload.noTracers !== true)
        for (const allocator of ts) out.push({ seq: out.length, rep, workload, allocator });
    }
  }
  return out;
}

export interface WarmUp<W, A> {
  readonly workload: W;
  readonly allocator: A;
}

/**
 * The untimed warm-up runs before the schedule (page cache, first-start costs), each at a tiny
 * size, and how many may run at once. The full run warms every ready workload under every ready
 * allocator and tracer that applies to it, one at a time. The quick profile warms what a first
 * run pays for once: every workload's program under the baseline (the first allocator), and
 * every other allocator's and tracer's libraries and helpers on the first workload the schedule
 * runs it with; two at a time, as none of them is timed and the schedule starts after the last.
 */
export function warmUpRuns<W extends Named, A extends Named>(
  quick: boolean,
  workloads: readonly W[],
  columns: readonly A[],
  schedule: ReadonlyArray<ScheduledRun<W, A>>,
  applies: (w: W, a: A) => boolean = () => true,
): { runs: Array<WarmUp<W, A>>; parallel: number } {
  const ws = workloads.filter((w) => w.status === 'ready');
  const cs = columns.filter((c) => c.status === 'ready');
  if (!quick)
    return {
      runs: ws.flatMap((workload) =>
        cs.filter((a) => applies(workload, a)).map((allocator) => ({ workload, allocator })),
      ),
      parallel: 1,
    };
  const [baseline, ...others] = cs;
  const runs: Array<WarmUp<W, A>> = [];
  if (baseline)
    for (const workload of ws)
      if (applies(workload, baseline)) runs.push({ workload, allocator: baseline });
  for (const allocator of others) {
    const first = schedule.find((s) => s.allocator === allocator);
    if (first) runs.push({ workload: first.workload, allocator });
  }
  return { runs, parallel: 2 };
}
