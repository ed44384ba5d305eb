/**
 * The folder tree is the architecture, and this file holds it to that (`npm run lint` runs
 * `depcruise src`; test/layers.test.ts proves each rule fails on a graph that breaks it).
 *
 * Layers, lowest first. A folder of src/ may import its own files and folders of a lower layer,
 * never one of its own layer or above; type-only imports count too. `shared` is the files directly
 * in src/ (names, errors, printable, interfaces, time text, column types, JSON, listen addresses,
 * logging, private files, where the package is): rules every layer uses, importing no folder.
 */
const LAYERS = [
  ['shared'],
  // What the rest stands on, each on its own: the export API's wire format, the HTTP client, the
  // sealing format and policies, the warehouse (its shared part and a folder per dialect), the
  // places kept off the warehouse (a folder or an S3 bucket).
  ['export-api', 'source', 'sealing', 'warehouse', 'storage'],
  // Built on those: file contents (fetched through source), the audit archive's checks (reading
  // the warehouse's chain), Parquet export, the fake server (speaking the export API), settings.
  ['files', 'audit', 'export', 'fake-server', 'config'],
  // The sync engine: source, sealing, warehouse and files together.
  ['sync'],
  // What runs syncs or serves the warehouse back.
  ['serve', 'daemon'],
  // The command line wires everything.
  ['cli'],
];

const DIALECTS = ['sqlite', 'postgres'];
/** The one file that picks a dialect (and so may import the dialect folders). */
const OPENER = '^src/warehouse/open\\.ts$';

const folders = LAYERS.flat().filter((name) => name !== 'shared');
const pathOf = (name) => (name === 'shared' ? '^src/[^/]+\\.ts$' : `^src/${name}/`);
const either = (names) => `^src/(${names.join('|')})/`;

const layerRules = LAYERS.flatMap((layer, index) => {
  const higher = LAYERS.slice(index).flat();
  return layer.map((name) => {
    const forbidden = higher.filter((other) => other !== name && other !== 'shared');
    return {
      name: `layer-${name}`,
      comment: `${name} is in layer ${index} (lowest first, see LAYERS); it may import only lower layers`,
      severity: 'error',
      from: { path: pathOf(name) },
      to: { path: either(forbidden) },
    };
  });
}).filter((rule) => rule.to.path !== '^src/()/');

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    ...layerRules,
    {
      name: 'layer-unknown-folder',
      comment: 'every folder of src/ belongs to a layer: add a new one to LAYERS',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^src/[^/]+/', pathNot: either(folders) },
    },
    {
      name: 'no-circular',
      comment: 'files that import each other, directly or round a loop',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'dialects-apart',
      comment: 'a dialect folder never imports another dialect folder',
      severity: 'error',
      from: { path: '^src/warehouse/(sqlite|postgres)/' },
      to: { path: '^src/warehouse/(sqlite|postgres)/', pathNot: '^src/warehouse/$1/' },
    },
    {
      name: 'dialects-behind-open',
      comment:
        'only src/warehouse/open.ts picks a dialect (a warehouse, a reader, a page sink, its rules); everything else uses the shared part of src/warehouse/',
      severity: 'error',
      from: { path: '^src/', pathNot: [OPENER, `^src/warehouse/(${DIALECTS.join('|')})/`] },
      to: { path: `^src/warehouse/(${DIALECTS.join('|')})/` },
    },
    {
      name: 'src-stands-alone',
      comment: 'the program never imports its tests or benchmarks',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'no-orphans',
      comment: 'a file of src/ that nothing imports is dead code (or an entry point to list here)',
      severity: 'error',
      from: {
        orphan: true,
        path: '^src/',
        pathNot: [
          // bin/ocs-sync.js starts the CLI.
          '^src/cli/main\\.ts$',
          // Started by their files' URLs (new Worker), which no import names.
          '^src/warehouse/sqlite/writer-thread\\.ts$',
          '^src/sync/pipeline/page-thread\\.ts$',
        ],
      },
      to: {},
    },
    {
      name: 'not-to-unresolvable',
      comment: 'an import of a file or package that does not exist',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports are edges of the graph too.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '^(dist|node_modules)/' },
  },
};
