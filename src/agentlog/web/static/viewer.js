// agentlog viewer: paging by scrolling, permalinks into collapsed pages, live updates.
// Served as a file (the Content-Security-Policy allows no inline script); it builds
// session content with textContent only, never as HTML.
"use strict";

function loadMore(link) {
  const url = link.getAttribute("data-fragment");
  if (!url || link.dataset.loading) return;
  link.dataset.loading = "1";
  fetch(url, { credentials: "same-origin" })
    .then((response) => {
      if (!response.ok) throw new Error(response.status + " " + response.statusText);
      return response.text();
    })
    .then((html) => {
      const parsed = new DOMParser().parseFromString(html, "text/html");
      const nodes = Array.from(parsed.body.childNodes).map((node) => document.adoptNode(node));
      link.replaceWith(...nodes);
      watchMore(document);
    })
    .catch((error) => {
      delete link.dataset.loading;
      link.textContent = "could not load more (" + error.message + "): follow this link";
      link.removeAttribute("data-fragment");
    });
}

const observer = "IntersectionObserver" in window
  ? new IntersectionObserver((entries) => {
      for (const entry of entries) {
        if (entry.isIntersecting) {
          observer.unobserve(entry.target);
          loadMore(entry.target);
        }
      }
    }, { rootMargin: "600px" })
  : null;

function watchMore(root) {
  for (const link of root.querySelectorAll("a.more[data-fragment]")) {
    if (link.dataset.watched) continue;
    link.dataset.watched = "1";
    if (observer) observer.observe(link);
  }
}

function followPermalink() {
  const match = /^#seq-(\d+)$/.exec(window.location.hash);
  const table = document.getElementById("events");
  const session = document.getElementById("session");
  if (!match || document.getElementById("seq-" + match[1])) return;
  const seq = Number(match[1]);
  if (session && session.dataset.events) {
    // not a message of the turns this window shows: the event inspector has every seq
    window.location.replace(session.dataset.events + "?from=" + seq + "#seq-" + seq);
    return;
  }
  if (!table) return;
  const params = new URLSearchParams(window.location.search);
  if (params.get("from") === String(seq) && params.get("expand") === "1") return;
  params.set("from", String(seq));
  params.set("expand", "1");
  window.location.replace(table.dataset.session + "?" + params.toString() + "#seq-" + seq);
}

function liveItem(event) {
  const article = document.createElement("article");
  article.className = "msg live role-" + String(event.role || "event").replace(/[^a-z-]/g, "");
  article.id = "live-seq-" + Number(event.seq);
  const header = document.createElement("header");
  const role = document.createElement("span");
  role.className = "role";
  role.textContent = event.role;
  const seq = document.createElement("span");
  seq.className = "seq";
  seq.textContent = " #" + Number(event.seq) + " (new)";
  header.append(role, seq);
  const text = document.createElement("div");
  text.className = "text";
  text.textContent = event.text || "";
  article.append(header, text);
  return article;
}

function followLive() {
  const session = document.getElementById("session");
  if (!session || !session.dataset.live || !("EventSource" in window)) return;
  const count = document.getElementById("event-count");
  const items = document.getElementById("live-items");
  const source = new EventSource(session.dataset.live);
  source.addEventListener("open", () => { session.dataset.liveState = "connected"; });
  source.addEventListener("error", () => { session.dataset.liveState = "reconnecting"; });
  source.addEventListener("events", (message) => {
    const batch = JSON.parse(message.data);
    if (batch.length === 1 && batch[0].gone !== undefined) {
      source.close();
      session.dataset.liveState = "ended";
      return;
    }
    let last = -1;
    for (const event of batch) {
      last = Math.max(last, Number(event.seq));
      if (event.role !== undefined && items) items.append(liveItem(event));
    }
    if (last >= 0 && count) count.textContent = (last + 1).toLocaleString("en-US");
    // the next reconnect resumes after what arrived
    session.dataset.live = session.dataset.live.replace(/from=\d+/, "from=" + (last + 1));
  });
}

document.addEventListener("DOMContentLoaded", () => {
  watchMore(document);
  followPermalink();
  followLive();
});
window.addEventListener("hashchange", followPermalink);
