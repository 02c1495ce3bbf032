// Each family of blocking calls, made once inside a marked section, is caught by name.
import { describe, expect, it } from 'vitest';

import { rtcheck } from '../../src/index.js';
import { program } from '../helpers/programs.js';

const families: readonly (readonly [string, readonly string[]])[] = [
  ['mutex', ['pthread_mutex_lock']],
  ['cond', ['pthread_cond_timedwait', 'pthread_mutex_lock']],
  ['sem', ['sem_wait']],
  ['sleep', ['clock_nanosleep', 'nanosleep', 'sleep', 'usleep']],
  ['file', ['open', 'read', 'write']],
  ['stdio', ['fclose', 'fopen', 'fprintf', 'fputs', 'fwrite', 'printf']],
  ['socket', ['recv', 'recvfrom', 'send', 'sendto']],
  ['thread', ['pthread_create', 'pthread_join']],
  ['fork', ['fork']],
  ['mmap', ['madvise', 'mmap', 'mremap', 'munmap', 'sbrk']],
];

describe.each(families)('%s', (family, calls) => {
  it(`is caught: ${calls.join(', ')}`, async () => {
    const r = await rtcheck(program('rt_blocking'), [family], { stdio: 'pipe' });
    expect(r.programStatus).toBe(0);
    const seen = [...new Set(r.analysis.violations.map((v) => v.call))].sort();
    expect(seen).toEqual(calls);
    for (const v of r.analysis.violations) {
      expect(v.thread).toBe('rt_blocking');
      expect(v.frames.some((f) => f.function === 'family')).toBe(true);
    }
    expect(r.status).toBe(1);
  });
});
