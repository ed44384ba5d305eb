/**
 * A tiny seeded pseudo-random generator (mulberry32) so every fake dataset, fault schedule and
 * generated value is the same on every run for the same seed. Not for anything secret.
 */

export class SeededRandom {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max], both ends included. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** True with the given probability. */
  chance(probability: number): boolean {
    return this.next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('SeededRandom.pick: empty list');
    return items[Math.floor(this.next() * items.length)] as T;
  }

  /** An unsigned 32-bit integer. */
  uint32(): number {
    return (this.next() * 4294967296) >>> 0;
  }

  /** A random version-4 UUID, deterministic for the seed. */
  uuid(): string {
    const a = this.uint32();
    const b = this.uint32();
    const c = this.uint32();
    const d = this.uint32();
    // Written as bytes into one scratch buffer and read back as one flat string: string
    // concatenation would be several times slower and leave a tree of pieces per value, which for
    // a million generated rows is most of the heap.
    let at = writeHex(a, 8, 0);
    uuidScratch[at++] = 0x2d;
    at = writeHex(b >>> 16, 4, at);
    uuidScratch[at++] = 0x2d;
    uuidScratch[at++] = 0x34;
    at = writeHex(b & 0xfff, 3, at);
    uuidScratch[at++] = 0x2d;
    at = writeHex(((c >>> 16) & 0x3fff) | 0x8000, 4, at);
    uuidScratch[at++] = 0x2d;
    at = writeHex(c & 0xffff, 4, at);
    at = writeHex(d, 8, at);
    return uuidScratch.toString('latin1', 0, at);
  }
}

const uuidScratch = Buffer.alloc(36);
const hexDigitCodes = Array.from('0123456789abcdef', (digit) => digit.charCodeAt(0));

function writeHex(value: number, digits: number, at: number): number {
  for (let shift = (digits - 1) * 4; shift >= 0; shift -= 4) {
    uuidScratch[at++] = hexDigitCodes[(value >>> shift) & 15] as number;
  }
  return at;
}

/** A 32-bit seed mixed from a number and a label, so each resource gets its own stream. */
export function deriveSeed(seed: number, label: string): number {
  let hash = (seed ^ 0x9e3779b9) >>> 0;
  for (let index = 0; index < label.length; index += 1) {
    hash = Math.imul(hash ^ label.charCodeAt(index), 0x01000193) >>> 0;
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b) >>> 0;
  hash ^= hash >>> 13;
  return hash >>> 0;
}
