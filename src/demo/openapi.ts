import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, type OpenAPIObject, SwaggerModule } from '@nestjs/swagger';

/** The demo's OpenAPI document; `@Idempotent()` routes document their key header and problems themselves. */
export function openApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('Orders demo')
    .setDescription('Orders and payments behind an idempotency-key layer: retry with the same Idempotency-Key and get the original answer.')
    .setVersion('1.0')
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'An API key, e.g. demo-key-acme' })
    .addSecurityRequirements('bearer')
    .build();
  return SwaggerModule.createDocument(app, config);
}

/** Swagger UI at /docs, the JSON at /docs-json. */
export function serveOpenApi(app: INestApplication): void {
  SwaggerModule.setup('docs', app, () => openApiDocument(app));
}
