import { createSampleDataset } from './src/fake-server/fixture.js';
import { startFakeServer } from './src/fake-server/server.js';
let t = Date.now();
const dataset = createSampleDataset({ bigResource: { resource: 'chat_messages', rows: 1_000_000 } });
console.log('gen ms', Date.now() - t, 'mem MB', Math.round(process.memoryUsage().heapUsed / 1e6));
const rows = dataset.rows('chat_messages');
let total = 0; for (let i = 0; i < 20000; i++) total += JSON.stringify(rows[i]).length;
console.log('avg bytes', total / 20000);
const server = await startFakeServer({ dataset });
t = Date.now();
let cursor: string | null = null; let n = 0; let bytes = 0;
do {
  const r = await fetch(`${server.url}/api/export/chat_messages/?limit=1000${cursor ? '&cursor=' + encodeURIComponent(cursor) : ''}`, { headers: { 'X-Api-Key': 'test-admin-key' } });
  const text = await r.text(); bytes += text.length;
  const body = JSON.parse(text); n += body.results.length; cursor = body.cursor;
} while (cursor);
console.log('walk', n, 'ms', Date.now() - t, 'MB', Math.round(bytes / 1e6));
await server.close();
