// Unit tier: the configuration parsers themselves (native/config.c through
// test/native/config_test.c, linked with libheaphook_core.a, no interposition): the table of
// sizes, booleans and log formats, and heaphook_env_size's good, default and bad paths.
import { describe, expect, it } from 'vitest';

import { built, run } from '../helpers/native.js';

const EXIT_CONFIG = 78;

describe('the parsers themselves (test/native/config_test.c)', () => {
  it('parse sizes, booleans and format log lines as documented', () => {
    const result = run(built('heaphook_config_test'), []);
    expect(result.stdout).not.toContain('FAIL');
    expect(result.stdout).toMatch(/^config_test: \d+ cases, 0 failed$/m);
    expect(result.status).toBe(0);
  });

  const sizes: Array<[string, string]> = [
    ['100000000', '100000000'],
    ['100M', '100000000'],
    ['100MiB', String(100 * 2 ** 20)],
    ['1GiB', String(2 ** 30)],
    ['1.5GiB', String(1.5 * 2 ** 30)],
    ['2TB', '2000000000000'],
    ['64k', '64000'],
  ];
  for (const [text, bytes] of sizes) {
    it(`heaphook_env_size reads ${text} as ${bytes}`, () => {
      const result = run(built('heaphook_config_test'), ['env', 'HEAPHOOK_TEST_SIZE'], {
        env: { HEAPHOOK_TEST_SIZE: text },
      });
      expect(result.stdout).toBe(`HEAPHOOK_TEST_SIZE=${bytes}\n`);
      expect(result.status).toBe(0);
    });
  }

  it('heaphook_env_size uses the default when unset and stops on junk', () => {
    expect(run(built('heaphook_config_test'), ['env', 'HEAPHOOK_TEST_SIZE']).stdout).toBe(
      'HEAPHOOK_TEST_SIZE=12345\n',
    );
    const bad = run(built('heaphook_config_test'), ['env', 'HEAPHOOK_TEST_SIZE'], {
      env: { HEAPHOOK_TEST_SIZE: '1.5' },
    });
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toBe(
      'heaphook: HEAPHOOK_TEST_SIZE="1.5" is not a size; expected bytes or a number with a suffix, e.g. HEAPHOOK_TEST_SIZE=100M\n',
    );
    expect(bad.status).toBe(EXIT_CONFIG);
  });
});
