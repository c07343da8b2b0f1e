/* sagents-django chat pages: the little the server cannot do.
 * Rows keyed by id (no doubles after a resync), resync on every socket open,
 * reconnect when a draining server closes the socket (4503),
 * Enter to send, form errors shown, JSON checked before an edit is sent,
 * older history on scroll. No inline script anywhere: the CSP forbids it. */
(function () {
  "use strict";

  var ROW = /^sg-msg-(\d+)$/;

  function scroller() { return document.getElementById("sg-scroller"); }

  function nearBottom() {
    var s = scroller();
    return !s || s.scrollHeight - s.scrollTop - s.clientHeight < 80;
  }

  function toBottom() {
    var s = scroller();
    if (s) { s.scrollTop = s.scrollHeight; }
  }

  function lastRowId() {
    var list = document.getElementById("sg-messages");
    var last = null;
    if (!list) { return null; }
    Array.prototype.forEach.call(list.children, function (child) {
      var m = ROW.exec(child.id || "");
      if (m && (last === null || Number(m[1]) > last)) { last = Number(m[1]); }
    });
    return last;
  }

  // A row the page already has is replaced where it stands, never appended again.
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var d = event.detail;
    var target = d.target;
    // The same pending approval pushed again (a resync, the run's end) keeps the
    // form as the person is filling it in.
    if (target && target.id === "sg-approvals" && d.fragment) {
      var incoming = d.fragment.id === "sg-approvals" ? d.fragment
        : (d.fragment.querySelector ? d.fragment.querySelector("#sg-approvals") : null);
      var key = incoming ? incoming.getAttribute("data-key") : null;
      if (key && key === target.getAttribute("data-key")) { d.shouldSwap = false; }
      return;
    }
    if (!target || (target.id !== "sg-messages" && target.id !== "sg-debug")) { return; }
    var fragment = d.fragment;
    if (!fragment || !fragment.children) { return; }
    Array.prototype.slice.call(fragment.children).forEach(function (child) {
      if (!child.id || child.id === target.id) { return; }
      var existing = document.getElementById(child.id);
      if (existing && !fragment.contains(existing)) { existing.replaceWith(child); }
    });
  });

  var stick = true;
  document.addEventListener("htmx:wsBeforeMessage", function () { stick = nearBottom(); });
  document.addEventListener("htmx:wsAfterMessage", function () { if (stick) { toBottom(); } });

  function setConnection(text) {
    var conn = document.getElementById("sg-conn");
    if (conn) { conn.textContent = text; }
    var chat = document.getElementById("sg-chat");
    if (chat) { chat.classList.toggle("sg-offline", text !== ""); }
  }

  // Every (re)open asks the server for what the page may have missed.
  document.addEventListener("htmx:wsOpen", function (event) {
    setConnection("");
    window.__sgOpen = (window.__sgOpen || 0) + 1;  // how many times it opened
    var chat = document.getElementById("sg-chat");
    if (!chat) { return; }
    event.detail.socketWrapper.send(JSON.stringify({ action: "resync", after: lastRowId() }));
  });
  document.addEventListener("htmx:wsClose", function (event) {
    var code = event.detail.event && event.detail.event.code;
    // 4401: no signed-in session, or it signed out (in this tab or another).
    if (code === 4401) {
      setConnection("You are signed out: sign in again to go on.");
      // What the forms would send now would be refused by a sign-in redirect
      // that a swap of nothing hides: nothing can be sent from this page.
      document.querySelectorAll("form.sg-form button, form.sg-form textarea, form.sg-form input")
        .forEach(function (el) { el.disabled = true; });
      return;
    }
    if (code === 4404) { setConnection("This conversation is not available."); return; }
    setConnection("Connection lost: reconnecting…");
    // 4503: the server is stopping for a deploy. htmx reconnects by itself only
    // on 1006/1011/1012/1013, which an application under daphne cannot send, so
    // reconnect here, after a random pause that spreads a page's clients over a
    // second; the load balancer sends the new socket to another process, and the
    // page resyncs as on every open.
    var wrapper = event.detail.socketWrapper;
    if (code === 4503 && wrapper && wrapper.reconnect && document.body.contains(event.target)) {
      setTimeout(function () { wrapper.reconnect(); }, 100 + Math.random() * 900);
    }
  });

  // Forms the socket pushed (an approval form) were rendered without a request,
  // so without a CSRF token: send the page's token as the header Django reads.
  document.addEventListener("htmx:configRequest", function (event) {
    var d = event.detail;
    if (d.parameters && d.parameters.csrfmiddlewaretoken) { return; }
    var any = document.querySelector("input[name=csrfmiddlewaretoken]");
    if (any) { d.headers["X-CSRFToken"] = any.value; }
  });

  // The same for a pushed form the browser itself sends (htmx may not have taken a
  // form the socket swapped in): it gets the page's token before it leaves.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form || form.tagName !== "FORM" || form.method.toLowerCase() !== "post") { return; }
    var own = form.querySelector("input[name=csrfmiddlewaretoken]");
    if (own && own.value) { return; }
    var any = document.querySelector("input[name=csrfmiddlewaretoken]");
    if (!any || !any.value) { return; }
    if (!own) {
      own = document.createElement("input");
      own.type = "hidden";
      own.name = "csrfmiddlewaretoken";
      form.appendChild(own);
    }
    own.value = any.value;
  }, true);

  // Forms: errors shown beside the form, cleared and reset on success.
  function errorBox(form) { return form && form.querySelector(".sg-form-error"); }
  document.addEventListener("htmx:responseError", function (event) {
    var form = event.detail.elt.closest ? event.detail.elt.closest("form") : null;
    var box = errorBox(form);
    if (box) { box.textContent = event.detail.xhr.responseText || "Something went wrong."; }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail.elt;
    if (!event.detail.successful || !elt || elt.tagName !== "FORM") { return; }
    var box = errorBox(elt);
    if (box) { box.textContent = ""; }
    if (elt.hasAttribute("data-reset")) { elt.reset(); }
  });

  // Enter sends, Shift+Enter adds a line (not while an input method composes).
  document.addEventListener("keydown", function (event) {
    var t = event.target;
    if (!t || t.id !== "sg-text" || event.key !== "Enter" || event.shiftKey || event.isComposing) { return; }
    event.preventDefault();
    if (t.value.trim() !== "" && t.form) { t.form.requestSubmit(); }
  });

  // Edited arguments must be a JSON object before the form can be sent.
  function checkJson(area) {
    var fieldset = area.closest("fieldset");
    var chosen = fieldset && fieldset.querySelector("input[type=radio]:checked");
    var message = "";
    if (chosen && chosen.value === "edit") {
      try {
        var value = JSON.parse(area.value);
        if (value === null || typeof value !== "object" || Array.isArray(value)) {
          message = "The arguments must be a JSON object.";
        }
      } catch (e) { message = "Not valid JSON: " + e.message; }
    }
    area.setCustomValidity(message);
    return message === "";
  }
  function checkAll(root) {
    var ok = true;
    Array.prototype.forEach.call(root.querySelectorAll(".sg-json-input"), function (a) {
      if (!checkJson(a)) { ok = false; a.reportValidity(); }
    });
    return ok;
  }
  document.addEventListener("input", function (event) {
    if (event.target.classList && event.target.classList.contains("sg-json-input")) { checkJson(event.target); }
  });
  document.addEventListener("change", function (event) {
    var fs = event.target.closest && event.target.closest("fieldset.sg-request");
    if (fs) { checkAll(fs); }
  });
  document.addEventListener("submit", function (event) {
    if (event.target.classList && event.target.classList.contains("sg-approval") && !checkAll(event.target)) {
      event.preventDefault();
      event.stopPropagation();
    }
  }, true);

  // Older history loads when the list is scrolled to its top.
  var loading = false;
  document.addEventListener("scroll", function (event) {
    var s = event.target;
    if (!s || s.id !== "sg-scroller" || loading || s.scrollTop > 40) { return; }
    var older = document.getElementById("sg-older");
    if (older && window.htmx) { loading = true; window.htmx.trigger(older, "click"); }
  }, true);
  var before = 0;
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (event.detail.elt.id === "sg-older") { before = scroller().scrollHeight; }
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    if (event.detail.elt && event.detail.elt.id === "sg-older" || loading) {
      var s = scroller();
      if (s && before) { s.scrollTop += s.scrollHeight - before; before = 0; }
      loading = false;
    }
  });

  document.addEventListener("DOMContentLoaded", toBottom);
})();
