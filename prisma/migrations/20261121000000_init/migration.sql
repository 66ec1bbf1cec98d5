-- CreateTable
CREATE TABLE "organizations" (
    "id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "organizations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "workspaces" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "workspaces_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_keys" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID,
    "key_hash" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "api_keys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "deployments" (
    "id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "display_name" TEXT NOT NULL,
    "source" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "source_config" JSONB NOT NULL,
    "deployment_type" TEXT,
    "listener_id" UUID,
    "integration_id" UUID,
    "secrets" JSONB NOT NULL,
    "secret_references" JSONB NOT NULL,
    "latest_revision_id" UUID,
    "active_revision_id" UUID,
    "agent_id" TEXT,
    "agent_environment" TEXT,
    "shareable" BOOLEAN NOT NULL DEFAULT false,
    "route_through_gateway" BOOLEAN NOT NULL DEFAULT false,
    "tracer_session_id" UUID NOT NULL,
    "url" TEXT NOT NULL,
    "is_preview" BOOLEAN NOT NULL DEFAULT false,
    "image_version" TEXT NOT NULL,
    "is_managed_deep_agent" BOOLEAN NOT NULL DEFAULT false,
    "deployment_tier" TEXT NOT NULL,
    "compute_tier" TEXT NOT NULL,
    "database_tier" TEXT NOT NULL,
    "remote_reconciled" BOOLEAN NOT NULL DEFAULT false,
    "tag_value_ids" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "deployments_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "revisions" (
    "id" UUID NOT NULL,
    "deployment_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "status" TEXT NOT NULL,
    "status_message" TEXT NOT NULL DEFAULT '',
    "source" TEXT NOT NULL,
    "source_config" JSONB NOT NULL,
    "source_revision_config" JSONB NOT NULL,
    "repo_commit_sha" TEXT,
    "repo_commit_title" TEXT,
    "secrets" JSONB NOT NULL,
    "secret_references" JSONB NOT NULL,
    "shareable" BOOLEAN NOT NULL DEFAULT false,
    "route_through_gateway" BOOLEAN NOT NULL DEFAULT false,
    "remote_reconciled" BOOLEAN NOT NULL DEFAULT false,
    "next_step_at" TIMESTAMPTZ(3),
    "lease_owner" TEXT,
    "lease_until" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "revisions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "revision_events" (
    "id" BIGSERIAL NOT NULL,
    "revision_id" UUID NOT NULL,
    "from_status" TEXT,
    "to_status" TEXT NOT NULL,
    "message" TEXT NOT NULL DEFAULT '',
    "at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "revision_events_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "listeners" (
    "id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "compute_type" TEXT NOT NULL,
    "compute_id" TEXT NOT NULL,
    "compute_config" JSONB NOT NULL,
    "version" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "listeners_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "codehost_installations" (
    "id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "installation_id" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "repository_selection" TEXT,
    "settings_url" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "codehost_installations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "agent_connections" (
    "id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "agent_id" TEXT NOT NULL,
    "oauth_token_id" TEXT NOT NULL,
    "provider_id" TEXT NOT NULL,
    "provider_account_label" TEXT NOT NULL,
    "scopes" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "expires_at" TIMESTAMPTZ(3),
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "agent_connections_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "workspaces_organization_id_idx" ON "workspaces"("organization_id");

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_key_hash_key" ON "api_keys"("key_hash");

-- CreateIndex
CREATE INDEX "api_keys_organization_id_idx" ON "api_keys"("organization_id");

-- CreateIndex
CREATE INDEX "api_keys_workspace_id_idx" ON "api_keys"("workspace_id");

-- CreateIndex
CREATE INDEX "deployments_workspace_id_created_at_id_idx" ON "deployments"("workspace_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "deployments_workspace_id_status_idx" ON "deployments"("workspace_id", "status");

-- CreateIndex
CREATE INDEX "deployments_workspace_id_agent_id_idx" ON "deployments"("workspace_id", "agent_id");

-- CreateIndex
CREATE UNIQUE INDEX "deployments_workspace_id_name_key" ON "deployments"("workspace_id", "name");

-- CreateIndex
CREATE INDEX "revisions_deployment_id_created_at_id_idx" ON "revisions"("deployment_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "revisions_workspace_id_idx" ON "revisions"("workspace_id");

-- CreateIndex
CREATE INDEX "revisions_next_step_at_idx" ON "revisions"("next_step_at");

-- CreateIndex
CREATE INDEX "revision_events_revision_id_id_idx" ON "revision_events"("revision_id", "id");

-- CreateIndex
CREATE INDEX "listeners_workspace_id_created_at_id_idx" ON "listeners"("workspace_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE UNIQUE INDEX "listeners_workspace_id_compute_id_key" ON "listeners"("workspace_id", "compute_id");

-- CreateIndex
CREATE INDEX "codehost_installations_workspace_id_created_at_id_idx" ON "codehost_installations"("workspace_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE UNIQUE INDEX "codehost_installations_workspace_id_installation_id_key" ON "codehost_installations"("workspace_id", "installation_id");

-- CreateIndex
CREATE INDEX "agent_connections_workspace_id_agent_id_created_at_id_idx" ON "agent_connections"("workspace_id", "agent_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE UNIQUE INDEX "agent_connections_workspace_id_agent_id_oauth_token_id_key" ON "agent_connections"("workspace_id", "agent_id", "oauth_token_id");

-- AddForeignKey
ALTER TABLE "workspaces" ADD CONSTRAINT "workspaces_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_workspace_id_fkey" FOREIGN KEY ("workspace_id") REFERENCES "workspaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "deployments" ADD CONSTRAINT "deployments_workspace_id_fkey" FOREIGN KEY ("workspace_id") REFERENCES "workspaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "revisions" ADD CONSTRAINT "revisions_deployment_id_fkey" FOREIGN KEY ("deployment_id") REFERENCES "deployments"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "revision_events" ADD CONSTRAINT "revision_events_revision_id_fkey" FOREIGN KEY ("revision_id") REFERENCES "revisions"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "listeners" ADD CONSTRAINT "listeners_workspace_id_fkey" FOREIGN KEY ("workspace_id") REFERENCES "workspaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "codehost_installations" ADD CONSTRAINT "codehost_installations_workspace_id_fkey" FOREIGN KEY ("workspace_id") REFERENCES "workspaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "agent_connections" ADD CONSTRAINT "agent_connections_workspace_id_fkey" FOREIGN KEY ("workspace_id") REFERENCES "workspaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;
