/** The HOST:PORT addresses ocs-sync listens on (health server, `serve`). Pure. */

export interface ListenAddress {
  host: string;
  port: number;
}

export function parseListenAddress(value: string): ListenAddress | { problem: string } {
  const match =
    /^\[([0-9a-fA-F:.]+)\]:(\d{1,5})$/.exec(value) ?? /^([^\s:[\]]+):(\d{1,5})$/.exec(value);
  if (!match) {
    return {
      problem: 'must be HOST:PORT (e.g. 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464), or off',
    };
  }
  const port = Number(match[2]);
  if (port > 65535) return { problem: 'has a port above 65535' };
  return { host: match[1]!, port };
}

/** `HOST:PORT cannot be opened: why`, for any listening socket of ours. */
export function listenFailure(listen: ListenAddress, error: NodeJS.ErrnoException): string {
  const where = `${listen.host.includes(':') ? `[${listen.host}]` : listen.host}:${listen.port}`;
  const why =
    error.code === 'EADDRINUSE'
      ? 'the address is already in use (is another ocs-sync running?)'
      : error.code === 'EACCES'
        ? 'permission denied (ports below 1024 need privileges)'
        : error.code === 'EADDRNOTAVAIL' || error.code === 'ENOTFOUND'
          ? 'this machine has no such address'
          : error.message;
  return `${where} cannot be opened: ${why}`;
}
