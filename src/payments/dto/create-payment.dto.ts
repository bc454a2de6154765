import { IsIn, IsInt, Max, Min } from 'class-validator';

export const CURRENCIES = ['EUR', 'USD', 'GBP', 'CHF', 'JPY'] as const;

export class CreatePaymentDto {
  @IsInt()
  @Min(1)
  @Max(100_000_000)
  amountCents: number;

  @IsIn(CURRENCIES)
  currency: (typeof CURRENCIES)[number];
}
