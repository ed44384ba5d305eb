/**
 * The daemon's warehouse kept between runs (src/cli/kept-warehouse.ts), against a warehouse that
 * counts what is asked of it. The daemon's own test (daemon.test.ts) runs it through the CLI.
 */
import { describe, expect, it } from 'vitest';
import { KeptWarehouse } from '../src/cli/kept-warehouse.js';
import type { Warehouse } from '../src/interfaces.js';
import { createLogger } from '../src/log.js';
import { Writable } from 'node:stream';

interface Counted {
  warehouse: Warehouse;
  refreshed: number;
  closed: number;
}

function countedWarehouse(refreshError?: Error, dialect: Warehouse['dialect'] = 'sqlite'): Counted {
  const counted: Counted = {
    warehouse: undefined as unknown as Warehouse,
    refreshed: 0,
    closed: 0,
  };
  counted.warehouse = {
    dialect,
    description: `${dialect}:counted`,
    refresh: async () => {
      counted.refreshed += 1;
      if (refreshError) throw refreshError;
    },
    close: async () => {
      counted.closed += 1;
    },
  } as unknown as Warehouse;
  return counted;
}

function keeper(): { kept: KeptWarehouse; logs: () => string } {
  let logs = '';
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      logs += chunk.toString();
      callback();
    },
  });
  const logger = createLogger({
    level: 'debug',
    pretty: false,
    destination: stream,
  });
  return { kept: new KeptWarehouse(logger), logs: () => logs };
}

describe('a warehouse kept between runs', () => {
  it('is opened once, and caught up before each later run', async () => {
    const { kept } = keeper();
    const first = countedWarehouse();
    let opened = 0;
    const open = async () => {
      opened += 1;
      return first.warehouse;
    };
    for (let run = 0; run < 3; run++) {
      const warehouse = await kept.take(open);
      expect(warehouse).toBe(first.warehouse);
      await kept.give(warehouse, true);
    }
    expect(opened).toBe(1);
    expect(first.refreshed).toBe(2);
    expect(first.closed).toBe(0);
    await kept.close();
    expect(first.closed).toBe(1);
  });

  it('closes the warehouse of a run that threw; the next run opens one afresh', async () => {
    const { kept } = keeper();
    const [first, second] = [countedWarehouse(), countedWarehouse()];
    const opens = [first, second];
    const open = async () => opens.shift()!.warehouse;
    await kept.give(await kept.take(open), false);
    expect(first.closed).toBe(1);
    expect(await kept.take(open)).toBe(second.warehouse);
    expect(second.refreshed).toBe(0);
  });

  it('opens afresh, saying why, when the one kept cannot catch up', async () => {
    const { kept, logs } = keeper();
    const first = countedWarehouse(
      new Error('The warehouse file counted.db was replaced or removed.'),
    );
    const second = countedWarehouse();
    const opens = [first, second];
    const open = async () => opens.shift()!.warehouse;
    await kept.give(await kept.take(open), true);
    expect(await kept.take(open)).toBe(second.warehouse);
    expect(first.closed).toBe(1);
    expect(logs()).toContain(
      'Opening the warehouse afresh: the one kept since the last run cannot be used',
    );
    expect(logs()).toContain('was replaced or removed');
  });

  it('keeps no PostgreSQL warehouse: its pool would hold connections between runs', async () => {
    const { kept } = keeper();
    const [first, second] = [
      countedWarehouse(undefined, 'postgres'),
      countedWarehouse(undefined, 'postgres'),
    ];
    const opens = [first, second];
    const open = async () => opens.shift()!.warehouse;
    await kept.give(await kept.take(open), true);
    expect(first.closed).toBe(1);
    expect(await kept.take(open)).toBe(second.warehouse);
  });

  it('once closed, closes a warehouse a run gives back instead of keeping it', async () => {
    const { kept } = keeper();
    const first = countedWarehouse();
    const warehouse = await kept.take(async () => first.warehouse);
    await kept.close();
    expect(first.closed).toBe(0);
    await kept.give(warehouse, true);
    expect(first.closed).toBe(1);
  });
});
