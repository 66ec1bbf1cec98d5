-- AlterTable
ALTER TABLE "revisions" ADD COLUMN "image_digest" TEXT,
ADD COLUMN "build_report" JSONB;

-- AlterTable
ALTER TABLE "listeners" ALTER COLUMN "version" DROP NOT NULL;

-- CreateTable
CREATE TABLE "push_tokens" (
    "id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "deployment_id" UUID NOT NULL,
    "token_hash" TEXT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "push_tokens_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "source_uploads" (
    "object_path" TEXT NOT NULL,
    "workspace_id" UUID NOT NULL,
    "deployment_id" UUID NOT NULL,
    "status" TEXT NOT NULL,
    "size_bytes" INTEGER,
    "sha256" TEXT,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "stored_at" TIMESTAMPTZ(3),

    CONSTRAINT "source_uploads_pkey" PRIMARY KEY ("object_path")
);

-- CreateTable
CREATE TABLE "source_upload_chunks" (
    "object_path" TEXT NOT NULL,
    "seq" INTEGER NOT NULL,
    "data" BYTEA NOT NULL,

    CONSTRAINT "source_upload_chunks_pkey" PRIMARY KEY ("object_path","seq")
);

-- CreateIndex
CREATE UNIQUE INDEX "push_tokens_token_hash_key" ON "push_tokens"("token_hash");

-- CreateIndex
CREATE INDEX "push_tokens_deployment_id_idx" ON "push_tokens"("deployment_id");

-- CreateIndex
CREATE INDEX "push_tokens_expires_at_idx" ON "push_tokens"("expires_at");

-- CreateIndex
CREATE INDEX "source_uploads_deployment_id_idx" ON "source_uploads"("deployment_id");

-- CreateIndex
CREATE INDEX "source_uploads_status_expires_at_idx" ON "source_uploads"("status", "expires_at");

-- AddForeignKey
ALTER TABLE "push_tokens" ADD CONSTRAINT "push_tokens_deployment_id_fkey" FOREIGN KEY ("deployment_id") REFERENCES "deployments"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "source_uploads" ADD CONSTRAINT "source_uploads_deployment_id_fkey" FOREIGN KEY ("deployment_id") REFERENCES "deployments"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "source_upload_chunks" ADD CONSTRAINT "source_upload_chunks_object_path_fkey" FOREIGN KEY ("object_path") REFERENCES "source_uploads"("object_path") ON DELETE CASCADE ON UPDATE CASCADE;
