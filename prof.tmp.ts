import { createSampleDataset } from './src/fake-server/fixture.js';
let t = Date.now();
const ds = createSampleDataset({ bigResource: { resource: 'chat_messages', rows: 1_000_000 } });
console.log('gen ms', Date.now() - t, 'mem MB', Math.round(process.memoryUsage().heapUsed / 1e6));
