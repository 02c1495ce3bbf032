/** Types shared by the driver's modules; the shape of latest.json is in results.ts. */

export type Profile = 'quick' | 'default';

export type AllocatorKind = 'glibc' | 'backend' | 'variant' | 'system' | 'custom' | 'tracer';

/** One column of the comparison: how a workload is started under it. */
export interface Allocator {
  /** Column name: glibc, example, tlsf, tlsf-rt, jemalloc, kde-heaptrack ... */
  readonly name: string;
  readonly kind: AllocatorKind;
  /** 'ready', or 'skipped' with a reason ("install libjemalloc2"). */
  readonly status: 'ready' | 'skipped';
  readonly reason?: string;
  readonly description: string;
  /** Libraries for LD_PRELOAD, in order (a tracer first, then the allocator it wraps). */
  readonly preload: readonly string[];
  /** Extra environment for every workload. */
  readonly env: Readonly<Record<string, string>>;
  /** Extra environment that depends on the workload (tlsf-rt sizes its pool per workload). */
  readonly envFor?: (workload: Workload) => Record<string, string>;
  /** Runs only these workloads (tlsf-rec: those with a recommended pool); every one when absent. */
  readonly appliesTo?: (workload: Workload) => boolean;
  /** A command prefix run around the workload (KDE heaptrack); `{dir}` is the run's scratch folder. */
  readonly wrap?: readonly string[];
  /** Ratios of this column are taken against this allocator's medians (glibc; a tracer: the traced one). */
  readonly baseline: string;
  /** npm package or Debian package it comes from, and its version when known. */
  readonly source?: string;
  readonly version?: string;
}

/** The workload figures the driver tabulates. `reported.*` come from the workload's JSON line. */
export type MetricKey =
  | 'wall_s'
  | 'cpu_s'
  | 'user_s'
  | 'sys_s'
  | 'peak_rss_bytes'
  | 'minflt'
  | 'majflt'
  | `reported.${string}`;

/** One workload program at one thread count. */
export interface Workload {
  /** Instance name (`larson-t2`); the base name for single-threaded ones (`churn`). */
  readonly name: string;
  /** Catalogue name (`larson`). */
  readonly base: string;
  readonly description: string;
  /** Effective thread count for threaded workloads, undefined otherwise. */
  readonly threads?: number;
  readonly size: number;
  /** Program and arguments (without any wrapper or preload). */
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** The figure of the main table; lower is better. */
  readonly primary: MetricKey;
  /** Initial pool for the real-time TLSF variant: enough for this workload's peak, with room. */
  readonly rtPoolBytes: number;
  /** The tlsf-rec column runs it with the pool `heaphook recommend` gives for its own trace. */
  readonly recommendPool?: boolean;
  /** Not run under the tracers. */
  readonly noTracers?: boolean;
  /** That recommendation's environment, once made (compare records and replays a trace first). */
  readonly recommendedEnv?: Readonly<Record<string, string>>;
  /** 'ready', or 'skipped' with a reason (python3 missing). */
  readonly status: 'ready' | 'skipped';
  readonly reason?: string;
}

/** What hh-run reports of one child. */
export interface LauncherReport {
  exit_code: number;
  signal: number;
  timed_out: boolean;
  exec_errno: number;
  wall_ns: number;
  utime_us: number;
  stime_us: number;
  maxrss_kb: number;
  minflt: number;
  majflt: number;
  nvcsw: number;
  nivcsw: number;
}

export type RunStatus = 'ok' | 'failed' | 'timeout';

/** One process run: one workload under one allocator, one repetition. */
export interface RunRecord {
  /** Position in the schedule (0-based): the order the runs really happened in. */
  seq: number;
  workload: string;
  allocator: string;
  /** Repetition index (0-based). */
  rep: number;
  status: RunStatus;
  /** Why the run failed: the workload's "verification failed" line, a signal, a timeout ... */
  error?: string;
  exit_code: number | null;
  signal: string | null;
  wall_s: number | null;
  user_s: number | null;
  sys_s: number | null;
  cpu_s: number | null;
  peak_rss_bytes: number | null;
  minflt: number | null;
  majflt: number | null;
  voluntary_switches: number | null;
  involuntary_switches: number | null;
  /** The workload's own JSON line (ops, checksum, p99_ns, rss_over_live ...). */
  reported: Record<string, unknown> | null;
  /** Bytes of trace written by a tracer (heaptrack's file, heaplog.*.log). */
  trace_bytes?: number;
  /**
   * Allocation-family calls in heaphook's log of this run (realloc's second record not
   * counted): taken from one heaphook-heaptrack run per workload, the divisor of every
   * tracer's bytes per call.
   */
  trace_calls?: number;
  /** The last lines of the child's stderr when it failed. */
  stderr_tail?: string;
}

export interface Stat {
  median: number;
  min: number;
  max: number;
  n: number;
}

/** The summary of one (workload, allocator) cell over its repetitions. */
export interface Cell {
  workload: string;
  allocator: string;
  /** ok: every run passed; failed: at least one run crashed, timed out or computed a wrong result. */
  status: 'ok' | 'failed' | 'skipped';
  runs: number;
  failed_runs: number;
  /** First failure's reason. */
  error?: string;
  /** Median, min and max of every figure over the passing runs. */
  metrics: Record<string, Stat>;
  /** Median of this cell divided by the median of its baseline's cell, per figure. */
  ratios: Record<string, number>;
  /** The allocator the ratios are against. */
  baseline: string;
}
