-- Keys are managed after the first start (`npm run keys`): a name, the key's first characters to
-- recognise it by, and revocation (a revoked key's row stays, for the record).
-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "key_prefix" TEXT,
ADD COLUMN     "name" TEXT,
ADD COLUMN     "revoked_at" TIMESTAMPTZ(3);
