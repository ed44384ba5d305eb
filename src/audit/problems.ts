/** The kinds of change `audit verify` names, and how it names where one is. */

export const PROBLEM_KINDS = {
  value_edited: 'a value edited',
  valid_time_edited: 'a validity time edited',
  version_deleted: 'a version deleted',
  version_inserted: 'a version inserted',
  version_reordered: 'versions reordered',
  row_edited: 'a live row edited',
  row_deleted: 'a live row deleted',
  row_inserted: 'a live row inserted',
  deleted_at_edited: '_deleted_at set or cleared by hand',
  version_kind_edited: "a version's kind (_ocs_version_kind) edited",
  out_of_scope_edited: '_ocs_out_of_scope_since set, cleared or moved by hand',
  served_under_edited: "a live row's _ocs_served_under edited",
  table_dropped: 'a table dropped',
  record_edited: 'a record edited',
  record_deleted: 'a record deleted',
  record_inserted: 'a record inserted',
  choice_edited: "a chatbot choice's chatbots edited",
  entry_edited: 'a chain entry edited',
  entries_deleted: 'chain entries deleted',
  entries_cut: 'chain entries cut',
  chain_rewritten: 'the chain rewritten',
  checkpoint_unsigned: 'a checkpoint not signed by the key',
  checkpoint_deleted: 'a checkpoint deleted',
  checkpoint_edited: 'a checkpoint edited',
} as const;

export type ProblemKind = keyof typeof PROBLEM_KINDS;

export interface Problem {
  kind: ProblemKind;
  table?: string;
  rowId?: string;
  /** The version's place among the row's versions (1 = first), and its `_version_id`. */
  version?: number;
  versionId?: string;
  /** The chain entry where the break is. */
  seq?: number;
  detail: string;
}
