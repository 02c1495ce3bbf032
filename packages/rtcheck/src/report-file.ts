/**
 * The report file libheaphook_rtcheck.so writes at exit when HEAPHOOK_RT_REPORT names it
 * (native/report.c gives the format): one per process, tab-separated lines.
 */
import type { ModuleRecord } from '@heaphook/heaptrack';

export interface RawViolation {
  /** The intercepted call: malloc, operator new, pthread_mutex_lock ... */
  readonly call: string;
  readonly count: number;
  readonly tid: number;
  readonly policy: number;
  readonly priority: number;
  readonly thread: string;
  /** Return addresses, innermost first (the caller of the intercepted call first). */
  readonly pcs: readonly number[];
}

export interface RawThread {
  readonly tid: number;
  readonly policy: number;
  readonly priority: number;
  readonly thread: string;
  readonly minorFaults: number;
  readonly majorFaults: number;
}

export interface RawReport {
  readonly pid: number;
  /** 'abort' when the process stopped at this violation (--abort). */
  readonly mode: 'report' | 'abort';
  readonly modules: readonly ModuleRecord[];
  readonly threads: readonly RawThread[];
  readonly violations: readonly RawViolation[];
  /** Violations the library's fixed table had no room for. */
  readonly dropped: number;
  /** False when the file stops before its `end` line (the process died while writing it). */
  readonly complete: boolean;
}

const hex = (text: string): number => Number.parseInt(text, 16);

function hexText(text: string): string {
  if (text === '-') return '';
  return Buffer.from(text, 'hex').toString('utf8');
}

/** Parses one report file's text. */
export function parseReport(text: string): RawReport {
  const lines = text.split('\n');
  const head = (lines[0] ?? '').split('\t');
  if (head[0] !== 'heaphook-rtcheck' || head[1] !== '1') {
    throw new Error('not a heaphook rtcheck report (version 1)');
  }
  const modules: ModuleRecord[] = [];
  const threads: RawThread[] = [];
  const violations: RawViolation[] = [];
  let dropped = 0;
  let complete = false;
  for (const line of lines.slice(1)) {
    const f = line.split('\t');
    switch (f[0]) {
      case 'module':
        modules.push({
          type: 'module',
          base: hex(f[1]!),
          start: hex(f[2]!),
          end: hex(f[3]!),
          buildId: f[4] === '-' ? '' : f[4]!,
          path: f.slice(5).join('\t'),
        });
        break;
      case 'thread':
        threads.push({
          tid: Number(f[1]),
          policy: Number(f[2]),
          priority: Number(f[3]),
          minorFaults: Number(f[4]),
          majorFaults: Number(f[5]),
          thread: hexText(f[6] ?? '-'),
        });
        break;
      case 'violation':
        violations.push({
          call: f[1]!,
          count: Number(f[2]),
          tid: Number(f[3]),
          policy: Number(f[4]),
          priority: Number(f[5]),
          thread: hexText(f[6] ?? '-'),
          pcs: (f[7] ?? '')
            .split(',')
            .filter((p) => p !== '')
            .map(hex),
        });
        break;
      case 'dropped':
        dropped = Number(f[1]);
        break;
      case 'end':
        complete = true;
        break;
      default:
        break;
    }
  }
  return {
    pid: Number(head[2]),
    mode: head[3] === 'abort' ? 'abort' : 'report',
    modules,
    threads,
    violations,
    dropped,
    complete,
  };
}
