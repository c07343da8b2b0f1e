/* The header's theme switch without a reload: the same cookie the theme view sets
 * (sg_theme, a year), and data-theme on <html> at once. Without JavaScript the
 * switch is a plain form that posts to that view. No inline script: the CSP. */
(function () {
  "use strict";
  function current() {
    var chosen = document.documentElement.getAttribute("data-theme");
    if (chosen === "light" || chosen === "dark") { return chosen; }
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  function label() {
    document.querySelectorAll(".sg-theme").forEach(function (button) {
      var next = current() === "dark" ? "light" : "dark";
      button.setAttribute("aria-label", "Switch to the " + next + " theme");
    });
  }
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.classList || !form.classList.contains("sg-theme-form")) { return; }
    event.preventDefault();
    var next = current() === "dark" ? "light" : "dark";
    document.documentElement.setAttribute("data-theme", next);
    document.cookie = "sg_theme=" + next + "; path=/; max-age=31536000; samesite=lax";
    label();
  });
  document.addEventListener("DOMContentLoaded", label);
})();
