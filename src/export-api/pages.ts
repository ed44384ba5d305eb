/**
 * Answers the real server gives outside the API's own JSON: Django's 404 page for a URL it does
 * not route. Both servers we run (the fake and `serve`) send it as the real one does.
 */
export function djangoNotFound(): {
  status: number;
  headers: Record<string, string>;
  body: string;
} {
  return {
    status: 404,
    headers: { 'content-type': 'text/html; charset=utf-8' },
    body:
      '<!doctype html>\n<html lang="en">\n<head>\n  <title>Not Found</title>\n</head>\n<body>\n' +
      '  <h1>Not Found</h1><p>The requested resource was not found on this server.</p>\n</body>\n</html>\n',
  };
}
