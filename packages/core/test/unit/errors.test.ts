/** The CLI's errors: the exit status they carry, and file-system errors as one line. */
import { lstatSync } from 'node:fs';

import { describe, expect, it } from 'vitest';

import { describeFileSystemError, EXIT_USAGE, HeaphookError } from '../../src/index.js';

function fsError(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a file-system error');
}

describe('HeaphookError', () => {
  it('is a usage error (exit status 2) unless it says otherwise', () => {
    expect(new HeaphookError('bad --top').exitStatus).toBe(EXIT_USAGE);
    expect(new HeaphookError('damaged', { exitStatus: 3 }).exitStatus).toBe(3);
    expect(new HeaphookError('x').namesCommand).toBe(false);
  });
});

describe('describeFileSystemError', () => {
  it('names the path, the problem and the code, on one line', () => {
    const error = fsError(() => lstatSync('/nonexistent/heaplog.1.log'));
    expect(describeFileSystemError(error)).toBe(
      '/nonexistent/heaplog.1.log: no such file or directory (ENOENT)',
    );
  });

  it('knows the errors a path can meet (EACCES, EISDIR, EEXIST, ENOTDIR, ELOOP ...)', () => {
    for (const code of ['EACCES', 'EPERM', 'EISDIR', 'EEXIST', 'ENOTDIR', 'ELOOP']) {
      const error = Object.assign(new Error(code), { code, path: '/p' });
      expect(describeFileSystemError(error)).toMatch(new RegExp(`^/p: [a-z].* \\(${code}\\)$`));
    }
  });

  it('leaves other errors alone (a bug keeps its stack trace)', () => {
    expect(describeFileSystemError(new TypeError('x is undefined'))).toBeUndefined();
    expect(describeFileSystemError('a string')).toBeUndefined();
  });
});
