/**
 * A response body we stop reading (an error on our side, a limit passed, an answer we do not
 * want) must be let go of safely. Destroying an undici body that was not read to its end makes it
 * emit `RequestAbortedError` as an 'error' event, a tick later when nothing has read it yet; with
 * no listener that event ends the process (`Unhandled 'error' event`). Every body dropped goes
 * through here: a listener first, then the destroy, which also closes the connection (a body
 * left half-read cannot be reused for the next request).
 */

/** What of an undici body (a Node Readable) dropping it needs. */
export interface DroppableBody {
  readonly destroyed: boolean;
  on(event: 'error', listener: (error: Error) => void): unknown;
  destroy(error?: Error): unknown;
}

function ignore(): void {
  // The body's own end: whatever it says now (aborted, reset), nobody is reading it any more.
}

/** Lets go of `body` whatever state it is in (unread, half-read, ended, destroyed); idempotent. */
export function dropBody(body: DroppableBody): void {
  body.on('error', ignore);
  if (!body.destroyed) body.destroy();
}
