// The dashboard's few lines of script: times in the viewer's zone (UTC on hover), the part
// marked #live fetched again every few seconds, and "choose all" boxes.
"use strict";

function localTimes(root) {
  root.querySelectorAll("time[data-ms]").forEach((el) => {
    const d = new Date(Number(el.dataset.ms));
    const pad = (n, w = 2) => String(n).padStart(w, "0");
    const ms = d.getMilliseconds() ? "." + pad(d.getMilliseconds(), 3) : "";
    el.textContent = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}${ms}`;
    el.title = el.getAttribute("datetime");
  });
}

function chooseAll(root) {
  root.querySelectorAll("input[data-all]").forEach((box) => {
    box.addEventListener("change", () => {
      box.form.querySelectorAll(`input[name="${box.dataset.all}"]`).forEach((b) => {
        b.checked = box.checked;
      });
    });
  });
}

async function refresh() {
  const live = document.getElementById("live");
  if (!live || document.hidden) return;
  // Never replace what someone is choosing or typing in.
  if (live.querySelector("input:checked, details[open]") || live.contains(document.activeElement)) return;
  try {
    const reply = await fetch(location.href, { headers: { "X-Refresh": "1" }, credentials: "same-origin" });
    if (!reply.ok) throw new Error(String(reply.status));
    const page = new DOMParser().parseFromString(await reply.text(), "text/html");
    const fresh = page.getElementById("live");
    if (fresh) {
      live.innerHTML = fresh.innerHTML;
      localTimes(live);
      chooseAll(live);
    }
    document.body.classList.remove("stale");
  } catch (e) {
    document.body.classList.add("stale");
  }
}

document.addEventListener("DOMContentLoaded", () => {
  localTimes(document);
  chooseAll(document);
  const every = Number(document.body.dataset.refresh || 0);
  if (every > 0) setInterval(refresh, every * 1000);
});
