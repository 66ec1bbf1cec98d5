-- Keys are managed after the first start (`npm run keys`): a name, the key's first characters to
-- recognise it by, when it was last used, and revocation (a revoked key's row stays, for the record).
-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "key_prefix" TEXT,
ADD COLUMN     "last_used_at" TIMESTAMPTZ(3),
ADD COLUMN     "name" TEXT,
ADD COLUMN     "revoked_at" TIMESTAMPTZ(3);
