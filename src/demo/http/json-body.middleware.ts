import { Injectable, type NestMiddleware, UnsupportedMediaTypeException } from '@nestjs/common';

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\b/i;

/** A request with a body must send JSON: anything else gets 415 before any handler, so nothing is claimed. */
@Injectable()
export class JsonBodyMiddleware implements NestMiddleware {
  use(request: { headers: Record<string, string | undefined> }, _response: unknown, next: () => void): void {
    const { 'content-type': type, 'content-length': length, 'transfer-encoding': chunked } = request.headers;
    const hasBody = (length !== undefined && length !== '0') || chunked !== undefined;
    if (hasBody && !JSON_TYPE.test(type ?? '')) throw new UnsupportedMediaTypeException(`Send the body as application/json, not ${type ?? 'without a content type'}.`);
    next();
  }
}
