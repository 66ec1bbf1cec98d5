/** Prisma's known request errors, recognised by code without importing the runtime's classes. */
const hasCode = (err: unknown, code: string) =>
  typeof err === "object" && err !== null && "code" in err && (err as { code: unknown }).code === code;

/** A unique constraint was violated (P2002). */
export const isUniqueViolation = (err: unknown) => hasCode(err, "P2002");

/** The record to update or delete does not exist (P2025). */
export const isRecordMissing = (err: unknown) => hasCode(err, "P2025");
