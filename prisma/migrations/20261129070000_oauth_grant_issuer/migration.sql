-- A provider configured by hand names no issuer: its auth_url's origin stands in, and the `iss` of
-- its answers (and of its ID tokens) is checked against it. A flow, and the token it makes, keep the
-- issuer they began under, so that auth_url moved since (another name of the same server) breaks
-- neither a flow in progress nor a token's refresh. Rows from before keep none (null): the
-- provider's, as until now.
-- AlterTable
ALTER TABLE "oauth_flows" ADD COLUMN     "issuer" TEXT;

-- AlterTable
ALTER TABLE "oauth_tokens" ADD COLUMN     "issuer" TEXT;
