/**
 * Argument checks for heaphook's public TypeScript APIs: a wrong value is refused at the call
 * with a TypeError (wrong type, a string with a NUL byte) or a RangeError (a number out of
 * range, NaN, a fraction where an integer is expected) whose message names the argument, says
 * what was expected and shows what was given, e.g.
 *   TypeError: watchMemoryEvents(mask, callback): callback must be a function, got 'notafunction'
 */
import { inspect } from 'node:util';

/** A short rendering of a value for an error message. */
export function shown(value: unknown): string {
  return inspect(value, { depth: 1, breakLength: Infinity, maxStringLength: 60 });
}

function fail(
  Kind: typeof TypeError,
  where: string,
  name: string,
  expected: string,
  value: unknown,
): never {
  throw new Kind(`${where}: ${name} must be ${expected}, got ${shown(value)}`);
}

/** `value` is a string without NUL bytes (a path, a name: C would cut it at the NUL). */
export function checkString(where: string, name: string, value: unknown): string {
  if (typeof value !== 'string') fail(TypeError, where, name, 'a string', value);
  if (value.includes('\0')) fail(TypeError, where, name, 'a string without NUL bytes', value);
  return value;
}

/** One of choices (compared exactly). */
export function checkChoice<T extends string>(
  where: string,
  name: string,
  value: unknown,
  choices: readonly T[],
): T {
  if (!choices.includes(value as T))
    fail(TypeError, where, name, `one of ${choices.join(', ')}`, value);
  return value as T;
}

export function checkBoolean(where: string, name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') fail(TypeError, where, name, 'true or false', value);
  return value;
}

export function checkFunction<F extends (...args: never[]) => unknown>(
  where: string,
  name: string,
  value: unknown,
): F {
  if (typeof value !== 'function') fail(TypeError, where, name, 'a function', value);
  return value as F;
}

/** An options object (undefined counts as {}). */
export function checkOptions<T extends object>(where: string, name: string, value: unknown): T {
  if (value === undefined) return {} as T;
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    fail(TypeError, where, name, 'an object', value);
  return value as T;
}

export interface NumberRule {
  /** Only integers (default true). */
  readonly integer?: boolean;
  readonly min?: number;
  readonly max?: number;
  /** min itself is refused (e.g. "> 0"). */
  readonly minExclusive?: boolean;
}

/** A finite number within the rule: TypeError for another type, RangeError for NaN, an
 * infinity, a fraction where an integer is expected, or a value out of range. */
export function checkNumber(
  where: string,
  name: string,
  value: unknown,
  rule: NumberRule = {},
): number {
  const integer = rule.integer ?? true;
  const min = rule.min ?? (integer ? 0 : -Infinity);
  const max = rule.max ?? (integer ? Number.MAX_SAFE_INTEGER : Infinity);
  const expected =
    `${integer ? 'an integer' : 'a number'} ` +
    (max === Infinity || max === Number.MAX_SAFE_INTEGER
      ? `${rule.minExclusive ? '>' : '>='} ${min}`
      : `from ${min}${rule.minExclusive ? ' (excluded)' : ''} to ${max}`);
  if (typeof value !== 'number') fail(TypeError, where, name, expected, value);
  if (
    !Number.isFinite(value) ||
    (integer && !Number.isSafeInteger(value)) ||
    value < min ||
    (rule.minExclusive && value === min) ||
    value > max
  )
    fail(RangeError, where, name, expected, value);
  return value;
}
