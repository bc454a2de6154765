import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { AuthenticatedRequest } from './api-key.guard.js';
import { requestOf } from '../http/request-of.js';

/** The authenticated caller's tenant. */
export const Tenant = createParamDecorator((_: unknown, context: ExecutionContext) => requestOf<AuthenticatedRequest>(context).tenant);
