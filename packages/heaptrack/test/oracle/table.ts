/**
 * An open-addressing hash table from non-zero integer keys (addresses, ordinals: any integer
 * a double holds exactly) to non-negative numbers, stored in one typed array: no object per
 * entry, so the oracle's state costs 16 bytes per slot and no GC work. Key
 * and value sit side by side (one cache line per probe). Linear probing with backward-shift
 * deletion; key 0 marks an empty slot.
 */
const TWO32 = 4294967296;

export class NumberTable {
  /** Slot i: key at 2i, value at 2i + 1. */
  private data: Float64Array;
  private mask: number;
  private shift: number;
  size = 0;

  constructor(capacity = 1024) {
    let n = 16;
    while (n < capacity * 2) n *= 2;
    this.data = new Float64Array(2 * n);
    this.mask = n - 1;
    this.shift = 32 - Math.log2(n);
  }

  private slot(key: number): number {
    const lo = key >>> 0;
    const hi = (key / TWO32) >>> 0;
    return Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) >>> this.shift;
  }

  /** The value of `key`, or -1. */
  get(key: number): number {
    const d = this.data;
    const mask = this.mask;
    for (let i = this.slot(key); ; i = (i + 1) & mask) {
      const k = d[2 * i]!;
      if (k === key) return d[2 * i + 1]!;
      if (k === 0) return -1;
    }
  }

  /** Sets `key` (non-zero) to `value` (>= 0); returns the previous value or -1. */
  set(key: number, value: number): number {
    if ((this.size + 1) * 4 > this.data.length) this.grow();
    const d = this.data;
    const mask = this.mask;
    for (let i = this.slot(key); ; i = (i + 1) & mask) {
      const k = d[2 * i]!;
      if (k === key) {
        const old = d[2 * i + 1]!;
        d[2 * i + 1] = value;
        return old;
      }
      if (k === 0) {
        d[2 * i] = key;
        d[2 * i + 1] = value;
        this.size++;
        return -1;
      }
    }
  }

  /** Removes `key`; returns its value or -1 when it was not there. */
  delete(key: number): number {
    const d = this.data;
    const mask = this.mask;
    let i = this.slot(key);
    for (;;) {
      const k = d[2 * i]!;
      if (k === 0) return -1;
      if (k === key) break;
      i = (i + 1) & mask;
    }
    const old = d[2 * i + 1]!;
    // Backward shift: pull later entries of the probe run into the hole.
    let hole = i;
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const k = d[2 * j]!;
      if (k === 0) break;
      const home = this.slot(k);
      // Move k when its home is not cyclically within (hole, j].
      if (hole <= j ? home <= hole || home > j : home <= hole && home > j) {
        d[2 * hole] = k;
        d[2 * hole + 1] = d[2 * j + 1]!;
        hole = j;
      }
    }
    d[2 * hole] = 0;
    d[2 * hole + 1] = 0;
    this.size--;
    return old;
  }

  clear(): void {
    this.data.fill(0);
    this.size = 0;
  }

  /** Calls fn for every entry (in no particular order). */
  forEach(fn: (value: number, key: number) => void): void {
    const d = this.data;
    for (let i = 0; i < d.length; i += 2) if (d[i] !== 0) fn(d[i + 1]!, d[i]!);
  }

  private grow(): void {
    const old = this.data;
    const n = old.length; // slots double: 2 * (old.length / 2)
    this.data = new Float64Array(2 * n);
    this.mask = n - 1;
    this.shift = 32 - Math.log2(n);
    this.size = 0;
    for (let i = 0; i < old.length; i += 2) if (old[i] !== 0) this.set(old[i]!, old[i + 1]!);
  }
}
