import type { RunRecord } from '../src/types.js';

/** A passing run record with the given wall time and workload figures. */
export function fakeRun(
  workload: string,
  allocator: string,
  rep: number,
  wall: number,
  reported: Record<string, unknown> = {},
  extra: Partial<RunRecord> = {},
): RunRecord {
  return {
    seq: rep,
    workload,
    allocator,
    rep,
    status: 'ok',
    exit_code: 0,
    signal: null,
    wall_s: wall,
    user_s: wall * 0.9,
    sys_s: wall * 0.1,
    cpu_s: wall,
    peak_rss_bytes: 4 << 20,
    minflt: 1000,
    majflt: 0,
    voluntary_switches: 1,
    involuntary_switches: 1,
    reported: { ok: true, checksum: 'c0ffee', ...reported },
    ...extra,
  };
}

export function failedRun(
  workload: string,
  allocator: string,
  rep: number,
  error: string,
): RunRecord {
  return {
    ...fakeRun(workload, allocator, rep, 0.1),
    status: 'failed',
    error,
    exit_code: 2,
    reported: null,
  };
}
