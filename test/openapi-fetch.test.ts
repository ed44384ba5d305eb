/**
 * The export schema is optional (REFERENCE.md): `schema/` may answer JSON, YAML (when `format=json`
 * is not honoured), an HTML page, a 404, or nothing at all. Every case gives the document or
 * `undefined` (then types come from rows and sealed fields from their values); none stops a sync.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify as stringifyYaml } from 'yaml';
import { createLogger } from '../src/log.js';
import { HttpExportSource } from '../src/source/http-source.js';
import { columnsFromOpenApi } from '../src/sync/openapi-columns.js';
import { Writable } from 'node:stream';

const DOCUMENT = {
  openapi: '3.0.3',
  paths: {
    '/api/export/llm_providers/': {
      get: {
        responses: {
          '200': {
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  properties: {
                    results: {
                      type: 'array',
                      items: {
                        type: 'object',
                        properties: {
                          id: { type: 'integer' },
                          name: { type: 'string' },
                          config: {
                            type: 'string',
                            description: "Sealed under the team's public key (base64, RSA-OAEP).",
                          },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  },
};

type Handler = (request: IncomingMessage, response: ServerResponse) => void;
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function sourceAnswering(
  handler: Handler,
): Promise<{ source: HttpExportSource; logs: () => string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  let logs = '';
  const source = new HttpExportSource({
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    apiKey: 'key',
    authScheme: 'api-key',
    requestTimeoutMs: 300,
    maxAttempts: 2,
    minRetryDelayMs: 1,
    maxRetryDelayMs: 5,
    maxRequestsPerMinute: 0,
    userAgent: 'ocs-sync-test',
    logger: createLogger({
      level: 'warn',
      destination: new Writable({
        write(chunk, _encoding, callback) {
          logs += String(chunk);
          callback();
        },
      }),
    }),
  });
  closers.push(async () => {
    await source.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { source, logs: () => logs };
}

describe('fetching the export schema', () => {
  it('reads JSON, and finds the sealed-field marker in it', async () => {
    const { source } = await sourceAnswering((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/vnd.oai.openapi+json' });
      response.end(JSON.stringify(DOCUMENT));
    });
    const document = await source.openApi();
    expect(document).toEqual(DOCUMENT);
    expect(columnsFromOpenApi(document).sealed.get('llm_providers')).toEqual(['config']);
  });

  it('reads YAML when the server ignores format=json', async () => {
    const { source } = await sourceAnswering((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/vnd.oai.openapi; charset=utf-8' });
      response.end(stringifyYaml(DOCUMENT));
    });
    expect(await source.openApi()).toEqual(DOCUMENT);
  });

  it.each([
    ['an HTML page with status 200', 200, 'text/html', '<html><body>Login</body></html>'],
    ['a 404 page', 404, 'text/html', '<h1>Not Found</h1>'],
    ['a JSON value that is not a document', 200, 'application/json', '["not", "a", "schema"]'],
    ['a 500 twice', 500, 'text/html', '<h1>Server Error (500)</h1>'],
  ])('gives undefined, with a warning, for %s', async (_name, status, type, body) => {
    const { source, logs } = await sourceAnswering((_request, response) => {
      response.writeHead(status, { 'content-type': type });
      response.end(body);
    });
    expect(await source.openApi()).toBeUndefined();
    expect(logs()).toMatch(/does not publish its export schema/);
  });

  it('gives undefined when the schema never answers (timeouts)', async () => {
    const { source, logs } = await sourceAnswering(() => {
      // Never answers: the request times out, is retried, then given up on.
    });
    expect(await source.openApi()).toBeUndefined();
    expect(logs()).toMatch(/does not publish its export schema/);
  });
});
