// hitl sandbox page. Everything from Slack fields is rendered with textContent: no HTML is ever parsed.
"use strict";

const EMOJI = {
  white_check_mark: "✅", x: "❌", lock: "🔒", hourglass: "⌛", warning: "⚠️", no_entry: "⛔",
  ballot_box_with_check: "☑️", arrows_counterclockwise: "🔄", gear: "⚙️", information_source: "ℹ️", crystal_ball: "🔮", arrow_forward: "▶️",
  leftwards_arrow_with_hook: "↩️",
  alarm_clock: "⏰", checkered_flag: "🏁", grey_question: "❔", tada: "🎉", no_entry_sign: "🚫",
  octagonal_sign: "🛑", rotating_light: "🚨", mortar_board: "🎓", bust_in_silhouette: "👤",
  busts_in_silhouette: "👥", mag: "🔍", scissors: "✂️", package: "📦", abacus: "🧮", bar_chart: "📊", arrow_up_small: "🔼",
  arrow_right_hook: "↪️", handshake: "🤝",
};
const ui = { user: null, channel: null, data: null, busy: false, view: "channel", highlight: null };

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}
function decode(s) { return s.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&"); }
function emoji(s) { return s.replace(/:([a-z0-9_+-]+):/g, (m, name) => EMOJI[name] || m); }
function personName(id) {
  const p = (ui.data && ui.data.people || []).find((x) => x.id === id);
  return p ? p.name : id;
}

function renderInline(text, parent) {
  // Formatting marks only count at word boundaries, as in Slack; emoji codes are tokens of their own.
  const re = /(<https?:\/\/[^|>\s]+(?:\|[^>]*)?>|<@[A-Z0-9_]+>|<!date\^\d+\^[^|>]*\|[^>]*>|`[^`\n]+`|:[a-z0-9_+-]+:|(?<![\w*])\*[^*\n]+\*(?![\w*])|(?<![\w_])_[^_\n]+_(?![\w_])|(?<![\w~])~[^~\n]+~(?![\w~])|\n)/g;
  let last = 0;
  let m;
  while ((m = re.exec(text)) !== null) {
    if (m.index > last) parent.appendChild(document.createTextNode(emoji(decode(text.slice(last, m.index)))));
    const t = m[0];
    if (t === "\n") parent.appendChild(el("br"));
    else if (t.startsWith("<http")) parent.appendChild(link(t.slice(1, -1)));
    else if (t.startsWith("<@")) parent.appendChild(el("span", "mention", "@" + personName(t.slice(2, -1))));
    else if (t.startsWith("<!date")) {
      const ts = Number(t.split("^")[1]);
      parent.appendChild(document.createTextNode(new Date(ts * 1000).toLocaleString(undefined, { timeZoneName: "short" })));
    } else if (t[0] === "`") parent.appendChild(el("code", "inline", decode(t.slice(1, -1))));
    else if (t[0] === ":") parent.appendChild(document.createTextNode(emoji(t)));
    else if (t[0] === "*") parent.appendChild(el("b", "", emoji(decode(t.slice(1, -1)))));
    else if (t[0] === "_") parent.appendChild(el("i", "", decode(t.slice(1, -1))));
    else parent.appendChild(el("s", "", decode(t.slice(1, -1))));
    last = re.lastIndex;
  }
  if (last < text.length) parent.appendChild(document.createTextNode(emoji(decode(text.slice(last)))));
}

function link(inner) {
  // <url|label>: a card's permalink (/archives/<channel>/p<ts>) opens that card here; anything else is a plain link.
  const bar = inner.indexOf("|");
  const url = bar < 0 ? inner : inner.slice(0, bar);
  const a = el("a", "link", decode(bar < 0 ? inner : inner.slice(bar + 1)));
  a.href = url;
  a.rel = "noopener noreferrer";
  const here = new URL(url, location.href);
  if (here.origin === location.origin && here.pathname.startsWith("/archives/")) {
    a.addEventListener("click", (ev) => { ev.preventDefault(); openPermalink(here.pathname); });
  } else {
    a.target = "_blank";
  }
  return a;
}

