import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { AuthenticatedRequest } from './api-key.guard.js';

/** The authenticated caller's tenant. */
export const Tenant = createParamDecorator((_: unknown, context: ExecutionContext) => context.switchToHttp().getRequest<AuthenticatedRequest>().tenant);
