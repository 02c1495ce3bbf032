/**
 * The live blocks of a replay, without one object per block: an open-addressing hash table
 * from address to slot number (typed arrays: addresses above 2^31 would be boxed numbers in a
 * Map), and the blocks' fields in typed arrays indexed by slot (freed slots are reused).
 * Memory is proportional to the live blocks; the garbage collector has nothing to chase.
 */
export class AddressMap {
  private keys = new Float64Array(1024); // 0 = empty (no block lives at address 0)
  private values = new Int32Array(1024);
  private mask = 1023;
  private shift = 22; // 32 - log2(capacity)
  size = 0;

  private home(key: number): number {
    const lo = key >>> 0;
    const hi = (key / 4294967296) >>> 0;
    return Math.imul((lo >>> 4) ^ (lo << 12) ^ hi, 0x9e3779b1) >>> this.shift;
  }

  get(key: number): number {
    if (key === 0) return -1; // 0 marks empty slots: no block lives there
    const keys = this.keys;
    for (let i = this.home(key); ; i = (i + 1) & this.mask) {
      const k = keys[i]!;
      if (k === key) return this.values[i]!;
      if (k === 0) return -1;
    }
  }

  /** Sets the value of a key (key > 0). */
  set(key: number, value: number): void {
    if ((this.size + 1) * 2 > this.keys.length) this.grow();
    const keys = this.keys;
    for (let i = this.home(key); ; i = (i + 1) & this.mask) {
      const k = keys[i]!;
      if (k === key || k === 0) {
        if (k === 0) this.size++;
        keys[i] = key;
        this.values[i] = value;
        return;
      }
    }
  }

  delete(key: number): boolean {
    const keys = this.keys;
    let i = this.home(key);
    for (; ; i = (i + 1) & this.mask) {
      const k = keys[i]!;
      if (k === key) break;
      if (k === 0) return false;
    }
    // Backward-shift deletion: move later entries of the run into the hole when their home
    // is not between the hole and them.
    for (let j = (i + 1) & this.mask; keys[j] !== 0; j = (j + 1) & this.mask) {
      const h = this.home(keys[j]!);
      const stays = i <= j ? i < h && h <= j : i < h || h <= j;
      if (stays) continue;
      keys[i] = keys[j]!;
      this.values[i] = this.values[j]!;
      i = j;
    }
    keys[i] = 0;
    this.size--;
    return true;
  }

  *entries(): IterableIterator<[number, number]> {
    for (let i = 0; i < this.keys.length; i++) {
      if (this.keys[i] !== 0) yield [this.keys[i]!, this.values[i]!];
    }
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldValues = this.values;
    const n = oldKeys.length * 2;
    this.keys = new Float64Array(n);
    this.values = new Int32Array(n);
    this.mask = n - 1;
    this.shift = 32 - Math.log2(n);
    this.size = 0;
    for (let i = 0; i < oldKeys.length; i++) {
      if (oldKeys[i] !== 0) this.set(oldKeys[i]!, oldValues[i]!);
    }
  }
}

export class LiveTable {
  private readonly slotOf = new AddressMap();
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
    return this.slotOf.get(ptr);
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
    for (const [ptr, slot] of this.slotOf.entries()) {
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
