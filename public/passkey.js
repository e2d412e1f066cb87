// Countersign's passkey ceremonies (ADR 0024): the sign-in and invitation pages (plain HTML,
// before any app code) and the app's step-up confirmations (window.countersignPasskey.assert).
// The server does the WebAuthn checks (webauthn-rs); this only moves bytes between its JSON
// (base64url) and the browser's API (ArrayBuffers), and calls its server functions.
(() => {
  "use strict";

  const decode = (text) => {
    const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
    const padded = base64 + "=".repeat((4 - (base64.length % 4)) % 4);
    const binary = atob(padded);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes.buffer;
  };

  const encode = (buffer) => {
    if (!buffer) return undefined;
    const bytes = new Uint8Array(buffer);
    let binary = "";
    for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  };

  const descriptors = (list) =>
    (list || []).map((c) => ({ ...c, id: decode(c.id) }));

  // The server's options ({publicKey: …}) as the browser's API wants them.
  const creationOptions = (options) => {
    const o = { ...options.publicKey };
    o.challenge = decode(o.challenge);
    o.user = { ...o.user, id: decode(o.user.id) };
    o.excludeCredentials = descriptors(o.excludeCredentials);
    return o;
  };

  const requestOptions = (options) => {
    const o = { ...options.publicKey };
    o.challenge = decode(o.challenge);
    o.allowCredentials = descriptors(o.allowCredentials);
    return o;
  };

  // A credential as the server reads it (the shape of PublicKeyCredential.toJSON()).
  const credentialJSON = (credential) => {
    const r = credential.response;
    const response = { clientDataJSON: encode(r.clientDataJSON) };
    if (r.attestationObject) {
      response.attestationObject = encode(r.attestationObject);
      if (r.getTransports) response.transports = r.getTransports();
    } else {
      response.authenticatorData = encode(r.authenticatorData);
      response.signature = encode(r.signature);
      if (r.userHandle && r.userHandle.byteLength) response.userHandle = encode(r.userHandle);
    }
    return {
      id: credential.id,
      rawId: encode(credential.rawId),
      type: credential.type,
      response,
      clientExtensionResults: credential.getClientExtensionResults
        ? credential.getClientExtensionResults()
        : {},
    };
  };

  // A Countersign server function (JSON in, JSON out); its refusal's words
  // (`{"error": {"code", "message"}}`) as the error.
  const call = async (name, body) => {
    const response = await fetch(`/api/fn/${name}`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      credentials: "same-origin",
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) {
      let message = "";
      try {
        message = JSON.parse(text).error.message;
      } catch (_) {
        message = text;
      }
      throw new Error(message || `the server answered ${response.status}`);
    }
    return text ? JSON.parse(text) : null;
  };

  const supported = () =>
    typeof window.PublicKeyCredential === "function" && !!navigator.credentials;

  const unsupported = () =>
    new Error(
      "This browser cannot use passkeys here (it needs a secure page: https, or http://localhost).",
    );

  // The browser's own refusal, in words a person can act on.
  const explain = (error) => {
    if (error && error.name === "NotAllowedError") {
      return new Error("The passkey was not used (cancelled, or it took too long). Try again.");
    }
    if (error && error.name === "InvalidStateError") {
      return new Error("This device already has a passkey for you here.");
    }
    return error instanceof Error ? error : new Error(String(error));
  };

  const register = async (token, name) => {
    if (!supported()) throw unsupported();
    const options = await call("passkey_register_begin", { token, name: name || null });
    let credential;
    try {
      credential = await navigator.credentials.create({ publicKey: creationOptions(options) });
    } catch (e) {
      throw explain(e);
    }
    return call("passkey_register_finish", { credential: credentialJSON(credential) });
  };

  const signIn = async (next) => {
    if (!supported()) throw unsupported();
    const options = await call("passkey_signin_begin", {});
    let credential;
    try {
      credential = await navigator.credentials.get({ publicKey: requestOptions(options) });
    } catch (e) {
      throw explain(e);
    }
    return call("passkey_signin_finish", {
      credential: credentialJSON(credential),
      next: next || null,
    });
  };

  // A step-up: the server's request options in, the assertion (JSON) out.
  const assert = async (options) => {
    if (!supported()) throw unsupported();
    try {
      const credential = await navigator.credentials.get({ publicKey: requestOptions(options) });
      return credentialJSON(credential);
    } catch (e) {
      throw explain(e);
    }
  };

  window.countersignPasskey = { register, signIn, assert };

  // The plain pages' forms: <form data-passkey="register" data-token> and data-passkey="signin".
  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.passkey) return;
    event.preventDefault();
    const status = form.querySelector(".passkey-status");
    const button = form.querySelector("button[type=submit]");
    const say = (text, error) => {
      if (!status) return;
      status.textContent = text;
      status.classList.toggle("signin-error", !!error);
      if (error) status.setAttribute("role", "alert");
    };
    if (button) button.disabled = true;
    say("Waiting for your passkey…");
    try {
      const next =
        form.dataset.passkey === "register"
          ? await register(form.dataset.token, (form.elements.name || {}).value)
          : await signIn(form.dataset.next);
      say("Signed in.");
      // Where to go is the server's to say (one rule, `local_path`: a path of this site only);
      // it is followed as given, never re-derived here.
      window.location.assign(typeof next === "string" ? next : "/");
    } catch (e) {
      say(e.message || String(e), true);
      if (button) button.disabled = false;
    }
  });
})();
