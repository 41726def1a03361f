// Talking to the collector: JSON over fetch, and server-sent events. With auth on, the session
// cookie (HttpOnly: the page never sees a token) goes along by itself; the page adds the
// session's CSRF secret, held in memory only, to every request that changes something.

export const API = "/api/v1";
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
const SPECIAL = { NaN: NaN, nan: NaN, "+Inf": Infinity, inf: Infinity, "-Inf": -Infinity, "-inf": -Infinity };

// An API answer that is not 2xx: the status and the collector's sentence.
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Numbers as the API spells them ("NaN", "+Inf", "-Inf" for non-finite values).
export const num = (v) => (typeof v === "string" ? SPECIAL[v] ?? NaN : v === null ? NaN : v);

const session = { csrf: null, refused: () => {} };

// Hold the session's CSRF secret (null: none), and what to do when the collector answers 401
// (no session, or it ended: the page asks to sign in again).
export function useSession(csrf, refused) {
  session.csrf = csrf || null;
  if (refused) session.refused = refused;
}

function headers(method, extra) {
  const csrf = !SAFE_METHODS.has(method) && session.csrf ? { "X-CSRF-Token": session.csrf } : {};
  return Object.assign(csrf, extra || {});
}

// GET (or another method with a JSON body) an API path; resolves to the parsed JSON.
// `quiet`: a 401 is only thrown, not reported as a signed-out page (sign-in asks this way).
export async function api(path, { method = "GET", body, signal, quiet = false } = {}) {
  const init = { method, signal, headers: headers(method, body ? { "Content-Type": "application/json" } : null) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await fetch(API + path, init);
  const text = await res.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch (e) {
    parsed = null;
  }
  if (res.status === 401 && !quiet) session.refused();
  if (!res.ok) throw new ApiError(res.status, (parsed && parsed.error) || res.statusText || String(res.status));
  return parsed;
}

// A query string from an object, leaving out null/undefined/"" values; arrays repeat the key.
export function qs(params) {
  const out = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === null || value === undefined || value === "") continue;
    for (const v of Array.isArray(value) ? value : [value]) out.append(key, String(v));
  }
  const text = out.toString();
  return text ? "?" + text : "";
}

// Server-sent events read through fetch (the session cookie goes along, as with EventSource).
// Calls onEvent(name, data) per event and onState(true/false) as the stream opens/drops;
// reconnects after a pause until close() is called, or until the collector answers 401.
export function subscribe(path, onEvent, onState = () => {}) {
  let closed = false;
  let controller = null;
  async function once() {
    controller = new AbortController();
    const res = await fetch(API + path, { signal: controller.signal });
    if (res.status === 401) {
      closed = true;
      onState(false);
      session.refused();
    }
    if (!res.ok || !res.body) throw new ApiError(res.status, "stream refused");
    onState(true);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let name = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).trim());
        }
        if (!data.length) continue;
        try {
          onEvent(name, JSON.parse(data.join("\n")));
        } catch (e) {
          // a malformed event is skipped; the next one carries the newer state anyway
        }
      }
    }
  }
  (async () => {
    while (!closed) {
      try {
        await once();
      } catch (e) {
        if (closed) return;
      }
      onState(false);
      if (closed) return;
      await new Promise((r) => setTimeout(r, 3000));
    }
  })();
  return {
    close() {
      closed = true;
      if (controller) controller.abort();
    },
  };
}

let routes = null;

// Whether the collector serves an API path (from its OpenAPI description, read once per page;
// a refusal before sign-in is asked again after it), so optional APIs are skipped without a
// 404 in the browser console.
export async function serves(path) {
  if (!routes) {
    routes = fetch("/openapi.json")
      .then((res) => (res.status === 401 ? null : res.ok ? res.json() : { paths: {} }))
      .then((spec) => spec && new Set(Object.keys(spec.paths || {})))
      .catch(() => new Set());
  }
  const known = await routes;
  if (!known) routes = null;
  return Boolean(known && known.has(path));
}
