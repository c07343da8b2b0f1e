/* sagents-django chat pages: the little the server cannot do.
 * Rows keyed by id (no doubles after a resync), resync on every socket open,
 * reconnect when a draining server closes the socket (4503),
 * Enter to send, form errors shown, JSON checked before an edit is sent,
 * older history on scroll, the sidebar drawer, copy buttons, the typing dots,
 * focus after sending and deciding, the tab title following the conversation's.
 * No inline script anywhere: the CSP forbids it. */
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
      if (existing && !fragment.contains(existing)) {
        existing.replaceWith(child);
        // Out of the fragment, htmx never sees it: its forms (rate, comment,
        // fork) would post as plain forms and reload the page.
        if (window.htmx) { window.htmx.process(child); }
        decorate(child);
      }
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

  // The conversation page has two sockets: the chat's and the sidebar's (the
  // list's, for live titles). Only the chat's opens count, resync, and say
  // when the connection is lost.
  function chatSocket(event) {
    var chat = document.getElementById("sg-chat");
    return !chat || chat.contains(event.target);
  }

  // Every (re)open asks the server for what the page may have missed.
  document.addEventListener("htmx:wsOpen", function (event) {
    if (!chatSocket(event)) {
      window.__sgListOpen = (window.__sgListOpen || 0) + 1;  // the list's socket
      return;
    }
    setConnection("");
    window.__sgOpen = (window.__sgOpen || 0) + 1;  // how many times it opened
    var chat = document.getElementById("sg-chat");
    if (!chat) { return; }
    event.detail.socketWrapper.send(JSON.stringify({ action: "resync", after: lastRowId() }));
  });
  document.addEventListener("htmx:wsClose", function (event) {
    var code = event.detail.event && event.detail.event.code;
    if (!chatSocket(event)) {
      // The sidebar's socket: no message of its own, but it follows a deploy too.
      if (code === 4503) { reconnect(event); }
      return;
    }
    // 4401: no signed-in session, or it signed out (in this tab or another).
    if (code === 4401) {
      setConnection("You are signed out: sign in again to go on.");
      // What the forms would send now would be refused by a sign-in redirect
      // that a swap of nothing hides: nothing can be sent from this page.
      disableForms();
      return;
    }
    if (code === 4404) {
      // Deleted, or a share stopped: nothing here can be sent any more (a page
      // may say it its own way: the shared files page's data-gone).
      var conn = document.getElementById("sg-conn");
      setConnection((conn && conn.getAttribute("data-gone")) || "This conversation is not available.");
      disableForms();
      return;
    }
    setConnection("Connection lost: reconnecting…");
    // 4503: the server is stopping for a deploy. htmx reconnects by itself only
    // on 1006/1011/1012/1013, which an application under daphne cannot send, so
    // reconnect here, after a random pause that spreads a page's clients over a
    // second; the load balancer sends the new socket to another process, and the
    // page resyncs as on every open.
    if (code === 4503) { reconnect(event); }
  });
  function disableForms() {
    document.querySelectorAll("form.sg-form button, form.sg-form textarea, form.sg-form input")
      .forEach(function (el) { el.disabled = true; });
  }
  function reconnect(event) {
    var wrapper = event.detail.socketWrapper;
    if (wrapper && wrapper.reconnect && document.body.contains(event.target)) {
      setTimeout(function () { wrapper.reconnect(); }, 100 + Math.random() * 900);
    }
  }

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
    var xhr = event.detail.xhr;
    var type = xhr.getResponseHeader("Content-Type") || "";
    // An edit the schema refused: the form comes back with each error beside
    // its field; it replaces this one and the first field to fix is focused.
    if (form && form.classList.contains("sg-approval") && type.indexOf("text/html") === 0) {
      var holder = form.closest("#sg-approvals");
      if (holder && window.htmx) {
        window.htmx.swap(holder, xhr.responseText, { swapStyle: "outerHTML" });
        var invalid = document.querySelector("#sg-approvals [aria-invalid=true]");
        if (invalid) { invalid.focus(); }
        return;
      }
    }
    // A refused form that answers with its own element again (the share panel
    // with its error, 422) takes its place, as a success would. Never a whole
    // page (an error page, the site's 404) in place of a form.
    var target = event.detail.target;
    var body = xhr.responseText || "";
    var wholePage = /^\s*(<!doctype|<html)/i.test(body);
    if (target && target.id && window.htmx && xhr.status === 422 && !wholePage &&
        type.indexOf("text/html") === 0 && body.indexOf('id="' + target.id + '"') !== -1) {
      window.htmx.swap(target, body, { swapStyle: "outerHTML" });
      return;
    }
    var box = errorBox(form);
    if (box) { box.textContent = refusal(xhr, type, body, wholePage); }
  });
  // What a refusal says beside the form: our views answer in plain text; an error
  // page (too large a request for the site's limits, a conversation gone) is not
  // shown as its markup. What was typed stays in the form.
  function refusal(xhr, type, body, wholePage) {
    if (body && !wholePage && type.indexOf("text/html") !== 0) { return body.slice(0, 500); }
    if (xhr.status === 404) { return "This is not available to you any more (deleted, or no longer shared with you). Reload the page."; }
    if (xhr.status === 403) { return "Refused: your session may have ended. Reload the page and try again."; }
    if (xhr.status === 400 || xhr.status === 413) { return "The server refused it: too large, or not what it expects."; }
    return "Something went wrong (HTTP " + xhr.status + "). What you typed is kept: try again.";
  }
  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail.elt;
    if (!event.detail.successful || !elt || elt.tagName !== "FORM") { return; }
    var box = errorBox(elt);
    if (box) { box.textContent = ""; }
    if (elt.hasAttribute("data-reset")) {
      elt.reset();
      // No style attribute left behind, not even an empty one: htmx copies
      // attributes when it settles a swap, and the CSP refuses inline styles.
      var text = elt.querySelector("#sg-text");
      if (text) { text.removeAttribute("style"); }
    }
    // After sending, and after deciding on an approval (its form goes away),
    // the message box has the focus again.
    if (elt.id === "sg-send" || elt.classList.contains("sg-approval")) { focusComposer(); }
  });

  function focusComposer() {
    var box = document.getElementById("sg-text");
    if (box && !box.disabled) { box.focus({ preventScroll: true }); }
  }

  // Enter sends, Shift+Enter adds a line (not while an input method composes).
  document.addEventListener("keydown", function (event) {
    var t = event.target;
    if (!t || t.id !== "sg-text" || event.key !== "Enter" || event.shiftKey || event.isComposing) { return; }
    event.preventDefault();
    if (t.value.trim() !== "" && t.form) { t.form.requestSubmit(); }
  });

  // Edited arguments must be a JSON object before the form can be sent.
  function checkJson(area) {
    var fieldset = area.closest("fieldset.sg-request");
    var chosen = fieldset && fieldset.querySelector("input[type=radio]:checked");
    var message = "";
    if (chosen && chosen.value === "edit" && !(area.value.trim() === "" && !area.hasAttribute("data-object"))) {
      try {
        var value = JSON.parse(area.value);
        if (area.hasAttribute("data-object") &&
            (value === null || typeof value !== "object" || Array.isArray(value))) {
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
    var t = event.target;
    // Changing an argument means editing it: the Edit choice follows.
    var args = t.closest && t.closest("fieldset.sg-args");
    if (args) {
      var edit = args.closest("fieldset.sg-request").querySelector("input[type=radio][value=edit]");
      if (edit && !edit.checked) { edit.checked = true; }
    }
    if (t.classList && t.classList.contains("sg-json-input")) { checkJson(t); }
    if (t.id === "sg-text") { grow(t); }
  });
  // The argument fields of a call not being edited are left out of the form
  // (and of the browser's checks) when a decision is sent.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("form.sg-approval button[type=submit]");
    if (!button) { return; }
    var dismiss = button.value === "dismiss";
    Array.prototype.forEach.call(button.form.querySelectorAll("fieldset.sg-request"), function (fs) {
      var chosen = fs.querySelector("input[type=radio]:checked");
      var args = fs.querySelector("fieldset.sg-args");
      if (args) { args.disabled = dismiss || !chosen || chosen.value !== "edit"; }
    });
  }, true);
  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail.elt;
    if (elt && elt.classList && elt.classList.contains("sg-approval")) {
      elt.querySelectorAll("fieldset.sg-args").forEach(function (fs) { fs.disabled = false; });
    }
  });

  // The message box grows with what is typed, up to its CSS max-height: by CSS
  // (field-sizing) where the browser can, else by setting its height here.
  var sizedByCss = window.CSS && CSS.supports && CSS.supports("field-sizing", "content");
  function grow(box) {
    if (sizedByCss) { return; }
    box.style.height = "auto";
    box.style.height = box.scrollHeight + 2 + "px";
  }
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

  // Sending: the typing dots show at once (the status takes over when the
  // turn starts: chat.css shows them while it runs and nothing has streamed).
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (event.detail.elt.id !== "sg-send") { return; }
    var chat = document.getElementById("sg-chat");
    if (chat) { chat.classList.add("sg-sending"); }
    toBottom();
  });
  var sent = false;
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.elt.id === "sg-send" && event.detail.successful) { sent = true; }
  });
  function notSending() {
    var chat = document.getElementById("sg-chat");
    if (chat) { chat.classList.remove("sg-sending"); }
  }
  document.addEventListener("htmx:responseError", function (event) {
    if (event.detail.elt.id === "sg-send") { notSending(); }
  });
  document.addEventListener("htmx:oobAfterSwap", function (event) {
    var t = event.detail.target;
    // The first status after the message was taken is the turn's: from then on
    // the status says whether the agent works.
    if (t && t.id === "sg-status") {
      window.__sgSynced = (window.__sgSynced || 0) + 1;  // each resync redraws it
      if (sent) { sent = false; notSending(); }
    }
    if (t && (t.id === "sg-title" || t.id === "sg-title-text")) { followTitle(); }
    decorate(t);
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    var t = event.detail.target;
    if (t && t.id === "sg-title") { followTitle(true); }
    decorate(t);
  });

  // The tab's title, and the sidebar's entry, follow a rename or a generated title.
  function followTitle(renamed) {
    var text = document.getElementById("sg-title-text");
    var chat = document.getElementById("sg-chat");
    if (!text || !chat) { return; }
    var title = text.textContent;
    document.title = title + " · sagents-django";
    var entry = document.getElementById("sg-title-" + chat.getAttribute("data-conversation"));
    if (renamed && entry) { entry.textContent = title; }
  }

  // Copy a message, copy a code block: buttons the page adds (a page without
  // JavaScript shows none), the clipboard API, "Copied" for a moment.
  function copy(text, button) {
    var done = function () {
      var was = button.textContent;
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = was; }, 1500);
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, function () { button.textContent = "Copy failed"; });
    } else {
      button.textContent = "Copy failed";
    }
  }
  function decorate(root) {
    if (!root || !root.querySelectorAll) { return; }
    root.querySelectorAll("[data-copy-message][hidden]").forEach(function (b) { b.hidden = false; });
    root.querySelectorAll(".sg-msg .sg-md pre").forEach(function (pre) {
      if (pre.parentNode.classList.contains("sg-code")) { return; }
      var wrap = document.createElement("div");
      wrap.className = "sg-code";
      pre.parentNode.insertBefore(wrap, pre);
      wrap.appendChild(pre);
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sg-copy-code";
      button.textContent = "Copy code";
      wrap.appendChild(button);
    });
  }
  document.addEventListener("click", function (event) {
    var t = event.target;
    if (!t.closest) { return; }
    var code = t.closest(".sg-copy-code");
    if (code) { copy(code.parentNode.querySelector("pre").innerText, code); return; }
    var message = t.closest("[data-copy-message]");
    if (message) {
      var body = message.closest(".sg-msg").querySelector(".sg-body");
      copy(body ? body.innerText : "", message);
    }
  });
  // Rows the socket appends arrive by a swap into #sg-messages, and a resync may
  // replace #sg-messages itself: the whole scroller is watched.
  var observer = window.MutationObserver ? new MutationObserver(function (changes) {
    changes.forEach(function (change) {
      change.addedNodes.forEach(function (node) {
        if (node.nodeType !== 1) { return; }
        if (node.matches(".sg-msg, #sg-messages") || node.querySelector(".sg-msg")) { decorate(node); }
      });
    });
  }) : null;

  // The sidebar: a drawer on a phone, folded away on a wide screen.
  function narrow() { return window.matchMedia("(max-width: 52rem)").matches; }
  function setNav(open) {
    var app = document.getElementById("sg-app");
    var toggle = document.querySelector(".sg-nav-toggle");
    if (!app) { return; }
    if (narrow()) {
      app.classList.toggle("sg-nav-open", open);
      if (open) { var first = document.querySelector("#sg-sidebar a, #sg-sidebar button"); if (first) { first.focus(); } }
    } else {
      app.classList.toggle("sg-nav-collapsed", !open);
      try { localStorage.setItem("sg-nav", open ? "open" : "collapsed"); } catch (e) { /* private mode */ }
    }
    if (toggle) { toggle.setAttribute("aria-expanded", String(open)); }
  }
  function navOpen() {
    var app = document.getElementById("sg-app");
    return narrow() ? app.classList.contains("sg-nav-open") : !app.classList.contains("sg-nav-collapsed");
  }
  document.addEventListener("click", function (event) {
    var t = event.target;
    if (!t.closest) { return; }
    if (t.closest(".sg-nav-toggle")) { setNav(!navOpen()); return; }
    if (t.closest("[data-nav-close]")) { setNav(false); document.querySelector(".sg-nav-toggle").focus(); }
  });
  document.addEventListener("keydown", function (event) {
    var app = document.getElementById("sg-app");
    if (event.key === "Escape" && app && app.classList.contains("sg-nav-open")) {
      setNav(false);
      document.querySelector(".sg-nav-toggle").focus();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var app = document.getElementById("sg-app");
    var toggle = document.querySelector(".sg-nav-toggle");
    if (app && toggle && document.getElementById("sg-sidebar")) {
      toggle.hidden = false;
      var saved = null;
      try { saved = localStorage.getItem("sg-nav"); } catch (e) { /* private mode */ }
      if (!narrow() && saved === "collapsed") { app.classList.add("sg-nav-collapsed"); }
      toggle.setAttribute("aria-expanded", String(navOpen()));
    }
    decorate(document);
    var watched = scroller();
    if (observer && watched) { observer.observe(watched, { childList: true, subtree: true }); }
    toBottom();
  });
})();
