/**
 * V8 heap snapshots (`.heapsnapshot`, as Node's --heapsnapshot-signal writes them) summed up the
 * way DevTools' "Summary" view groups them, and two summaries compared: which groups of objects
 * grew between them, and by how much per run of the daemon in between.
 */
import { readFileSync } from 'node:fs';

/** Objects of one group (a constructor name, or a kind such as `(string)`), and their bytes. */
export interface HeapGroup {
  count: number;
  bytes: number;
}

export type HeapSummary = Map<string, HeapGroup>;

interface SnapshotDocument {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** The group a node counts in: objects by their constructor's name, the rest by their kind. */
function groupOf(type: string, name: string): string | undefined {
  switch (type) {
    case 'object':
    case 'native':
      return name;
    case 'closure':
      return `(closure) ${name || '(anonymous)'}`;
    case 'string':
    case 'concatenated string':
    case 'sliced string':
      return '(string)';
    case 'code':
      return '(compiled code)';
    case 'hidden':
    case 'object shape':
      return '(system)';
    case 'synthetic':
      // GC roots and the like, not objects.
      return undefined;
    default:
      return `(${type})`;
  }
}

/** Counts and self sizes per group of a parsed snapshot. */
export function summarizeSnapshot(document: SnapshotDocument): HeapSummary {
  const fields = document.snapshot.meta.node_fields;
  const types = document.snapshot.meta.node_types[0];
  const stride = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const { nodes, strings } = document;
  const summary: HeapSummary = new Map();
  for (let index = 0; index < nodes.length; index += stride) {
    const group = groupOf(types[nodes[index + typeAt]!] ?? '?', strings[nodes[index + nameAt]!]!);
    if (group === undefined) continue;
    const entry = summary.get(group) ?? { count: 0, bytes: 0 };
    entry.count += 1;
    entry.bytes += nodes[index + sizeAt]!;
    summary.set(group, entry);
  }
  return summary;
}

export function summarizeSnapshotFile(path: string): HeapSummary {
  return summarizeSnapshot(JSON.parse(readFileSync(path, 'utf8')) as SnapshotDocument);
}

export interface HeapGrowth {
  group: string;
  before: HeapGroup;
  after: HeapGroup;
  /** Objects added per run of the daemon between the two snapshots. */
  countPerRun: number;
}

/**
 * Groups with more objects or more bytes in `after` than in `before`, most bytes gained first
 * (code grows in bytes as more of it is optimized, while its count may fall).
 */
export function heapGrowth(before: HeapSummary, after: HeapSummary, runs: number): HeapGrowth[] {
  const grown: HeapGrowth[] = [];
  for (const [group, entry] of after) {
    const earlier = before.get(group) ?? { count: 0, bytes: 0 };
    if (entry.count <= earlier.count && entry.bytes <= earlier.bytes) continue;
    grown.push({
      group,
      before: earlier,
      after: entry,
      countPerRun: runs > 0 ? (entry.count - earlier.count) / runs : Number.POSITIVE_INFINITY,
    });
  }
  return grown.sort(
    (a, b) =>
      b.after.bytes - b.before.bytes - (a.after.bytes - a.before.bytes) ||
      a.group.localeCompare(b.group),
  );
}
