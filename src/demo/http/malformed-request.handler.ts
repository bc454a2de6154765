import type { Socket } from 'node:net';

/**
 * Answers a request that Node's HTTP parser refused (a control character in a
 * header, say) with a problem document instead of a bare 400: such a request
 * never reaches Nest.
 */
export function answerMalformedRequest(error: { code?: string }, socket: Socket): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
  const status = tooLarge ? 431 : 400;
  const body = JSON.stringify({
    type: 'about:blank',
    title: tooLarge ? 'Request Header Fields Too Large' : 'Bad Request',
    status,
    detail: tooLarge ? 'The request headers are too large.' : 'The request is not valid HTTP: a header holds a character HTTP does not allow.',
  });
  socket.end(
    `HTTP/1.1 ${status} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
      `Content-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
