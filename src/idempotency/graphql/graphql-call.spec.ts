import * as graphql from '@nestjs/graphql';
import { RESOLVER_NAME_METADATA, RESOLVER_PROPERTY_METADATA, RESOLVER_TYPE_METADATA } from './graphql-call.js';

describe('the @nestjs/graphql metadata the module reads without loading it', () => {
  it('has the keys @nestjs/graphql sets on resolver methods', () => {
    expect(RESOLVER_TYPE_METADATA).toBe(graphql.RESOLVER_TYPE_METADATA);
    expect(RESOLVER_NAME_METADATA).toBe(graphql.RESOLVER_NAME_METADATA);
    expect(RESOLVER_PROPERTY_METADATA).toBe(graphql.RESOLVER_PROPERTY_METADATA);
    class Resolvers {
      @graphql.Mutation(() => Boolean, { name: 'placeOrder' })
      place() {
        return true;
      }
    }
    expect(Reflect.getMetadata(RESOLVER_TYPE_METADATA, Resolvers.prototype.place)).toBe('Mutation');
    expect(Reflect.getMetadata(RESOLVER_NAME_METADATA, Resolvers.prototype.place)).toBe('placeOrder');
  });
});