function openPermalink(path) {
  const [, , channel, p] = path.split("/");
  if (!channel || !p || !p.startsWith("p")) return;
  const digits = p.slice(1);
  ui.view = "channel";
  ui.channel = channel;
  ui.highlight = digits.slice(0, -6) + "." + digits.slice(-6);
  history.replaceState(null, "", "/" + location.search);
  refresh();
}

function renderText(obj, parent) {
  if (!obj || typeof obj.text !== "string") return;
  if (obj.type === "plain_text") { parent.appendChild(document.createTextNode(obj.text)); return; }
  obj.text.split("```").forEach((part, i) => {
    if (i % 2 === 1) parent.appendChild(el("pre", "code", decode(part.replace(/^\n/, "").replace(/\n$/, ""))));
    else renderInline(part, parent);
  });
}

function renderRichText(element, parent) {
  // Slack's rich text: typed elements, never parsed as markup (a text element's characters are shown as they are).
  for (const e of element.elements || []) {
    if (e.type === "emoji") { parent.appendChild(document.createTextNode(EMOJI[e.name] || ":" + e.name + ":")); continue; }
    if (e.type === "user") { parent.appendChild(el("span", "mention", "@" + personName(e.user_id))); continue; }
    if (e.type !== "text" && e.type !== "link") continue;
    const style = e.style || {};
    let node = document.createTextNode("");
    const lines = String(e.text || e.url || "").split("\n");
    const frag = document.createDocumentFragment();
    lines.forEach((line, i) => { if (i) frag.appendChild(el("br")); frag.appendChild(document.createTextNode(line)); });
    node = frag;
    for (const [key, tag, cls] of [["code", "code", "inline"], ["bold", "b", ""], ["italic", "i", ""], ["strike", "s", ""]]) {
      if (!style[key]) continue;
      const wrap = el(tag, cls);
      wrap.appendChild(node);
      node = wrap;
    }
    parent.appendChild(node);
  }
}

function renderRich(block, parent) {
  const box = el("div", "b-rich");
  for (const e of block.elements || []) {
    if (e.type === "rich_text_preformatted") {
      const pre = el("pre", "code");
      pre.textContent = (e.elements || []).map((t) => t.text || "").join("");
      box.appendChild(pre);
    } else if (e.type === "rich_text_quote") {
      const q = el("blockquote", "b-quote");
      renderRichText(e, q);
      box.appendChild(q);
    } else if (e.type === "rich_text_list") {
      const list = el(e.style === "ordered" ? "ol" : "ul");
      for (const item of e.elements || []) { const li = el("li"); renderRichText(item, li); list.appendChild(li); }
      box.appendChild(list);
    } else {
      const line = el("div", "b-rich-line");
      renderRichText(e, line);
      box.appendChild(line);
    }
  }
  parent.appendChild(box);
}

function makeButton(e, message, viewId) {
  if (e.url && /^https?:\/\//.test(e.url)) {  // a link button: Slack opens its address in a new tab
    const a = el("a", "btn link-btn", e.text.text);
    a.href = e.url;
    a.target = "_blank";
    a.rel = "noopener noreferrer";
    a.dataset.actionId = e.action_id;
    return a;
  }
  const btn = el("button", "btn" + (e.style ? " " + e.style : ""), e.text.text);
  btn.type = "button";
  btn.dataset.actionId = e.action_id;
  if (message) btn.addEventListener("click", () => clickButton(message, e));
  else btn.addEventListener("click", () => act({ kind: "view_click", view_id: viewId, action_id: e.action_id, value: e.value }));
  return btn;
}

