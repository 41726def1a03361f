// Signing in to a collector with auth: a token once, then the session the collector keeps
// behind an HttpOnly cookie, so the page never holds the token. Who is signed in (and the
// CSRF secret, in api.js) lives in memory only: after a reload the collector says it again.

import { api, useSession, ApiError } from "./api.js";

// What each role may do, as the collector grants it; the page offers only those controls
// (the collector checks every request anyway).
const GRANTS = { ingest: ["write"], viewer: ["read"], operator: ["read", "operate"], admin: ["write", "read", "operate", "admin"] };

const who = { auth: false, name: "", role: null };
const $ = (id) => document.getElementById(id);

// Whether the signed-in role has a permission ("read", "operate", "admin").
export function can(permission) {
  return (GRANTS[who.role] || []).includes(permission);
}

// The header says who is signed in, with their role and the sign-out control (auth on only).
function signedIn(me) {
  Object.assign(who, { auth: Boolean(me.auth), name: me.name, role: me.role });
  useSession(me.csrf);
  $("who").hidden = !who.auth;
  $("who").dataset.role = who.role;
  $("who-name").textContent = `${who.name} · ${who.role}`;
  $("who").title = "projects: " + [].concat(me.projects || []).join(", ");
  $("signin").hidden = true;
}

// Where the form says what went wrong; empty text hides it.
function formError(text) {
  $("signin-error").textContent = text;
}

// Show the view once someone is signed in (at once with a session or with auth off), and
// the sign-in form whenever the collector answers 401: `left()` clears the page first;
// `error(err)` hears of a sign-out the collector did not get.
export async function startSession({ ready, left, error }) {
  const ask = () => {
    if (!$("signin").hidden) return;
    Object.assign(who, { name: "", role: null });
    useSession(null);
    $("who").hidden = true;
    left();
    formError("");
    $("signin").hidden = false;
    $("signin-token").focus();
  };
  useSession(null, ask);
  $("signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    signIn(ready);
  });
  $("sign-out").addEventListener("click", () => signOut(ask, error, { left, ready }));
  const me = await whoami();
  if (!me) return ask();
  signedIn(me);
  await ready();
}

// Who the collector says is signed in (asked for by the page while the modules loaded, or
// now); null without a session.
async function whoami() {
  const early = window.stepwatchSession && (await window.stepwatchSession);
  window.stepwatchSession = null;
  if (early === 401) return null;
  if (early && typeof early === "object") return early;
  try {
    return await api("/session", { quiet: true });
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return null;
    throw err;
  }
}

// POST the token once; the field is emptied either way, the answer's CSRF secret kept. A
// token that may not read (an ingest token) opens no page: its session is closed at once.
async function signIn(ready) {
  const field = $("signin-token");
  const token = field.value.trim();
  if (!token) return formError("Paste the access token you were given.");
  formError("");
  field.value = "";
  let me;
  try {
    me = await api("/session", { method: "POST", body: { token }, quiet: true });
  } catch (err) {
    formError(err instanceof ApiError ? "Not signed in: " + err.message : "Cannot reach the collector.");
    return field.focus();
  }
  if (!(GRANTS[me.role] || []).includes("read")) {
    useSession(me.csrf);
    await signOut(() => useSession(null), () => {});
    formError(`Not signed in: ${me.name} has role ${me.role}, which only sends data; the dashboard needs a viewer, operator or admin token.`);
    return field.focus();
  }
  signedIn(me);
  await ready();
}

// End the session on the collector (the cookie opens nothing afterwards), then ask again.
// The page shown is cleared first, so none of its requests is still on its way when the
// session ends (it would come back refused); it comes back if the collector was unreachable.
async function signOut(ask, error, page = null) {
  if (page) page.left();
  try {
    await api("/session", { method: "DELETE", quiet: true });
  } catch (err) {
    if (!(err instanceof ApiError)) {
      error(err); // unreachable: the session still holds
      return page ? page.ready() : undefined;
    }
  }
  ask();
}
