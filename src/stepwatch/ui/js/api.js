// Talking to the collector: JSON over fetch with the bearer token, and server-sent events.

const API = "/api/v1";
const TOKEN_KEY = "stepwatch-token";
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

function headers(extra) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return Object.assign(token ? { Authorization: "Bearer " + token } : {}, extra || {});
}

// Ask once for the token when the collector answers 401; true when one was given.
function askToken() {
  const given = window.prompt("This collector needs its access token:");
  if (!given) return false;
  sessionStorage.setItem(TOKEN_KEY, given);
  return true;
}

// GET (or another method with a JSON body) an API path; resolves to the parsed JSON.
export async function api(path, { method = "GET", body, signal } = {}) {
  for (let attempt = 0; attempt < 2; attempt += 1) {
    const init = { method, signal, headers: headers(body ? { "Content-Type": "application/json" } : null) };
    if (body !== undefined) init.body = JSON.stringify(body);
    const res = await fetch(API + path, init);
    if (res.status === 401 && attempt === 0 && askToken()) continue;
    const text = await res.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch (e) {
      parsed = null;
    }
    if (!res.ok) throw new ApiError(res.status, (parsed && parsed.error) || res.statusText || String(res.status));
    return parsed;
  }
  throw new ApiError(401, "not authorized");
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

// Server-sent events read through fetch (EventSource cannot send the token).
// Calls onEvent(name, data) per event and onState(true/false) as the stream opens/drops;
// reconnects after a pause until close() is called.
export function subscribe(path, onEvent, onState = () => {}) {
  let closed = false;
  let controller = null;
  async function once() {
    controller = new AbortController();
    const res = await fetch(API + path, { headers: headers(), signal: controller.signal });
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

// Whether the collector serves an API path (from its OpenAPI description, read once per page),
// so optional APIs are skipped without a 404 in the browser console.
export async function serves(path) {
  if (!routes) {
    routes = fetch("/openapi.json", { headers: headers() })
      .then((res) => (res.ok ? res.json() : { paths: {} }))
      .then((spec) => new Set(Object.keys(spec.paths || {})))
      .catch(() => new Set());
  }
  return (await routes).has(path);
}