function renderBlocks(blocks, parent, message, viewId) {
  for (const b of blocks || []) {
    if (b.type === "header") { const h = el("div", "b-header"); renderText(b.text, h); parent.appendChild(h); }
    else if (b.type === "section") {
      const accessory = b.accessory && b.accessory.type === "button" && (message || viewId) ? b.accessory : null;
      if (b.text && accessory) {  // as Slack draws it: the text, its button at the right
        const row = el("div", "b-accessory-row");
        const s = el("div", "b-section"); renderText(b.text, s); row.appendChild(s);
        row.appendChild(makeButton(accessory, message, viewId));
        parent.appendChild(row);
      } else if (b.text) { const s = el("div", "b-section"); renderText(b.text, s); parent.appendChild(s); }
      if (b.fields) {
        const grid = el("div", "b-fields");
        for (const f of b.fields) { const c = el("div"); renderText(f, c); grid.appendChild(c); }
        parent.appendChild(grid);
      }
    } else if (b.type === "context") {
      const c = el("div", "b-context");
      for (const e of b.elements || []) renderText(e, c);
      parent.appendChild(c);
    } else if (b.type === "divider") parent.appendChild(el("hr", "b-divider"));
    else if (b.type === "rich_text") renderRich(b, parent);
    else if (b.type === "actions" && (message || viewId)) {
      const row = el("div", "b-actions");
      for (const e of b.elements || []) {
        if (e.type !== "button") continue;
        row.appendChild(makeButton(e, message, viewId));
      }
      parent.appendChild(row);
    }
  }
}

function renderMessage(m) {
  const row = el("div", "msg" + (m.ephemeral ? " ephemeral" : ""));
  row.dataset.ts = m.ts;
  row.appendChild(el("div", "avatar", "h"));
  const body = el("div", "body");
  const meta = el("div", "meta");
  meta.appendChild(el("b", "", "hitl"));
  meta.appendChild(el("span", "app-tag", "APP"));
  meta.appendChild(document.createTextNode(new Date(Number(m.ts.split(".")[0]) * 1000).toLocaleTimeString()));
  if (m.edited) meta.appendChild(el("span", "edited", " (edited)"));
  body.appendChild(meta);
  if (m.ephemeral) body.appendChild(el("div", "ephemeral-note", "Only visible to you"));
  if (m.blocks && m.blocks.length) renderBlocks(m.blocks, body, m);
  else { const t = el("div", "b-section"); renderInline(m.text, t); body.appendChild(t); }
  row.appendChild(body);
  return row;
}

function renderHome(box) {
  box.replaceChildren();
  const home = el("div", "home");
  home.id = "home";
  if (ui.data.home) renderBlocks(ui.data.home.blocks, home, null);
  else home.appendChild(el("div", "empty", "Opening your Home tab…"));
  box.appendChild(home);
}

function renderMessages() {
  const box = document.getElementById("messages");
  if (ui.view === "home") { renderHome(box); return; }
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
  box.replaceChildren();
  const msgs = ui.data.messages;
  if (!msgs.length) box.appendChild(el("div", "empty", "No messages yet. Try /hitl help."));
  const replies = {};
  for (const m of msgs) if (m.thread_ts) (replies[m.thread_ts] = replies[m.thread_ts] || []).push(m);
  for (const m of msgs) {
    if (m.thread_ts) continue;
    const node = renderMessage(m);
    const thread = replies[m.ts];
    if (thread) {
      const t = el("div", "thread");
      t.appendChild(el("div", "thread-title", thread.length + (thread.length === 1 ? " reply" : " replies")));
      for (const r of thread) t.appendChild(renderMessage(r));
      node.querySelector(".body").appendChild(t);
    }
    box.appendChild(node);
  }
  const target = ui.highlight && box.querySelector('.msg[data-ts="' + ui.highlight + '"]');
  if (target) {
    target.classList.add("highlight");
    target.scrollIntoView({ block: "center" });
    ui.highlight = null;
  } else if (atBottom) box.scrollTop = box.scrollHeight;
}

