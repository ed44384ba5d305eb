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

  /** A random version-4 UUID, deterministic for the seed. */
  uuid(): string {
    const hex: string[] = [];
    for (let index = 0; index < 4; index += 1) {
      hex.push(((this.next() * 4294967296) >>> 0).toString(16).padStart(8, '0'));
    }
    const digits = hex.join('');
    const variant = ((parseInt(digits[16] as string, 16) & 0x3) | 0x8).toString(16);
    return (
      `${digits.slice(0, 8)}-${digits.slice(8, 12)}-4${digits.slice(13, 16)}-` +
      `${variant}${digits.slice(17, 20)}-${digits.slice(20, 32)}`
    );
  }
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
