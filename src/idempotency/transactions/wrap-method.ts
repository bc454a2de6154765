/** Any function, as the wrappers below take and give them. */
export type Method = (...args: any[]) => any;

/**
 * Replaces a method of one object (own or inherited) by an own property
 * wrapping it, and returns how to put back what was there: instance
 * properties only, so other objects of the class stay as they were.
 */
export function wrapMethod<T extends object>(target: T, key: keyof T & string, wrapper: (previous: Method) => Method): () => void {
  return override(target, key, { value: wrapper(target[key] as Method), writable: true });
}

/** Defines an own property, and returns how to put back what was there. */
export function override(target: object, key: PropertyKey, descriptor: PropertyDescriptor): () => void {
  const before = Object.getOwnPropertyDescriptor(target, key);
  Object.defineProperty(target, key, { configurable: true, enumerable: false, ...descriptor });
  return () => {
    if (before) Object.defineProperty(target, key, before);
    else delete (target as Record<PropertyKey, unknown>)[key];
  };
}