function renderChrome() {
  const homeLink = document.getElementById("home-link");
  homeLink.className = ui.view === "home" ? "active" : "";
  if (ui.view === "home") document.getElementById("channel-title").textContent = "Home";
  document.getElementById("composer").hidden = ui.view === "home";
  const nav = document.getElementById("channels");
  nav.replaceChildren();
  for (const c of ui.data.channels) {
    const a = el("a", c.id === ui.data.channel && ui.view !== "home" ? "active" : "", "# " + c.name);
    if (c.count) a.appendChild(el("span", "count", String(c.count)));
    a.addEventListener("click", () => { ui.view = "channel"; ui.channel = c.id; refresh(); });
    nav.appendChild(a);
    if (c.id === ui.data.channel && ui.view !== "home") {
      document.getElementById("channel-title").textContent = "# " + c.name;
    }
  }
  const select = document.getElementById("user");
  if (!select.options.length) {
    for (const p of ui.data.people) {
      const o = el("option", "", p.name + (p.roles.length ? " (" + p.roles.join(", ") + ")" : " (no role)"));
      o.value = p.id;
      select.appendChild(o);
    }
    select.value = ui.user;
  }
}

function inputFor(block, errors) {
  const field = el("div", "field" + (errors[block.block_id] ? " invalid" : ""));
  field.dataset.blockId = block.block_id;
  const label = el("label");
  renderText(block.label, label);
  field.appendChild(label);
  const e = block.element;
  let control;
  if (e.type === "plain_text_input") {
    control = el(e.multiline ? "textarea" : "input");
    if (!e.multiline) control.type = "text";
    if (e.max_length) control.maxLength = e.max_length;
    control.value = e.initial_value || "";
  } else if (e.type === "number_input") {
    control = el("input");
    control.type = "number";
    control.step = e.is_decimal_allowed ? "any" : "1";
    control.value = e.initial_value || "";
  } else if (e.type === "static_select") {
    control = el("select");
    for (const o of e.options) { const opt = el("option", "", o.text.text); opt.value = o.value; control.appendChild(opt); }
    if (e.initial_option) control.value = e.initial_option.value;
  } else if (e.type === "checkboxes") {
    control = el("input");
    control.type = "checkbox";
    control.checked = !!(e.initial_options && e.initial_options.length);
  }
  control.dataset.kind = e.type;
  control.dataset.actionId = e.action_id;
  control.name = block.block_id;
  field.appendChild(control);
  if (block.hint) { const h = el("div", "hint"); renderText(block.hint, h); field.appendChild(h); }
  if (errors[block.block_id]) field.appendChild(el("div", "error", errors[block.block_id]));
  return field;
}

function renderModal() {
  const overlay = document.getElementById("overlay");
  const modal = ui.data.modal;
  if (!modal) {
    if (overlay.dataset.view) { overlay.hidden = true; overlay.replaceChildren(); overlay.dataset.view = ""; overlay.dataset.key = ""; }
    return;
  }
  // The key holds the view itself too: views.update (a page turned) keeps the id and changes the blocks.
  const key = modal.view_id + JSON.stringify(modal.errors) + JSON.stringify(modal.view);
  if (!overlay.hidden && overlay.dataset.key === key) return;
  // Re-rendered to show errors: keep what the person typed, as Slack does.
  const typed = {};
  if (!overlay.hidden && overlay.dataset.view === modal.view_id) {
    for (const c of overlay.querySelectorAll("[data-kind]")) typed[c.name] = c.type === "checkbox" ? c.checked : c.value;
  }
  overlay.dataset.key = key;
  overlay.dataset.view = modal.view_id;
  const view = modal.view;
  const box = el("div", "modal");
  box.setAttribute("role", "dialog");
  box.appendChild(el("h2", "", view.title.text));
  const content = el("div", "content");
  for (const b of view.blocks) {
    if (b.type === "input") content.appendChild(inputFor(b, modal.errors || {}));
    else renderBlocks([b], content, null, modal.view_id);
  }
  for (const c of content.querySelectorAll("[data-kind]")) {
    if (!(c.name in typed)) continue;
    if (c.type === "checkbox") c.checked = typed[c.name]; else c.value = typed[c.name];
  }
  box.appendChild(content);
  const footer = el("div", "footer");
  const close = el("button", "btn", view.close ? view.close.text : "Close");
  close.type = "button";
  close.addEventListener("click", () => act({ kind: "close", view_id: modal.view_id }));
  footer.appendChild(close);
  if (view.submit) {
    const submit = el("button", "btn primary", view.submit.text);
    submit.type = "button";
    submit.id = "modal-submit";
    submit.addEventListener("click", () => submitModal(modal.view_id, content));
    footer.appendChild(submit);
  }
  box.appendChild(footer);
  overlay.replaceChildren(box);
  overlay.hidden = false;
}

