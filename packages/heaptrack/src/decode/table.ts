/**
 * An open-addressing hash table from non-zero integer keys (addresses, ordinals: any integer
 * a double holds exactly) to non-negative numbers, stored in typed arrays: no object per entry,
 * so the decoder's and the replay's per-block state costs 16 bytes per slot and no GC work.
 * Linear probing with backward-shift deletion; key 0 marks an empty slot.
 */
const TWO32 = 4294967296;

export class NumberTable {
  private keys: Float64Array;
  private vals: Float64Array;
  private mask: number;
  private shift: number;
  size = 0;

  /**
   * `sequential`: the keys are mostly consecutive integers (ordinals): place them by their
   * low bits, so that neighbours share cache lines.
   */
  constructor(
    capacity = 1024,
    private readonly sequential = false,
  ) {
    let n = 16;
    while (n < capacity * 2) n *= 2;
    this.keys = new Float64Array(n);
    this.vals = new Float64Array(n);
    this.mask = n - 1;
    this.shift = 32 - Math.log2(n);
  }

  private slot(key: number): number {
    if (this.sequential) return key & this.mask;
    const lo = key >>> 0;
    const hi = (key / TWO32) >>> 0;
    return Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) >>> this.shift;
  }

  /** The value of `key`, or -1. */
  get(key: number): number {
    const keys = this.keys;
    const mask = this.mask;
    for (let i = this.slot(key); ; i = (i + 1) & mask) {
      const k = keys[i]!;
      if (k === key) return this.vals[i]!;
      if (k === 0) return -1;
    }
  }

  /** Sets `key` (non-zero) to `value` (>= 0); returns the previous value or -1. */
  set(key: number, value: number): number {
    if ((this.size + 1) * 2 > this.keys.length) this.grow();
    const keys = this.keys;
    const mask = this.mask;
    for (let i = this.slot(key); ; i = (i + 1) & mask) {
      const k = keys[i]!;
      if (k === key) {
        const old = this.vals[i]!;
        this.vals[i] = value;
        return old;
      }
      if (k === 0) {
        keys[i] = key;
        this.vals[i] = value;
        this.size++;
        return -1;
      }
    }
  }

  /** Removes `key`; returns its value or -1 when it was not there. */
  delete(key: number): number {
    const keys = this.keys;
    const vals = this.vals;
    const mask = this.mask;
    let i = this.slot(key);
    for (;;) {
      const k = keys[i]!;
      if (k === 0) return -1;
      if (k === key) break;
      i = (i + 1) & mask;
    }
    const old = vals[i]!;
    // Backward shift: pull later entries of the probe run into the hole.
    let hole = i;
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const k = keys[j]!;
      if (k === 0) break;
      const home = this.slot(k);
      // Move k when its home is not cyclically within (hole, j].
      if (hole <= j ? home <= hole || home > j : home <= hole && home > j) {
        keys[hole] = k;
        vals[hole] = vals[j]!;
        hole = j;
      }
    }
    keys[hole] = 0;
    vals[hole] = 0;
    this.size--;
    return old;
  }

  clear(): void {
    this.keys.fill(0);
    this.vals.fill(0);
    this.size = 0;
  }

  /** Calls fn for every entry (in no particular order). */
  forEach(fn: (value: number, key: number) => void): void {
    const keys = this.keys;
    for (let i = 0; i < keys.length; i++) if (keys[i] !== 0) fn(this.vals[i]!, keys[i]!);
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldVals = this.vals;
    const n = oldKeys.length * 2;
    this.keys = new Float64Array(n);
    this.vals = new Float64Array(n);
    this.mask = n - 1;
    this.shift = 32 - Math.log2(n);
    this.size = 0;
    for (let i = 0; i < oldKeys.length; i++)
      if (oldKeys[i] !== 0) this.set(oldKeys[i]!, oldVals[i]!);
  }
}
