/**
 * Date-time-like strings for holding the fast paths (timestamps, column types) to the general
 * ones: every fraction length, offsets, days around month ends and leap years, fields out of
 * range, and near misses made by changing, dropping or adding one character.
 */

const DAYS = [
  '2026-01-01',
  '2026-02-28',
  '2026-02-29',
  '2024-02-29',
  '2000-02-29',
  '1900-02-29',
  '2026-02-30',
  '2026-04-30',
  '2026-04-31',
  '2026-12-31',
  '2026-12-32',
  '2026-00-10',
  '2026-13-10',
  '2026-11-00',
  '0000-01-01',
  '0001-01-01',
  '9999-12-31',
];

const CLOCKS = ['00:00:00', '10:15:30', '23:59:59', '24:00:00', '10:60:00', '10:00:60', '99:99:99'];

const FRACTIONS = [
  '',
  '.1',
  '.25',
  '.137',
  '.1370',
  '.13725',
  '.137251',
  '.000000',
  '.999999',
  '.1372514',
  '.9999996',
  '.13725149',
  '.999999999',
  '.1234567890',
];

const ZONES = [
  'Z',
  '+00:00',
  '-00:00',
  '+01:00',
  '-05:30',
  '+14:00',
  '+15:59',
  '+16:00',
  '-00:60',
  '+0000',
  '+00',
  'z',
  '',
];

const NEAR_MISS_CHARACTERS = ['0', '9', '-', ':', '.', 'T', 't', 'Z', '+', ' ', '\n', '\u0660'];

/** The shapes above combined, and one-character variants of a few of them. */
export function dateTimeCases(): string[] {
  const cases = new Set<string>();
  for (const day of DAYS) {
    for (const clock of CLOCKS) {
      for (const fraction of FRACTIONS) {
        for (const zone of ZONES) cases.add(`${day}T${clock}${fraction}${zone}`);
      }
    }
  }
  const seeds = [
    '2026-01-01T00:00:00.137251Z',
    '2026-01-01T00:02:05Z',
    '2026-01-01T00:02:05+00:00',
    '2026-01-01T00:02:05.137-00:00',
    '2024-02-29T23:59:59.999999999+01:00',
  ];
  for (const seed of seeds) {
    for (let position = 0; position <= seed.length; position++) {
      cases.add(seed.slice(0, position) + seed.slice(position + 1));
      for (const character of NEAR_MISS_CHARACTERS) {
        cases.add(seed.slice(0, position) + character + seed.slice(position + 1));
        cases.add(seed.slice(0, position) + character + seed.slice(position));
      }
    }
    cases.add(` ${seed}`);
    cases.add(`${seed}\n`);
  }
  for (const other of [
    '',
    'Z',
    'yesterday',
    '2026-11-20',
    '2026-11-20 10:00:00Z',
    '1'.repeat(27),
  ]) {
    cases.add(other);
  }
  return [...cases];
}
