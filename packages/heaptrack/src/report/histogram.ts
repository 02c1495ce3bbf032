/** Fixed-size histograms: allocation sizes in power-of-two buckets, latencies log-linear. */

/** Bucket 0 holds size 0; bucket k (1..64) holds sizes in [2^(k-1), 2^k). */
export class SizeHistogram {
  readonly counts = new Array<number>(65).fill(0);
  readonly bytes = new Array<number>(65).fill(0);

  static bucketOf(size: number): number {
    if (size <= 0) return 0;
    if (size < 0x80000000) return 32 - Math.clz32(size);
    return Math.min(64, Math.floor(Math.log2(size)) + 1);
  }

  /** Lower bound of bucket k (inclusive). */
  static lowerBound(k: number): number {
    return k === 0 ? 0 : 2 ** (k - 1);
  }

  /** A histogram with these counts and bytes per bucket (65 each), as the native pass keeps them. */
  static fromBuckets(counts: ArrayLike<number>, bytes: ArrayLike<number>): SizeHistogram {
    const h = new SizeHistogram();
    for (let k = 0; k < h.counts.length; k++) {
      h.counts[k] = counts[k] ?? 0;
      h.bytes[k] = bytes[k] ?? 0;
    }
    return h;
  }

  add(size: number): void {
    const k = SizeHistogram.bucketOf(size);
    this.counts[k]!++;
    this.bytes[k]! += size;
  }

  /** The non-empty buckets: [from, to) in bytes, with their counts. */
  rows(): { from: number; to: number; count: number; bytes: number }[] {
    const out: { from: number; to: number; count: number; bytes: number }[] = [];
    this.counts.forEach((count, k) => {
      if (count > 0) {
        out.push({
          from: SizeHistogram.lowerBound(k),
          to: k === 0 ? 1 : 2 ** k,
          count,
          bytes: this.bytes[k]!,
        });
      }
    });
    return out;
  }
}

const SUB = 16; // sub-buckets per power of two: values are known within 1/16 (6.25 %)
const POWERS = 48; // up to 2^48 ns (3 days)

export interface Percentiles {
  readonly count: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
  readonly mean: number;
}

/**
 * Durations in ns, log-linear buckets (as HdrHistogram): values below 16 exactly, above in
 * 16 sub-buckets per power of two. A percentile is the upper bound of its bucket, capped at
 * the exact maximum, so it is at most 6.25 % above the true value.
 */
export class LatencyHistogram {
  private readonly counts = new Array<number>(SUB * POWERS).fill(0);
  count = 0;
  max = 0;
  sum = 0;

  static bucketOf(ns: number): number {
    const v = Math.max(0, Math.floor(ns));
    if (v < SUB) return v;
    const p = Math.floor(Math.log2(v)); // >= 4
    const sub = Math.floor(v / 2 ** (p - 4)) - SUB; // 0..15
    return Math.min(SUB * POWERS - 1, (p - 3) * SUB + sub);
  }

  /** Largest value of bucket k. */
  static upperBound(k: number): number {
    if (k < SUB) return k;
    const p = Math.floor(k / SUB) + 3;
    const sub = k % SUB;
    return (SUB + sub + 1) * 2 ** (p - 4) - 1;
  }

  /** A histogram with these bucket counts (SUB * POWERS of them) and totals. */
  static fromBuckets(
    counts: ArrayLike<number>,
    totals: { count: number; max: number; sum: number },
  ): LatencyHistogram {
    const h = new LatencyHistogram();
    for (let k = 0; k < h.counts.length; k++) h.counts[k] = counts[k] ?? 0;
    h.count = totals.count;
    h.max = totals.max;
    h.sum = totals.sum;
    return h;
  }

  add(ns: number): void {
    this.counts[LatencyHistogram.bucketOf(ns)]!++;
    this.count++;
    this.sum += ns;
    if (ns > this.max) this.max = ns;
  }

  quantile(q: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let k = 0; k < this.counts.length; k++) {
      seen += this.counts[k]!;
      if (seen >= rank) return Math.min(this.max, LatencyHistogram.upperBound(k));
    }
    return this.max;
  }

  percentiles(): Percentiles {
    return {
      count: this.count,
      p50: this.quantile(0.5),
      p90: this.quantile(0.9),
      p99: this.quantile(0.99),
      p999: this.quantile(0.999),
      max: this.max,
      mean: this.count === 0 ? 0 : this.sum / this.count,
    };
  }

  /** Counts in power-of-two ranges of ns (for a compact chart): [from, to) with counts. */
  coarse(): { from: number; to: number; count: number }[] {
    const out: { from: number; to: number; count: number }[] = [];
    const byPower = new Map<number, number>();
    this.counts.forEach((c, k) => {
      if (c === 0) return;
      const lo = k < SUB ? k : LatencyHistogram.upperBound(k - 1) + 1;
      const p = lo === 0 ? 0 : Math.floor(Math.log2(lo)) + 1;
      byPower.set(p, (byPower.get(p) ?? 0) + c);
    });
    for (const [p, count] of [...byPower.entries()].sort((a, b) => a[0] - b[0])) {
      out.push({ from: p === 0 ? 0 : 2 ** (p - 1), to: 2 ** p, count });
    }
    return out;
  }
}
