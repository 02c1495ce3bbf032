/**
 * Heap consumption over time in a fixed number of points, whatever the number of events:
 * values fall into equal-width time buckets; when a value lands past the last bucket, the
 * width doubles and adjacent buckets merge. Each bucket keeps its minimum, maximum and last
 * value, so the peak survives every merge.
 */
export interface SeriesPoint {
  /** Start of the bucket, ns since the process started. */
  readonly time: number;
  readonly min: number;
  readonly max: number;
  /** The value at the end of the bucket. */
  readonly last: number;
}

interface Bucket {
  min: number;
  max: number;
  last: number;
}

export class HeapSeries {
  private width: number;
  private buckets: (Bucket | undefined)[];

  /** `capacity` buckets (even, at least 2); `initialWidth` ns per bucket to begin with. */
  constructor(
    readonly capacity = 1024,
    initialWidth = 1,
  ) {
    if (capacity < 2 || capacity % 2 !== 0) throw new RangeError('capacity: an even number >= 2');
    this.width = Math.max(1, initialWidth);
    this.buckets = new Array<Bucket | undefined>(capacity).fill(undefined);
  }

  /** ns per bucket now. */
  get bucketWidth(): number {
    return this.width;
  }

  /** The heap is `value` bytes from `time` (ns) on; times must not decrease much (they are clamped to 0). */
  add(time: number, value: number): void {
    let index = Math.floor(Math.max(0, time) / this.width);
    while (index >= this.capacity) {
      this.merge();
      index = Math.floor(Math.max(0, time) / this.width);
    }
    const b = this.buckets[index];
    if (b === undefined) this.buckets[index] = { min: value, max: value, last: value };
    else {
      if (value < b.min) b.min = value;
      if (value > b.max) b.max = value;
      b.last = value;
    }
  }

  private merge(): void {
    const merged = new Array<Bucket | undefined>(this.capacity).fill(undefined);
    for (let i = 0; i < this.capacity; i += 2) {
      const a = this.buckets[i];
      const b = this.buckets[i + 1];
      if (a === undefined || b === undefined) merged[i / 2] = a ?? b;
      else {
        merged[i / 2] = {
          min: Math.min(a.min, b.min),
          max: Math.max(a.max, b.max),
          last: b.last,
        };
      }
    }
    this.buckets = merged;
    this.width *= 2;
  }

  /** The buckets that saw a value, in time order. */
  points(): SeriesPoint[] {
    const out: SeriesPoint[] = [];
    this.buckets.forEach((b, i) => {
      if (b !== undefined) out.push({ time: i * this.width, ...b });
    });
    return out;
  }
}
