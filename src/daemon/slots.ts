/**
 * `teams_at_once`: at most that many teams sync together; a team whose run is due waits for a
 * slot, first come first served. A slot is handed back exactly once, when the run ends or when
 * the fleet gives up waiting for a run that was told to stop (team-runner.ts).
 */

export interface Slot {
  /** Hands the slot to the next team waiting; later calls do nothing. */
  release(): void;
}

export class Slots {
  private free: number;
  private readonly queue: Array<{ grant: (slot: Slot) => void }> = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`slots: ${size}`);
    this.free = size;
  }

  /** Teams waiting for a slot. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Slots in use. */
  get inUse(): number {
    return this.size - this.free;
  }

  /** A slot, once one is free; rejects with the signal's reason if it aborts first. */
  acquire(signal?: AbortSignal): Promise<Slot> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.free > 0) {
      this.free -= 1;
      return Promise.resolve(this.slot());
    }
    return new Promise<Slot>((resolve, reject) => {
      const entry = {
        grant: (slot: Slot) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(slot);
        },
      };
      const onAbort = () => {
        const at = this.queue.indexOf(entry);
        if (at >= 0) this.queue.splice(at, 1);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.queue.push(entry);
    });
  }

  private slot(): Slot {
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        const next = this.queue.shift();
        if (next) next.grant(this.slot());
        else this.free += 1;
      },
    };
  }
}
