/** Option parsers shared by `heaphook` and the subcommands packages contribute (commander). */
import { HeaphookError } from './errors.js';

/** A repeatable, comma-separable list option: `-b a -b b,c` → ['a', 'b', 'c']. */
export function collectList(value: string, previous: readonly string[]): string[] {
  return [...previous, ...value.split(',').filter((v) => v.length > 0)];
}

/** A repeatable `--env KEY=VALUE` option, accumulated into an object. */
export function parseEnvAssignment(
  value: string,
  previous: Readonly<Record<string, string>>,
): Record<string, string> {
  const eq = value.indexOf('=');
  if (eq <= 0) {
    throw new HeaphookError(
      `--env expects KEY=VALUE, got "${value}" (e.g. --env INITIAL_MEMPOOL_SIZE=64M)`,
    );
  }
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}
