/**
 * The page's files (`console/` at the package root, plain files with no build step), read once
 * and served with the headers a browser needs to keep the page to itself.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { send, type Route } from '../transport/http/server.js';

/** The folder of the page's files: `console/` at the package root (src/ and dist/ alike). */
const ASSET_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../console');

const ASSETS = {
  'index.html': 'text/html; charset=utf-8',
  'console.js': 'text/javascript; charset=utf-8',
  'console.css': 'text/css; charset=utf-8',
} as const;

/** The name of one of the page's files. */
type AssetName = keyof typeof ASSETS;

/** A route serving each asset, each file read on first use and kept. */
export function createAssets(): (name: AssetName) => Route {
  const bodies = new Map<string, Buffer>();
  const read = (name: AssetName): Buffer => {
    let body = bodies.get(name);
    if (body === undefined) {
      body = fs.readFileSync(path.join(ASSET_DIR, name));
      bodies.set(name, body);
    }
    return body;
  };
  return (name) => (_req, res) => {
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    if (name === 'index.html') {
      // The page loads nothing from elsewhere.
      res.setHeader(
        'Content-Security-Policy',
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
      );
    }
    send(res, 200, ASSETS[name], read(name));
  };
}
