/**
 * Lenient base64 decoding for sealed values: standard or url-safe alphabet, padding optional,
 * surrounding/embedded whitespace ignored (PEM-style line breaks). Anything else is refused rather
 * than silently skipped, so garbage never decodes into something that looks plausible.
 */
const BASE64_BODY = /^[A-Za-z0-9+/_-]*$/;

/** Decoded bytes, or undefined when the text is not base64. */
export function decodeBase64Lenient(text: string): Buffer | undefined {
  const compact = text.replace(/\s+/g, '');
  const body = compact.replace(/={1,2}$/, '');
  if (!BASE64_BODY.test(body)) return undefined;
  // A single leftover character cannot encode a byte.
  if (body.length % 4 === 1) return undefined;
  // When padding is present it must be the right amount.
  if (body.length !== compact.length && compact.length % 4 !== 0) return undefined;
  return Buffer.from(body.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
}
