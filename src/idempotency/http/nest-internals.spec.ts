import { Controller, HttpCode, Next, Post, RequestMethod, Res, Sse, UseInterceptors } from '@nestjs/common';
// Deep paths that Nest 10 and 11 (no exports map) and 12 (`./*.js`) all resolve.
import * as common from '@nestjs/common/constants.js';
import { RouteParamtypes as NestRouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum.js';
import { EventPattern, MessagePattern } from '@nestjs/microservices';
import * as microservices from '@nestjs/microservices/constants.js';
import { PatternHandler } from '@nestjs/microservices/enums/pattern-handler.enum.js';
import * as internals from './nest-internals.js';

class Wrapping {
  intercept() {}
}

@Controller('carts')
class CartsController {
  @Post('items')
  @HttpCode(202)
  @UseInterceptors(Wrapping)
  add(@Res({ passthrough: true }) _response: unknown, @Next() _next: unknown) {}

  @Sse('events')
  events() {}

  @EventPattern('cart.paid')
  paid(_event: unknown) {}

  @MessagePattern('cart.total')
  total(_request: unknown) {}
}

describe('the Nest metadata keys the module reads by value', () => {
  it('are the installed Nest’s own', () => {
    for (const key of ['PATH_METADATA', 'METHOD_METADATA', 'HTTP_CODE_METADATA', 'INTERCEPTORS_METADATA', 'ROUTE_ARGS_METADATA', 'RESPONSE_PASSTHROUGH_METADATA', 'SSE_METADATA', 'VERSION_METADATA', 'RENDER_METADATA', 'REDIRECT_METADATA', 'EXCEPTION_FILTERS_METADATA', 'FILTER_CATCH_EXCEPTIONS'] as const) {
      expect({ key, value: internals[key] }).toEqual({ key, value: common[key] });
    }
    expect(internals.RouteParamtypes).toEqual({ RESPONSE: NestRouteParamtypes.RESPONSE, NEXT: NestRouteParamtypes.NEXT });
    expect(internals.MESSAGE_PATTERN_METADATA).toBe(microservices.PATTERN_METADATA);
    expect(internals.MESSAGE_HANDLER_TYPE_METADATA).toBe(microservices.PATTERN_HANDLER_METADATA);
  });

  it('read back what Nest’s decorators write, in the shapes the module expects', () => {
    const { add, events, paid, total } = CartsController.prototype;
    expect(Reflect.getMetadata(internals.PATH_METADATA, CartsController)).toBe('carts');
    expect(Reflect.getMetadata(internals.PATH_METADATA, add)).toBe('items');
    expect(Reflect.getMetadata(internals.METHOD_METADATA, add)).toBe(RequestMethod.POST);
    expect(Reflect.getMetadata(internals.HTTP_CODE_METADATA, add)).toBe(202);
    expect(Reflect.getMetadata(internals.INTERCEPTORS_METADATA, add)).toEqual([Wrapping]);
    const params = Object.keys(Reflect.getMetadata(internals.ROUTE_ARGS_METADATA, CartsController, 'add'));
    expect(params.map((key) => Number(key.split(':')[0])).sort()).toEqual([internals.RouteParamtypes.RESPONSE, internals.RouteParamtypes.NEXT]);
    expect(Reflect.getMetadata(internals.RESPONSE_PASSTHROUGH_METADATA, CartsController, 'add')).toBe(true);
    expect(Reflect.getMetadata(internals.SSE_METADATA, events)).toBe(true);
    expect(Reflect.getMetadata(internals.MESSAGE_PATTERN_METADATA, paid)).toEqual(['cart.paid']);
    expect(Reflect.getMetadata(internals.MESSAGE_HANDLER_TYPE_METADATA, paid)).toBe(PatternHandler.EVENT);
    expect(Reflect.getMetadata(internals.MESSAGE_HANDLER_TYPE_METADATA, total)).toBe(PatternHandler.MESSAGE);
  });
});
