/**
 * The daemon's small HTTP server (node:http): `/healthz` (200 or 503 with a JSON body saying why;
 * `?team=NAME` for one team of a fleet), `/livez` (whether the process itself still works, for a
 * liveness probe) and `/metrics` (Prometheus text). Read-only, no secrets in any answer.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigError } from '../errors.js';
import { listenFailure, type ListenAddress } from '../listen-address.js';
import type { Logger } from '../log.js';

/** An answer of /healthz or /livez: its status and its JSON body. */
export interface HealthAnswer {
  httpStatus: number;
  body: unknown;
}

export interface HealthServerOptions {
  listen: ListenAddress;
  /** `team`: the `?team=` asked for, or null. */
  health(team: string | null): HealthAnswer;
  live(): HealthAnswer;
  metrics(): Promise<{ contentType: string; body: string }>;
  logger: Logger;
}

export interface HealthServer {
  /** Where it listens (the real port when 0 was asked for). */
  readonly address: ListenAddress;
  /** Base URL, e.g. http://127.0.0.1:9464 */
  readonly url: string;
  close(): Promise<void>;
}

export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const { logger } = options;
  const server = createServer((request, response) => {
    handle(request, response, options).catch((error: unknown) => {
      logger.error(
        { error: error instanceof Error ? error.message : String(error) },
        'Health server error',
      );
      if (!response.headersSent) {
        send(
          response,
          500,
          'text/plain; charset=utf-8',
          'internal error\n',
          request.method === 'HEAD',
        );
      } else {
        response.destroy();
      }
    });
  });
  // Scrapers keep connections open; do not let them hold up shutdown for long.
  server.keepAliveTimeout = 5_000;
  server.requestTimeout = 10_000;

  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      reject(listenError(options.listen, error));
    };
    const onListening = () => {
      server.off('error', onError);
      resolve();
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(options.listen.port, options.listen.host);
  });
  server.on('error', (error) => logger.error({ error: error.message }, 'Health server error'));

  const bound = server.address() as AddressInfo;
  const address: ListenAddress = { host: bound.address, port: bound.port };
  const hostForUrl = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
  logger.info({ listen: `${hostForUrl}:${bound.port}` }, 'Serving /healthz and /metrics');

  let closing: Promise<void> | undefined;
  return {
    address,
    url: `http://${hostForUrl}:${bound.port}`,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        // A scrape in the middle of its answer gets a moment; then connections are cut.
        setTimeout(() => server.closeAllConnections(), 1_000).unref();
      })),
  };
}

async function handle(
  request: IncomingMessage,
  response: ServerResponse,
  options: HealthServerOptions,
): Promise<void> {
  const head = request.method === 'HEAD';
  if (request.method !== 'GET' && !head) {
    response.setHeader('allow', 'GET, HEAD');
    send(response, 405, 'text/plain; charset=utf-8', 'method not allowed\n', false);
    return;
  }
  const url = new URL(request.url ?? '/', 'http://localhost');
  const json = ({ httpStatus, body }: HealthAnswer) =>
    send(
      response,
      httpStatus,
      'application/json; charset=utf-8',
      `${JSON.stringify(body)}\n`,
      head,
    );
  switch (url.pathname) {
    case '/healthz':
      json(options.health(url.searchParams.get('team')));
      return;
    case '/livez':
      json(options.live());
      return;
    case '/metrics': {
      const { contentType, body } = await options.metrics();
      send(response, 200, contentType, body, head);
      return;
    }
    case '/':
      send(
        response,
        200,
        'text/plain; charset=utf-8',
        'ocs-sync daemon: /healthz /livez /metrics\n',
        head,
      );
      return;
    default:
      send(
        response,
        404,
        'text/plain; charset=utf-8',
        'not found: try /healthz, /livez or /metrics\n',
        head,
      );
  }
}

function send(
  response: ServerResponse,
  status: number,
  contentType: string,
  body: string,
  head: boolean,
): void {
  response.statusCode = status;
  response.setHeader('content-type', contentType);
  response.setHeader('cache-control', 'no-store');
  response.setHeader('content-length', Buffer.byteLength(body));
  response.end(head ? undefined : body);
}

function listenError(listen: ListenAddress, error: NodeJS.ErrnoException): ConfigError {
  return new ConfigError([
    `health.listen ${listenFailure(listen, error)}; set OCS_HEALTH_LISTEN (health.listen) to another HOST:PORT, or off`,
  ]);
}