function submitModal(viewId, content) {
  const values = {};
  for (const c of content.querySelectorAll("[data-kind]")) {
    const cell = { type: c.dataset.kind };
    if (c.dataset.kind === "static_select") cell.selected_option = { value: c.value, text: { type: "plain_text", text: c.value } };
    else if (c.dataset.kind === "checkboxes") cell.selected_options = c.checked ? [{ value: "true" }] : [];
    else cell.value = c.value === "" ? null : c.value;
    values[c.name] = { [c.dataset.actionId]: cell };
  }
  act({ kind: "submit", view_id: viewId, values });
}

function confirmDialog(confirm) {
  return new Promise((resolve) => {
    const overlay = document.getElementById("overlay");
    const box = el("div", "modal");
    box.appendChild(el("h2", "", confirm.title.text));
    const content = el("div", "content");
    renderText(confirm.text, content);
    box.appendChild(content);
    const footer = el("div", "footer");
    const deny = el("button", "btn", confirm.deny.text);
    const ok = el("button", "btn " + (confirm.style || "primary"), confirm.confirm.text);
    ok.id = "confirm-ok";
    const done = (answer) => {
      overlay.hidden = true; overlay.replaceChildren(); overlay.dataset.key = ""; overlay.dataset.view = ""; resolve(answer);
    };
    deny.addEventListener("click", () => done(false));
    ok.addEventListener("click", () => done(true));
    footer.append(deny, ok);
    box.appendChild(footer);
    overlay.replaceChildren(box);
    overlay.hidden = false;
  });
}

async function clickButton(message, element) {
  if (element.confirm && !(await confirmDialog(element.confirm))) return;
  act({ kind: "click", channel: message.channel, ts: message.ts, action_id: element.action_id, value: element.value });
}

function toast(text) {
  const t = document.getElementById("toast");
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 3000);
}

async function act(body) {
  const resp = await fetch("/sandbox/act", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ user: ui.user, ...body }) });
  const answer = await resp.json().catch(() => ({}));
  if (!answer.ok && answer.error) toast(answer.error);
  await refresh();
}

async function refresh() {
  const q = new URLSearchParams({ user: ui.user || "" });
  if (ui.channel) q.set("channel", ui.channel);
  const resp = await fetch("/sandbox/state?" + q.toString());
  ui.data = await resp.json();
  ui.user = ui.data.user;
  // Who "Sign in with Slack" signs in as here (the stand-in's provider reads it): the person picked under Acting as.
  document.cookie = "hitl_sandbox_as=" + encodeURIComponent(ui.user || "") + "; path=/; SameSite=Lax";
  ui.channel = ui.data.channel;
  renderChrome();
  renderMessages();
  renderModal();
  document.body.dataset.version = String(ui.data.version);
}

function start() {
  const params = new URLSearchParams(location.search);
  ui.user = params.get("as") || null;
  if (location.pathname.startsWith("/archives/")) openPermalink(location.pathname);
  document.getElementById("user").addEventListener("change", (ev) => {
    ui.user = ev.target.value;
    if (ui.view === "home") act({ kind: "home" }); else refresh();
  });
  document.getElementById("home-link").addEventListener("click", () => {
    ui.view = "home";
    act({ kind: "home" });  // Slack tells the app the tab was opened; the app publishes it
  });
  document.getElementById("composer").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = document.getElementById("composer-input");
    const text = input.value.trim();
    if (!text) return;
    input.value = "";
    act({ kind: "command", channel: ui.channel, text });
  });
  refresh().then(() => {
    const events = new EventSource("/sandbox/events");
    events.onmessage = () => refresh();
  });
}

document.addEventListener("DOMContentLoaded", start);
