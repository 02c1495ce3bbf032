/**
 * The live blocks of a replay, without one object per block: a Map from address to a slot
 * number, and the blocks' fields in typed arrays indexed by slot (freed slots are reused).
 * Memory is proportional to the live blocks; the garbage collector has nothing to chase.
 */
export class LiveTable {
  private readonly slotOf = new Map<number, number>();
  private sizes = new Float64Array(1024);
  private weights = new Float64Array(1024);
  private sites = new Int32Array(1024);
  private freeSlots = new Int32Array(1024);
  private freeCount = 0;
  private used = 0;

  get size(): number {
    return this.slotOf.size;
  }

  /** The slot of a live block, or -1. */
  find(ptr: number): number {
    return this.slotOf.get(ptr) ?? -1;
  }

  sizeAt(slot: number): number {
    return this.sizes[slot]!;
  }

  weightAt(slot: number): number {
    return this.weights[slot]!;
  }

  siteAt(slot: number): number {
    return this.sites[slot]!;
  }

  /** Adds a block (the address must not be live). */
  add(ptr: number, size: number, weight: number, site: number): void {
    let slot: number;
    if (this.freeCount > 0) slot = this.freeSlots[--this.freeCount]!;
    else {
      slot = this.used++;
      if (slot >= this.sizes.length) this.grow();
    }
    this.sizes[slot] = size;
    this.weights[slot] = weight;
    this.sites[slot] = site;
    this.slotOf.set(ptr, slot);
  }

  /** Removes the block in `slot` at `ptr`. */
  remove(ptr: number, slot: number): void {
    this.slotOf.delete(ptr);
    if (this.freeCount >= this.freeSlots.length) {
      const bigger = new Int32Array(this.freeSlots.length * 2);
      bigger.set(this.freeSlots);
      this.freeSlots = bigger;
    }
    this.freeSlots[this.freeCount++] = slot;
  }

  /** Every live block: address, bytes asked for, weight, site. */
  *entries(): IterableIterator<[number, number, number, number]> {
    for (const [ptr, slot] of this.slotOf) {
      yield [ptr, this.sizes[slot]!, this.weights[slot]!, this.sites[slot]!];
    }
  }

  private grow(): void {
    const n = this.sizes.length * 2;
    const sizes = new Float64Array(n);
    sizes.set(this.sizes);
    this.sizes = sizes;
    const weights = new Float64Array(n);
    weights.set(this.weights);
    this.weights = weights;
    const sites = new Int32Array(n);
    sites.set(this.sites);
    this.sites = sites;
  }
}
