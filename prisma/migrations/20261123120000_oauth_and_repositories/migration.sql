-- AlterTable
ALTER TABLE "agent_connections" ALTER COLUMN "provider_account_label" DROP NOT NULL;

-- CreateTable
CREATE TABLE "codehost_repositories" (
    "id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "integration_id" UUID NOT NULL,
    "repository_id" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "owner" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "default_branch" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "codehost_repositories_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "oauth_providers" (
    "id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "provider_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "client_id" TEXT NOT NULL,
    "client_secret" TEXT,
    "auth_url" TEXT NOT NULL,
    "token_url" TEXT NOT NULL,
    "revocation_url" TEXT,
    "issuer" TEXT,
    "uses_pkce" BOOLEAN NOT NULL DEFAULT false,
    "code_challenge_method" TEXT,
    "provider_type" TEXT,
    "mcp_server_url" TEXT,
    "token_endpoint_auth_method" TEXT NOT NULL DEFAULT 'client_secret_post',
    "is_dynamic_client" BOOLEAN NOT NULL DEFAULT false,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "oauth_providers_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "oauth_tokens" (
    "id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "oauth_provider_id" UUID NOT NULL,
    "provider_id" TEXT NOT NULL,
    "owner" TEXT NOT NULL,
    "access_token" TEXT NOT NULL,
    "refresh_token" TEXT,
    "token_type" TEXT NOT NULL DEFAULT 'bearer',
    "scopes" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "expires_at" TIMESTAMPTZ(3),
    "provider_account_label" TEXT,
    "is_default" BOOLEAN NOT NULL DEFAULT false,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "oauth_tokens_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "oauth_flows" (
    "id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "oauth_provider_id" UUID NOT NULL,
    "owner" TEXT NOT NULL,
    "state_hash" TEXT NOT NULL,
    "code_verifier" TEXT,
    "redirect_uri" TEXT NOT NULL,
    "scopes" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "is_default" BOOLEAN NOT NULL DEFAULT true,
    "status" TEXT NOT NULL,
    "message" TEXT NOT NULL DEFAULT '',
    "token_id" UUID,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "oauth_flows_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "codehost_repositories_workspace_id_idx" ON "codehost_repositories"("workspace_id");

-- CreateIndex
CREATE UNIQUE INDEX "codehost_repositories_integration_id_repository_id_key" ON "codehost_repositories"("integration_id", "repository_id");

-- CreateIndex
CREATE INDEX "oauth_providers_workspace_id_created_at_id_idx" ON "oauth_providers"("workspace_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE UNIQUE INDEX "oauth_providers_workspace_id_provider_id_key" ON "oauth_providers"("workspace_id", "provider_id");

-- CreateIndex
CREATE INDEX "oauth_tokens_workspace_id_owner_created_at_id_idx" ON "oauth_tokens"("workspace_id", "owner", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "oauth_tokens_oauth_provider_id_idx" ON "oauth_tokens"("oauth_provider_id");

-- CreateIndex
CREATE UNIQUE INDEX "oauth_flows_state_hash_key" ON "oauth_flows"("state_hash");

-- CreateIndex
CREATE INDEX "oauth_flows_oauth_provider_id_idx" ON "oauth_flows"("oauth_provider_id");

-- CreateIndex
CREATE INDEX "oauth_flows_token_id_idx" ON "oauth_flows"("token_id");

-- CreateIndex
CREATE INDEX "oauth_flows_expires_at_idx" ON "oauth_flows"("expires_at");

-- AddForeignKey
ALTER TABLE "codehost_repositories" ADD CONSTRAINT "codehost_repositories_integration_id_fkey" FOREIGN KEY ("integration_id") REFERENCES "codehost_installations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "oauth_providers" ADD CONSTRAINT "oauth_providers_workspace_id_fkey" FOREIGN KEY ("workspace_id") REFERENCES "workspaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "oauth_tokens" ADD CONSTRAINT "oauth_tokens_oauth_provider_id_fkey" FOREIGN KEY ("oauth_provider_id") REFERENCES "oauth_providers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "oauth_flows" ADD CONSTRAINT "oauth_flows_oauth_provider_id_fkey" FOREIGN KEY ("oauth_provider_id") REFERENCES "oauth_providers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "oauth_flows" ADD CONSTRAINT "oauth_flows_token_id_fkey" FOREIGN KEY ("token_id") REFERENCES "oauth_tokens"("id") ON DELETE SET NULL ON UPDATE CASCADE;
