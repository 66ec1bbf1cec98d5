/** The repository's root, and the bundle `npm start` runs (build/server/main.mjs). */
export const ROOT: string;
export const BUNDLE: string;
/** Bundles src/main.ts (or `entry`, another tree's) into BUNDLE (or `outfile`). */
export function buildServer(options?: { entry?: string; outfile?: string }): Promise<void>;
